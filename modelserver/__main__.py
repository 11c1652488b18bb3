import sys

from modelserver.server import main

sys.exit(main())

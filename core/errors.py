"""One error family, each error carrying the README's exit code, and the one place an entry point turns it into
a line and a status. Components subclass these (stack.local.StackError, loadgen.errors.RunError, ...), keeping the
builtin a caller may already catch (ValueError, RuntimeError, FileNotFoundError) as a second base.

    0 done   1 found something   2 usage: one line, nothing sent or started   3 a server or Prometheus did not
    answer, or the result is invalid   130/143 a signal   70 a bug: anything else, with its traceback
"""
from __future__ import annotations

import sys
import traceback

EXIT_FOUND, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_BUG = 1, 2, 3, 70  # 70: EX_SOFTWARE of sysexits.h


class BenchError(Exception):
    """Said in one line; exit_code is the README's."""
    exit_code = EXIT_USAGE


class UsageError(BenchError, ValueError):
    """Bad input (a flag, a variable, a file the user named): nothing was sent or started."""


class Missing(BenchError, FileNotFoundError):
    """A run, baseline or file the user named that is not there."""


class Exists(BenchError, FileExistsError):
    """What the user asked to create is there already."""


class Unreachable(BenchError, RuntimeError):
    """A server or Prometheus that does not answer at its address."""
    exit_code = EXIT_UNREACHABLE


class Failed(BenchError, RuntimeError):
    """Something started failed: a server that died or refused, a result that is invalid."""
    exit_code = EXIT_UNREACHABLE


def run_main(main, prefix: str = "error", boundary: tuple = ()) -> int:
    """main()'s status, or the error's: a BenchError (or one of `boundary`, the I/O errors of the outside world an
    entry point names: fileio's reads and writes) is one line and its exit code; `stopping.Interrupted` keeps its
    own status (it carries exit_code too); anything else is a bug, shown with its traceback, exit 70."""
    try:
        return main()
    except (BenchError, *boundary) as e:
        print(f"{prefix}: {e}", file=sys.stderr)
        return getattr(e, "exit_code", EXIT_USAGE)
    except Exception:  # noqa: BLE001 - the one place a bug is told apart from an error
        traceback.print_exc()
        print(f"{prefix}: the error above is a bug of tfserving-bench (exit {EXIT_BUG}); please report it",
              file=sys.stderr)
        return EXIT_BUG

"""The one command line of a zoo model's exporter (models/image.py, text.py, recommender.py), run inside a
version's venv by models/zoo.py: `python -m models.<name> --out <base>/<n>` writes that version directory."""
from __future__ import annotations

import argparse
import os


def run(build, prog: str, doc: str, argv=None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {prog}", description=doc.splitlines()[0])
    p.add_argument("--out", required=True, help="the version directory to write (<base>/<n>)")
    a = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    print(build(a.out))
    return 0

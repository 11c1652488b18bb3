"""Prepare models for the stack: export the example model per TF version, check user models.

    python -m models export --version 2.9      # -> models/build/tf2.9/my_model/1
    python -m models check /path/to/model_base  # is it servable?
"""
from __future__ import annotations

import argparse
import sys

from models.prepare import check_base_path, ensure_example_model
from core.registry import load_registry
from core.errors import run_main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="export the example model with a version's TensorFlow")
    e.add_argument("--version", required=True)
    e.add_argument("--extra-layers", type=int, default=0)
    c = sub.add_parser("check", help="check a model base path holds numbered SavedModel versions")
    c.add_argument("path")
    args = p.parse_args(argv)
    def dispatch() -> int:
        if args.cmd == "export":
            reg = load_registry()
            print(ensure_example_model(reg.get(args.version), reg, extra_layers=args.extra_layers))
        else:
            print(check_base_path(args.path))
        return 0
    return run_main(dispatch)


if __name__ == "__main__":
    sys.exit(main())

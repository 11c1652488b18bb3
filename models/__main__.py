"""Prepare models for the stack: export the example model per TF version, check user models.

    python -m models export --version 2.9      # -> models/build/tf2.9/my_model/1
    python -m models check /path/to/model_base  # is it servable?
"""
from __future__ import annotations

import argparse
import sys

from models.prepare import ModelError, check_base_path, ensure_example_model
from core.registry import RegistryError, load_registry
from core.venvs import VenvError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="export the example model with a version's TensorFlow")
    e.add_argument("--version", required=True)
    e.add_argument("--extra-layers", type=int, default=0)
    c = sub.add_parser("check", help="check a model base path holds numbered SavedModel versions")
    c.add_argument("path")
    args = p.parse_args(argv)
    try:
        if args.cmd == "export":
            reg = load_registry()
            print(ensure_example_model(reg.get(args.version), reg, extra_layers=args.extra_layers))
        else:
            print(check_base_path(args.path))
    except (ModelError, RegistryError, VenvError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`make up/down/status` and friends: python -m stack <command>.

    python -m stack up --versions "2.9 2.21"     # local runtime when no docker engine answers
    python -m stack status
    python -m stack down
"""
from __future__ import annotations

import argparse
import os
import sys

from models.prepare import ModelError
from stack.registry import RegistryError, load_registry
from stack.runtime import pick_runtime
from stack.venvs import VenvError, ensure_venv


def _versions_arg(args) -> str:
    return args.versions or os.environ.get("VERSIONS") or os.environ.get("VERSION") or "2.9"


def cmd_up(args, reg) -> int:
    from stack import local

    runtime = pick_runtime(args.runtime)
    versions = reg.select(_versions_arg(args))
    print(f"runtime: {runtime}")
    for v in versions:
        info = local.up_version(v, reg, model_path=args.model or None, model_name=args.model_name,
                                batching=not args.no_batching, bind=args.bind)
        print(f"  TF Serving {v.name}: REST http://127.0.0.1:{info['rest']}/v1/models/{args.model_name}  "
              f"gRPC 127.0.0.1:{info['grpc']}  metrics http://127.0.0.1:{info['rest']}/monitoring/prometheus/metrics")
    return 0


def cmd_down(args, reg) -> int:
    from stack import local

    n = local.down()
    print(f"stopped {n} process(es)" if n else "nothing was running")
    return 0


def cmd_status(args, reg) -> int:
    from stack import local

    rows = local.status(reg)
    if not rows:
        print("nothing is up (make up VERSION=2.9)")
        return 0
    for r in rows:
        print(f"{r['component']:<22} {'up' if r['running'] else 'DOWN':<5} pid {r['pid'] or '-':<8} "
              f"{r['state']:<10} {r['url']}")
    return 0 if all(r["running"] for r in rows) else 1


def cmd_venv(args, reg) -> int:
    for v in reg.select(_versions_arg(args)):
        print(ensure_venv(v, reg, gpu=args.gpu))
    return 0


def cmd_demo(args, reg) -> int:
    from stack.demo import run_demo

    return run_demo(reg, args.versions or "2.9 2.21")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m stack", description="bring the benchmark stack up and down")
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start model servers (and, where built, the monitoring stack)")
    up.add_argument("--versions", default="", help='e.g. "2.6 2.9 2.12" (default: $VERSIONS, $VERSION, 2.9)')
    up.add_argument("--runtime", default=os.environ.get("RUNTIME", "auto"), choices=["auto", "local", "docker"])
    up.add_argument("--model", default=os.environ.get("MODEL", ""), help="a SavedModel base path instead of the example")
    up.add_argument("--model-name", default=os.environ.get("MODEL_NAME", "my_model"))
    up.add_argument("--no-batching", action="store_true")
    up.add_argument("--bind", default=os.environ.get("BIND", "127.0.0.1"))
    sub.add_parser("down", help="stop what `up` started (keeps Prometheus data)")
    sub.add_parser("status", help="what runs, and whether each server answers")
    demo = sub.add_parser("demo", help="the embedded default end to end on two versions")
    demo.add_argument("--versions", default="2.9 2.21")
    venv = sub.add_parser("venv", help="create (or reuse) the venvs of versions")
    venv.add_argument("--versions", default="")
    venv.add_argument("--gpu", action="store_true")
    args = p.parse_args(argv)
    try:
        reg = load_registry()
        return {"up": cmd_up, "down": cmd_down, "status": cmd_status, "venv": cmd_venv,
                "demo": cmd_demo}[args.cmd](args, reg)
    except (RegistryError, VenvError, ModelError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

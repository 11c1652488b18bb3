"""The TensorFlow ceiling: the model's signature called in-process, back to back, exactly as the
model server calls it (Servable.run), in this venv's TensorFlow. Nothing of the serving path
(HTTP, gRPC, JSON, queues, threads) is in the way, so its rows/s is the most any server built
on this runtime can deliver for this request size on these cores.

    python -m modelserver.ceiling --model-dir models/build/tf2.9/my_model/1 --rows 1 32 \\
        --windows 5 --window-s 1

prints {"tensorflow": "2.9.3", "python": "3.9.20", "pid": 123, "rows_per_s": {"1": [...], "32": [...]},
"cpu_us_per_call": {"1": [...], "32": [...]}} (one value per window; the windows of the row sizes
alternate, so drift spreads over all of them; CPU time of all the process's threads per call).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time


def load_requests(a, prog: str) -> tuple | None:
    """((servable, signature), {rows: [inputs, ...]}): the servers' own requests (--requests, which also names
    the signature they are for), else one random tensor per row count; None (said on stderr) on an error."""
    from modelserver import requestfile
    from modelserver.servable import example_inputs

    got = None
    if a.requests:
        try:
            a.signature, got = requestfile.read(a.requests)
        except (OSError, ValueError) as e:
            print(f"{prog}: error: {e}", file=sys.stderr)
            return None
        missing = [r for r in a.rows if not got.get(r)]
        if missing:
            print(f"{prog}: error: {a.requests} has no requests of {missing} rows", file=sys.stderr)
            return None
    loaded = load_servable(a, prog)
    if loaded is None:
        return None
    return loaded, got or {r: [example_inputs(loaded[1], r)] for r in a.rows}


def measure(servable, sig, rows_levels: list, windows: int, window_s: float, warmup_s: float,
            requests: dict) -> dict:
    for r in rows_levels:  # graph tracing, allocator growth, caches: not part of the ceiling
        t_end, i = time.perf_counter() + warmup_s, 0
        while time.perf_counter() < t_end:
            servable.run(sig, requests[r][i % len(requests[r])])
            i += 1
    out = {str(r): [] for r in rows_levels}
    cpu = {str(r): [] for r in rows_levels}
    for _ in range(windows):
        for r in rows_levels:
            n, t0, c0 = 0, time.perf_counter(), time.process_time()
            t_end, reqs = t0 + window_s, requests[r]
            while time.perf_counter() < t_end:
                servable.run(sig, reqs[n % len(reqs)])  # the servers' requests, cycled
                n += 1
            out[str(r)].append(n * r / (time.perf_counter() - t0))
            # CPU of every thread of this process per call: steal and other processes' time are not in it
            cpu[str(r)].append((time.process_time() - c0) / n * 1e6)
    return {"rows_per_s": out, "cpu_us_per_call": cpu}


FRONT_END = ("aiohttp", "grpcio", "protobuf", "numpy", "orjson", "uvloop", "prometheus-client")


def front_end_packages() -> dict:
    """The drop-in's front-end distributions as installed in this venv: the report lists them per version,
    so a reader can tell a TensorFlow difference from a grpcio or numpy one."""
    from importlib import metadata

    out = {}
    for name in FRONT_END:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def model_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The flags every in-process measurement takes: the model, the row counts, warm-up, the server's threads."""
    p = argparse.ArgumentParser(prog=f"python -m modelserver.{prog}", description=description)
    p.add_argument("--model-dir", required=True, help="one version directory (holding saved_model.pb)")
    p.add_argument("--signature", default="serving_default")
    p.add_argument("--rows", type=int, nargs="+", default=[1])
    p.add_argument("--warmup-s", type=float, default=0.5)
    p.add_argument("--intra-op", type=int, default=0, help="TF Serving's --tensorflow_intra_op_parallelism (0: TF's)")
    p.add_argument("--inter-op", type=int, default=0, help="TF Serving's --tensorflow_inter_op_parallelism (0: TF's)")
    p.add_argument("--requests", default="", help="the servers' requests and the signature they are for "
                                                  "(modelserver/requestfile.py; default: one random tensor per row "
                                                  "count)")
    return p


def load_servable(a, prog: str) -> tuple | None:
    """(servable, signature) as a server started with these thread flags would load them; None (said on stderr)
    when the model cannot be loaded."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from modelserver.servable import Servable
    from modelserver.status import ServingError

    try:
        # the server's Session config: the same thread pools as a server started with these flags
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=a.intra_op,
                                          inter_op_parallelism_threads=a.inter_op)
        servable = Servable(prog, 1, a.model_dir, session_config=config)
        return servable, servable.signature(a.signature)
    except (ServingError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return None


def print_result(**got) -> None:
    """The one JSON line a measurement process prints: what it ran on, then its figures."""
    import tensorflow as tf

    print(json.dumps({"tensorflow": tf.__version__, "python": platform.python_version(), "pid": os.getpid(), **got}))


def main(argv=None) -> int:
    p = model_parser("ceiling", __doc__.splitlines()[0])
    p.add_argument("--windows", type=int, default=5)
    p.add_argument("--window-s", type=float, default=1.0)
    a = p.parse_args(argv)
    if min(a.rows) < 1 or a.windows < 1 or min(a.intra_op, a.inter_op) < 0 or not 0 < a.window_s <= 3600 \
            or not 0 <= a.warmup_s <= 3600:
        p.error("--rows, --windows and --window-s must be positive, --window-s and --warmup-s finite and at most 3600, "
                "thread counts >= 0")
    got = load_requests(a, "ceiling")
    if got is None:
        return 2
    (servable, sig), requests = got
    got = measure(servable, sig, a.rows, a.windows, a.window_s, a.warmup_s, requests)
    print_result(packages=front_end_packages(), **got)
    return 0


if __name__ == "__main__":
    sys.exit(main())

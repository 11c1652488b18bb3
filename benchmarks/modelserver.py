"""Does the drop-in model server hide TF differences behind its own overhead? One run, one table.

    .venv/bin/python benchmarks/modelserver.py [--version 2.21] [--seconds 5]

(a) requests/s and P50/P99 at concurrency 1, 8, 32, REST and gRPC, batching off;
(b) the same signature called in-process in a tight loop at batch size 1, and the
    ratio server / in-process; (c) batching on (the repo's batching.config) vs off
    at concurrency 64. The client is loadgen, pinned to the other core.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from benchmarks.common import ROOT, pin, table  # noqa: E402

IN_PROCESS = '''
import sys, time, numpy as np, tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
fn = model.signatures["serving_default"]
x = np.random.default_rng(0).random((1, 784)).astype(np.float32)
for _ in range(200):
    fn(x=tf.constant(x))
n, t0, seconds = 0, time.perf_counter(), float(sys.argv[2])
while time.perf_counter() - t0 < seconds:
    fn(x=tf.constant(x))["probabilities"].numpy()
    n += 1
print(n / (time.perf_counter() - t0))
'''


def loadgen(target: str, conc: int, seconds: int) -> dict:
    out = Path(tempfile.mkdtemp()) / "lg.json"
    proc = subprocess.run(pin(1) + [sys.executable, "-m", "loadgen", "run", "--target", target, "--concurrency",
                                    str(conc), "--duration", f"{seconds}s", "--warmup", "1s", "--quiet",
                                    "--metrics-port", "0", "--out", str(out)],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
    if not out.exists():
        raise RuntimeError(proc.stderr)
    return json.loads(out.read_text())["targets"][0]["phases"]["steady"]


def main() -> int:
    from servers import CONFIGS, example_model, start_modelserver, version_python

    from stack.registry import load_registry
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=load_registry().newest.name)
    ap.add_argument("--seconds", type=int, default=5)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    base = example_model(a.version)
    inproc = float(subprocess.run(pin(0) + [version_python(a.version), "-c", IN_PROCESS, str(base / "1"),
                                            str(a.seconds)], capture_output=True, text=True,
                                  env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")).stdout.strip().splitlines()[-1])
    rows = []
    srv = start_modelserver(a.version, tmp, extra=["--rest_api_num_threads=2"])
    try:
        for proto, port in (("REST", srv.rest), ("gRPC", srv.grpc)):
            for conc in (1, 8, 32):
                st = loadgen(f"{proto.lower()}://127.0.0.1:{port}", conc, a.seconds)
                rows.append([proto, conc, f"{st['achieved_qps']:,.0f}", f"{st['latency_ms']['p50']:.2f}",
                             f"{st['latency_ms']['p99']:.2f}", f"{st['achieved_qps'] / inproc:.2f}",
                             sum(st["errors"].values())])
        off = loadgen(f"rest://127.0.0.1:{srv.rest}", 64, a.seconds)
    finally:
        srv.stop()
    srv = start_modelserver(a.version, tmp, batching=CONFIGS / "batching.config")
    try:
        on = loadgen(f"rest://127.0.0.1:{srv.rest}", 64, a.seconds)
    finally:
        srv.stop()
    print(table(f"model server, TF {a.version}, example model, batching off; in-process {inproc:,.0f} calls/s",
                ["protocol", "concurrency", "req/s", "p50 ms", "p99 ms", "x in-process", "errors"], rows))
    print(table("\nbatching at concurrency 64 (REST)", ["batching", "req/s", "p50 ms", "p99 ms", "x off"],
                [["off", f"{off['achieved_qps']:,.0f}", f"{off['latency_ms']['p50']:.2f}",
                  f"{off['latency_ms']['p99']:.2f}", "1.00"],
                 ["on (batching.config)", f"{on['achieved_qps']:,.0f}", f"{on['latency_ms']['p50']:.2f}",
                  f"{on['latency_ms']['p99']:.2f}", f"{on['achieved_qps'] / off['achieved_qps']:.2f}"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

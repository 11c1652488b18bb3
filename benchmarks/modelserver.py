"""Does the drop-in model server bury TensorFlow under its own overhead? One run, ratio tables.

    .venv/bin/python benchmarks/modelserver.py [--version 2.21] [--seconds 5]

(a) in-process, the example model's signature called back to back at 1 and 32 rows, two ways:
    the server's own call (Servable.run: a C++ Session callable) and a TF2 concrete function
    (`tf.saved_model.load(...).signatures[...]`, what this benchmark measured before);
(b) the server, batching off, REST and gRPC at concurrency 1, 8, 32 and 1 and 32 rows per
    request: req/s, rows/s, P50/P99, the ratio to each in-process figure, and from the server's
    own counters (read before and after each window) the mean TF runtime and the mean front-end
    time per request (request_latency - runtime_latency): what the serving path adds to TF;
(c) batching on (the repo's batching.config) vs off at concurrency 64, REST.
The client is loadgen, pinned to the second core; the server shares the machine with it.
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
import json, sys, time, numpy as np, tensorflow as tf
from modelserver.servable import Servable
path, seconds = sys.argv[1], float(sys.argv[2])
servable = Servable("bench", 1, path)
sig = servable.signature("serving_default")
fn = tf.saved_model.load(path).signatures["serving_default"]
def rate(call, rows):
    x = np.random.default_rng(0).random((rows, 784)).astype(np.float32)
    for _ in range(200):
        call(x)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        call(x)
        n += 1
    return n / (time.perf_counter() - t0)
out = {}
for rows in (1, 32):
    out[rows] = {"session": rate(lambda x: servable.run(sig, {"x": x}), rows),
                 "concrete": rate(lambda x: fn(x=tf.constant(x))["probabilities"].numpy(), rows)}
print(json.dumps(out))
'''


def loadgen(target: str, conc: int, seconds: int, rows: int = 1) -> dict:
    out = Path(tempfile.mkdtemp()) / "lg.json"
    proc = subprocess.run(pin(1) + [sys.executable, "-m", "loadgen", "run", "--target", target, "--concurrency",
                                    str(conc), "--duration", f"{seconds}s", "--warmup", "1s", "--quiet",
                                    "--metrics-port", "0", "--batch-size", str(rows), "--out", str(out)],
                          cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
    if not out.exists():
        raise RuntimeError(proc.stderr)
    return json.loads(out.read_text())["targets"][0]["phases"]["steady"]


def measured(srv, proto: str, conc: int, rows: int, seconds: int) -> tuple:
    """(loadgen steady stats, counter breakdown of the whole run: warmup included, means only)."""
    from stack import counters

    url = srv.url("/monitoring/prometheus/metrics")
    before = counters.read(url)
    st = loadgen(f"{proto}://127.0.0.1:{srv.rest if proto == 'rest' else srv.grpc}", conc, seconds, rows)
    return st, counters.breakdown(counters.delta(before, counters.read(url)), None)


def main() -> int:
    from servers import CONFIGS, example_model, start_modelserver, version_python

    from core.registry import load_registry
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default=load_registry().newest.name)
    ap.add_argument("--seconds", type=int, default=5)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    base = example_model(a.version)
    proc = subprocess.run(pin(0) + [version_python(a.version), "-c", IN_PROCESS, str(base / "1"), str(a.seconds)],
                          capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT)))
    inproc = {int(k): v for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}
    rows_out = []
    srv = start_modelserver(a.version, tmp)
    try:
        for rows in (1, 32):
            for proto in ("REST", "gRPC"):
                for conc in (1, 8, 32):
                    st, b = measured(srv, proto.lower(), conc, rows, a.seconds)
                    q = st["achieved_qps"]
                    rows_out.append([proto, rows, conc, f"{q:,.0f}", f"{q * rows:,.0f}", f"{st['latency_ms']['p50']:.2f}",
                                     f"{st['latency_ms']['p99']:.2f}", f"{q / inproc[rows]['session']:.2f}",
                                     f"{q / inproc[rows]['concrete']:.2f}", f"{b['runtime_ms'] * 1000:.0f}",
                                     f"{b['frontend_ms'] * 1000:.0f}", sum(st["errors"].values())])
        off = loadgen(f"rest://127.0.0.1:{srv.rest}", 64, a.seconds)
    finally:
        srv.stop()
    srv = start_modelserver(a.version, tmp, batching=CONFIGS / "batching.config")
    try:
        on = loadgen(f"rest://127.0.0.1:{srv.rest}", 64, a.seconds)
    finally:
        srv.stop()
    print(table(f"in-process, TF {a.version}, example model (calls/s)", ["rows", "session callable (the server's call)",
                                                                       "concrete function"],
                [[r, f"{v['session']:,.0f}", f"{v['concrete']:,.0f}"] for r, v in sorted(inproc.items())]))
    print(table(f"\nmodel server, TF {a.version}, batching off; x = req/s over in-process calls/s at the same rows; "
                "runtime and front end (request - runtime) are means per request from the server's counters",
                ["protocol", "rows", "concurrency", "req/s", "rows/s", "p50 ms", "p99 ms", "x session",
                 "x concrete", "runtime us", "front end us", "errors"], rows_out))
    print(table("\nbatching at concurrency 64 (REST, 1 row)", ["batching", "req/s", "p50 ms", "p99 ms", "x off"],
                [["off", f"{off['achieved_qps']:,.0f}", f"{off['latency_ms']['p50']:.2f}",
                  f"{off['latency_ms']['p99']:.2f}", "1.00"],
                 ["on (batching.config)", f"{on['achieved_qps']:,.0f}", f"{on['latency_ms']['p50']:.2f}",
                  f"{on['latency_ms']['p99']:.2f}", f"{on['achieved_qps'] / off['achieved_qps']:.2f}"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How fast and how honest is the load generator? One run, one table, ratios to wrk.

    .venv/bin/python benchmarks/loadgen.py [--seconds 5] [--concurrency 32] [--requests 1000000]

Against nginx answering a fixed predict JSON (1 worker, pinned to core 0; every
client pinned to core 1): wrk, hey, Locust HttpUser and FastHttpUser, the seeds'
ThreadPoolExecutor + requests client, and loadgen (1 process, closed loop, same
concurrency). Then: the open loop at 80% of loadgen's maximum (achieved rate,
send lag), the recording cost against prometheus_client's Histogram.observe, RSS
growth over many requests. Last, the client's own cost against the drop-in model server (newest
TF, batching off, 1 row) at concurrency 1 and 8, alternated pair by pair with an independent C/C++
client on the same server: wrk for REST, Triton's perf_analyzer for gRPC (benchmarks/independent.py
says how it runs and how to reproduce it by hand).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import ROOT, Nginx, pin, table  # noqa: E402

PY = sys.executable
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def body(seed: int = 0) -> bytes:
    import numpy as np
    return json.dumps({"instances": np.random.default_rng(seed).random((1, 784)).round(6).tolist()}).encode()


def run_wrk(url, body_file, seconds, conc):
    from benchmarks.independent import wrk

    return wrk(url, body_file, conc, seconds)["qps"]


def run_hey(url, body_file, seconds, conc):
    out = subprocess.run(pin(1) + ["hey", "-z", f"{seconds}s", "-c", str(conc), "-m", "POST", "-T",
                                   "application/json", "-D", str(body_file), url], capture_output=True, text=True).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def run_locust(url, body_file, seconds, conc, fast: bool):
    d = Path(tempfile.mkdtemp())
    user = "FastHttpUser" if fast else "HttpUser"
    (d / "locustfile.py").write_text(
        f"from locust import {user}, task, constant\n"
        f"BODY = open({str(body_file)!r}, 'rb').read()\n"
        f"class U({user}):\n    wait_time = constant(0)\n"
        "    @task\n    def predict(self):\n"
        "        self.client.post('/v1/models/my_model:predict', data=BODY,"
        " headers={'Content-Type': 'application/json'})\n")
    subprocess.run(pin(1) + [str(Path(PY).with_name("locust")), "-f", str(d / "locustfile.py"), "--headless", "-u",
                             str(conc), "-r", str(conc), "-t", f"{seconds + 2}s", "--host", url, "--csv",
                             str(d / "s"), "--only-summary", "--loglevel", "ERROR"],
                   capture_output=True, text=True, cwd=d)
    with open(d / "s_stats.csv") as f:
        row = [r for r in csv.DictReader(f) if r["Name"] == "Aggregated"][0]
    return float(row["Requests/s"])


SEED_CLIENT = '''
import sys, time, requests
from concurrent.futures import ThreadPoolExecutor
url, body, seconds, conc = sys.argv[1], open(sys.argv[2], "rb").read(), float(sys.argv[3]), int(sys.argv[4])
def worker(_):
    s, n, deadline = requests.Session(), 0, time.time() + seconds
    while time.time() < deadline:
        s.post(url, data=body, headers={"Content-Type": "application/json"}).json()
        n += 1
    return n
t0 = time.time()
with ThreadPoolExecutor(max_workers=conc) as pool:
    total = sum(pool.map(worker, range(conc)))
print(total / (time.time() - t0))  # completed / elapsed (the seeds divided by the sum of latencies)
'''


def run_seed(url, body_file, seconds, conc):
    out = subprocess.run(pin(1) + [PY, "-c", SEED_CLIENT, url, str(body_file), str(seconds), str(conc)],
                         capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def run_loadgen(target: str, args: list, timeout=600, saturating: bool = False) -> dict:
    """loadgen's steady phase. saturating: the run is near the generator's own maximum, so an invalid
    window (exit 3: saturated, send lag) is a result to print, not a failure."""
    out = Path(tempfile.mkdtemp()) / "lg.json"
    proc = subprocess.run(pin(1) + [PY, "-m", "loadgen", "run", "--target", target, "--quiet", "--metrics-port", "0",
                                    "--out", str(out), *args], capture_output=True, text=True, env=ENV, cwd=ROOT,
                          timeout=timeout)
    if proc.returncode not in ((0, 1, 3) if saturating else (0, 1)) or not out.exists():
        raise RuntimeError(f"loadgen exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-2000:]}")
    return json.loads(out.read_text())["targets"][0]["phases"]["steady"]


def set_vs_one(target: str, body_file, set_file, seconds: int, conc: int, rounds: int = 3) -> list:
    """Rows: round, one body, the set, their ratio; the last row the means over the rounds."""
    base = ["--concurrency", str(conc), "--duration", f"{seconds}s", "--warmup", "1s"]
    rows, ones, sets = [], [], []
    for i in range(1, rounds + 1):
        ones.append(run_loadgen(target, base + ["--payload-file", str(body_file)], saturating=True)["achieved_qps"])
        sets.append(run_loadgen(target, base + ["--requests", str(set_file), "--request-count", "1024"],
                                saturating=True)["achieved_qps"])
        rows.append([i, f"{ones[-1]:,.0f}", f"{sets[-1]:,.0f}", f"{sets[-1] / ones[-1]:.3f}"])
    mo, ms = sum(ones) / rounds, sum(sets) / rounds
    return rows + [["mean", f"{mo:,.0f}", f"{ms:,.0f}", f"{ms / mo:.3f}"]]


def recording_cost(n=300_000) -> tuple:
    from prometheus_client import CollectorRegistry, Histogram

    from loadgen.record import BOUNDS, Series
    values = [0.001 + (i % 997) * 1e-5 for i in range(n)]
    h = Histogram("x_seconds", "x", buckets=BOUNDS, registry=CollectorRegistry())
    t = time.perf_counter()
    for v in values:
        h.observe(v)
    prom = (time.perf_counter() - t) / n
    s = Series(("a", "b", "c", "d"))
    t = time.perf_counter()
    for v in values:
        s.record(v)
    s.flush()
    ours = (time.perf_counter() - t) / n
    return prom * 1e9, ours * 1e9


def rss_growth(url_target: str, requests: int, conc: int, body_file) -> tuple:
    import psutil
    out = Path(tempfile.mkdtemp()) / "lg.json"
    proc = subprocess.Popen(pin(1) + [PY, "-m", "loadgen", "run", "--target", url_target, "--concurrency", str(conc),
                                      "--max-requests", str(requests), "--duration", "600s", "--warmup", "0",
                                      "--quiet", "--out", str(out), "--metrics-port", "0",
                                      "--payload-file", str(body_file)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT)
    p = psutil.Process(proc.pid)
    samples = []
    while proc.poll() is None:
        try:
            samples.append((time.monotonic(), p.memory_info().rss))
        except psutil.Error:
            break
        time.sleep(0.25)
    done = json.loads(out.read_text())["targets"][0]["phases"]["steady"]["ok"]
    base = samples[min(8, len(samples) - 1)][1]  # after ~2 s: imports and first batches done
    return done, base / 2**20, (max(s for _, s in samples) - base) / 2**20


def client_cost(seconds: int, body_file, pairs: int = 2) -> list:
    """Rows: protocol, concurrency, pair, loadgen req/s, independent req/s, ratio, p50s, client CPU."""
    from benchmarks import independent

    sys.path.insert(0, str(ROOT / "tests"))
    from servers import start_modelserver
    from core.registry import load_registry
    why_not = independent.perf_analyzer_ready(log=lambda m: print(m, file=sys.stderr, flush=True))
    srv = start_modelserver(load_registry().newest.name, Path(tempfile.mkdtemp()))
    rows = []
    try:
        for proto, port in (("REST", srv.rest), ("gRPC", srv.grpc)):
            if proto == "gRPC" and why_not:
                rows.append([proto, "-", "-", "-", "-", "-", "-", "-", f"skipped: {why_not}"])
                continue
            for conc in (1, 8):
                for pair in range(1, pairs + 1):
                    lg = run_loadgen(f"{proto.lower()}://127.0.0.1:{port}", [
                        "--concurrency", str(conc), "--duration", f"{seconds}s", "--warmup", "1s"]
                        + (["--payload-file", str(body_file)] if proto == "REST" else []))
                    other = (independent.wrk(f"http://127.0.0.1:{port}/v1/models/my_model:predict", body_file, conc,
                                             seconds) if proto == "REST" else independent.perf_analyzer(port, conc,
                                                                                                     seconds=seconds))
                    rows.append([proto, conc, pair, f"{lg['achieved_qps']:,.0f}", f"{other['qps']:,.0f}",
                                 f"{lg['achieved_qps'] / other['qps']:.2f}",
                                 f"{lg['latency_ms']['p50']:.3f} / {other['p50_ms']:.3f}",
                                 f"{lg['client_cpu_ms_per_request'] * 1000:.0f}",
                                 "wrk" if proto == "REST" else "perf_analyzer 2.60"])
    finally:
        srv.stop()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--requests", type=int, default=1_000_000, help="for the RSS growth check")
    a = ap.parse_args()
    body_file = Path(tempfile.mkdtemp()) / "body.json"
    body_file.write_bytes(body())
    set_file = body_file.with_name("set.jsonl")  # a request set: 1,024 distinct bodies, cycled in a seeded order
    set_file.write_bytes(b"\n".join(body(i) for i in range(1024)) + b"\n")
    rows = {}
    with Nginx(core=0) as nginx:
        url = f"http://127.0.0.1:{nginx.port}/v1/models/my_model:predict"
        target = f"rest://127.0.0.1:{nginx.port}"
        for name, fn in (("wrk", lambda: run_wrk(url, body_file, a.seconds, a.concurrency)),
                         ("hey", lambda: run_hey(url, body_file, a.seconds, a.concurrency)),
                         ("locust HttpUser", lambda: run_locust(f"http://127.0.0.1:{nginx.port}", body_file,
                                                                a.seconds, a.concurrency, False)),
                         ("locust FastHttpUser", lambda: run_locust(f"http://127.0.0.1:{nginx.port}", body_file,
                                                                    a.seconds, a.concurrency, True)),
                         ("seed client (threads+requests)", lambda: run_seed(url, body_file, a.seconds, a.concurrency)),
                         ("loadgen (1 process, closed loop)", lambda: run_loadgen(target, [
                             "--concurrency", str(a.concurrency), "--duration", f"{a.seconds}s", "--warmup", "1s",
                             "--payload-file", str(body_file)], saturating=True)["achieved_qps"])):
            print(f"measuring {name} ...", file=sys.stderr, flush=True)
            rows[name] = fn()
        wrk = rows["wrk"]
        print(table(f"\nclosed loop, {a.concurrency} connections, {a.seconds}s each, against nginx (fixed answer)",
                    ["client", "req/s", "x wrk"], [[k, f"{v:,.0f}", f"{v / wrk:.3f}"] for k, v in rows.items()]))
        lg = rows["loadgen (1 process, closed loop)"]
        print(f"loadgen / locust FastHttpUser: {lg / rows['locust FastHttpUser']:.1f}x   "
              f"loadgen / seed client: {lg / rows['seed client (threads+requests)']:.1f}x")
        print(table("\na request set of 1,024 distinct bodies against one body, 3 rounds alternating (one run each is "
                    "within its own noise: ±8% here)", ["round", "one body req/s", "1,024 bodies req/s", "ratio"],
                    set_vs_one(target, body_file, set_file, a.seconds, a.concurrency)))
        rate = round(0.8 * lg)
        print(f"measuring the open loop at {rate}/s ...", file=sys.stderr, flush=True)
        st = run_loadgen(target, ["--rate", str(rate), "--duration", f"{a.seconds * 2}s", "--warmup", "1s",
                                  "--payload-file", str(body_file)], saturating=True)
        print(table("\nopen loop (Poisson) at 80% of loadgen's maximum", ["offered/s", "scheduled", "sent",
                                                                             "sent/scheduled", "send lag p50 ms",
                                                                             "send lag p99 ms", "latency p99 ms",
                                                                             "valid"],
                    [[rate, st["scheduled"], st["sent"], f"{st['sent'] / st['scheduled']:.4f}",
                      f"{st['send_lag_ms']['p50']:.3f}", f"{st['send_lag_ms']['p99']:.3f}",
                      f"{st['latency_ms']['p99']:.2f}", "yes" if st["valid"] else "; ".join(st["invalid_reasons"])]]))
        print(f"measuring RSS over {a.requests:,} requests ...", file=sys.stderr, flush=True)
        done, base, growth = rss_growth(target, a.requests, a.concurrency, body_file)
    prom_ns, ours_ns = recording_cost()
    print(table("\nrecording cost per request", ["recorder", "ns/request", "x cheaper"],
                [["prometheus_client Histogram.observe (same 321 buckets)", f"{prom_ns:.0f}", "1.0"],
                 ["loadgen Series.record (log buckets + HDR, flushed)", f"{ours_ns:.0f}", f"{prom_ns / ours_ns:.1f}"]]))
    print(f"\nRSS: {done:,} requests, baseline {base:.1f} MiB, growth {growth:.1f} MiB")
    print("measuring the client's own cost against the model server ...", file=sys.stderr, flush=True)
    print(table("\nclient cost: loadgen vs an independent client on the drop-in model server (newest TF, batching "
                "off, 1 row), alternated", ["protocol", "concurrency", "pair", "loadgen req/s", "other req/s",
                                            "loadgen/other", "p50 ms loadgen / other", "loadgen CPU us/req",
                                            "other client"], client_cost(a.seconds, body_file)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Soak: a constant rate against two versions for a long time (default 30 minutes).

    .venv/bin/python benchmarks/soak.py [--versions "2.9 2.21"] [--rate 100] [--minutes 30]

Brings up its own local stack (ports shifted by TFSB_PORT_OFFSET=27000, state in a temp
dir), runs the load generator, samples every process' RSS and Prometheus' head series
every 30 s, and prints: RSS growth of loadgen, exporter and each model server (mean of
the last 5 samples against the first 5 after the warmup; flat means < 5%), the count
reconciliation (loadgen's completed requests == each server's request_count delta, read
from the servers themselves == loadgen_requests_total in Prometheus), and the maximum
series count. Not part of CI: it takes as long as it says.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, table  # noqa: E402

OFFSET = 27000


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def prom(expr: str) -> float:
    body = json.loads(_get(f"http://127.0.0.1:{9090 + OFFSET}/api/v1/query?" + urllib.parse.urlencode({"query": expr})))
    return sum(float(r["value"][1]) for r in body["data"]["result"])


def server_count(rest_port: int) -> int:
    """Sum of :tensorflow:serving:request_count over all labels, read from the server itself."""
    text = _get(f"http://127.0.0.1:{rest_port}/monitoring/prometheus/metrics")
    return int(sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
                   if ln.startswith(":tensorflow:serving:request_count{")))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default="2.9 2.21")
    ap.add_argument("--rate", type=float, default=100.0, help="requests/s per version")
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--sample-every", type=float, default=30.0)
    a = ap.parse_args()
    from core.registry import load_registry

    versions = load_registry().select(a.versions)
    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    env = dict(os.environ, TFSB_PORT_OFFSET=str(OFFSET), TFSB_STATE=str(tmp / "state"), PYTHONPATH=str(ROOT))
    stack = [sys.executable, "-m", "stack"]
    subprocess.run(stack + ["up", "--versions", a.versions, "--runtime", "local"], cwd=ROOT, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    try:
        state = tmp / "state" / "local"
        pids = {f"modelserver {v.name}": int((state / f"tf{v.name}" / "modelserver.pid").read_text())
                for v in versions}
        pids["exporter"] = int((state / "exporter" / "exporter.pid").read_text())
        rest = {v.name: v.ports.rest + OFFSET for v in versions}
        before = {n: server_count(p) for n, p in rest.items()}
        out = tmp / "soak.json"
        load = subprocess.Popen([sys.executable, "-m", "loadgen", "run", "--versions", a.versions, "--rate",
                                 str(a.rate), "--duration", f"{a.minutes * 60:g}s", "--warmup", "30s", "--quiet",
                                 "--linger", "6s", "--metrics-port", str(9464 + OFFSET), "--out", str(out)],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(tmp / "loadgen.log", "wb"))
        pids["loadgen"] = load.pid
        samples, series = {n: [] for n in pids}, []
        t0 = time.monotonic()
        print(f"soak: {a.minutes:g} min at {a.rate:g}/s against {a.versions}; state in {tmp}", flush=True)
        while load.poll() is None:
            time.sleep(a.sample_every)
            for n, pid in pids.items():
                try:
                    rss = psutil.Process(pid).memory_info().rss
                except psutil.NoSuchProcess:
                    continue
                if rss:  # 0: a process that has just exited (zombie)
                    samples[n].append(rss)
            try:
                series.append(prom("prometheus_tsdb_head_series"))
            except OSError:
                pass
            print(f"  {(time.monotonic() - t0) / 60:5.1f} min: " + ", ".join(
                f"{n} {s[-1] / 2**20:.0f} MiB" for n, s in samples.items() if s) + f", series {series[-1]:.0f}",
                flush=True)
        summary = json.loads(out.read_text())
        if summary["partial"]:
            print(f"loadgen exited {load.returncode} before the end; its last partial summary is used "
                  f"(log: {tmp / 'loadgen.log'})")
        time.sleep(3)  # the loadgen's last scrape is in (it lingered 6 s)
        rows = []
        for n, s in samples.items():
            first, last = s[2:7] or s[:1], s[-6:-1] or s[-1:]  # skip the warmup; the last sample may be at exit
            growth = (sum(last) / len(last)) / (sum(first) / len(first)) - 1
            rows.append([n, f"{first[0] / 2**20:.0f}", f"{last[-1] / 2**20:.0f}", f"{growth:+.1%}",
                         "flat" if growth < 0.05 else "GROWS"])
        print(table("RSS over the soak (first 5 samples after warmup vs last 5)",
                    ["process", "start MiB", "end MiB", "growth", "verdict"], rows))
        rec = []
        for t in summary["targets"]:
            client = sum(p["completed"] for p in t["phases"].values())
            server = server_count(rest[t["version"]]) - before[t["version"]]
            # The loadgen target is gone (stale) by now: each counter series' last value, via max_over_time.
            in_prom = prom(f'sum(max_over_time(loadgen_requests_total{{version="{t["version"]}"}}'
                           f'[{a.minutes + 5:.0f}m]))')
            errors = sum(sum(p["errors"].values()) for p in t["phases"].values())
            rec.append([t["version"], client, server, f"{in_prom:.0f}", errors,
                        "none lost" if client == server == round(in_prom) else "MISMATCH"])
        print(table("Count reconciliation (all phases)", ["version", "loadgen", "server", "Prometheus", "errors",
                                                          "verdict"], rec))
        print(f"Prometheus head series: max {max(series):.0f}, last {series[-1]:.0f} (bounded when max == last "
              "after the first minutes)")
    finally:
        subprocess.run(stack + ["down"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())

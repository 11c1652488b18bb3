"""Exporter cost: scrape latency with 8 GPUs and 64 processes, and its own CPU use.

    .venv/bin/python benchmarks/exporter.py [--scrapes 300] [--seconds 20]

NVML is the fake module from tests/ (there is no GPU here), so this measures the
exporter's own work: sampling every 100 ms, attribution over /proc, exposition.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import ROOT, free_port, table  # noqa: E402


def state(devices=8, processes=64) -> dict:
    pids = [p.pid for p in psutil.process_iter()][:processes]
    devs = []
    for i in range(devices):
        devs.append({"name": "NVIDIA H100", "uuid": f"GPU-{i:04d}", "used": (i + 1) << 30, "total": 80 << 30,
                     "reserved": 1 << 29, "util": [50, 20], "power_mw": 300000, "energy_mj": 10 ** 9, "temp": 50,
                     "clocks_mhz": [1980, 2619],
                     "processes": [[pid, 1 << 28] for pid in pids[i::devices]]})
    return {"devices": devs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scrapes", type=int, default=300)
    ap.add_argument("--seconds", type=int, default=20)
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp())
    (d / "nvml.json").write_text(json.dumps(state()))
    port = free_port()
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT}/tests", FAKE_NVML_STATE=str(d / "nvml.json"))
    proc = subprocess.Popen([sys.executable, "-m", "exporter", "--port", str(port), "--nvml-module", "fake_nvml",
                             "--sample-interval", "0.1", "--docker", "off"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                body = urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                assert time.monotonic() < deadline, "exporter did not start"
                time.sleep(0.1)
        lat = []
        for _ in range(a.scrapes):
            t0 = time.perf_counter()
            urllib.request.urlopen(url, timeout=5).read()
            lat.append((time.perf_counter() - t0) * 1000)
        lat.sort()
        p = psutil.Process(proc.pid)
        c0, t0 = sum(p.cpu_times()[:2]), time.monotonic()
        for _ in range(a.seconds):
            time.sleep(1.0)
            urllib.request.urlopen(url, timeout=5).read()
        cpu = (sum(p.cpu_times()[:2]) - c0) / (time.monotonic() - t0)
    finally:
        proc.terminate()
        proc.wait(10)
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]  # noqa: E731
    print(table("exporter, 8 fake GPUs, 64 processes, 100 ms sampling",
                ["measure", "value", "goal", "met"],
                [["scrape P50 (ms)", f"{q(0.5):.2f}", "", ""],
                 ["scrape P99 (ms)", f"{q(0.99):.2f}", "< 10", "yes" if q(0.99) < 10 else "NO"],
                 ["exposition size (bytes)", f"{len(body):,}", "", ""],
                 [f"CPU, 1 s scrapes over {a.seconds}s (% of a core)", f"{cpu * 100:.2f}", "< 2",
                  "yes" if cpu < 0.02 else "NO"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

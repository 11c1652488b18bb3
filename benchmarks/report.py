"""Report generation time for a long compare run: `make report` over a 30-minute window.

    .venv/bin/python benchmarks/report.py --soak-dir /tmp/soak-XXXX [--cells 48]

A compare run of that length does not fit in a benchmark session, so this builds one from a
finished soak (benchmarks/soak.py): its Prometheus TSDB (30 minutes of two versions under load)
and its loadgen summary (client statistics, HDR histograms). The run's measurement windows are
spread evenly over the soak's span, versions interleaved, as the compare protocol does. Prints
the time each part of `make report` takes (build = PromQL per window + statistics).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.common import free_port, table  # noqa: E402


def synthetic_run(summary: dict, start: float, end: float, cells: int) -> dict:
    targets = {t["version"]: t for t in summary["targets"]}
    versions = sorted(targets, key=lambda v: tuple(map(int, v.split("."))))
    levels = (1, 8, 32)
    repeat = max(1, cells // (len(versions) * len(levels)))
    span = (end - start) / (repeat * len(levels) * len(versions))
    out, i = {}, 0
    for r in range(repeat):
        for level in levels:
            for v in versions:
                t = targets[v]
                hdr = summary["raw"]["targets"][t["name"]]["phases"]["steady"]["ok_hdr"]
                s, e = start + i * span + 2, start + (i + 1) * span - 2
                out[f"{r}/rest/closed/{level}/{v}"] = {
                    "repeat": r, "protocol": "rest", "mode": "closed", "level": level, "version": v,
                    "start": s, "end": e, "client": t["phases"]["steady"], "valid": True, "ok_hdr": hdr}
                i += 1
    profile = {"name": "standard", "concurrency": list(levels), "rates": [], "window_s": span, "warmup_s": 0,
               "search_low": 50, "search_high": 10000, "search_window_s": 10, "search_probes": 0, "sla_p99_ms": 50}
    return {"run_id": "bench-report", "status": "done", "created": start, "finished": end,
            "config": {"versions": versions, "protocols": ["rest"], "profile": profile, "repeat": repeat,
                       "runtime": "local", "model": "example"},
            "environment": {"cpu": "", "cpus": os.cpu_count(), "gpu": "none", "driver": "none", "python": "",
                            "platform": "", "runtime": "local", "git_commit": "", "tensorflow": {}},
            "cold_start": {v: {"to_available_s": 1.0, "first_request_ms": 5.0, "to_first_predict_s": 1.1}
                           for v in versions}, "cells": out, "search": {}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soak-dir", required=True, help="the state directory benchmarks/soak.py printed")
    ap.add_argument("--cells", type=int, default=48)
    a = ap.parse_args()
    soak = Path(a.soak_dir)
    summary = json.loads((soak / "soak.json").read_text())
    tmp = Path(tempfile.mkdtemp(prefix="bench-report-"))
    tsdb = tmp / "tsdb"
    shutil.copytree(soak / "state" / "prometheus-data", tsdb)
    port = free_port()
    (tmp / "prometheus.yml").write_text("global: {scrape_interval: 1h}\n")
    prom = subprocess.Popen([shutil.which("prometheus"), f"--config.file={tmp / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tsdb}", f"--web.listen-address=127.0.0.1:{port}",
                             "--storage.tsdb.retention.time=3650d"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        os.environ.update(TFSB_RESULTS=str(tmp / "results"), TFSB_PORT_OFFSET=str(port - 9090))
        from analysis import promql, report, runstore

        deadline = time.monotonic() + 60
        while True:
            try:
                stamps = promql.instant('up{job="prometheus"}[2h]', time.time())
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        ts = sorted(float(t) for r in stamps for t, _ in r["values"])
        run = synthetic_run(summary, ts[0] + 40, ts[-1] - 5, a.cells)
        runstore.save(run)
        t0 = time.perf_counter()
        rep = report.build(run["run_id"], log=lambda *_: None)
        t1 = time.perf_counter()
        report.write(run["run_id"], log=lambda *_: None)
        t2 = time.perf_counter()
        minutes = (ts[-1] - ts[0]) / 60
        print(table(f"make report over a {minutes:.0f}-minute run ({len(run['cells'])} windows, 2 versions)",
                    ["part", "seconds"], [["build (PromQL per window, statistics)", f"{t1 - t0:.2f}"],
                                          ["write (build again + md, csv, json, html with charts)", f"{t2 - t1:.2f}"]]))
        print(f"windows: {len(rep['crosscheck'])}; PromQL answered for "
              f"{sum(r['server_p99_ms']['mean'] is not None for r in rep['rows'])} of {len(rep['rows'])} rows")
    finally:
        prom.terminate()
        prom.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

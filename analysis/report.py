"""`make report RUN=<id>`: tables and charts for a compare run, from its results and Prometheus.

Client-side figures are the load generator's exact HDR statistics; server-side
P99, request counts, memory and CPU come from PromQL over each measurement's
window. Charts over time use the queries of the Grafana comparison dashboard,
read from grafana/dashboards/compare.json, so report and dashboard agree.
"""
from __future__ import annotations

import html
import time

import numpy as np

from analysis import charts, promql, runstore, stats
from analysis.report_text import METRICS, csv_text, markdown
from loadgen.record import bin_values, decode_hdr
from loadgen.summary import write_json_atomic
from stack import dashboards
from stack.procs import write_atomic

def cell_metrics(cell: dict, prom: dict) -> dict:
    st, lat = cell["client"], cell["client"]["latency_ms"]
    completed = st["completed"]
    cpu = prom.get("cpu_seconds")
    return {"achieved_qps": st["achieved_qps"], "avg_ms": lat.get("avg"), "p50_ms": lat.get("p50"),
            "p90_ms": lat.get("p90"), "p99_ms": lat.get("p99"), "server_p99_ms": prom.get("server_p99_ms"),
            "error_ratio": st["error_ratio"],
            "rss_mib": prom["rss_bytes"] / 2**20 if prom.get("rss_bytes") is not None else None,
            "gpu_mib": prom["gpu_bytes"] / 2**20 if prom.get("gpu_bytes") is not None else None,
            "cpu_s_per_1k": cpu / completed * 1000 if cpu is not None and completed else None}


def crosscheck(cell: dict, prom: dict, scrape_s: float = 2.0) -> dict:
    """Requests counted by loadgen vs the server's request_count increase vs Prometheus' loadgen counter."""
    client = cell["client"]["completed"]
    server = prom.get("server_count")
    edge = cell["client"]["throughput_qps"] * scrape_s * 2 + 2  # a scrape on each side of the window
    ok = server is not None and abs(server - client) <= edge
    return {"client": client, "server": None if server is None else round(server),
            "prometheus_loadgen": None if prom.get("prom_client_count") is None else round(prom["prom_client_count"]),
            "edge": round(edge), "consistent": ok}


def build(run_id: str, log=print) -> dict:
    run = runstore.load(run_id)
    baseline = run["config"]["versions"][0]
    groups, checks = {}, []
    for cell in run["cells"].values():
        prom = promql.window(cell)
        m = cell_metrics(cell, prom)
        g = groups.setdefault((cell["protocol"], cell["mode"], cell["level"], cell["version"]), [])
        g.append(m)
        checks.append({"cell": f"rep {cell['repeat'] + 1} {cell['protocol']} {cell['mode']} {cell['level']:g} "
                               f"{cell['version']}", "valid": cell["valid"], **crosscheck(cell, prom)})
    rows = []
    for (proto, mode, level, version), ms in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2],
                                                                                    kv[0][3] != baseline, kv[0][3])):
        row = {"protocol": proto, "mode": mode, "level": level, "version": version, "repeats": len(ms)}
        for name, _, better in METRICS:
            row[name] = stats.mean_ci([m[name] for m in ms])
        base = groups.get((proto, mode, level, baseline))
        if version != baseline and base:
            for name, better in (("achieved_qps", True), ("p99_ms", False)):
                d = stats.diff_ci([m[name] for m in ms], [b[name] for b in base])
                row[f"{name}_vs_baseline"] = {**d, "verdict": stats.verdict(d, better)}
        rows.append(row)
    window = [min((c["start"] for c in run["cells"].values()), default=run["created"]),
              max((c["end"] for c in run["cells"].values()), default=time.time())]
    gaps = promql.scrape_gaps(*window)
    for check, cell in zip(checks, run["cells"].values()):
        check["in_gap"] = bool(gaps) and any(a < cell["end"] and cell["start"] < b for a, b in gaps)
    return {"run_id": run_id, "baseline_version": baseline, "gaps": gaps, "planned": planned_cells(run["config"]),
            "config": run["config"], "environment": run["environment"],
            "cold_start": run["cold_start"], "max_stable_qps": {k: v.get("max_stable_qps") for k, v in
                                                                run["search"].items()},
            "search": run["search"], "rows": rows, "crosscheck": checks, "status": run["status"],
            "window": window, "_run": run}


def planned_cells(config: dict) -> int:
    p = config["profile"]
    return len(config["versions"]) * len(config["protocols"]) * (len(p["concurrency"]) + len(p["rates"])) \
        * config["repeat"]


def _cdf_points(encoded: str) -> tuple:
    h = decode_hdr(encoded)
    counts = np.frombuffer(h.counts, dtype=np.int64, count=h.counts_len)
    nz = np.nonzero(counts)[0]
    if not len(nz):
        return [], []
    low, size = bin_values(h, nz)
    return ((low + size) / 1000).tolist(), (np.cumsum(counts[nz]) / h.total_count).tolist()


def html_page(rep: dict) -> str:
    run = rep["_run"]
    parts = []
    curves = {}
    for r in rep["rows"]:
        if r["mode"] == "closed" and r["achieved_qps"]["mean"] is not None and r["p99_ms"]["mean"] is not None:
            half = (r["p99_ms"]["ci_high"] - r["p99_ms"]["ci_low"]) / 2 if r["p99_ms"]["ci_low"] is not None else 0
            curves.setdefault(f"{r['version']} {r['protocol']}", []).append(
                (r["achieved_qps"]["mean"], r["p99_ms"]["mean"], half))
    parts.append(charts.qps_vs_p99(curves, "QPS vs P99 (closed loop, mean ± 95% CI)"))
    top = max((c["level"] for c in run["cells"].values() if c["mode"] == "closed"), default=None)
    cdfs = {}
    for c in run["cells"].values():
        if c["mode"] == "closed" and c["level"] == top and c["repeat"] == 0 and c.get("ok_hdr"):
            cdfs[f"{c['version']} {c['protocol']}"] = _cdf_points(c["ok_hdr"])
    parts.append(charts.cdf(cdfs, f"Latency CDF at concurrency {top:g} (first repeat, exact HDR)"))
    start, end = rep["window"]
    panels = {t: e for t, _, e in dashboards.panel_queries(dashboards.load("compare.json"))}
    versions = run["config"]["versions"]
    for title, ylabel, scale in (("QPS (client side)", "req/s", 1), ("P99 latency (client side)", "ms", 1000),
                                 ("Memory (process RSS)", "MiB", 1 / 2**20)):
        expr = dashboards.substitute(panels[title], versions, versions[0], "10s")
        try:
            res = promql.series_range(expr, start - 5, end + 5, step=2)
        except (OSError, ValueError):
            res = []
        series = {r["metric"].get("version", "?"): [(float(t), float(v)) for t, v in r["values"]] for r in res}
        parts.append(charts.timeseries(series, f"{title} (dashboard query)", ylabel, scale))
    table = html.escape(markdown(rep))
    return ("<!doctype html><html><head><meta charset='utf-8'><title>TF Serving comparison "
            f"{html.escape(rep['run_id'])}</title><style>body{{font-family:sans-serif;max-width:1100px;margin:auto}}"
            "pre{white-space:pre-wrap;font-size:12px} .chart{margin:12px 0}</style></head><body>"
            f"<h1>TF Serving comparison, run {html.escape(rep['run_id'])}</h1>"
            + "".join(f"<div class='chart'>{svg}</div>" for svg in parts)
            + f"<h2>Tables</h2><pre>{table}</pre></body></html>")


def write(run_id: str, log=print) -> dict:
    t0 = time.perf_counter()
    rep = build(run_id, log)
    d = runstore.run_dir(run_id)
    out = {"md": d / "report.md", "csv": d / "report.csv", "json": d / "report.json", "html": d / "report.html"}
    for key, text in (("md", markdown(rep)), ("csv", csv_text(rep)), ("html", html_page(rep))):
        write_atomic(out[key], text)
    write_json_atomic(str(out["json"]), {k: v for k, v in rep.items() if k != "_run"})
    log(f"report written in {time.perf_counter() - t0:.1f}s: " + ", ".join(str(p) for p in out.values()))
    return {**rep, "files": {k: str(v) for k, v in out.items()}}

"""`make report RUN=<id>`: a compare run's verdicts, tables and charts, from its results and Prometheus.

Client-side figures are the load generator's exact statistics; the breakdown and the counts
come from the server's own counters read at each window's edges (analysis/counters.py);
memory and CPU from PromQL over each window. Rows, intervals and Holm-corrected verdicts:
analysis/rows.py; the count reconciliation: analysis/reconcile.py. Charts over time use the
queries of the Grafana comparison dashboard, read from grafana/dashboards/compare.json.
"""
from __future__ import annotations

import html
import time

import numpy as np

from analysis import charts, promql, reconcile, rows as rows_mod, runstore
from analysis.report_text import csv_text, markdown
from loadgen.record import bin_values, decode_hdr
from loadgen.summary import write_json_atomic
from stack import dashboards
from stack.procs import write_atomic


def checks(run: dict) -> list:
    """The reconciliation of every cell: client vs server (exact), server vs Prometheus."""
    activity = reconcile.activity_by_server(run)
    samples: dict = {}
    out = []
    for k, cell in run["cells"].items():
        v = cell["version"]
        if v not in samples:
            spans = activity.get(v, [])
            start, end = min(a for a, _ in spans) - 60, max(b for _, b in spans) + 60
            samples[v] = promql.counter_samples(":tensorflow:serving:request_count", v, start, end)
        out.append({"cell": k, "valid": cell["valid"], "client_vs_server": reconcile.client_vs_server(cell),
                    "server_vs_prometheus": reconcile.server_vs_prometheus(cell, samples[v], activity.get(v, []))})
    return out


def build(run_id: str, log=print) -> dict:
    run = runstore.load(run_id)
    prom = {k: promql.window(cell) for k, cell in run["cells"].items()}
    built = rows_mod.build(run, prom)
    window = [min((c["warmup_start"] for c in run["cells"].values()), default=run["created"]),
              max((c["end"] for c in run["cells"].values()), default=time.time())]
    gaps = promql.scrape_gaps(*window)
    crosscheck = checks(run)
    for check in crosscheck:
        cell = run["cells"][check["cell"]]
        check["in_gap"] = bool(gaps) and any(a < cell["end"] and cell["start"] < b for a, b in gaps)
    return {"run_id": run_id, "baseline_version": run["config"]["versions"][0], "gaps": gaps,
            "planned": planned_cells(run["config"]), "config": run["config"], "placement": run.get("placement"),
            "environment": run["environment"], "cold_start": run["cold_start"],
            "max_stable_qps": {k: v.get("max_stable_qps") for k, v in run["search"].items()},
            "search": run["search"], **built, "crosscheck": crosscheck, "status": run["status"],
            "window": window, "_run": run}


def planned_cells(config: dict) -> int:
    from analysis import plan
    from analysis.plan import Settings
    from analysis.profiles import Profile

    settings = Settings(tuple(config["versions"]), tuple(config["rows"]), tuple(config["batching"]),
                        tuple(config["protocols"]), Profile(**config["profile"]), config["repeat"],
                        config["sla_p99_ms"])
    return len(plan.cells(settings))


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

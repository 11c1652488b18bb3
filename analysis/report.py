"""`make report RUN=<id>`: a compare run's verdicts, tables and charts, from its results and Prometheus.

Client-side figures are the load generator's exact statistics; the breakdown and the counts
come from the server's own counters read at each window's edges (stack/counters.py);
memory and CPU from PromQL over each window. Rows, intervals and Holm-corrected verdicts:
analysis/rows.py; the count reconciliation: analysis/reconcile.py; the page: analysis/report_html.py.
"""
from __future__ import annotations

import time

from analysis import coldstart, growth, promql, reconcile, rows as rows_mod, runstore
from stack import counters
from analysis.report_html import html_page
from analysis.report_text import csv_text, markdown
from loadgen.summary import write_json_atomic
from fileio.atomic import write_atomic


def checks(run: dict, url: str | None = None) -> list:
    """The reconciliation of every cell: client vs server (exact), server vs Prometheus."""
    activity = reconcile.activity_by_server(run)
    samples: dict = {}
    out = []
    for k, cell in run["cells"].items():
        v = cell["version"]
        if v not in samples:
            spans = activity.get(v, [])
            start, end = min(a for a, _ in spans) - 60, max(b for _, b in spans) + 60
            samples[v] = promql.counter_samples(counters.INFERENCE_SELECTORS, v, start, end, url)
        out.append({"cell": k, "valid": cell["valid"], "client_vs_server": reconcile.client_vs_server(cell),
                    "server_vs_prometheus": reconcile.server_vs_prometheus(cell, samples[v], activity.get(v, []))})
    return out


def build(run_id: str, log=print) -> dict:
    run = runstore.load(run_id)
    url = run["config"].get("prometheus")  # an external compare's Prometheus; None: the stack's own
    prom = {k: promql.window(cell, url) for k, cell in run["cells"].items()}
    built = rows_mod.build(run, prom)
    built["memory"] = growth.table(run, steady_rss(built["rows"]))
    built["cold_starts"] = coldstart.table(run)
    built["families"] = {**built["families"], growth.FAMILY: built["memory"]["tests"],
                         coldstart.FAMILY: built["cold_starts"]["tests"]}
    window = [min((c["warmup_start"] for c in run["cells"].values()), default=run["created"]),
              max((c["end"] for c in run["cells"].values()), default=time.time())]
    gaps = promql.scrape_gaps(*window, url=url)
    crosscheck = checks(run, url)
    planned = planned_keys(run["config"])
    for check in crosscheck:
        cell = run["cells"][check["cell"]]
        check["in_gap"] = bool(gaps) and any(a < cell["end"] and cell["start"] < b for a, b in gaps)
    return {"run_id": run_id, "baseline_version": run["config"]["versions"][0], "gaps": gaps,
            "planned": len(planned), "missing": [k for k in planned if k not in run["cells"]], "config": run["config"], "placement": run.get("placement"),
            "environment": run["environment"], "cold_start": run["cold_start"],
            "max_stable_qps": {k: v.get("max_stable_qps") for k, v in run["search"].items()},
            "search": run["search"], **built, "crosscheck": crosscheck, "status": run["status"],
            "interrupted": (run.get("interrupted") or {}).get("signal", ""),
            "failed": (run.get("failed") or {}).get("error", ""),
            "window": window, "_run": run}


def steady_rss(rows: list) -> dict:
    """{version: the mean RSS MiB of its cells' windows}."""
    got: dict = {}
    for r in rows:
        if r["rss_mib"]["mean"] is not None:
            got.setdefault(r["version"], []).append(r["rss_mib"]["mean"])
    return {v: sum(xs) / len(xs) for v, xs in got.items()}


def planned_keys(config: dict) -> list:
    """The keys of every cell the run's config plans, in measuring order."""
    from analysis import plan
    from analysis.plan import Settings
    from analysis.profiles import Profile
    from analysis.schemas import known_profile_fields

    settings = Settings(tuple(config["versions"]), tuple(config["rows"]), tuple(config["batching"]),
                        tuple(config["protocols"]), Profile(**known_profile_fields(config["profile"])), config["repeat"],
                        config["sla_p99_ms"])
    return [plan.key(c) for c in plan.cells(settings)]


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

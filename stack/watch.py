"""`make watch`: the comparison dashboard's panels as a live terminal table (no Grafana needed).

The queries are read from grafana/dashboards/compare.json, so this view and the
dashboard show the same numbers.
"""
from __future__ import annotations

import time

from core import ports
from stack import dashboards
from stack.monitoring import running_versions
from stack.targets import query

COLUMNS = ["QPS (client side)", "QPS (server side)", "P50 latency (client side)", "P99 latency (client side)",
           "P99 latency (server side)", "Error ratio (client side)", "Memory (process RSS)"]
BREAKDOWN_PANEL = "Where the time goes: $version"  # its targets' legends become columns (mean per request)
BREAKDOWN_COLUMNS = [label for label, _ in dashboards.BREAKDOWN]


def _fmt(title: str, value: float | None) -> str:
    if value is None:
        return "-"
    if "latency" in title or title in BREAKDOWN_COLUMNS:
        return f"{value * 1000:.2f} ms"
    if "ratio" in title:
        return f"{value:.2%}"
    if "Memory" in title:
        return f"{value / 2**20:.0f} MiB"
    return f"{value:.1f}/s"


def snapshot(prom_url: str, versions: list) -> dict:
    """{version: {panel title: value}} for the comparison panels, evaluated now."""
    queries = dashboards.panel_queries(dashboards.load("compare.json"))
    panels = {t: e for t, _, e in queries}
    panels.update({legend: e for t, legend, e in queries if t == BREAKDOWN_PANEL})
    out = {v: {} for v in versions}
    for title in COLUMNS + BREAKDOWN_COLUMNS:
        expr = dashboards.substitute(panels[title], versions, versions[0], "30s")
        for r in query(prom_url, expr):
            v = r["metric"].get("version")
            if v in out:
                out[v][title] = float(r["value"][1])
    return out


def table(values: dict):
    from rich.table import Table

    t = Table(title=f"TF Serving versions side by side ({time.strftime('%H:%M:%S')}, last 30 s)")
    t.add_column("version")
    for c in COLUMNS:
        t.add_column(c, justify="right")
    for c in BREAKDOWN_COLUMNS:
        t.add_column(f"{c} (mean)", justify="right")
    for v, row in values.items():
        t.add_row(v, *[_fmt(c, row.get(c)) for c in COLUMNS + BREAKDOWN_COLUMNS])
    return t


def watch(registry, once: bool = False, interval_s: float = 3.0, duration_s: float = 3600.0) -> int:
    from rich.console import Console
    from rich.live import Live

    prom = f"http://127.0.0.1:{ports.port(ports.PROMETHEUS)}"
    versions = [v.name for v in running_versions(registry)]
    if not versions:
        print("nothing is up: make up VERSION=2.9 first")
        return 1
    try:
        if once:
            Console(width=200).print(table(snapshot(prom, versions)))
            return 0
        deadline = time.monotonic() + duration_s
        with Live(table(snapshot(prom, versions)), refresh_per_second=1) as live:
            while time.monotonic() < deadline:
                time.sleep(interval_s)
                live.update(table(snapshot(prom, versions)))
    except OSError as e:
        print(f"error: Prometheus at {prom} does not answer ({e}); is the stack up?")
        return 2
    except KeyboardInterrupt:
        pass
    return 0

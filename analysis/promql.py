"""What Prometheus says about a measurement window: server-side latency, counts, memory, CPU."""
from __future__ import annotations

import json
import math
import urllib.parse

from fileio import http
from core import ports
from core.errors import Failed


def prometheus_url() -> str:
    return f"http://127.0.0.1:{ports.port(ports.PROMETHEUS)}"


def instant(expr: str, at: float, url: str | None = None) -> list:
    q = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
    body = json.loads(http.get(f"{url or prometheus_url()}/api/v1/query?{q}", timeout_s=15))
    if body.get("status") != "success":
        raise Failed(f"Prometheus rejected {expr!r}: {body.get('error')}")
    return body["data"]["result"]


def scalar(expr: str, at: float, url: str | None = None) -> float | None:
    res = instant(expr, at, url)
    if not res:
        return None
    v = float(res[0]["value"][1])
    return None if math.isnan(v) else v


def series_range(expr: str, start: float, end: float, step: float = 5, url: str | None = None) -> list:
    q = urllib.parse.urlencode({"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"})
    body = json.loads(http.get(f"{url or prometheus_url()}/api/v1/query_range?{q}", timeout_s=30))
    if body.get("status") != "success":
        raise Failed(f"Prometheus rejected {expr!r}: {body.get('error')}")
    return body["data"]["result"]


def window(cell: dict, url: str | None = None) -> dict:
    """What only Prometheus knows about one measurement window of one version: memory and CPU
    (from the exporter). Counts and latencies come from the server's own counters instead."""
    v, end = cell["version"], cell["end"]
    w = f"{max(1, math.ceil(cell['end'] - cell['start']))}s"
    sel = f'version="{v}"'
    q = {
        "rss_bytes": f'sum(max_over_time(process_resident_memory_bytes{{job="exporter",{sel}}}[{w}]))',
        "gpu_bytes": f"sum(max_over_time(process_gpu_memory_used_bytes{{{sel}}}[{w}]))",
        "cpu_seconds": f'sum(increase(process_cpu_seconds_total{{job="exporter",{sel}}}[{w}]))',
    }
    out = {}
    for name, expr in q.items():
        try:
            out[name] = scalar(expr, end, url)
        except (OSError, ValueError):
            out[name] = None  # Prometheus down or the data gone: the report says "n/a", never a guess
    return out


def counter_samples(selectors: list, version: str, start: float, end: float, url: str | None = None) -> list | None:
    """[(timestamp, value)] of counters summed over their series, raw samples as scraped (no
    rate, no extrapolation) for one version over [start, end]. selectors: PromQL series selectors
    without their closing brace ('name{label!=""'). None: Prometheus did not answer."""
    span = max(1, math.ceil(end - start))
    try:
        res = [r for sel in selectors for r in instant(f'{sel},version="{version}"}}[{span}s]', end, url)]
        up = instant(f'up{{version="{version}"}}[{span}s]', end, url)
    except (OSError, ValueError):
        return None
    sums: dict = {}
    for r in res:  # the series of one target are scraped together: equal timestamps
        for t, val in r["values"]:
            sums[round(float(t), 3)] = sums.get(round(float(t), 3), 0.0) + float(val)
    # A labelled counter has no series until its first increment (TF Serving's too): a successful
    # scrape before the first sample means zero requests so far, not a hole.
    first = min(sums, default=math.inf)
    for r in up:
        for t, val in r["values"]:
            if float(val) == 1 and round(float(t), 3) < first:
                sums[round(float(t), 3)] = 0.0
    return sorted(sums.items())


def scrape_gaps(start: float, end: float, interval_s: float = 2.0, url: str | None = None) -> list | None:
    """Stretches of [start, end] where Prometheus stored no `up` sample of a model server (it was down,
    restarted or not scraping): [[from, to], ...], each longer than three scrape intervals. The model
    servers' own targets, so this works with any Prometheus (the stack's, or a cluster's).
    Raw samples, not a range query: the 5-minute lookback would paper over a gap. None: unknown."""
    span = max(1, math.ceil(end - start))
    try:
        res = instant(f'up{{version!=""}}[{span}s]', end, url)
    except (OSError, ValueError):
        return None
    stamps = sorted(float(t) for r in res for t, _ in r["values"])
    edges = [start] + [t for t in stamps if start <= t <= end] + [end]
    # A gap starts when the scrape after the last stored sample did not happen.
    return [[a + (interval_s if a > start else 0), b] for a, b in zip(edges, edges[1:]) if b - a > 3 * interval_s]

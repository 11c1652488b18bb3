"""A model server's own counters, read straight from its metrics endpoint.

At the edges of a measurement window nothing is in flight (the load generator drains first),
so the difference of two readings is exact: how many requests the server answered in the
window, and the exact mean of each stage a request went through (TF Serving's `_sum`/`_count`
pairs), with no scrape interval and no extrapolation in between. Prometheus keeps the live
view; these readings make the per-cell breakdown and the "nothing lost" check exact.

    >>> a = read("http://127.0.0.1:8591/monitoring/prometheus/metrics")
    >>> ...  # a window of load
    >>> breakdown(delta(a, read(url)))["runtime_ms"]
"""
from __future__ import annotations

import bisect
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

P = ":tensorflow:serving:"
# family -> what the breakdown calls it; each is a histogram in microseconds
HISTOGRAMS = {P + "request_latency": "request", P + "runtime_latency": "runtime",
              P + "batching_session:queuing_latency": "queue"}
# rows per batch the batching session ran (a size, not a time): what a batching config really did
BATCH_SIZE = P + "batching_session:processed_batch_size"


def parse(text: str) -> dict:
    """{"requests": n, "requests_ok": n, "<stage>_sum_us", "<stage>_count", "request_buckets": {le: n}}
    summed over every label set (one model server, one model under test)."""
    out = {"requests": 0.0, "requests_ok": 0.0, "request_buckets": {}, "batch_rows_sum": 0.0, "batches": 0.0}
    for stage in HISTOGRAMS.values():
        out[f"{stage}_sum_us"] = out[f"{stage}_count"] = 0.0
    for fam in text_string_to_metric_families(text):
        if fam.name == P + "request_count":
            for s in fam.samples:
                out["requests"] += s.value
                if s.labels.get("status") == "OK":
                    out["requests_ok"] += s.value
        if fam.name == BATCH_SIZE:
            for s in fam.samples:
                if s.name.endswith("_sum"):
                    out["batch_rows_sum"] += s.value
                elif s.name.endswith("_count"):
                    out["batches"] += s.value
        stage = HISTOGRAMS.get(fam.name)
        if stage is None:
            continue
        for s in fam.samples:
            if s.name.endswith("_sum"):
                out[f"{stage}_sum_us"] += s.value
            elif s.name.endswith("_count"):
                out[f"{stage}_count"] += s.value
            elif stage == "request" and s.name.endswith("_bucket"):
                le = float(s.labels["le"])
                out["request_buckets"][le] = out["request_buckets"].get(le, 0.0) + s.value
    return out


def read(url: str, timeout: float = 5.0) -> dict:
    """One reading of the server's metrics endpoint, stamped with the time it was taken."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        text = r.read().decode()
    return {**parse(text), "at": time.time()}


def delta(before: dict, after: dict) -> dict:
    """after - before, for every counter; a negative difference means the server restarted."""
    out = {k: after[k] - before.get(k, 0.0) for k in after if k not in ("at", "request_buckets")}
    out["request_buckets"] = {le: n - before["request_buckets"].get(le, 0.0)
                              for le, n in after["request_buckets"].items()}
    out["seconds"] = after["at"] - before["at"]
    out["restarted"] = any(v < 0 for k, v in out.items() if isinstance(v, float) and k != "seconds")
    return out


def _mean_ms(d: dict, stage: str) -> float | None:
    n = d[f"{stage}_count"]
    return d[f"{stage}_sum_us"] / n / 1000 if n > 0 else None


def breakdown(d: dict, client_ms: float | None) -> dict:
    """Mean milliseconds per request in each stage of a window, from its counter deltas.

    TF Serving records runtime_latency around the session's Run; with batching that session is
    the batching session, so each request's runtime includes its wait in the queue. The TF run
    itself is therefore runtime - queue, and the stages add up:
    client = transport + server, server = frontend + queue + runtime."""
    server, queue, runtime_incl = _mean_ms(d, "request"), _mean_ms(d, "queue"), _mean_ms(d, "runtime")
    runtime = None if runtime_incl is None else runtime_incl - (queue or 0.0)
    return {"client_ms": client_ms, "server_ms": server, "queue_ms": queue, "runtime_ms": runtime,
            "frontend_ms": None if server is None or runtime_incl is None else server - runtime_incl,
            "transport_ms": None if server is None or client_ms is None else client_ms - server}


def mean_batch(d: dict) -> float | None:
    """Mean rows per batch the batching session ran in a window; None without batching."""
    return d["batch_rows_sum"] / d["batches"] if d.get("batches", 0) > 0 else None


def quantile_bucket(buckets: dict, q: float) -> tuple | None:
    """(low ms, high ms) of the histogram bucket that holds quantile q: all that TF Serving's
    coarse buckets (x1.8 apart) can say about it. None when the window has no request."""
    les = sorted(buckets)
    total = buckets[les[-1]] if les else 0
    if total <= 0:
        return None
    cum = [buckets[le] for le in les]
    i = bisect.bisect_left(cum, q * total)
    low = les[i - 1] if i > 0 else 0.0
    return low / 1000, les[i] / 1000

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
import math
import time

from prometheus_client.parser import text_string_to_metric_families

from fileio import http

P = ":tensorflow:serving:"
# family -> what the breakdown calls it; each is a histogram in microseconds
HISTOGRAMS = {P + "request_latency": "request", P + "runtime_latency": "runtime",
              P + "batching_session:queuing_latency": "queue"}
# rows per batch the batching session ran (a size, not a time): what a batching config really did.
# A histogram from TF Serving 2.10; before, a PercentileSampler printed as one scalar 0 (no _sum/_count)
BATCH_SIZE = P + "batching_session:processed_batch_size"
GRAPH_RUNS = ":tensorflow:core:graph_runs"  # one per Session::Run: per batch with batching on
STATUS_API = ""  # the API label of REST status and metadata GETs (healthchecks, probes)
# The inference requests a server answered, in PromQL (as parse() counts them): successful ones
# are request_latency's counts with an API, failed ones request_count's non-OK statuses.
INFERENCE_SELECTORS = [P + 'request_latency_count{API!=""', P + 'request_count{status!="OK"']


def sum_half_ulp(v: float) -> float:
    """Half a unit in the sixth significant digit of v: how far a `_sum` TF Serving printed
    (absl::StrCat of a double) can be from the true sum."""
    return 0.5 * 10 ** (math.floor(math.log10(abs(v))) - 5) if v else 0.0


def parse(text: str) -> dict:
    """One reading of a model server's page, inference requests only:
    {"requests": inference requests answered (OK + errors), "requests_ok", "status_gets",
     "<stage>_sum_us", "<stage>_count", "<stage>_sum_err_us", "request_buckets": {le: n},
     "batch_rows_sum", "batches", "batch_histogram", "graph_runs", "tensorflow_families": how many
     :tensorflow: families the page has (0: not TF Serving's page)}, summed over label sets.

    request_count has no API label and counts status GETs too, so the successful inference
    requests are request_latency's counts with an API (`API=""` are the GETs), and the errors
    request_count's non-OK counts."""
    out = {"requests": 0.0, "requests_ok": 0.0, "errors": 0.0, "status_gets": 0.0, "request_buckets": {},
           "batch_rows_sum": 0.0, "batches": 0.0, "batch_histogram": False, "graph_runs": 0.0,
           "tensorflow_families": 0}
    for stage in HISTOGRAMS.values():
        out[f"{stage}_sum_us"] = out[f"{stage}_count"] = out[f"{stage}_sum_err_us"] = 0.0
    for fam in text_string_to_metric_families(text):
        out["tensorflow_families"] += fam.name.startswith(":tensorflow:")
        if fam.name == P + "request_count":
            out["errors"] += sum(s.value for s in fam.samples if s.labels.get("status") != "OK")
        elif fam.name == GRAPH_RUNS:
            out["graph_runs"] += sum(s.value for s in fam.samples)
        elif fam.name == BATCH_SIZE and fam.type == "histogram":
            out["batch_histogram"] = True
            for s in fam.samples:
                if s.name.endswith("_sum"):
                    out["batch_rows_sum"] += s.value
                elif s.name.endswith("_count"):
                    out["batches"] += s.value
        stage = HISTOGRAMS.get(fam.name)
        if stage is None:
            continue
        for s in fam.samples:
            if stage == "request" and s.labels.get("API") == STATUS_API:
                if s.name.endswith("_count"):
                    out["status_gets"] += s.value
                continue
            if s.name.endswith("_sum"):
                out[f"{stage}_sum_us"] += s.value
                out[f"{stage}_sum_err_us"] += sum_half_ulp(s.value)
            elif s.name.endswith("_count"):
                out[f"{stage}_count"] += s.value
            elif stage == "request" and s.name.endswith("_bucket"):
                le = float(s.labels["le"])
                out["request_buckets"][le] = out["request_buckets"].get(le, 0.0) + s.value
    out["requests_ok"] = out["request_count"]
    out["requests"] = out["requests_ok"] + out["errors"]
    return out


def read(url: str, timeout: float = 5.0) -> dict:
    """One reading of the server's metrics endpoint, stamped with the time it was taken."""
    text = http.get(url, timeout_s=timeout).decode(errors="replace")
    return {**parse(text), "at": time.time()}


def delta(before: dict, after: dict) -> dict:
    """after - before, for every counter; a negative difference means the server restarted. The
    `_sum` rounding errors of both readings add up (<stage>_sum_err_us)."""
    out = {k: after[k] - before.get(k, 0.0) for k in after
           if k not in ("at", "request_buckets", "batch_histogram", "tensorflow_families") and not k.endswith("_sum_err_us")}
    out["request_buckets"] = {le: n - before["request_buckets"].get(le, 0.0)
                              for le, n in after["request_buckets"].items()}
    out["seconds"] = after["at"] - before["at"]
    out["restarted"] = any(v < 0 for k, v in out.items() if isinstance(v, float) and k != "seconds")
    out["batch_histogram"] = after.get("batch_histogram", False)
    for stage in HISTOGRAMS.values():
        out[f"{stage}_sum_err_us"] = before.get(f"{stage}_sum_err_us", 0.0) + after.get(f"{stage}_sum_err_us", 0.0)
    return out


def _mean_ms(d: dict, stage: str) -> float | None:
    n = d[f"{stage}_count"]
    return d[f"{stage}_sum_us"] / n / 1000 if n > 0 else None


def breakdown(d: dict, client_ms: float | None) -> dict:
    """Mean milliseconds per request in each stage of a window, from its counter deltas.

    TF Serving records runtime_latency around the session's Run; with batching that session is
    the batching session, so each request's runtime includes its wait in the queue. The TF run
    itself is therefore runtime - queue, and the stages add up:
    client = transport + server, server = frontend + queue + runtime.

    precision_ms bounds every stage's error: TF Serving prints `_sum` with six significant digits,
    so a mean from two readings of a long-lived server is off by up to (both roundings) / count."""
    server, queue, runtime_incl = _mean_ms(d, "request"), _mean_ms(d, "queue"), _mean_ms(d, "runtime")
    runtime = None if runtime_incl is None else runtime_incl - (queue or 0.0)
    err = sum(d.get(f"{st}_sum_err_us", 0.0) / d[f"{st}_count"] for st in HISTOGRAMS.values() if d[f"{st}_count"] > 0)
    return {"client_ms": client_ms, "server_ms": server, "queue_ms": queue, "runtime_ms": runtime,
            "frontend_ms": None if server is None or runtime_incl is None else server - runtime_incl,
            "transport_ms": None if server is None or client_ms is None else client_ms - server,
            "precision_ms": err / 1000}


def mean_batch(d: dict, rows_per_request: int | None = None) -> float | None:
    """Mean rows per batch the batching session ran in a window; None without batching.

    From processed_batch_size where it is a histogram (TF Serving 2.10+). Before 2.10 the server
    does not export it in a readable form; then, given the rows of every request, it is the rows
    answered per Session::Run (graph_runs: one per batch)."""
    if d.get("batches", 0) > 0:
        return d["batch_rows_sum"] / d["batches"]
    if rows_per_request and not d.get("batch_histogram") and d.get("graph_runs", 0) > 0:
        return d["requests_ok"] * rows_per_request / d["graph_runs"]
    return None


def mean_batch_source(d: dict) -> str:
    """Where mean_batch came from, for the report's note."""
    if d.get("batches", 0) > 0:
        return "processed_batch_size"
    if not d.get("batch_histogram") and d.get("graph_runs", 0) > 0:
        return ("graph_runs: this server exports processed_batch_size as a PercentileSampler scalar "
                "(TF Serving <= 2.9), so the mean is rows answered per session run")
    return "n/a: no batch ran"


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

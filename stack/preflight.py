"""Preflight: does each model server export the metrics the rules, panels and compare read, in
the form they read them? One line per missing or different family, type or label value, with
what it affects: a first run against a server we could not test here (the official images, a
cluster) shows a difference at once instead of as an empty panel.

    python -m stack doctor [--versions "2.9 2.21"] [--targets "2.9=grpc://h:8500,rest://h:8501"]

Run by `make up` and before a compare's first window (after the cold start's predict, so the
families TF Serving creates on first use exist).
"""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from fileio import http
from modelserver.metrics import HISTOGRAM_BATCH_SIZE_FROM, tf_release

P = ":tensorflow:serving:"
REST_APIS, GRPC_APIS = {"predict", "classify", "regress", ""}, {"Predict", "Classify", "Regress"}
# family: (type, labels, what reads it)
EXPECTED = {
    P + "request_count": ("counter", {"model_name", "status"}, "the error counts of the reconciliation and rules"),
    P + "request_latency": ("histogram", {"model_name", "API", "entrypoint"},
                            "client = server reconciliation, server-side QPS and P99, the breakdown's server time"),
    P + "runtime_latency": ("histogram", {"model_name", "API", "runtime"}, "the breakdown's TF runtime"),
    ":tensorflow:core:graph_runs": ("counter", set(), "graph runs per second; the mean batch of TF Serving <= 2.9"),
}
BATCHING = {P + "batching_session:queuing_latency": ("histogram", {"thread_pool_name"}, "the breakdown's queue")}
BATCH_SIZE = P + "batching_session:processed_batch_size"


def check_page(text: str, batching: bool | None, tensorflow: str = "") -> list:
    """Problems of one metrics page, one line each (empty: everything is as the readers expect).
    batching None: unknown (a server deployed elsewhere), then its families are checked if present."""
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    expected = {**EXPECTED, **(BATCHING if batching else {})}
    if batching is None:
        expected.update({k: v for k, v in BATCHING.items() if k in fams})
    out = []
    for name, (kind, labels, affects) in expected.items():
        fam = fams.get(name)
        if fam is None:
            out.append(f"{name} is missing: {affects} will be n/a")
            continue
        if fam.type != kind:
            out.append(f"{name} is a {fam.type}, expected a {kind}: {affects} will be wrong")
            continue
        have = {k for s in fam.samples for k in s.labels if k != "le"}
        if fam.samples and have != labels:
            out.append(f"{name} has labels {sorted(have)}, expected {sorted(labels)}: {affects} may not match")
    lat = fams.get(P + "request_latency")
    for s in (lat.samples if lat else []):
        api, entry = s.labels.get("API"), s.labels.get("entrypoint")
        allowed = REST_APIS if entry == "REST" else GRPC_APIS if entry == "GRPC" else None
        if allowed is None or api not in allowed:
            out.append(f'{P}request_latency has API="{api}" entrypoint="{entry}", which TF Serving does not '
                       "write: inference-only counts (API!=\"\") may include or miss it")
            break
    out += _batch_size(fams.get(BATCH_SIZE), batching, tf_release(tensorflow) if tensorflow else None)
    return out


def _batch_size(fam, batching, rel) -> list:
    if not batching or fam is None:
        return [] if not batching else [f"{BATCH_SIZE} is missing (no batch ran yet?): mean batch will be n/a"]
    if rel is None:
        return []
    want = "histogram" if rel >= HISTOGRAM_BATCH_SIZE_FROM else "counter"
    if fam.type != want:
        return [f"{BATCH_SIZE} is a {fam.type}, but TF Serving {rel[0]}.{rel[1]} exports a {want}: the mean batch "
                "is read the wrong way"]
    return []


def read_page(server, timeout: float = 5.0) -> str:
    """The server's metrics page, bounded in bytes and time; OSError where it does not answer whole."""
    return http.get(server.metrics_url, timeout_s=timeout).decode(errors="replace")


def unanswered(server, e: OSError) -> str:
    return (f"{server.name}: its metrics page {server.metrics_url} does not answer ({getattr(e, 'reason', e)}): "
            "is --monitoring_config_file set? Nothing server-side can be measured")


def check(server, batching: bool | None, timeout: float = 5.0) -> list:
    """Problems of a live server's metrics page, each line starting with its name."""
    try:
        text = read_page(server, timeout)
    except OSError as e:
        return [unanswered(server, e)]
    return check_text(server, text, batching)


def check_text(server, text: str, batching: bool | None) -> list:
    try:
        lines = check_page(text, batching, server.tensorflow)
    except ValueError as e:  # prometheus_client's parser on a page that is not its text format
        lines = [f"its metrics page {server.metrics_url} is not Prometheus' text format ({e}): nothing server-side "
                 "can be read from it"]
    return [f"{server.name}: {line}" for line in lines]

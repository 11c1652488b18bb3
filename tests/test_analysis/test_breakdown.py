"""Where the time goes and nothing lost: the server's own counters read at a window's edges, the
breakdown they give, and the reconciliation of client, server and Prometheus counts, against real
model servers and a fake one that miscounts on purpose."""
import json
import urllib.request

import pytest
from fake_serving import Behaviour, FakeServing
from servers import start_modelserver

from analysis import reconcile
from stack import counters
from analysis.compare import measure_cell
from analysis.plan import Settings
from analysis.profiles import PROFILES
from stack.serving import Server

pytestmark = pytest.mark.integration
BODY = json.dumps({"instances": [[0.5] * 784] * 4}).encode()


def predict(port: int, n: int) -> None:
    for _ in range(n):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models/my_model:predict", data=BODY,
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=30).read()


def metrics_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/monitoring/prometheus/metrics"


def test_counter_deltas_are_exact_and_the_stages_add_up(server):
    before = counters.read(metrics_url(server.rest))
    predict(server.rest, 25)
    d = counters.delta(before, counters.read(metrics_url(server.rest)))
    assert d["requests"] == 25 and d["requests_ok"] == 25 and d["request_count"] == 25
    assert d["runtime_count"] == 25 and d["queue_count"] == 0 and not d["restarted"]
    b = counters.breakdown(d, client_ms=50.0)
    assert b["queue_ms"] is None  # batching off: no queue
    assert 0 < b["runtime_ms"] < b["server_ms"] < 50.0
    assert b["frontend_ms"] == pytest.approx(b["server_ms"] - b["runtime_ms"])
    assert b["transport_ms"] == pytest.approx(50.0 - b["server_ms"])
    low, high = counters.quantile_bucket(d["request_buckets"], 0.99)
    assert high / low == pytest.approx(1.8, rel=1e-4)  # one of TF Serving's x1.8 buckets...
    assert high >= b["server_ms"]  # ...holding the 25th of 25 requests, the slowest: above the mean


def test_with_batching_the_runtime_holds_the_queue_as_tf_serving_records_it(tmp_path):
    batching = tmp_path / "batching.config"
    batching.write_text("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 5000 }\n"
                        "num_batch_threads { value: 1 }\n")
    s = start_modelserver("2.21", tmp_path, batching=batching)
    try:
        before = counters.read(metrics_url(s.rest))
        predict(s.rest, 10)  # one at a time: every batch waits its full 5 ms timeout
        d = counters.delta(before, counters.read(metrics_url(s.rest)))
    finally:
        s.stop()
    assert d["queue_count"] == 10 and d["runtime_count"] == 10
    b = counters.breakdown(d, client_ms=None)
    assert b["queue_ms"] >= 5.0  # the batch timeout
    runtime_incl = d["runtime_sum_us"] / d["runtime_count"] / 1000
    assert runtime_incl >= b["queue_ms"] and b["runtime_ms"] == pytest.approx(runtime_incl - b["queue_ms"])
    assert b["server_ms"] == pytest.approx(b["frontend_ms"] + b["queue_ms"] + b["runtime_ms"])
    assert b["transport_ms"] is None


def test_quantile_bucket_names_the_bucket_never_a_point():
    buckets = {100.0: 10, 180.0: 95, 324.0: 100, float("inf"): 100}
    assert counters.quantile_bucket(buckets, 0.5) == (0.1, 0.18)
    assert counters.quantile_bucket(buckets, 0.99) == (0.18, 0.324)
    assert counters.quantile_bucket({float("inf"): 0}, 0.99) is None


SETTINGS = Settings(("fake",), (1,), (True,), ("rest",), PROFILES["quick"].__class__(
    **{**PROFILES["quick"].__dict__, "window_s": 1.0, "warmup_s": 0.3}), 1, 50.0)


@pytest.mark.parametrize("miscount,exact", [(0, True), (1, False), (-1, False)],
                         ids=["honest", "server-adds", "server-drops"])
def test_reconciliation_calls_a_server_that_adds_or_drops_requests(miscount, exact):
    from loadgen.app import build_payloads
    from analysis.compare import scenario

    with FakeServing(Behaviour(miscount=miscount)) as fake:
        srv = Server("fake", "127.0.0.1", fake.port, None, metrics_url(fake.port))
        cell = {"batching": True, "rows": 1, "repeat": 0, "protocol": "rest", "mode": "closed", "level": 2,
                "version": "fake"}
        payload = build_payloads(scenario(srv, "rest", "closed", 2, SETTINGS.profile, "t"))["fake/rest"]
        m = measure_cell(cell, srv, SETTINGS, "t", payload)
    check = reconcile.client_vs_server(m)
    assert check["exact"] and check["client"] == m["client"]["completed"] > 20
    assert check["ok"] is exact
    if not exact:
        assert check["server"] == check["client"] * (1 + miscount)
    assert m["client_warmup"]["completed"] > 0  # the warmup is excluded from both sides, not lost


def _cell(warmup, steady, start=100.0, end=110.0, qps=50.0, errors=None):
    return {"warmup_start": start, "end": end, "client": {"completed": steady, "errors": errors or {},
                                                          "throughput_qps": qps},
            "server": {"warmup": {"requests": warmup}, "steady": {"requests": steady}}}


def test_prometheus_agrees_exactly_when_the_server_was_idle_at_both_samples():
    cell = _cell(30, 500)
    samples = [(96.0, 1000.0), (98.0, 1000.0), (111.0, 1530.0), (113.0, 1530.0)]
    got = reconcile.server_vs_prometheus(cell, samples, [(100.0, 110.0)])
    assert got == {"prometheus": 530, "expected": 530, "exact": True, "ok": True, "why": ""}
    off_by_one = reconcile.server_vs_prometheus(cell, [(98.0, 1000.0), (111.0, 1531.0)], [(100.0, 110.0)])
    assert off_by_one["exact"] and not off_by_one["ok"]  # exact means exact: one request too many is caught


def test_prometheus_within_a_scrape_interval_when_a_sample_fell_inside_other_activity():
    cell = _cell(30, 500)
    busy = [(100.0, 110.0), (90.0, 99.0)]  # the sample at 98 s was taken during another run on this server
    near = reconcile.server_vs_prometheus(cell, [(98.0, 990.0), (111.0, 1530.0)], busy)
    assert not near["exact"] and near["ok"] and "scrape interval" in near["why"]
    far = reconcile.server_vs_prometheus(cell, [(98.0, 700.0), (111.0, 1530.0)], busy)
    assert not far["ok"]  # 300 more than expected: far beyond one scrape interval (2 s x 50/s) per edge
    gap = reconcile.server_vs_prometheus(cell, [(111.0, 1530.0)], [(100.0, 110.0)])
    assert not gap["ok"] and "gap" in gap["why"]


def test_client_timeouts_make_exactness_impossible_and_the_check_says_so():
    cell = _cell(30, 500, errors={"timeout": 3})
    cell["server"]["steady"]["requests"] = 499
    got = reconcile.client_vs_server(cell)
    assert not got["exact"] and got["ok"] and "gave up on 3" in got["why"]
    cell["server"]["steady"]["requests"] = 490
    assert not reconcile.client_vs_server(cell)["ok"]

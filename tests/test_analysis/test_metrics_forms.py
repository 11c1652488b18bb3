"""The readers against metrics pages in the forms the official servers write them (from TF Serving's
source at the pinned tags): status GETs left out of the inference counts, the batch size of 2.6-2.9
(a PercentileSampler scalar) read another way, the six-digit `_sum` turned into a stated precision,
and the preflight naming each difference in one line."""
from stack import counters
from stack import preflight

P = ":tensorflow:serving:"


def page(predicts: int, gets: int, latency_sum: float, batch_histogram: bool, graph_runs: int,
         errors: int = 0) -> str:
    lat = [f'{P}request_latency_bucket{{model_name="m",API="{api}",entrypoint="REST",le="+Inf"}} {n}\n'
           f'{P}request_latency_sum{{model_name="m",API="{api}",entrypoint="REST"}} {s:.6g}\n'
           f'{P}request_latency_count{{model_name="m",API="{api}",entrypoint="REST"}} {n}\n'
           for api, n, s in (("predict", predicts, latency_sum), ("", gets, gets * 50.0))]
    batch = (f"# TYPE {P}batching_session:processed_batch_size histogram\n"
             f'{P}batching_session:processed_batch_size_bucket{{le="+Inf"}} {graph_runs}\n'
             f"{P}batching_session:processed_batch_size_sum {predicts * 2}\n"
             f"{P}batching_session:processed_batch_size_count {graph_runs}\n") if batch_histogram else \
        f"# TYPE {P}batching_session:processed_batch_size counter\n{P}batching_session:processed_batch_size{{}} 0\n"
    return (f"# TYPE {P}request_count counter\n"
            f'{P}request_count{{model_name="m",status="OK"}} {predicts + gets}\n'
            + (f'{P}request_count{{model_name="m",status="INVALID_ARGUMENT"}} {errors}\n' if errors else "")
            + f"# TYPE {P}request_latency histogram\n" + "".join(lat)
            + f"# TYPE {P}runtime_latency histogram\n"
            f'{P}runtime_latency_bucket{{model_name="m",API="Predict",runtime="TF1",le="+Inf"}} {predicts}\n'
            f'{P}runtime_latency_sum{{model_name="m",API="Predict",runtime="TF1"}} {predicts * 300.0:.6g}\n'
            f'{P}runtime_latency_count{{model_name="m",API="Predict",runtime="TF1"}} {predicts}\n'
            f"# TYPE {P}batching_session:queuing_latency histogram\n"
            f'{P}batching_session:queuing_latency_bucket{{thread_pool_name="batch_threads",le="+Inf"}} {predicts}\n'
            f'{P}batching_session:queuing_latency_sum{{thread_pool_name="batch_threads"}} {predicts * 100.0:.6g}\n'
            f'{P}batching_session:queuing_latency_count{{thread_pool_name="batch_threads"}} {predicts}\n'
            + batch + f"# TYPE :tensorflow:core:graph_runs counter\n:tensorflow:core:graph_runs {graph_runs}\n")


def test_status_gets_are_not_inference_requests():
    a = {**counters.parse(page(100, 7, 100 * 1000.0, True, 50)), "at": 0.0}
    b = {**counters.parse(page(160, 19, 160 * 1000.0, True, 80, errors=3)), "at": 1.0}
    d = counters.delta(a, b)
    assert (d["requests_ok"], d["errors"], d["requests"], d["status_gets"]) == (60, 3, 63, 12)
    assert d["request_sum_us"] == 60000 and set(d["request_buckets"].values()) == {60}  # the GETs' bucket left out
    assert counters.breakdown(d, 2.0)["server_ms"] == 1.0


def test_batch_size_of_releases_before_2_10_is_derived_from_graph_runs():
    new = counters.delta({**counters.parse(page(100, 0, 1e5, True, 50)), "at": 0.0},
                         {**counters.parse(page(160, 0, 1.6e5, True, 80)), "at": 1.0})
    old = counters.delta({**counters.parse(page(100, 0, 1e5, False, 50)), "at": 0.0},
                         {**counters.parse(page(160, 0, 1.6e5, False, 80)), "at": 1.0})
    assert counters.mean_batch(new) == 4.0 and counters.mean_batch_source(new) == "processed_batch_size"
    assert counters.mean_batch(old) is None  # the scalar 0 says nothing, and the rows are not known
    assert counters.mean_batch(old, rows_per_request=2) == 4.0  # 60 requests x 2 rows in 30 runs
    assert counters.mean_batch_source(old).startswith("graph_runs")


def test_six_digit_sums_give_a_stated_precision_that_grows_with_the_lifetime_total():
    """A long-lived server's `_sum` is rounded to its sixth digit: the mean of a small window is
    only as exact as both roundings over the window's requests."""
    young = counters.delta({**counters.parse(page(100, 0, 123456.0, True, 50)), "at": 0.0},
                           {**counters.parse(page(200, 0, 234567.0, True, 99)), "at": 1.0})
    old = counters.delta({**counters.parse(page(10**7, 0, 1.23456789e10, True, 50)), "at": 0.0},
                         {**counters.parse(page(10**7 + 100, 0, 1.23457889e10, True, 99)), "at": 1.0})
    p_young, p_old = (counters.breakdown(d, 5.0)["precision_ms"] for d in (young, old))
    assert p_young < 1e-4 < p_old
    # the 1.1e5 us really added is 1.23458e10 - 1.23457e10 = 1e5 as printed: off by 10 %, within the bound
    true_mean_ms = 1.1e5 / 100 / 1000
    got = counters.breakdown(old, 5.0)["server_ms"]
    assert abs(got - true_mean_ms) <= p_old


def test_preflight_names_each_difference_in_one_line():
    assert preflight.check_page(page(10, 2, 1e4, True, 5), batching=True, tensorflow="2.21.0") == []
    assert preflight.check_page(page(10, 2, 1e4, False, 5), batching=True, tensorflow="2.9.3") == []
    wrong = preflight.check_page(page(10, 2, 1e4, False, 5), batching=True, tensorflow="2.21.0")
    assert len(wrong) == 1 and "processed_batch_size is a counter, but TF Serving 2.21 exports a histogram" in wrong[0]
    text = page(10, 2, 1e4, True, 5).replace(f"{P}runtime_latency", f"{P}runtime_latency_renamed")
    text = text.replace('API="predict"', 'API="Predict"')
    lines = preflight.check_page(text, batching=True, tensorflow="2.21.0")
    assert any(ln.startswith(f"{P}runtime_latency is missing: the breakdown's TF runtime") for ln in lines), lines
    assert any('API="Predict" entrypoint="REST"' in ln for ln in lines), lines

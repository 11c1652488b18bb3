"""REST API of the drop-in model server, against real servers of two TF versions."""
import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

X = np.random.RandomState(3).rand(3, 784).astype(np.float32)


def post(server, path, **kw):
    return requests.post(server.url(path), timeout=10, **kw)


def test_row_format_matches_in_process_model(server, reference):
    r = post(server, "/v1/models/my_model:predict", json={"instances": X.tolist()})
    assert r.status_code == 200, r.text
    got = np.asarray(r.json()["predictions"])
    assert got.shape == (3, 10)
    np.testing.assert_allclose(got, reference(server.base_path, X), atol=1e-6)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-5)  # softmax rows


def test_columnar_format_and_explicit_signature(server, reference):
    r = post(server, "/v1/models/my_model/versions/1:predict",
             json={"signature_name": "serving_default", "inputs": {"x": X[:2].tolist()}})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.asarray(r.json()["outputs"]), reference(server.base_path, X[:2]), atol=1e-6)
    r = post(server, "/v1/models/my_model:predict", json={"inputs": X[:1].tolist()})
    assert np.asarray(r.json()["outputs"]).shape == (1, 10)


def test_status_json_shape(server):
    r = requests.get(server.url("/v1/models/my_model"), timeout=5)
    assert r.json() == {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
    assert requests.get(server.url("/v1/models/my_model/versions/1"), timeout=5).status_code == 200
    assert requests.get(server.url("/v1/models/my_model/versions/7"), timeout=5).status_code == 404


def test_metadata_json_shape(server):
    meta = requests.get(server.url("/v1/models/my_model/metadata"), timeout=5).json()
    assert meta["model_spec"] == {"name": "my_model", "signature_name": "", "version": "1"}
    sd = meta["metadata"]["signature_def"]
    assert set(meta) == {"model_spec", "metadata"} and set(meta["metadata"]) == {"signature_def"}
    # exactly TF Serving's ToJsonString: the SignatureDefMap printed alone (no "@type" of the Any), proto field
    # names, default fields printed; built here from the SavedModel on disk
    from google.protobuf import json_format
    from tensorflow.core.protobuf import saved_model_pb2
    from tensorflow_serving.apis import get_model_metadata_pb2

    assert set(sd) == {"signature_def"}
    got = json_format.ParseDict(sd, get_model_metadata_pb2.SignatureDefMap())  # refuses any unknown key
    saved = saved_model_pb2.SavedModel.FromString((server.base_path / "1" / "saved_model.pb").read_bytes())
    assert dict(got.signature_def) == dict(saved.meta_graphs[0].signature_def)
    sig = sd["signature_def"]["serving_default"]
    assert sig["method_name"] == "tensorflow/serving/predict"
    x = sig["inputs"]["x"]
    assert x["dtype"] == "DT_FLOAT"
    assert [d["size"] for d in x["tensor_shape"]["dim"]] == ["-1", "784"]  # int64 as strings
    assert [d["size"] for d in sig["outputs"]["probabilities"]["tensor_shape"]["dim"]] == ["-1", "10"]


def test_metrics_have_tf_serving_names_labels_and_buckets(server):
    for _ in range(3):
        post(server, "/v1/models/my_model:predict", json={"instances": X[:1].tolist()})
    post(server, "/v1/models/my_model:predict", data=b"{", headers={"Content-Type": "application/json"})
    text = requests.get(server.url("/monitoring/prometheus/metrics"), timeout=5).text
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    # TF Serving writes counters without the _total suffix (the parser adds it back to samples).
    assert "# TYPE :tensorflow:serving:request_count counter" in text
    assert ':tensorflow:serving:request_count{model_name="my_model",status="OK"}' in text
    count = fams[":tensorflow:serving:request_count"]
    assert count.type == "counter"
    by_status = {s.labels["status"]: s.value for s in count.samples}
    assert by_status["OK"] >= 3 and by_status["INVALID_ARGUMENT"] >= 1
    lat = fams[":tensorflow:serving:request_latency"]
    assert lat.type == "histogram"
    buckets = [s for s in lat.samples if s.name.endswith("_bucket")]
    assert {(s.labels["model_name"], s.labels["API"], s.labels["entrypoint"]) for s in buckets} >= {
        ("my_model", "predict", "REST")}
    rest = [s for s in buckets if s.labels["entrypoint"] == "REST" and s.labels["API"] == "predict"]
    bounds = [float(s.labels["le"]) for s in rest]
    expected = [10 * 1.8 ** i for i in range(33)] + [float("inf")]
    assert len(bounds) == 34
    np.testing.assert_allclose(bounds[:-1], expected[:-1], rtol=1e-5)
    assert bounds[-1] == float("inf")
    count_sample = [s for s in lat.samples if s.name.endswith("_count") and s.labels["entrypoint"] == "REST"
                    and s.labels["API"] == "predict"][0]
    assert rest[-1].value == count_sample.value  # the +Inf bucket holds every observation
    # Latency is recorded for successes only, over both entrypoints (other tests may use gRPC too).
    all_counts = sum(s.value for s in lat.samples if s.name.endswith("_count"))
    assert all_counts == by_status["OK"]
    assert ":tensorflow:serving:runtime_latency" in fams
    assert fams[":tensorflow:core:graph_runs"].samples[0].value >= 3
    loads = fams[":tensorflow:cc:saved_model:load_attempt_count"].samples
    assert loads[0].labels["status"] == "success" and loads[0].labels["model_path"].endswith("/1")


def test_status_and_metadata_gets_count_as_tf_serving_counts_them(server):
    """http_server.cc: every REST request goes into request_count and, when OK, into request_latency
    with the URL's method as API: "" for status and metadata GETs (healthchecks, probes). The
    metrics page itself is not counted. The compare's reader leaves the GETs out of its counts."""
    from stack import counters

    metrics = server.url("/monitoring/prometheus/metrics")

    def page():
        fams = {f.name: f for f in text_string_to_metric_families(requests.get(metrics, timeout=5).text)}
        by_status = {}
        for s in fams[":tensorflow:serving:request_count"].samples:
            by_status[s.labels["status"]] = by_status.get(s.labels["status"], 0) + s.value
        gets = sum(s.value for s in fams[":tensorflow:serving:request_latency"].samples
                   if s.name.endswith("_count") and s.labels["API"] == "" and s.labels["entrypoint"] == "REST")
        return by_status, gets
    (st0, gets0), r0 = page(), counters.read(metrics)
    assert requests.get(server.url("/v1/models/my_model"), timeout=5).status_code == 200
    assert requests.get(server.url("/v1/models/my_model/metadata"), timeout=5).status_code == 200
    assert requests.get(server.url("/v1/models/my_model/versions/7"), timeout=5).status_code == 404
    (st1, gets1), r1 = page(), counters.read(metrics)
    assert st1["OK"] - st0["OK"] == 2 and gets1 - gets0 == 2
    assert st1.get("NOT_FOUND", 0) - st0.get("NOT_FOUND", 0) == 1
    d = counters.delta(r0, r1)
    assert d["requests_ok"] == 0 and d["status_gets"] == 2 and d["request_count"] == 0


def test_histogram_sums_are_printed_with_six_significant_digits(server):
    """absl::StrCat of a double: what a reader of the real server gets, so no test here relies on more."""
    text = requests.get(server.url("/monitoring/prometheus/metrics"), timeout=5).text
    sums = [ln.rsplit(" ", 1)[1] for ln in text.splitlines() if ln.startswith(":tensorflow:serving:") and "_sum{" in ln]
    assert sums
    for v in sums:
        assert len(v.replace(".", "").replace("-", "").split("e")[0].lstrip("0")) <= 6, v

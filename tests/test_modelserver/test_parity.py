"""The drop-in behaves like TF Serving on TF Serving's kind of models: the documented requests of its
REST API page on half_plus_two (zero-padded version directory, TF1 graph, fed intermediate tensor,
tf.Example classify/regress, an asset read by a table the legacy init op fills), labels, the gRPC
Classify/Regress/MultiInference methods, config reload under load, and the metrics the Grafana
tensorflow-mixin looks for; in both TF versions the tests use."""
import asyncio
import threading
import time

import aiohttp
import grpc
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from servers import TEST_VERSIONS, start_modelserver
from tensorflow.core.example import example_pb2
from tensorflow_serving.apis import (classification_pb2, inference_pb2, model_management_pb2, model_service_pb2_grpc,
                                     prediction_service_pb2_grpc, regression_pb2)

from models.prepare import ensure_test_models
from core.registry import load_registry

pytestmark = pytest.mark.integration


def models_of(version: str):
    reg = load_registry()
    return ensure_test_models(reg.get(version), reg, log=lambda *_: None)


def config(tmp_path, models: dict, name: str = "models.config"):
    """models: name -> (base path, extra text inside config {})."""
    text = "model_config_list {\n" + "".join(
        f'  config {{ name: "{n}" base_path: "{p}" model_platform: "tensorflow" {extra} }}\n'
        for n, (p, extra) in models.items()) + "}\n"
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.fixture(scope="module", params=TEST_VERSIONS, ids=lambda v: f"tf{v}")
def hp(request, tmp_path_factory):
    """half_plus_two and half_plus_n (both versions, labelled) behind one server."""
    v, tmp = request.param, tmp_path_factory.mktemp("parity")
    td = models_of(v)
    cfg = config(tmp, {"half_plus_two": (td / "half_plus_two", ""), "half_plus_two_tf2": (td / "half_plus_two_tf2", ""),
                       "half_plus_n": (td / "half_plus_n", "model_version_policy { all {} } "
                                       'version_labels { key: "stable" value: 1 } '
                                       'version_labels { key: "canary" value: 2 }')})
    s = start_modelserver(v, tmp, extra=[f"--model_config_file={cfg}", "--model_config_file_poll_wait_seconds=1"],
                          model_name="half_plus_two", config=True)
    yield s
    s.stop()


def post(s, path, body):
    return requests.post(s.url(path), json=body, timeout=20)


def test_a_zero_padded_version_directory_is_its_number(hp):
    st = requests.get(hp.url("/v1/models/half_plus_two"), timeout=5).json()
    assert st == {"model_version_status": [{"version": "123", "state": "AVAILABLE",
                                            "status": {"error_code": "OK", "error_message": ""}}]}
    meta = requests.get(hp.url("/v1/models/half_plus_two/versions/123/metadata"), timeout=5).json()
    sigs = meta["metadata"]["signature_def"]["signature_def"]
    assert meta["model_spec"]["version"] == "123" and {"classify_x_to_y", "tensorflow/serving/regress"} <= set(sigs)
    assert sigs["serving_default"]["inputs"]["x"]["name"] == "x:0"  # an intermediate tensor, not a placeholder


def test_the_docs_predict_requests_answer_what_the_docs_show(hp):
    # the REST API page: curl -d '{"instances": [1.0,2.0,5.0]}' .../half_plus_two:predict
    assert post(hp, "/v1/models/half_plus_two:predict", {"instances": [1.0, 2.0, 5.0]}).json() == {
        "predictions": [2.5, 3.0, 4.5]}
    assert post(hp, "/v1/models/half_plus_two:predict", {"inputs": [1.0, 2.0, 5.0]}).json() == {
        "outputs": [2.5, 3.0, 4.5]}
    assert post(hp, "/v1/models/half_plus_two:predict", {"instances": [{"x": 1.0}, {"x": 2.0}]}).json() == {
        "predictions": [2.5, 3.0]}
    # the static shape [?, 1] is not checked: the graph decides, and [[1.0], [2.0]] works as well
    assert post(hp, "/v1/models/half_plus_two:predict", {"instances": [[1.0], [2.0]]}).json() == {
        "predictions": [[2.5], [3.0]]}


def test_regress_and_classify_with_examples_and_context(hp):
    reg = post(hp, "/v1/models/half_plus_two:regress",
               {"signature_name": "tensorflow/serving/regress", "examples": [{"x": 1.0}, {"x": 2.0}]})
    assert reg.json() == {"results": [2.5, 3.0]}
    ctx = post(hp, "/v1/models/half_plus_two:regress",
               {"signature_name": "regress_x_to_y", "context": {"x": 4.0}, "examples": [{}, {}]})
    assert ctx.json() == {"results": [4.0, 4.0]}  # the context's feature merged into every example
    cls = post(hp, "/v1/models/half_plus_two:classify",
               {"signature_name": "classify_x_to_y", "examples": [{"x": 1.0}, {"x": 2.0}]})
    assert cls.json() == {"results": [[["", 2.5]], [["", 3.0]]]}
    labelled = post(hp, "/v1/models/half_plus_two:classify",
                    {"signature_name": "classify_x_to_label", "examples": [{"x": 1.0}, {"x": 4.0}]})
    assert labelled.json() == {"results": [[["small", 2.5]], [["large", 4.0]]]}  # labels from the asset file
    bad = post(hp, "/v1/models/half_plus_two:regress", {"examples": [{"x": 1.0}]})  # serving_default: x -> y
    assert bad.status_code == 400 and "No regression inputs found in SignatureDef" in bad.json()["error"]


def test_classify_and_regress_run_on_a_tf2_models_predict_signatures(hp):
    """tf.saved_model.save marks every signature tensorflow/serving/predict; TF Serving's default
    (--enable_signature_method_name_check=false) runs Classify/Regress on them by their shape."""
    reg = post(hp, "/v1/models/half_plus_two_tf2:regress",
               {"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}, {"x": 2.0}]})
    assert reg.status_code == 200 and reg.json() == {"results": [2.5, 3.0]}, reg.text
    cls = post(hp, "/v1/models/half_plus_two_tf2:classify",
               {"signature_name": "classify_x_to_y", "examples": [{"x": 3.0}]})
    assert cls.json() == {"results": [[["", 3.5]]]}, cls.text
    with grpc.insecure_channel(f"127.0.0.1:{hp.grpc}") as ch:
        req = regression_pb2.RegressionRequest()
        req.model_spec.name, req.model_spec.signature_name = "half_plus_two_tf2", "regress_x_to_y"
        ex = req.input.example_list.examples.add()
        ex.features.feature["x"].float_list.value.append(4.0)
        resp = prediction_service_pb2_grpc.PredictionServiceStub(ch).Regress(req, timeout=10)
    assert [r.value for r in resp.result.regressions] == [4.0]


def test_version_labels_pick_versions_for_every_verb(hp):
    for label, want in (("stable", 2.5), ("canary", 3.5)):
        r = post(hp, f"/v1/models/half_plus_n/labels/{label}:predict", {"instances": [1.0]})
        assert r.json() == {"predictions": [want]}, (label, r.text)
        st = requests.get(hp.url(f"/v1/models/half_plus_n/labels/{label}"), timeout=5).json()
        assert [v["version"] for v in st["model_version_status"]] == ["1" if label == "stable" else "2"]
    assert post(hp, "/v1/models/half_plus_n:predict", {"instances": [1.0]}).json() == {"predictions": [3.5]}
    unknown = post(hp, "/v1/models/half_plus_n/labels/nope:predict", {"instances": [1.0]})
    assert unknown.status_code == 400 and "Unrecognized servable version label: nope" in unknown.json()["error"]


def _examples(*xs):
    out = []
    for x in xs:
        e = example_pb2.Example()
        e.features.feature["x"].float_list.value.append(x)
        out.append(e)
    return out


def test_grpc_classify_regress_and_multi_inference(hp):
    with grpc.insecure_channel(f"127.0.0.1:{hp.grpc}") as ch:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
        req = regression_pb2.RegressionRequest()
        req.model_spec.name, req.model_spec.signature_name = "half_plus_two", "regress_x_to_y"
        req.input.example_list.examples.extend(_examples(1.0, 2.0))
        resp = stub.Regress(req, timeout=20)
        assert [r.value for r in resp.result.regressions] == [2.5, 3.0] and resp.model_spec.version.value == 123
        creq = classification_pb2.ClassificationRequest()
        creq.model_spec.name, creq.model_spec.signature_name = "half_plus_two", "classify_x_to_label"
        creq.input.example_list_with_context.context.features.feature["x"].float_list.value.append(4.0)
        creq.input.example_list_with_context.examples.add()
        cresp = stub.Classify(creq, timeout=20)
        assert [(c.label, c.score) for c in cresp.result.classifications[0].classes] == [("large", 4.0)]
        mreq = inference_pb2.MultiInferenceRequest()
        for sig, method in (("regress_x_to_y", "tensorflow/serving/regress"),
                            ("classify_x_to_y", "tensorflow/serving/classify")):
            t = mreq.tasks.add(method_name=method)
            t.model_spec.name, t.model_spec.signature_name = "half_plus_two", sig
        mreq.input.example_list.examples.extend(_examples(2.0))
        mresp = stub.MultiInference(mreq, timeout=20)
        assert mresp.results[0].regression_result.regressions[0].value == 3.0
        assert mresp.results[1].classification_result.classifications[0].classes[0].score == 3.0
        with pytest.raises(grpc.RpcError) as err:
            bad = regression_pb2.RegressionRequest()
            bad.model_spec.name = "half_plus_two"  # serving_default is a predict signature
            bad.input.example_list.examples.extend(_examples(1.0))
            stub.Regress(bad, timeout=20)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_metrics_count_classify_and_regress_and_show_what_the_mixin_needs(hp):
    post(hp, "/v1/models/half_plus_two:regress", {"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]})
    text = requests.get(hp.url("/monitoring/prometheus/metrics"), timeout=5).text
    for needle in ('request_latency_count{model_name="half_plus_two",API="regress",entrypoint="REST"}',
                   'request_latency_count{model_name="half_plus_two",API="classify",entrypoint="REST"}',
                   'runtime_latency_count{model_name="half_plus_two",API="Regress",runtime="TF1"}',
                   ":tensorflow:core:graph_build_calls ", ":tensorflow:core:graph_build_time_usecs ",
                   ":tensorflow:serving:model_warmup_latency_bucket", ":tensorflow:cc:saved_model:load_latency{"):
        assert needle in text, needle


def test_models_config_reloads_under_load_without_a_failed_request(hp, tmp_path):
    """Add half_plus_three (a copy of half_plus_n) to the polled models.config while half_plus_two is
    under load, then remove it: it comes and goes, and not one request of the load fails."""
    cfg_path = next(a.split("=", 1)[1] for a in hp.args if a.startswith("--model_config_file="))
    original = open(cfg_path).read()
    td = models_of(hp.version)
    codes, stop = [], threading.Event()

    async def load():
        async with aiohttp.ClientSession() as s:
            while not stop.is_set():
                async with s.post(hp.url("/v1/models/half_plus_two:predict"), json={"instances": [1.0]}) as r:
                    codes.append(r.status)

    runner = threading.Thread(target=lambda: asyncio.run(load()))
    runner.start()
    try:
        added = original.rstrip().rstrip("}") + (f'  config {{ name: "half_plus_three" base_path: "{td / "half_plus_n"}" '
                                                 'model_platform: "tensorflow" }\n}\n')
        open(cfg_path, "w").write(added)
        deadline = time.monotonic() + 60
        while post(hp, "/v1/models/half_plus_three:predict", {"instances": [1.0]}).status_code != 200:
            assert time.monotonic() < deadline, hp.log.read_text()[-2000:]
            time.sleep(0.3)
        assert post(hp, "/v1/models/half_plus_three:predict", {"instances": [1.0]}).json() == {"predictions": [3.5]}
        open(cfg_path, "w").write(original)
        deadline = time.monotonic() + 60
        while post(hp, "/v1/models/half_plus_three:predict", {"instances": [1.0]}).status_code != 404:
            assert time.monotonic() < deadline
            time.sleep(0.3)
    finally:
        stop.set()
        runner.join(30)
        open(cfg_path, "w").write(original)
    assert len(codes) > 50 and set(codes) == {200}, {c: codes.count(c) for c in set(codes)}


def test_handle_reload_config_request_over_grpc(hp):
    from tensorflow_serving.config import model_server_config_pb2

    td = models_of(hp.version)
    cfg = model_server_config_pb2.ModelServerConfig()
    # the module's models stay (later tests use them), "again" is added
    for name, path in (("half_plus_two", td / "half_plus_two"), ("half_plus_two_tf2", td / "half_plus_two_tf2"),
                       ("half_plus_n", td / "half_plus_n"), ("again", td / "half_plus_n")):
        c = cfg.model_config_list.config.add(name=name, base_path=str(path), model_platform="tensorflow")
        if name == "half_plus_n":
            c.model_version_policy.all.SetInParent()
            c.version_labels["stable"], c.version_labels["canary"] = 1, 2
    with grpc.insecure_channel(f"127.0.0.1:{hp.grpc}") as ch:
        stub = model_service_pb2_grpc.ModelServiceStub(ch)
        resp = stub.HandleReloadConfigRequest(model_management_pb2.ReloadConfigRequest(config=cfg), timeout=120)
        assert resp.status.error_code == 0, resp
        assert post(hp, "/v1/models/again:predict", {"instances": [1.0]}).json() == {"predictions": [3.5]}
        bad = model_server_config_pb2.ModelServerConfig()
        bad.model_config_list.config.add(name="x", base_path="/nonexistent", model_platform="tensorflow")
        resp = stub.HandleReloadConfigRequest(model_management_pb2.ReloadConfigRequest(config=bad), timeout=60)
        assert resp.status.error_code == 3 and "/nonexistent" in resp.status.error_message
        assert post(hp, "/v1/models/again:predict", {"instances": [1.0]}).status_code == 200  # unchanged


def test_grpc_requests_carry_the_method_name_and_multi_inference_records_nothing(hp):
    """prediction_service_impl.cc: gRPC Regress/Classify record API="Regress"/"Classify" with
    entrypoint "GRPC"; MultiInference records neither request_count nor request_latency."""
    def page():
        text = requests.get(hp.url("/monitoring/prometheus/metrics"), timeout=5).text
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        counts = sum(s.value for s in fams[":tensorflow:serving:request_count"].samples)
        lat = {(s.labels["API"], s.labels["entrypoint"]): s.value
               for s in fams[":tensorflow:serving:request_latency"].samples if s.name.endswith("_count")}
        return counts, lat
    with grpc.insecure_channel(f"127.0.0.1:{hp.grpc}") as ch:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
        req = regression_pb2.RegressionRequest()
        req.model_spec.name, req.model_spec.signature_name = "half_plus_two", "regress_x_to_y"
        req.input.example_list.examples.extend(_examples(1.0))
        stub.Regress(req, timeout=20)
        count0, lat0 = page()
        assert lat0.get(("Regress", "GRPC"), 0) >= 1 and not [k for k in lat0 if k[0].lower() == "multi_inference"]
        assert all(api in ("Predict", "Classify", "Regress") for api, entry in lat0 if entry == "GRPC"), lat0
        mreq = inference_pb2.MultiInferenceRequest()
        t = mreq.tasks.add(method_name="tensorflow/serving/regress")
        t.model_spec.name, t.model_spec.signature_name = "half_plus_two", "regress_x_to_y"
        mreq.input.example_list.examples.extend(_examples(2.0))
        assert stub.MultiInference(mreq, timeout=20).results[0].regression_result.regressions[0].value == 3.0
        count1, lat1 = page()
    assert count1 == count0 and lat1 == lat0


def _metric(s, name: str) -> float:
    text = requests.get(s.url("/monitoring/prometheus/metrics"), timeout=5).text
    fams = text_string_to_metric_families(text)  # the parser names a counter's family without "_total"
    return sum(smp.value for fam in fams if fam.name == name.removesuffix("_total") for smp in fam.samples)


def test_output_filters_refuse_duplicates_and_their_callables_stay_bounded(hp):
    """TF Serving refuses an alias named twice; one callable per set of outputs (any order), at most 64
    per servable, the oldest dropped and counted: filters cannot grow the server without bound."""
    import itertools

    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    def predict(stub, aliases):
        req = predict_pb2.PredictRequest(output_filter=list(aliases))
        req.model_spec.name, req.model_spec.signature_name = "half_plus_two_tf2", "predict_many"
        req.inputs["x"].CopyFrom(tf.make_tensor_proto([[1.0]], dtype=tf.float32))
        return stub.Predict(req, timeout=10)

    builds = ":tensorflow:core:graph_build_calls"
    with grpc.insecure_channel(f"127.0.0.1:{hp.grpc}") as ch:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
        with pytest.raises(grpc.RpcError) as err:
            predict(stub, ["y1", "y2", "y1"])
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details() == "duplicate output tensor alias: y1"
        before = _metric(hp, builds)
        for perm in itertools.permutations(["y0", "y5", "y7"]):  # six orders, one set
            out = predict(stub, perm).outputs
            assert {k: list(v.float_val) for k, v in out.items()} == {"y0": [2.5], "y5": [7.5], "y7": [9.5]}
        assert _metric(hp, builds) - before == 1
        evicted = _metric(hp, "tfsb_modelserver_callable_cache_evictions_total")
        subsets = [c for r in (1, 2, 6, 7, 5) for c in itertools.combinations([f"y{i}" for i in range(8)], r)][:100]
        before = _metric(hp, builds)
        for aliases in subsets:
            assert set(predict(stub, aliases).outputs) == set(aliases)
        new = _metric(hp, builds) - before
        assert new == 100  # none of these sets was built before
        assert _metric(hp, "tfsb_modelserver_callable_cache_evictions_total") - evicted >= new - 64 > 0
        assert list(predict(stub, ["y0", "y5", "y7"]).outputs["y7"].float_val) == [9.5]  # rebuilt once dropped

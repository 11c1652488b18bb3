"""Requests as a model's own clients send them: tf.Examples built from the feature spec the graph parses, every
TF Serving API (predict, classify, regress, MultiInference) over REST and gRPC, a set of distinct requests, and
a model that refuses every request making the run invalid with the server's own words. Against the real drop-in
serving the zoo's TFX-style recommender, exported by TF 2.9 and served by 2.9 and the newest release."""
import json

import numpy as np
import pytest
from servers import TEST_VERSIONS, start_modelserver
from tests.test_loadgen.helpers import loadgen_summary, steady

from loadgen import examples, requestset, tfproto
from loadgen.scenario import Target
from models import zoo
from core.registry import load_registry

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def recommender():
    reg = load_registry()
    base = zoo.ensure("recommender", reg, [reg.get(v) for v in TEST_VERSIONS], log=lambda *_: None)
    return base, base / "1"


@pytest.fixture(scope="module", params=TEST_VERSIONS, ids=lambda v: f"tf{v}")
def rec_server(request, recommender, tmp_path_factory):
    s = start_modelserver(request.param, tmp_path_factory.mktemp("rec"), base_path=recommender[0])
    yield s
    s.stop()


def test_the_spec_is_read_from_the_graph_and_the_examples_parse_in_tensorflow(recommender):
    """The feature spec comes from the graph's ParseExampleV2 node, without TensorFlow; TensorFlow itself (this
    venv's) parses the Examples built from it with the model's own spec, string values from its vocabulary."""
    import tensorflow as tf

    base, model_dir = recommender
    assert zoo.exported_by(base) == load_registry().get("2.9").tensorflow
    spec = examples.read_spec(model_dir)
    assert spec == {"user": examples.Feature("string", "dense"), "item": examples.Feature("int64", "dense"),
                    "price": examples.Feature("float", "dense"), "hour": examples.Feature("int64", "dense"),
                    "tags": examples.Feature("string", "sparse")}
    vocab = examples.vocabularies(model_dir, spec)
    assert vocab["user"][:2] == [b"user0", b"user1"] and len(vocab["user"]) == 500
    built = [e.SerializeToString() for e in examples.examples(spec, 16, seed=3, vocab=vocab)]
    parsed = tf.io.parse_example(built, {"user": tf.io.FixedLenFeature([], tf.string),
                                         "item": tf.io.FixedLenFeature([], tf.int64),
                                         "price": tf.io.FixedLenFeature([], tf.float32),
                                         "hour": tf.io.FixedLenFeature([], tf.int64),
                                         "tags": tf.io.VarLenFeature(tf.string)})
    users = set(parsed["user"].numpy().tolist())
    assert users <= set(vocab["user"]) and len(users) > 8  # in the vocabulary, and not one value again and again
    assert 0 <= parsed["price"].numpy().min() and parsed["price"].numpy().max() < 1
    assert parsed["tags"].values.shape[0] >= 16  # one to five tags each


def test_a_graph_without_parse_ops_has_no_spec_and_a_bad_file_is_one_line(tmp_path):
    from servers import example_model

    assert examples.read_spec(example_model(TEST_VERSIONS[0]) / "1") == {}
    (tmp_path / "saved_model.pb").write_bytes(b"\xff\xff not a protobuf")
    with pytest.raises(examples.SpecError, match="is not a SavedModel"):
        examples.read_spec(tmp_path)


def test_a_request_set_holds_distinct_requests_in_a_seeded_cycle(rec_server, recommender):
    t = Target(rec_server.version, "grpc", "127.0.0.1", rec_server.grpc)
    reqs = requestset.build(t, 8, seed=1, count=64, model_dir=str(recommender[1]))
    assert reqs.api == "predict" and len(set(reqs.bodies)) == 64  # 64 different requests, not one body
    req = tfproto.PredictRequest.FromString(reqs.bodies[0])
    serialized = req.inputs["examples"].string_val
    assert len(serialized) == 8 and tfproto.Example.FromString(serialized[0]).features.feature["user"].bytes_list.value
    order = reqs.order(seed=1)
    assert sorted(order) == list(range(64)) and order != list(range(64)) and order == reqs.order(seed=1)


@pytest.mark.parametrize("proto,api", [("rest", "auto"), ("grpc", "auto"), ("rest", "classify"), ("grpc", "classify"),
                                       ("rest", "regress"), ("grpc", "regress"), ("grpc", "multi")])
def test_every_api_over_both_protocols_answers_without_errors(rec_server, recommender, tmp_path, proto, api):
    port = rec_server.rest if proto == "rest" else rec_server.grpc
    proc, summary = loadgen_summary(tmp_path, [
        "run", "--target", f"{rec_server.version}={proto}://127.0.0.1:{port}", "--concurrency", "2", "--duration", "1s",
        "--warmup", "0.2s", "--batch-size", "4", "--metrics-port", "0", "--min-requests", "20", "--api", api,
        "--model-path", str(recommender[0])])
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    st = steady(summary)
    assert st["errors"] == {} and st["ok"] >= 20 and st["valid"], st


def test_predict_on_examples_without_the_model_path_says_what_to_pass(rec_server, tmp_path):
    proc, _ = loadgen_summary(tmp_path, ["run", "--target", f"x=grpc://127.0.0.1:{rec_server.grpc}", "--duration", "1s",
                                         "--metrics-port", "0", "--api", "classify"])
    assert proc.returncode == 2 and "give the model's path" in proc.stderr and "Traceback" not in proc.stderr


def test_a_model_that_refuses_every_request_is_invalid_naming_what_it_said(rec_server, tmp_path):
    """The old failure: strings that are not Examples, sent again and again, every request a 400, reported valid."""
    body = tmp_path / "garbage.json"
    body.write_text(json.dumps({"instances": [{"b64": "////AAAA"}]}))
    proc, summary = loadgen_summary(tmp_path, [
        "run", "--target", f"x=rest://127.0.0.1:{rec_server.rest}", "--concurrency", "2", "--duration", "1s",
        "--warmup", "0", "--metrics-port", "0", "--min-requests", "1", "--payload-file", str(body)])
    assert proc.returncode == 3, proc.stdout[-1500:] + proc.stderr[-1500:]
    st = steady(summary)
    assert st["ok"] == 0 and not st["valid"] and set(st["errors"]) == {"400"}
    reason = st["invalid_reasons"][0]
    assert reason.startswith("no successful request") and "most 400" in reason and "rror" in reason, reason
    assert rec_server.proc.poll() is None  # the server keeps serving


def test_tensors_for_the_ceiling_are_the_requests_the_servers_get(rec_server, recommender, tmp_path):
    """The in-process ceiling feeds the same requests: the classify signature's serialized Examples."""
    t = Target(rec_server.version, "grpc", "127.0.0.1", rec_server.grpc)
    sig, reqs = requestset.tensors(t, 4, 1, 3, str(recommender[1]), "classify")
    assert sig == "classify" and len(reqs) == 3 and list(reqs[0]) == ["inputs"]
    path = tmp_path / "requests.json"
    requestset.write_tensors(path, sig, {4: reqs})
    from modelserver import requestfile

    name, back = requestfile.read(str(path))
    assert name == "classify" and back[4][2]["inputs"].tolist() == reqs[2]["inputs"].tolist()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    requestset.write_tensors(path, "serving_default", {2: [{"x": x}]})
    assert np.array_equal(requestfile.read(str(path))[1][2][0]["x"], x)


def _examples_file(path, n: int, price=lambda i: [float(i) / 10]) -> None:
    """A TFRecord of tf.Examples written by TensorFlow itself (gzip): what a TFX pipeline's users hold."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path), options="GZIP") as w:
        for i in range(n):
            feats = {"user": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"user{i}".encode()])),
                     "item": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                     "tags": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"a", b"b"]))}
            v = price(i)
            feats["price"] = tf.train.Feature(float_list=tf.train.FloatList(value=v)) if isinstance(v[0], float) \
                else tf.train.Feature(int64_list=tf.train.Int64List(value=v))
            w.write(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())


@pytest.mark.parametrize("proto,api", [("grpc", "auto"), ("rest", "classify")])
def test_requests_from_a_tfrecord_of_examples(rec_server, recommender, tmp_path, proto, api):
    path = tmp_path / "examples.tfrecord.gz"
    _examples_file(path, 40)
    port = rec_server.rest if proto == "rest" else rec_server.grpc
    t = Target(rec_server.version, proto, "127.0.0.1", port)
    reqs = requestset.build(t, 4, 1, 64, str(recommender[1]), api, requests_file=str(path))
    assert len(reqs.bodies) == 10 and "10 requests of 4 tf.Examples from" in reqs.source  # 40 Examples, 4 a request
    proc, summary = loadgen_summary(tmp_path, [
        "run", "--target", f"{rec_server.version}={proto}://127.0.0.1:{port}", "--concurrency", "2", "--duration",
        "1s", "--warmup", "0.2s", "--batch-size", "4", "--metrics-port", "0", "--min-requests", "20", "--api", api,
        "--model-path", str(recommender[0]), "--requests", str(path)])
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert steady(summary)["errors"] == {} and steady(summary)["valid"]


def test_examples_that_drifted_from_the_model_are_refused_naming_the_feature_and_both_types(rec_server, recommender,
                                                                                            tmp_path):
    path = tmp_path / "drifted.tfrecord"
    _examples_file(path, 8, price=lambda i: [i])  # price as int64: the graph parses a float
    proc, _ = loadgen_summary(tmp_path, [
        "run", "--target", f"x=grpc://127.0.0.1:{rec_server.grpc}", "--duration", "1s", "--metrics-port", "0",
        "--model-path", str(recommender[0]), "--requests", str(path)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "feature 'price' is a int64_list, the graph parses it as float (float_list)" in proc.stderr, proc.stderr


@pytest.mark.parametrize("proto", ["grpc", "rest"])
def test_requests_from_tf_servings_warmup_records(rec_server, recommender, tmp_path, proto):
    """TF Serving's warmup format (PredictionLog TFRecords, written here by TensorFlow and tensorflow-serving-api),
    predict and classify logs; the API taken from the first log."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    exs = [e.SerializeToString() for e in examples.examples(examples.read_spec(recommender[1]), 6, seed=1)]
    path = tmp_path / "warmup.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(3):
            log = prediction_log_pb2.PredictionLog()
            req = log.predict_log.request
            req.model_spec.name = "whatever_it_was_called"
            req.inputs["examples"].CopyFrom(tf.make_tensor_proto(exs[2 * i:2 * i + 2], dtype=tf.string))
            w.write(log.SerializeToString())
        log = prediction_log_pb2.PredictionLog()
        log.classify_log.request.model_spec.signature_name = "classify"
        log.classify_log.request.input.example_list.examples.add().ParseFromString(exs[0])
        w.write(log.SerializeToString())
    port = rec_server.rest if proto == "rest" else rec_server.grpc
    reqs = requestset.build(Target("x", proto, "127.0.0.1", port), 1, 1, 64, "", "auto", requests_file=str(path))
    assert reqs.api == "predict" and len(reqs.bodies) == 3 and "warmup records" in reqs.source
    proc, summary = loadgen_summary(tmp_path, [
        "run", "--target", f"x={proto}://127.0.0.1:{port}", "--concurrency", "2", "--duration", "1s", "--warmup",
        "0.2s", "--metrics-port", "0", "--min-requests", "20", "--requests", str(path)])
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert steady(summary)["errors"] == {} and steady(summary)["valid"]
    cls = requestset.build(Target("x", proto, "127.0.0.1", port), 1, 1, 64, "", "classify", requests_file=str(path))
    assert cls.api == "classify" and len(cls.bodies) == 1


def test_requests_from_json_lines_of_rest_bodies(server, tmp_path):
    """JSON lines of REST bodies are sent as they are (no metadata needed); a gRPC target is refused in one line."""
    rng = np.random.default_rng(0)
    path = tmp_path / "bodies.jsonl"
    path.write_text("\n".join(json.dumps({"instances": rng.random((2, 784)).round(5).tolist()}) for _ in range(16)))
    reqs = requestset.build(Target("x", "rest", "127.0.0.1", server.rest), 2, 1, 64, requests_file=str(path))
    assert reqs.api == "predict" and len(set(reqs.bodies)) == 16 and reqs.source.startswith("16 REST bodies")
    proc, summary = loadgen_summary(tmp_path, [
        "run", "--target", f"x=rest://127.0.0.1:{server.rest}", "--concurrency", "2", "--duration", "1s",
        "--warmup", "0", "--metrics-port", "0", "--min-requests", "20", "--requests", str(path)])
    assert proc.returncode == 0 and steady(summary)["errors"] == {}, proc.stderr[-1500:]
    grpc, _ = loadgen_summary(tmp_path, ["run", "--target", f"x=grpc://127.0.0.1:{server.grpc}", "--duration", "1s",
                                         "--metrics-port", "0", "--requests", str(path)])
    assert grpc.returncode == 2 and "JSON lines are REST bodies; use PROTOCOL=rest" in grpc.stderr, grpc.stderr

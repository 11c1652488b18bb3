"""gRPC API of the drop-in model server with the official tensorflow-serving-api stubs."""
import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_service_pb2_grpc,
                                     predict_pb2, prediction_service_pb2_grpc)

pytestmark = pytest.mark.integration

X = np.random.RandomState(5).rand(4, 784).astype(np.float32)


@pytest.fixture(scope="module")
def stubs(server):
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc}")
    yield prediction_service_pb2_grpc.PredictionServiceStub(channel), model_service_pb2_grpc.ModelServiceStub(channel)
    channel.close()


def request(x, name="my_model", version=None, signature=""):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = name
    req.model_spec.signature_name = signature
    if version is not None:
        req.model_spec.version.value = version
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
    return req


def test_predict_matches_in_process_model(server, stubs, reference):
    resp = stubs[0].Predict(request(X), timeout=10)
    got = tf.make_ndarray(resp.outputs["probabilities"])
    np.testing.assert_allclose(got, reference(server.base_path, X), atol=1e-6)
    assert resp.model_spec.name == "my_model" and resp.model_spec.version.value == 1
    assert resp.model_spec.signature_name == "serving_default"


def test_predict_answers_in_typed_fields_as_tf_serving(stubs):
    """TF Serving's Predict fills float_val (Tensor::AsProtoField), never tensor_content: clients that read
    outputs["..."].float_val (its own integration test does) see every value."""
    out = stubs[0].Predict(request(X[:2]), timeout=10).outputs["probabilities"]
    assert out.tensor_content == b"" and len(out.float_val) == 2 * 10
    np.testing.assert_array_equal(np.array(out.float_val, np.float32).reshape(2, 10), tf.make_ndarray(out))


def test_predict_with_float_val_encoding(server, stubs, reference):
    req = request(X[:1])
    t = req.inputs["x"]
    t.ClearField("tensor_content")
    t.float_val.extend(X[0].tolist())
    got = tf.make_ndarray(stubs[0].Predict(req, timeout=10).outputs["probabilities"])
    np.testing.assert_allclose(got, reference(server.base_path, X[:1]), atol=1e-6)


def test_metadata_and_status(stubs):
    req = get_model_metadata_pb2.GetModelMetadataRequest()
    req.model_spec.name = "my_model"
    req.metadata_field.append("signature_def")
    resp = stubs[0].GetModelMetadata(req, timeout=10)
    sdm = get_model_metadata_pb2.SignatureDefMap()
    resp.metadata["signature_def"].Unpack(sdm)
    sig = sdm.signature_def["serving_default"]
    assert sig.inputs["x"].dtype == tf.float32.as_datatype_enum
    assert [d.size for d in sig.inputs["x"].tensor_shape.dim] == [-1, 784]
    status = stubs[1].GetModelStatus(get_model_status_pb2.GetModelStatusRequest(model_spec=req.model_spec), timeout=5)
    [v] = status.model_version_status
    assert v.version == 1 and v.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE


@pytest.mark.parametrize("req_fn,code", [
    (lambda: request(X, name="other"), grpc.StatusCode.NOT_FOUND),
    (lambda: request(X, version=9), grpc.StatusCode.NOT_FOUND),
    (lambda: request(X[:, :10]), grpc.StatusCode.INVALID_ARGUMENT),
    (lambda: request(X.astype(np.float64)), grpc.StatusCode.INVALID_ARGUMENT),
    (lambda: request(X, signature="nope"), grpc.StatusCode.INVALID_ARGUMENT),
], ids=["unknown-model", "unknown-version", "wrong-shape", "wrong-dtype", "unknown-signature"])
def test_errors_use_tf_serving_codes(stubs, req_fn, code):
    with pytest.raises(grpc.RpcError) as err:
        stubs[0].Predict(req_fn(), timeout=10)
    assert err.value.code() == code
    assert stubs[0].Predict(request(X[:1]), timeout=10).outputs  # still serving


def test_bad_tensor_content_length_is_invalid_argument(stubs):
    req = request(X[:1])
    req.inputs["x"].tensor_content = req.inputs["x"].tensor_content[:-4]
    with pytest.raises(grpc.RpcError) as err:
        stubs[0].Predict(req, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tensor_content" in err.value.details()

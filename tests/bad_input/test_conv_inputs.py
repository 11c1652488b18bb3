"""Wrong-shaped inputs to a convolutional model (the zoo's ResNet-50, float images [-1,64,64,3]) are refused
INVALID_ARGUMENT before TensorFlow sees them, and the server keeps serving. Without the check, TF 2.9's Conv2D
aborts the whole process on a rank-2 input (tensor_format.h:427 CHECK failure): one malformed request would end
a compare's server."""
import grpc
import numpy as np
import pytest
import requests
from servers import TEST_VERSIONS, start_modelserver

from loadgen import tfproto
from models import zoo
from core.registry import load_registry

pytestmark = pytest.mark.integration

PREDICT = "/v1/models/image:predict"
GOOD = np.random.RandomState(1).rand(1, 64, 64, 3).astype(np.float32)
REST_BAD = [
    ("rank 2 (the example model's row)", {"instances": [[0.5] * 784]}, "has shape [1,784]"),
    ("wrong fixed dims", {"instances": np.zeros((1, 32, 32, 3)).tolist()}, "has shape [1,32,32,3]"),
    ("rank 5", {"inputs": np.zeros((1, 1, 64, 64, 3)).tolist()}, "has shape [1,1,64,64,3]"),
    ("strings for floats", {"instances": [[["a"] * 3] * 64] * 64}, "float32"),
]


@pytest.fixture(scope="module", params=TEST_VERSIONS, ids=lambda v: f"tf{v}")
def conv_server(request, tmp_path_factory):
    reg = load_registry()
    base = zoo.ensure("image", reg, [reg.get(v) for v in TEST_VERSIONS], log=lambda *_: None)
    s = start_modelserver(request.param, tmp_path_factory.mktemp("conv"), base_path=base, model_name="image")
    yield s
    s.stop()


def _serves(server) -> bool:
    r = requests.post(server.url(PREDICT), json={"instances": GOOD.tolist()}, timeout=30)
    return r.status_code == 200 and len(r.json()["predictions"][0]) == 10


@pytest.mark.parametrize("case,body,needle", REST_BAD, ids=[c[0] for c in REST_BAD])
def test_rest_wrong_inputs_are_400_and_the_server_keeps_serving(conv_server, case, body, needle):
    r = requests.post(conv_server.url(PREDICT), json=body, timeout=30)
    assert r.status_code == 400, r.text[:300]
    assert needle in r.json()["error"], r.json()["error"]
    assert conv_server.proc.poll() is None and _serves(conv_server)


@pytest.mark.parametrize("arr,needle", [
    (np.zeros((2, 784), np.float32), "has shape [2,784]"),
    (np.zeros((1, 64, 64, 1), np.float32), "has shape [1,64,64,1]"),
    (np.zeros((1, 64, 64, 3), np.float64), "to be float but float64 is provided"),
], ids=["rank-2", "one-channel", "float64"])
def test_grpc_wrong_inputs_are_invalid_argument_and_the_server_keeps_serving(conv_server, arr, needle):
    req = tfproto.PredictRequest()
    req.model_spec.name = "image"
    req.inputs["images"].CopyFrom(tfproto.tensor_proto(arr))
    with grpc.insecure_channel(f"127.0.0.1:{conv_server.grpc}") as ch:
        predict = ch.unary_unary("/tensorflow.serving.PredictionService/Predict",
                                 request_serializer=tfproto.PredictRequest.SerializeToString,
                                 response_deserializer=tfproto.PredictResponse.FromString)
        with pytest.raises(grpc.RpcError) as err:
            predict(req, timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
        assert needle in err.value.details()
        req.inputs["images"].CopyFrom(tfproto.tensor_proto(GOOD))
        assert len(predict(req, timeout=30).outputs["probabilities"].float_val) == 10
    assert conv_server.proc.poll() is None

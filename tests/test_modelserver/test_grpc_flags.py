"""The gRPC flags TF Serving's own integration test passes to every server: --grpc_socket_path (gRPC
on a UNIX socket too) and --grpc_channel_arguments (key=value, integers as integers) are accepted and
honoured; what this server cannot do (TFLite, the profiler service) is refused in one line."""
import grpc
import numpy as np
import pytest
import tensorflow as tf
from servers import TEST_VERSIONS, example_model, free_port, run_modelserver, start_modelserver
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

pytestmark = pytest.mark.integration
LIMIT = 4000  # bytes a request may have through grpc.max_receive_message_length


@pytest.fixture(scope="module", params=TEST_VERSIONS, ids=lambda v: f"tf{v}")
def socket_server(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grpcflags")
    sock = tmp / "tfs.sock"
    s = start_modelserver(request.param, tmp, extra=[
        f"--grpc_socket_path={sock}",
        f"--grpc_channel_arguments=grpc.max_receive_message_length={LIMIT},grpc.primary_user_agent=tfsb",
        "--enable_profiler=false", "--prefer_tflite_model=false"])  # off: accepted, as TF Serving accepts them
    yield s, sock
    s.stop()


def predict(target: str, rows: int):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "my_model"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.zeros((rows, 784), np.float32)))
    with grpc.insecure_channel(target) as ch:
        return prediction_service_pb2_grpc.PredictionServiceStub(ch).Predict(req, timeout=10)


def test_grpc_answers_on_the_unix_socket_and_the_port(socket_server):
    s, sock = socket_server
    assert sock.exists()
    via_socket = predict(f"unix:{sock}", 1).outputs["probabilities"]
    via_port = predict(f"127.0.0.1:{s.grpc}", 1).outputs["probabilities"]
    assert tf.make_ndarray(via_socket).shape == (1, 10)
    np.testing.assert_array_equal(tf.make_ndarray(via_socket), tf.make_ndarray(via_port))


def test_channel_arguments_override_the_servers_defaults(socket_server):
    s, _ = socket_server
    with pytest.raises(grpc.RpcError) as err:  # 2 rows of 784 floats: 6 kB, above the 4000 bytes asked for
        predict(f"127.0.0.1:{s.grpc}", 2)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert predict(f"127.0.0.1:{s.grpc}", 1).outputs  # 3.1 kB passes


@pytest.mark.parametrize("flag,needle", [
    ("--prefer_tflite_model=true", "TensorFlow Lite models cannot be served here"),
    ("--enable_profiler", "no profiler service"),
    ("--grpc_channel_arguments=grpc.max_connection_age_ms", "expected key=value pairs"),
])
def test_what_cannot_be_done_here_is_one_line_and_exit_2(flag, needle):
    base = example_model(TEST_VERSIONS[0])
    proc = run_modelserver(TEST_VERSIONS[0], [f"--port={free_port()}", f"--model_base_path={base}", flag])
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr, proc.stderr



def test_a_profiler_client_gets_unimplemented(socket_server):
    s, _ = socket_server
    with grpc.insecure_channel(f"127.0.0.1:{s.grpc}") as ch:
        call = ch.unary_unary("/tensorflow.ProfilerService/Profile")
        with pytest.raises(grpc.RpcError) as err:
            call(b"", timeout=5)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED

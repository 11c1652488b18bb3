"""Hostile or careless requests against a live model server: every one costs a bounded amount,
answers 4xx in TF Serving's {"error": ...} form (or its gRPC code), logs one line, never a
traceback, and the server keeps serving."""
import gzip
import resource
import socket
import subprocess
import time

import grpc
import numpy as np
import psutil
import pytest
import requests
from servers import CONFIGS, free_port, start_modelserver, version_python, wait_available
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from servers import ROOT, Server

pytestmark = pytest.mark.integration
X = np.random.RandomState(4).rand(1, 784).astype(np.float32)
PREDICT = "/v1/models/my_model:predict"


def ok(server) -> bool:
    return requests.post(server.url(PREDICT), json={"instances": X.tolist()}, timeout=10).status_code == 200


def raw_http(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        try:
            while b"\r\n\r\n" not in out or len(out) < 40:
                chunk = s.recv(4096)
                if not chunk:
                    break
                out += chunk
        except socket.timeout:
            pass
    return out


def test_a_40_byte_grpc_request_cannot_make_the_server_allocate_gigabytes(server):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "my_model"
    t = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[1.0])
    t.tensor_shape.dim.add(size=250000)
    t.tensor_shape.dim.add(size=784)
    req.inputs["x"].CopyFrom(t)
    assert req.ByteSize() < 64
    proc = psutil.Process(server.proc.pid)
    before = proc.memory_info().rss
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc}") as ch:
        with pytest.raises(grpc.RpcError) as err:
            prediction_service_pb2_grpc.PredictionServiceStub(ch).Predict(req, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "784000000 bytes decoded, above the server's limit" in err.value.details()
    assert proc.memory_info().rss - before < 64 << 20  # not the 784 MB the tensor would take
    assert ok(server)


def test_unknown_model_names_are_counted_under_one_label(server):
    page = lambda: requests.get(server.url("/monitoring/prometheus/metrics"), timeout=5).text  # noqa: E731
    for i in range(300):
        r = requests.post(server.url(f"/v1/models/nope{i}:predict"), json={"instances": X.tolist()}, timeout=5)
        assert r.status_code == 404
    text = page()
    assert 'model_name="nope' not in text and 'model_name="_unknown_",status="NOT_FOUND"' in text
    size = len(text)
    for i in range(300, 600):
        requests.post(server.url(f"/v1/models/nope{i}:predict"), data=b"{oops", timeout=5)
    assert len(page()) - size < 200  # a count grew; no series was added


def test_bad_gzip_is_400_and_a_gzip_bomb_is_413_not_500(server):
    bad = requests.post(server.url(PREDICT), data=b"not gzip at all",
                        headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}, timeout=10)
    assert bad.status_code == 400 and "cannot read the request body" in bad.json()["error"]
    bomb = gzip.compress(b"[" + b"0," * (80 << 20) + b"0]")  # ~160 MiB inflated, under 1 MiB on the wire
    r = requests.post(server.url(PREDICT), data=bomb, timeout=60,
                      headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})
    assert r.status_code == 413 and "larger than" in r.json()["error"]
    assert ok(server)


def test_expect_100_continue_over_the_limit_is_413_at_once(server):
    t0 = time.monotonic()
    out = raw_http(server.rest, b"POST /v1/models/my_model:predict HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                                b"Content-Type: application/json\r\nContent-Length: 999999999999\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 413") and time.monotonic() - t0 < 3, out[:100]
    small = raw_http(server.rest, b"POST /v1/models/my_model:predict HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                                  b"Content-Type: application/json\r\nContent-Length: 10\r\n\r\n")
    assert small.startswith(b"HTTP/1.1 100 Continue"), small[:100]


def test_a_malformed_later_chunk_is_400_at_once(server):
    t0 = time.monotonic()
    out = raw_http(server.rest, b"POST /v1/models/my_model:predict HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                b"Content-Type: application/json\r\n\r\n5\r\n{\"ins\r\nZZ\r\noops\r\n0\r\n\r\n")
    assert b" 400 " in out.split(b"\r\n")[0] and time.monotonic() - t0 < 3, out[:100]
    assert ok(server)


def test_a_missing_named_input_names_it(server):
    r = requests.post(server.url(PREDICT), json={"instances": [{"y": X[0].tolist()}]}, timeout=10)
    assert r.status_code == 400 and "'x'" in r.json()["error"], r.text


def test_bad_requests_leave_one_log_line_each_never_a_traceback(server):
    log = server.log.read_text()
    assert "Traceback" not in log, log[-3000:]


def test_rest_api_timeout_in_ms_ends_a_slow_run_with_504(tmp_path):
    from servers import example_model

    slow = example_model("2.21", extra_layers=16)
    s = start_modelserver("2.21", tmp_path, base_path=slow, extra=["--rest_api_timeout_in_ms=1"])
    try:
        x = np.random.RandomState(1).rand(512, 784).astype(np.float32)
        r = requests.post(s.url(PREDICT), json={"instances": x.tolist()}, timeout=60)
        assert r.status_code == 504 and r.json()["error"], r.text  # DEADLINE_EXCEEDED from TensorFlow itself
    finally:
        s.stop()


def test_connection_cap_stays_below_the_open_file_limit(tmp_path):
    """With 256 open files allowed, connections beyond the cap get 503 (not resets), a normal
    predict gets an answer, and everything works again once they close."""
    py = version_python("2.21")
    rest, grpc_port = free_port(), free_port()
    from servers import example_model

    cmd = [py, "-m", "modelserver", f"--port={grpc_port}", f"--rest_api_port={rest}", "--model_name=my_model",
           f"--model_base_path={example_model('2.21')}", f"--monitoring_config_file={CONFIGS / 'monitoring.config'}"]
    log = tmp_path / "ms.log"

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, preexec_fn=limit)
    srv = Server("2.21", rest, grpc_port, proc, log, example_model("2.21"))
    socks = []
    try:
        wait_available(srv)
        assert "REST connection cap 1024 lowered to 192" in log.read_text()
        refused = 0
        for _ in range(260):
            s = socket.create_connection(("127.0.0.1", rest), timeout=5)
            socks.append(s)
            s.settimeout(0.05)
            try:
                refused += s.recv(64).startswith(b"HTTP/1.1 503")
            except socket.timeout:
                pass
        assert refused >= 260 - 192 - 2
        busy = requests.post(srv.url(PREDICT), json={"instances": X.tolist()}, timeout=10)
        assert busy.status_code == 503  # an answer, not a reset
    finally:
        for s in socks:
            s.close()
    try:
        time.sleep(0.5)
        assert ok(srv)
        assert "connection cap 192 reached" in log.read_text()
    finally:
        srv.stop()

"""Bad requests to the model server: each gets TF Serving's error (status and message) and the
server keeps serving; body size, slow clients and connection counts are bounded; a model whose
signature has an unsupported dtype is refused per request, not by a crash."""
import socket
import subprocess
import time

import numpy as np
import pytest
import requests
from servers import TEST_VERSIONS, start_modelserver, version_python

pytestmark = pytest.mark.integration

X = np.random.RandomState(3).rand(3, 784).astype(np.float32)
PREDICT = "/v1/models/my_model:predict"
LIMITS = ["--rest_api_max_body_bytes=65536", "--rest_api_max_connections=8", "--rest_api_read_timeout_ms=1500",
          "--enable_signature_method_name_check"]


def post(server, path, **kw):
    return requests.post(server.url(path), timeout=10, **kw)


def predicts(server) -> bool:
    return post(server, PREDICT, json={"instances": X[:1].tolist()}).status_code == 200


BAD = [
    ("invalid JSON", "/v1/models/my_model:predict", b'{"instances": [[1, 2]', 400, "JSON"),
    ("not an object", "/v1/models/my_model:predict", b"[1, 2]", 400, "instances"),
    ("neither format", "/v1/models/my_model:predict", b'{"foo": 1}', 400, "instances"),
    ("both formats", "/v1/models/my_model:predict", b'{"instances": [[1]], "inputs": [[1]]}', 400, "exactly one"),
    ("empty instances", "/v1/models/my_model:predict", b'{"instances": []}', 400, "non-empty"),
    # checked before TensorFlow runs (TF Serving leaves it to the graph: docs/parity.md)
    ("wrong shape", "/v1/models/my_model:predict", b'{"instances": [[1.0, 2.0]]}', 400,
     "has shape [1,2], the signature expects [-1,784]"),
    ("wrong dtype", "/v1/models/my_model:predict", b'{"instances": [["a", "b"]]}', 400, "float32"),
    ("ragged rows", "/v1/models/my_model:predict", b'{"instances": [[1.0], [1.0, 2.0]]}', 400, "ragged"),
    ("unknown input", "/v1/models/my_model:predict", b'{"inputs": {"y": [[1.0]]}}', 400, "unknown"),
    ("unknown signature", "/v1/models/my_model:predict", b'{"signature_name": "nope", "instances": [[1.0]]}',
     400, "nope"),
    ("unknown model", "/v1/models/other:predict", b'{"instances": [[1.0]]}', 404, "other"),
    ("unknown version", "/v1/models/my_model/versions/9:predict", b'{"instances": [[1.0]]}', 404, "9"),
    ("unknown label", "/v1/models/my_model/labels/canary:predict", b'{"instances": [[1.0]]}', 400, "canary"),
    ("path traversal", "/v1/models/..%2F..%2Fetc%2Fpasswd:predict", b'{"instances": [[1.0]]}', 404, "Servable"),
    ("unknown verb", "/v1/models/my_model:explain", b'{"instances": [[1.0]]}', 404, "Malformed request"),
    ("classify without examples", "/v1/models/my_model:classify", b'{"examples": []}', 400, "examples"),
    # TF Serving's default --enable_signature_method_name_check=false: the signature's shape is what is checked
    ("classify on a predict signature", "/v1/models/my_model:classify", b'{"examples": [{"x": 1.0}]}', 400,
     "No classification inputs found in SignatureDef 'serving_default'"),
    ("malformed path", "/v2/whatever", b"{}", 404, "Malformed"),
]


@pytest.mark.parametrize("case,path,body,status,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_requests_get_tf_serving_errors_and_server_keeps_serving(server, case, path, body, status, needle):
    r = post(server, path, data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text
    assert needle in r.json()["error"]
    assert predicts(server)



@pytest.fixture(scope="module", params=TEST_VERSIONS, ids=lambda v: f"tf{v}")
def limited(request, tmp_path_factory):
    s = start_modelserver(request.param, tmp_path_factory.mktemp("limits"), extra=LIMITS)
    yield s
    s.stop()


def test_huge_body_is_413_and_the_limit_is_configurable(limited):
    big = b'{"instances": [' + b"[0.5]," * 20000 + b"[0.5]]}"  # ~120 kB > 64 KiB
    r = post(limited, PREDICT, data=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and "65536" in r.json()["error"]
    small = {"instances": X[:2].tolist()}  # ~30 kB < 64 KiB
    assert post(limited, PREDICT, json=small).status_code == 200


def _connect(server) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.rest), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def test_the_method_name_check_refuses_a_predict_signature_when_asked(limited):
    r = post(limited, "/v1/models/my_model:classify", json={"examples": [{"x": 1.0}]})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == ("Expected classification signature method_name to be tensorflow/serving/classify. "
                                 "Was: tensorflow/serving/predict")


def test_slow_loris_is_disconnected_after_the_read_timeout(limited):
    s = _connect(limited)
    s.sendall(b"POST /v1/models/my_model:predict HTTP/1.1\r\nHost: x\r\n")
    started, closed = time.monotonic(), False
    try:
        for _ in range(20):  # one header line a second, never finishing: at most 20 s
            s.sendall(b"X-Slow: 1\r\n")
            s.settimeout(1.0)
            try:
                if s.recv(1024) == b"":
                    closed = True
                    break
            except socket.timeout:
                continue
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    finally:
        s.close()
    assert closed and 1.0 <= time.monotonic() - started < 6.0
    assert predicts(limited)


def test_silent_connection_is_closed_and_keepalive_clients_are_not(limited):
    quiet = _connect(limited)
    with requests.Session() as session:  # one keep-alive connection, requests 2 s apart
        for _ in range(2):
            assert session.post(limited.url(PREDICT), json={"instances": X[:1].tolist()}, timeout=10).ok
            time.sleep(2.0)
        assert session.post(limited.url(PREDICT), json={"instances": X[:1].tolist()}, timeout=10).ok
    quiet.settimeout(1.0)
    assert quiet.recv(1) == b""  # closed by the server long ago (1.5 s read timeout)
    quiet.close()


def test_connections_beyond_the_cap_get_503_and_the_server_recovers(limited):
    held = [_connect(limited) for _ in range(8)]
    try:
        for s in held:  # a complete request each, kept alive: 8 open connections
            s.sendall(b"GET /v1/models/my_model HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"AVAILABLE" in s.recv(65536)
        extra = _connect(limited)
        extra.sendall(b"GET /v1/models/my_model HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = extra.recv(65536)
        extra.close()
        assert answer.startswith(b"HTTP/1.1 503") and b"too many connections" in answer
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 5
    while not predicts(limited) and time.monotonic() < deadline:  # closes are seen asynchronously
        time.sleep(0.1)
    assert predicts(limited)


UNSUPPORTED = """
import sys, tensorflow as tf
class M(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.complex64, name="z")])
    def serve(self, z):
        return {"re": tf.math.real(z)}
m = M()
tf.saved_model.save(m, sys.argv[1], signatures={"serving_default": m.serve})
"""


def test_model_with_an_unsupported_dtype_is_refused_per_request(tmp_path):
    v = TEST_VERSIONS[-1]
    base = tmp_path / "complex_model"
    subprocess.run([version_python(v), "-c", UNSUPPORTED, str(base / "1")], check=True, timeout=300,
                   capture_output=True)
    s = start_modelserver(v, tmp_path, base_path=base)
    try:
        r = post(s, PREDICT, json={"instances": [[1.0, 2.0]]})
        assert r.status_code == 400
        assert "unsupported dtypes" in r.json()["error"] and "DT_COMPLEX64" in r.json()["error"]
        assert requests.get(s.url("/v1/models/my_model/metadata"), timeout=10).status_code == 200
    finally:
        s.stop()


def _peak_rss(server) -> int:
    for line in open(f"/proc/{server.proc.pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_body_of_millions_of_empty_arrays_is_refused_cheaply_without_stalling_others(server):
    """63.9 MiB of empty instances, under the 64 MiB body limit: refused before it is parsed (not 2.3 GB
    and 12 s of parsing), and a 1-row predict sent meanwhile is answered at once."""
    import threading

    body = b'{"instances": [' + b"[]," * ((63 << 20) // 3) + b"[]]}"
    peak = _peak_rss(server)
    answer = {}
    big = threading.Thread(target=lambda: answer.update(r=post(server, PREDICT, data=body,
                                                              headers={"Content-Type": "application/json"})))
    big.start()
    t0 = time.monotonic()
    while big.is_alive() and time.monotonic() - t0 < 30:
        t = time.monotonic()
        assert predicts(server)
        assert time.monotonic() - t < 1.0, "a 1-row predict waited behind the big body"
    big.join(30)
    r = answer["r"]
    assert r.status_code == 400 and "--rest_api_max_json_containers" in r.json()["error"], r.text[:200]
    assert _peak_rss(server) - peak < 4 * len(body)


def test_a_large_valid_body_is_parsed_off_the_event_loop_and_answered(server):
    x = np.full((700, 784), 0.5, np.float32)  # ~2.2 MB of JSON: above LARGE_BODY_BYTES
    r = post(server, PREDICT, json={"instances": x.tolist()})
    assert r.status_code == 200 and np.asarray(r.json()["predictions"]).shape == (700, 10)

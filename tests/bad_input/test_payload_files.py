"""A payload file (--payload-file) that does not fit the model's signature is one line naming the file and the
input, exit 2, before any request is sent; the probe's cases ended in tracebacks with exit 1 (an empty .npy:
EOFError, ragged JSON, strings for a float input, a complex128 .npy)."""
import json

import numpy as np
import pytest
from servers import TEST_VERSIONS, start_modelserver
from tests.test_loadgen.helpers import run_loadgen

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = start_modelserver(TEST_VERSIONS[-1], tmp_path_factory.mktemp("payload"))
    yield s
    s.stop()


def _npy(path, arr):
    np.save(path, arr)


CASES = [
    ("empty.npy", lambda p: p.write_bytes(b""), "cannot read payload file"),
    ("complex.npy", lambda p: _npy(p, np.zeros((1, 784), np.complex128)), "holds complex128 values"),
    ("ragged.json", lambda p: p.write_text("[[1.0, 2.0], [3.0]]"), "is ragged"),
    ("strings.json", lambda p: p.write_text(json.dumps([["a"] * 784])), "holds <U1 values, the signature takes DT_FLOAT"),
    ("narrow.json", lambda p: p.write_text(json.dumps({"instances": [[0.5] * 10]})), "has shape [1, 10]"),
    ("unknown.json", lambda p: p.write_text(json.dumps({"inputs": {"x": [[0.5] * 784], "y": [1]}})),
     "input 'y' is not in the signature"),
    ("not-json.json", lambda p: p.write_text("{instances"), "cannot read payload file"),
]


@pytest.mark.parametrize("name,write,needle", CASES, ids=[c[0] for c in CASES])
def test_a_payload_file_that_does_not_fit_is_one_line_and_exit_2(server, tmp_path, name, write, needle):
    path = tmp_path / name
    write(path)
    proc = run_loadgen(["run", "--target", f"x=grpc://127.0.0.1:{server.grpc}", "--duration", "1s", "--warmup", "0",
                        "--metrics-port", "0", "--payload-file", str(path), "--quiet"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-1500:]
    assert needle in proc.stderr and str(path) in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_payload_file_that_fits_is_sent(server, tmp_path):
    path = tmp_path / "rows.npy"
    _npy(path, np.full((2, 784), 0.5, np.float32))
    proc = run_loadgen(["run", "--target", f"x=grpc://127.0.0.1:{server.grpc}", "--duration", "1s", "--warmup", "0",
                        "--metrics-port", "0", "--payload-file", str(path), "--quiet"])
    assert proc.returncode == 0, proc.stderr[-1500:]

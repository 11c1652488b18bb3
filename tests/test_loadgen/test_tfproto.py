"""The load generator's own TF Serving messages are wire-compatible with the real ones, both ways,
and a gRPC run never imports TensorFlow."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2

from loadgen import tfproto
from loadgen.payload import DTYPES

ROOT = Path(__file__).resolve().parents[2]
ARRAYS = {name: np.arange(6).reshape(2, 3).astype(dt) % 2 if dt is not object else
          np.array([[b"a", b"bc", b""], [b"\x00\xff", b"x", b"y"]], dtype=object)
          for name, dt in DTYPES.items()}


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_a_predict_request_reads_back_identically_with_tensorflow_serving_api(name):
    req = tfproto.PredictRequest()
    req.model_spec.name, req.model_spec.signature_name = "my_model", "serving_default"
    req.model_spec.version.value = 7
    req.inputs["x"].CopyFrom(tfproto.tensor_proto(ARRAYS[name]))
    real = predict_pb2.PredictRequest.FromString(req.SerializeToString())
    assert real.model_spec.name == "my_model" and real.model_spec.version.value == 7
    assert tf.dtypes.as_dtype(real.inputs["x"].dtype).name == tf.as_dtype(
        ARRAYS[name].dtype if name != "DT_STRING" else tf.string).name
    np.testing.assert_array_equal(tf.make_ndarray(real.inputs["x"]), ARRAYS[name])
    # and the real message, serialized, is byte for byte what ours writes
    again = predict_pb2.PredictRequest()
    again.model_spec.name, again.model_spec.signature_name = "my_model", "serving_default"
    again.model_spec.version.value = 7
    again.inputs["x"].CopyFrom(real.inputs["x"])
    assert again.SerializeToString() == req.SerializeToString()


def test_metadata_written_by_tensorflow_serving_api_reads_with_ours():
    sdm = get_model_metadata_pb2.SignatureDefMap()
    sig = sdm.signature_def["serving_default"]
    sig.method_name = "tensorflow/serving/predict"
    sig.inputs["x"].name, sig.inputs["x"].dtype = "x:0", tf.float32.as_datatype_enum
    sig.inputs["x"].tensor_shape.dim.add(size=-1)
    sig.inputs["x"].tensor_shape.dim.add(size=784)
    resp = get_model_metadata_pb2.GetModelMetadataResponse()
    resp.model_spec.name = "my_model"
    resp.metadata["signature_def"].Pack(sdm)
    ours = tfproto.GetModelMetadataResponse.FromString(resp.SerializeToString())
    got = tfproto.SignatureDefMap.FromString(ours.metadata["signature_def"].value).signature_def["serving_default"]
    assert ours.metadata["signature_def"].type_url.endswith("tensorflow.serving.SignatureDefMap")
    assert tfproto.DT_NAME[got.inputs["x"].dtype] == "DT_FLOAT"
    assert [d.size for d in got.inputs["x"].tensor_shape.dim] == [-1, 784]


def test_a_config_reload_reads_back_identically_with_tensorflow_serving_api():
    """The neighbour scenario's HandleReloadConfigRequest and its answer, ours against the real classes."""
    from tensorflow_serving.apis import model_management_pb2

    req = tfproto.ReloadConfigRequest()
    for name, base in (("my_model", "/m/a"), ("neighbour", "/m/b")):
        m = req.config.model_config_list.config.add()
        m.name, m.base_path, m.model_platform = name, base, "tensorflow"
    real = model_management_pb2.ReloadConfigRequest.FromString(req.SerializeToString())
    assert [(c.name, c.base_path, c.model_platform) for c in real.config.model_config_list.config] == [
        ("my_model", "/m/a", "tensorflow"), ("neighbour", "/m/b", "tensorflow")]
    assert real.SerializeToString() == req.SerializeToString()
    resp = model_management_pb2.ReloadConfigResponse()
    resp.status.error_code, resp.status.error_message = 3, "bad base path"
    ours = tfproto.ReloadConfigResponse.FromString(resp.SerializeToString())
    assert (ours.status.error_code, ours.status.error_message) == (3, "bad base path")


@pytest.mark.integration
def test_a_grpc_run_imports_no_tensorflow(server, tmp_path):
    out = tmp_path / "lg.json"
    code = ("import runpy, sys\nsys.argv = ['loadgen', 'run', '--target', 'grpc://127.0.0.1:%d', '--concurrency', '2',"
            " '--duration', '0.5s', '--min-duration', '0.1s', '--warmup', '0', '--quiet', '--metrics-port', '0', '--out', %r]\n"
            "try:\n    runpy.run_module('loadgen', run_name='__main__')\nexcept SystemExit as e:\n"
            "    print('exit', e.code)\nprint('tensorflow' in sys.modules, 'tensorflow_serving' in sys.modules)\n"
            % (server.grpc, str(out)))
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.stdout.strip().splitlines()[-2:] == ["exit 0", "False False"], proc.stdout + proc.stderr
    assert out.exists()

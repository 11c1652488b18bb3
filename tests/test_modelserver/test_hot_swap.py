"""A new model version dropped into the base path during load is loaded, warmed up and
swapped in with zero failed requests; the old version unloads after."""
import os
import shutil
import threading
import time

import grpc
import numpy as np
import pytest
import requests
import tensorflow as tf
from servers import TEST_VERSIONS, example_model, start_modelserver
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("version", TEST_VERSIONS, ids=lambda v: f"tf{v}")
def test_hot_swap_under_load_loses_nothing(version, tmp_path):
    base = tmp_path / "my_model"
    shutil.copytree(example_model(version) / "1", base / "1")
    server = start_modelserver(version, tmp_path, base_path=base, extra=["--file_system_poll_wait_seconds=1"])
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "my_model"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.random.RandomState(2).rand(1, 784).astype(np.float32)))
    seen, failures, stop = [], [], threading.Event()

    def client():
        stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.grpc}"))
        deadline = time.monotonic() + 40  # bounded even if the swap never happens
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                seen.append(stub.Predict(req, timeout=10).model_spec.version.value)
            except grpc.RpcError as e:
                failures.append(e.code())
    threads = [threading.Thread(target=client) for _ in range(4)]
    try:
        for t in threads:
            t.start()
        time.sleep(2)
        before = len(seen)
        staging = base / ".incoming"
        shutil.copytree(base / "1", staging)
        os.rename(staging, base / "2")  # atomic: the poller never sees a half-copied version
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not seen or seen[-1] != 2):
            time.sleep(0.1)
        time.sleep(1.5)  # keep the load on through the unload of version 1
        stop.set()
        for t in threads:
            t.join(30)
        status = requests.get(server.url("/v1/models/my_model"), timeout=5).json()["model_version_status"]
    finally:
        stop.set()
        server.stop()
    assert failures == []
    assert before > 0 and seen[:before] == [1] * before
    assert seen[-1] == 2 and set(seen) == {1, 2}
    assert {s["version"]: s["state"] for s in status} == {"2": "AVAILABLE", "1": "END"}

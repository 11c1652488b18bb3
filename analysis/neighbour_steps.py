"""Model B's steps of the neighbour scenario (analysis/neighbour.py), run in a process of their own so that the load
generator's process measures model A and nothing else: load B (a config reload naming A and B), a new version of B
written into its base, B unloaded (a config reload naming A alone); each at the start of the load's next phase."""
from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

import grpc

from loadgen.tfproto import ReloadConfigRequest, ReloadConfigResponse  # tensorflow-serving-api's import TensorFlow
from stack.serving import wait_states
from core.errors import Failed

RELOAD = "/tensorflow.serving.ModelService/HandleReloadConfigRequest"


def reload_config(server, models: dict, timeout_s: float = 300) -> None:
    """Serve exactly these {name: base path as the server reads it} from now on (HandleReloadConfigRequest)."""
    req = ReloadConfigRequest()
    for name, base in models.items():
        m = req.config.model_config_list.config.add()
        m.name, m.base_path, m.model_platform = name, str(base), "tensorflow"
    host, port = server.address("grpc")
    with grpc.insecure_channel(f"{host}:{port}") as ch:
        call = ch.unary_unary(RELOAD, request_serializer=ReloadConfigRequest.SerializeToString,
                              response_deserializer=ReloadConfigResponse.FromString)
        resp = call(req, timeout=timeout_s)
    if resp.status.error_code:
        raise Failed(f"{server.name} refused the model config: {resp.status.error_message}")


def _wait(server, model: str, done, t0: float, timeout_s: float) -> float | None:
    """Seconds from t0 until the states of the server's model `model` satisfy done (None: not within timeout_s)."""
    return wait_states(dataclasses.replace(server, model=model), done, t0, timeout_s)


def run(server, bases: dict, name_b: str, phase_s: float, go, results) -> None:
    """bases: {model: (path here, path as the server reads it)}; says "ready" on results once imported, then takes
    the wall time of B's first step from go."""
    a, b = server.model, name_b
    here_b = Path(bases[b][0])
    took: dict = {}
    results.put("ready")
    try:
        time.sleep(max(0.0, go.get(timeout=600) - time.time()))
        t0 = time.monotonic()
        reload_config(server, {a: bases[a][1], b: bases[b][1]})  # returns once B is loaded, as TF Serving's does
        took["load"] = _wait(server, b, lambda st: st.get("1") == "AVAILABLE", t0, phase_s)
        time.sleep(max(0.0, t0 + phase_s - time.monotonic()))
        t0 = time.monotonic()
        shutil.copytree(here_b / "1", here_b / ".incoming")
        (here_b / ".incoming").rename(here_b / "2")  # at once: the poller never sees half a version
        took["reload"] = _wait(server, b, lambda st: st.get("2") == "AVAILABLE" and st.get("1") in ("END", None),
                               t0, phase_s)
        time.sleep(max(0.0, t0 + phase_s - time.monotonic()))
        t0 = time.monotonic()
        reload_config(server, {a: bases[a][1]})
        took["unload"] = _wait(server, b, lambda st: not st or set(st.values()) <= {"END"}, t0, phase_s)
    except (OSError, RuntimeError, grpc.RpcError) as e:
        took["error"] = f"{type(e).__name__}: {e}"
    results.put(took)

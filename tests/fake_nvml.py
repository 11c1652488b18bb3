"""A stand-in for the `pynvml` module at the hardware boundary (there is no GPU here).

It has pynvml's API for what the exporter calls. Its state is a JSON file named by
$FAKE_NVML_STATE (re-read on every call, so a test can lose a GPU mid-run), or a
dict given to `configure()` when used in-process:

    {"init_error": null | "LIBRARY_NOT_FOUND" | "DRIVER_NOT_LOADED",
     "lost": false, "driver": "550.54.15",
     "devices": [{"name": "NVIDIA A100", "uuid": "GPU-...", "used": 1, "total": 2, "reserved": 3 | null,
                  "util": [50, 20] | null, "power_mw": 123000 | null, "energy_mj": 5000 | null,
                  "temp": 40 | null, "clocks_mhz": [1410, 1215] | null,
                  "processes": [[pid, used bytes | null], ...]}]}
"""
from __future__ import annotations

import json
import os
from types import SimpleNamespace

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
nvmlMemory_v2 = 33554472


class NVMLError(Exception):
    def __init__(self, value: int):
        super().__init__(f"NVML error {value}")
        self.value = value


_state = {"config": None, "initialized": False, "file": (None, None)}


def configure(config: dict | None) -> None:
    _state["config"] = config
    _state["initialized"] = False


def _cfg() -> dict:
    if _state["config"] is not None:
        return _state["config"]
    path = os.environ["FAKE_NVML_STATE"]
    mtime = os.stat(path).st_mtime_ns  # re-read only when the test rewrote the file
    if _state["file"][0] != mtime:
        with open(path) as f:
            _state["file"] = (mtime, json.load(f))
    return _state["file"][1]


def _check() -> dict:
    cfg = _cfg()
    if not _state["initialized"]:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    if cfg.get("lost"):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return cfg


def _dev(handle) -> dict:
    return _check()["devices"][handle]


def _opt(value):
    if value is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return value


def nvmlInit():
    cfg = _cfg()
    err = cfg.get("init_error")
    if err:
        raise NVMLError(globals()[f"NVML_ERROR_{err}"])
    if cfg.get("lost"):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    _state["initialized"] = True


def nvmlShutdown():
    _state["initialized"] = False


def nvmlSystemGetDriverVersion():
    return _check().get("driver", "550.54.15")


def nvmlDeviceGetCount():
    return len(_check()["devices"])


def nvmlDeviceGetHandleByIndex(i):
    if not 0 <= i < nvmlDeviceGetCount():
        raise NVMLError(2)
    return i


def nvmlDeviceGetName(h):
    return _dev(h)["name"]


def nvmlDeviceGetUUID(h):
    return _dev(h)["uuid"]


def nvmlDeviceGetMemoryInfo(h, version=None):
    d = _dev(h)
    if version is not None and d.get("reserved") is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return SimpleNamespace(used=d["used"], total=d["total"], free=d["total"] - d["used"] - (d.get("reserved") or 0),
                           reserved=d.get("reserved"))


def nvmlDeviceGetUtilizationRates(h):
    u = _opt(_dev(h).get("util"))
    return SimpleNamespace(gpu=u[0], memory=u[1])


def nvmlDeviceGetPowerUsage(h):
    return _opt(_dev(h).get("power_mw"))


def nvmlDeviceGetTotalEnergyConsumption(h):
    return _opt(_dev(h).get("energy_mj"))


def nvmlDeviceGetTemperature(h, sensor):
    return _opt(_dev(h).get("temp"))


def nvmlDeviceGetClockInfo(h, kind):
    clocks = _opt(_dev(h).get("clocks_mhz"))
    return clocks[0] if kind == NVML_CLOCK_SM else clocks[1]


def nvmlDeviceGetComputeRunningProcesses(h):
    return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in _dev(h).get("processes", [])]


def nvmlDeviceGetCudaComputeCapability(h):
    return tuple(_dev(h).get("compute_capability", (9, 0)))  # an H100/H200 by default

"""Reading NVML: init with backoff, fields that may be NotSupported, a GPU that may be lost.

A field NVML reports as NotSupported is None (and then absent from /metrics,
never a fake 0). A lost GPU or a failed init keeps the exporter up: the source
reports itself down, counts the error by kind, and re-inits with exponential
backoff (a driver reload brings it back).
"""
from __future__ import annotations

import dataclasses
import time


@dataclasses.dataclass
class DeviceReading:
    index: int
    uuid: str
    name: str
    memory_used: int | None = None
    memory_free: int | None = None
    memory_total: int | None = None
    memory_reserved: int | None = None
    util_gpu: float | None = None       # ratio 0..1
    util_memory: float | None = None
    power_watts: float | None = None
    energy_joules: float | None = None
    temperature_c: float | None = None
    sm_clock_hz: float | None = None
    memory_clock_hz: float | None = None
    processes: list = dataclasses.field(default_factory=list)  # [(pid, used bytes or None)]


class NvmlSource:
    def __init__(self, nvml, errors, clock=time.monotonic, max_backoff_s: float = 60.0):
        """nvml: the pynvml module (or a stand-in with its API); errors(kind) counts an error."""
        self.nvml, self.count_error, self.clock, self.max_backoff_s = nvml, errors, clock, max_backoff_s
        self.ready = False
        self.driver = ""
        self._backoff, self._next_try = 1.0, 0.0

    def _kind(self, e) -> str:
        nv = self.nvml
        return {getattr(nv, "NVML_ERROR_GPU_IS_LOST", -1): "gpu_lost",
                getattr(nv, "NVML_ERROR_NOT_SUPPORTED", -1): "not_supported",
                getattr(nv, "NVML_ERROR_LIBRARY_NOT_FOUND", -1): "library_not_found",
                getattr(nv, "NVML_ERROR_DRIVER_NOT_LOADED", -1): "driver_not_loaded"}.get(getattr(e, "value", None),
                                                                                           "nvml")

    def ensure_init(self) -> bool:
        if self.ready:
            return True
        now = self.clock()
        if now < self._next_try:
            return False
        try:
            self.nvml.nvmlInit()
            drv = self.nvml.nvmlSystemGetDriverVersion()
            self.driver = drv.decode() if isinstance(drv, bytes) else str(drv)
        except self.nvml.NVMLError as e:
            self.count_error("init_" + self._kind(e))
            self._next_try = now + self._backoff
            self._backoff = min(self._backoff * 2, self.max_backoff_s)
            return False
        self.ready, self._backoff = True, 1.0
        return True

    def _lost(self) -> None:
        """Drop the NVML session; the next read re-inits (after backoff)."""
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass
        self.ready = False
        self._next_try = self.clock() + self._backoff

    def _field(self, fn, *args):
        try:
            return fn(*args)
        except self.nvml.NVMLError as e:
            if getattr(e, "value", None) == getattr(self.nvml, "NVML_ERROR_NOT_SUPPORTED", -2):
                return None
            raise

    def read(self) -> list | None:
        """All devices' readings, or None when NVML is down."""
        if not self.ensure_init():
            return None
        nv = self.nvml
        try:
            out = []
            for i in range(nv.nvmlDeviceGetCount()):
                out.append(self._device(i))
            return out
        except nv.NVMLError as e:
            kind = self._kind(e)
            self.count_error(kind)
            if kind in ("gpu_lost", "driver_not_loaded") or getattr(e, "value", None) == getattr(
                    nv, "NVML_ERROR_UNINITIALIZED", -2):
                self._lost()
            return None

    def _device(self, i: int) -> DeviceReading:
        nv, f = self.nvml, self._field
        h = nv.nvmlDeviceGetHandleByIndex(i)
        text = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
        d = DeviceReading(i, text(nv.nvmlDeviceGetUUID(h)), text(nv.nvmlDeviceGetName(h)))
        mem = None
        if hasattr(nv, "nvmlMemory_v2"):
            try:
                mem = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
                d.memory_reserved = mem.reserved
            except nv.NVMLError as e:  # v2 not supported by this driver: fall back to v1
                if getattr(e, "value", None) not in (getattr(nv, "NVML_ERROR_NOT_SUPPORTED", -2),
                                                     getattr(nv, "NVML_ERROR_FUNCTION_NOT_FOUND", -2)):
                    raise
                mem = None
        mem = mem or f(nv.nvmlDeviceGetMemoryInfo, h)
        if mem is not None:
            d.memory_used, d.memory_free, d.memory_total = mem.used, mem.free, mem.total
        util = f(nv.nvmlDeviceGetUtilizationRates, h)
        if util is not None:
            d.util_gpu, d.util_memory = util.gpu / 100.0, util.memory / 100.0
        mw = f(nv.nvmlDeviceGetPowerUsage, h)
        d.power_watts = None if mw is None else mw / 1000.0           # NVML: milliwatts
        mj = f(nv.nvmlDeviceGetTotalEnergyConsumption, h)
        d.energy_joules = None if mj is None else mj / 1000.0         # NVML: millijoules
        d.temperature_c = f(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)
        sm = f(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM)
        d.sm_clock_hz = None if sm is None else sm * 1e6              # NVML: MHz
        mc = f(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM)
        d.memory_clock_hz = None if mc is None else mc * 1e6
        procs = f(nv.nvmlDeviceGetComputeRunningProcesses, h) or []
        d.processes = [(p.pid, p.usedGpuMemory) for p in procs]       # usedGpuMemory may be None
        return d

"""Sample NVML in the background so a short allocation spike between scrapes is not missed.

Every `interval_s` the sampler reads all devices; a scrape takes the latest
reading and the peak memory (per device and per process) seen since the previous
scrape, then the peaks restart from the current values.
"""
from __future__ import annotations

import threading


class Sampler:
    def __init__(self, source, interval_s: float = 0.1):
        if not 0 < interval_s <= 60:  # nan and inf fail this too
            raise ValueError(f"the sampling interval must be > 0 and at most 60 s, got {interval_s!r}")
        self.source, self.interval_s = source, interval_s
        self._lock = threading.Lock()
        self._latest = None
        self._dev_peak, self._proc_peak = {}, {}
        self._stop = threading.Event()
        self._thread = None

    def sample_once(self) -> None:
        readings = self.source.read()
        with self._lock:
            self._latest = readings
            for d in readings or []:
                if d.memory_used is not None:
                    self._dev_peak[d.index] = max(self._dev_peak.get(d.index, 0), d.memory_used)
                for pid, used in d.processes:
                    if used is not None:
                        key = (d.index, pid)
                        self._proc_peak[key] = max(self._proc_peak.get(key, 0), used)

    def take(self) -> tuple:
        """(latest readings or None, device peaks {gpu: bytes}, process peaks {(gpu, pid): bytes})."""
        with self._lock:
            latest, dev, proc = self._latest, self._dev_peak, self._proc_peak
            self._dev_peak = {d.index: d.memory_used for d in latest or [] if d.memory_used is not None}
            self._proc_peak = {(d.index, pid): used for d in latest or [] for pid, used in d.processes
                               if used is not None}
        return latest, dev, proc

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample_once()
            except Exception:  # never let the sampler thread die; the source counts NVML errors itself
                self.source.count_error("sampler")

    def start(self) -> "Sampler":
        self.sample_once()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(2)

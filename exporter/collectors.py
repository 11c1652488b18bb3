"""The exporter's collectors: each collect() yields metric families; none ever fails a scrape."""
from __future__ import annotations

import time

import psutil
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

DEV = ["gpu", "uuid", "name"]
_FIELDS = [  # (metric, help, reading attribute, counter?)
    ("gpu_memory_used_bytes", "Device memory used.", "memory_used", False),
    ("gpu_memory_free_bytes", "Device memory free.", "memory_free", False),
    ("gpu_memory_total_bytes", "Device memory in total.", "memory_total", False),
    ("gpu_memory_reserved_bytes", "Device memory reserved by the driver (NVML memory info v2).",
     "memory_reserved", False),
    ("gpu_utilization_ratio", "Fraction of the last sample period a kernel ran.", "util_gpu", False),
    ("gpu_memory_utilization_ratio", "Fraction of the last sample period memory was read or written.",
     "util_memory", False),
    ("gpu_power_watts", "Power draw.", "power_watts", False),
    ("gpu_energy_joules", "Energy used since the driver loaded.", "energy_joules", True),
    ("gpu_temperature_celsius", "GPU die temperature.", "temperature_c", False),
    ("gpu_sm_clock_hertz", "SM clock.", "sm_clock_hz", False),
    ("gpu_memory_clock_hertz", "Memory clock.", "memory_clock_hz", False),
]


class Health:
    """The exporter's own errors, by kind; shared by the collectors and the NVML source."""

    def __init__(self):
        self.errors = {}
        self.last_success = {}
        self.durations = {}

    def error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    def timed(self, name: str, fn):
        t0 = time.perf_counter()
        try:
            out = list(fn())
            self.last_success[name] = time.time()
            return out
        except Exception:  # a failing collector never fails the scrape: it is counted instead
            self.error(f"collector_{name}")
            return []
        finally:
            self.durations[name] = time.perf_counter() - t0


class GpuCollector:
    def __init__(self, sampler, source, attributor, health: Health):
        self.sampler, self.source, self.attributor, self.health = sampler, source, attributor, health

    def collect(self):
        yield from self.health.timed("gpu", self._collect)

    def _collect(self):
        latest, dev_peak, proc_peak = self.sampler.take()
        up = GaugeMetricFamily("gpu_up", "1 when NVML answers and devices were read.", value=1 if latest is not None else 0)
        yield up
        if latest is None:
            return
        info = GaugeMetricFamily("gpu_info", "Device information (always 1).", labels=DEV + ["driver_version"])
        fams = {m: (CounterMetricFamily if c else GaugeMetricFamily)(m, h, labels=DEV)
                for m, h, _, c in _FIELDS}
        peak = GaugeMetricFamily("gpu_memory_used_peak_bytes", "Peak device memory used since the last scrape "
                                 "(sampled in the background).", labels=DEV)
        servers = self.attributor.model_servers()
        proc = GaugeMetricFamily("process_gpu_memory_used_bytes", "GPU memory used by a process.",
                                 labels=["gpu", "pid", "container", "version"])
        proc_peak_f = GaugeMetricFamily("process_gpu_memory_used_peak_bytes", "Peak GPU memory of a process "
                                        "since the last scrape.", labels=["gpu", "pid", "container", "version"])
        per_version = {}
        for d in latest:
            labels = [str(d.index), d.uuid, d.name]
            info.add_metric(labels + [self.source.driver], 1)
            for metric, _, attr, _counter in _FIELDS:
                value = getattr(d, attr)
                if value is not None:  # NotSupported: absent, never a fake 0
                    fams[metric].add_metric(labels, value)
            if d.index in dev_peak:
                peak.add_metric(labels, dev_peak[d.index])
            for pid, used in d.processes:
                if used is None:
                    continue
                container, version = self.attributor.attribute(pid, servers)
                plabels = [str(d.index), str(pid), container, version]
                proc.add_metric(plabels, used)
                proc_peak_f.add_metric(plabels, proc_peak.get((d.index, pid), used))
                if version:
                    per_version[version] = per_version.get(version, 0) + used
        yield info
        yield from fams.values()
        yield peak
        yield proc
        yield proc_peak_f
        by_version = GaugeMetricFamily("process_gpu_memory_by_version_bytes", "GPU memory used by all processes "
                                       "of a TF Serving version.", labels=["version"])
        for version, used in sorted(per_version.items()):
            by_version.add_metric([version], used)
        yield by_version


class CpuFallbackCollector:
    """Always on: model-server processes' RSS, CPU seconds and threads, labelled with their version."""

    def __init__(self, attributor, health: Health):
        self.attributor, self.health = attributor, health

    def collect(self):
        yield from self.health.timed("cpu", self._collect)

    def _collect(self):
        labels = ["pid", "container", "version"]
        rss = GaugeMetricFamily("process_resident_memory_bytes", "Resident memory of a model-server process.",
                                labels=labels)
        cpu = CounterMetricFamily("process_cpu_seconds", "CPU time of a model-server process (user + system).",
                                  labels=labels)
        threads = GaugeMetricFamily("process_threads", "Threads of a model-server process.", labels=labels)
        by_version = GaugeMetricFamily("process_resident_memory_by_version_bytes", "Resident memory of all "
                                       "model-server processes of a version.", labels=["version"])
        sums = {}
        servers = self.attributor.model_servers()
        for pid, version in sorted(servers.items()):
            try:
                p = psutil.Process(pid)
                with p.oneshot():
                    mem, times, n = p.memory_info().rss, p.cpu_times(), p.num_threads()
            except psutil.Error:  # exited between listing and reading: simply absent
                continue
            lab = [str(pid), self.attributor.container_of(pid)[:12], version]
            rss.add_metric(lab, mem)
            cpu.add_metric(lab, times.user + times.system)
            threads.add_metric(lab, n)
            sums[version] = sums.get(version, 0) + mem
        for version, mem in sorted(sums.items()):
            by_version.add_metric([version], mem)
        yield from (rss, cpu, threads, by_version)


class SelfCollector:
    def __init__(self, health: Health):
        self.health = health

    def collect(self):
        h = self.health
        errors = CounterMetricFamily("exporter_errors", "Errors, by kind (NVML, collectors).", labels=["kind"])
        for kind, n in sorted(h.errors.items()):
            errors.add_metric([kind], n)
        yield errors
        dur = GaugeMetricFamily("exporter_collect_duration_seconds", "How long the last collect took.",
                                labels=["collector"])
        last = GaugeMetricFamily("exporter_last_success_timestamp_seconds", "When a collector last succeeded.",
                                 labels=["collector"])
        for name, secs in sorted(h.durations.items()):
            dur.add_metric([name], secs)
        for name, ts in sorted(h.last_success.items()):
            last.add_metric([name], ts)
        yield dur
        yield last

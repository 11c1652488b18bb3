"""The exporter through its real HTTP endpoint, with a fake NVML at the hardware boundary and
real model-server stand-in processes for the CPU fallback."""
import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from servers import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GiB = 2 ** 30

pytestmark = pytest.mark.integration


def stand_in(version: str, mib: int) -> subprocess.Popen:
    """A process that looks like a local model server (its command line) and holds `mib` of memory."""
    code = f"import time; x = bytearray({mib} << 20); time.sleep(120)"
    return subprocess.Popen([sys.executable, "-c", code, "modelserver", f"--version_label={version}"])


def device(i, **kw):
    d = {"name": "NVIDIA A100-SXM4-80GB", "uuid": f"GPU-{i:08d}-fake", "used": (i + 1) * GiB, "total": 80 * GiB,
         "reserved": 512 << 20, "util": [40 + i, 10 + i], "power_mw": 150500 + i, "energy_mj": 7_000_000 + i,
         "temp": 40 + i, "clocks_mhz": [1410, 1215], "processes": []}
    d.update(kw)
    return d


class Exporter:
    def __init__(self, tmp_path, state: dict):
        self.state_file = tmp_path / "nvml.json"
        self.write(state)
        self.port = free_port()
        env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT}/tests", FAKE_NVML_STATE=str(self.state_file))
        self.proc = subprocess.Popen([sys.executable, "-m", "exporter", "--port", str(self.port), "--nvml-module",
                                      "fake_nvml", "--state-dir", str(tmp_path / "none"), "--docker", "off"],
                                     cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                self.text()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(self.proc.stdout.read().decode())

    def write(self, state):
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.state_file)

    def text(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return r.read().decode()

    def samples(self) -> dict:
        """{(name, frozenset(labels)): value} of one scrape."""
        out = {}
        for fam in text_string_to_metric_families(self.text()):
            for s in fam.samples:
                out[(s.name, frozenset(s.labels.items()))] = s.value
        return out

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def get(samples, metric, **labels):
    hits = [v for (n, lab), v in samples.items() if n == metric and set(labels.items()) <= lab]
    assert len(hits) == 1, (metric, labels, hits)
    return hits[0]


def absent(samples, metric, **labels):
    return not [1 for (n, lab), _ in samples.items() if n == metric and set(labels.items()) <= lab]


@pytest.fixture
def servers():
    procs = {"2.9": stand_in("2.9", 64), "2.21": stand_in("2.21", 160)}
    time.sleep(1.0)  # let them allocate
    yield procs
    for p in procs.values():
        p.kill()
        p.wait()


def test_device_and_process_metrics_values_labels_and_units(tmp_path, servers):
    p29, p221 = servers["2.9"].pid, servers["2.21"].pid
    devs = [device(0, processes=[[p29, 3 * GiB], [p221, 5 * GiB], [999999, None]]),
            device(1, power_mw=None, energy_mj=None, reserved=None, util=None, clocks_mhz=None, temp=None,
                   processes=[[p221, 1 * GiB]]),
            device(2), device(3)]
    exp = Exporter(tmp_path, {"devices": devs, "driver": "550.54.15"})
    try:
        s = exp.samples()
    finally:
        exp.stop()
    d0 = {"gpu": "0", "uuid": "GPU-00000000-fake", "name": "NVIDIA A100-SXM4-80GB"}
    assert get(s, "gpu_up") == 1
    assert get(s, "gpu_info", gpu="3", driver_version="550.54.15") == 1
    assert get(s, "gpu_memory_used_bytes", **d0) == 1 * GiB
    assert get(s, "gpu_memory_total_bytes", **d0) == 80 * GiB
    assert get(s, "gpu_memory_reserved_bytes", **d0) == 512 << 20
    assert get(s, "gpu_memory_free_bytes", **d0) == 80 * GiB - GiB - (512 << 20)
    assert get(s, "gpu_utilization_ratio", **d0) == pytest.approx(0.40)
    assert get(s, "gpu_memory_utilization_ratio", **d0) == pytest.approx(0.10)
    assert get(s, "gpu_power_watts", **d0) == pytest.approx(150.5)           # milliwatts -> watts
    assert get(s, "gpu_energy_joules_total", **d0) == pytest.approx(7000.0)  # millijoules -> joules, a counter
    assert get(s, "gpu_temperature_celsius", **d0) == 40
    assert get(s, "gpu_sm_clock_hertz", **d0) == 1410e6                       # MHz -> Hz
    assert get(s, "gpu_memory_clock_hertz", **d0) == 1215e6
    assert get(s, "gpu_memory_used_peak_bytes", **d0) == 1 * GiB
    for name in ("gpu_power_watts", "gpu_energy_joules_total", "gpu_memory_reserved_bytes", "gpu_utilization_ratio",
                 "gpu_temperature_celsius", "gpu_sm_clock_hertz"):
        assert absent(s, name, gpu="1"), name  # NotSupported: absent, never a fake 0
    assert get(s, "gpu_memory_used_bytes", gpu="1") == 2 * GiB
    assert get(s, "process_gpu_memory_used_bytes", gpu="0", pid=str(p29)) == 3 * GiB
    assert get(s, "process_gpu_memory_used_bytes", gpu="0", pid=str(p29), version="2.9", container="") == 3 * GiB
    assert get(s, "process_gpu_memory_used_bytes", gpu="1", pid=str(p221), version="2.21") == 1 * GiB
    assert absent(s, "process_gpu_memory_used_bytes", pid="999999")  # usedGpuMemory None: not reported
    assert get(s, "process_gpu_memory_by_version_bytes", version="2.21") == 6 * GiB
    assert get(s, "process_gpu_memory_by_version_bytes", version="2.9") == 3 * GiB
    # CPU fallback, real processes: the 2.21 stand-in holds ~96 MiB more than the 2.9 one.
    rss29 = get(s, "process_resident_memory_bytes", version="2.9", pid=str(p29))
    rss221 = get(s, "process_resident_memory_bytes", version="2.21", pid=str(p221))
    assert rss29 > 64 << 20 and rss221 - rss29 > 80 << 20
    # The per-version sum covers every 2.21 server on the host (other tests may run some too).
    all221 = sum(v for (n, lab), v in s.items() if n == "process_resident_memory_bytes" and ("version", "2.21") in lab)
    assert get(s, "process_resident_memory_by_version_bytes", version="2.21") == all221 >= rss221
    assert get(s, "process_threads", version="2.9", pid=str(p29)) == 1
    assert get(s, "process_cpu_seconds_total", version="2.9", pid=str(p29)) >= 0
    assert get(s, "exporter_last_success_timestamp_seconds", collector="gpu") > time.time() - 60


def test_init_failure_keeps_cpu_metrics_and_says_so(tmp_path, servers):
    exp = Exporter(tmp_path, {"init_error": "LIBRARY_NOT_FOUND", "devices": []})
    try:
        s = exp.samples()
        assert exp.proc.poll() is None
    finally:
        exp.stop()
    assert get(s, "gpu_up") == 0
    assert get(s, "exporter_errors_total", kind="init_library_not_found") >= 1
    assert absent(s, "gpu_memory_used_bytes")
    assert get(s, "process_resident_memory_bytes", version="2.9", pid=str(servers["2.9"].pid)) > 0


def test_gpu_lost_mid_run_then_recovers(tmp_path, servers):
    state = {"devices": [device(0), device(1)]}
    exp = Exporter(tmp_path, state)
    try:
        assert get(exp.samples(), "gpu_up") == 1
        exp.write({**state, "lost": True})
        time.sleep(0.5)  # the background sampler meets the lost GPU
        s = exp.samples()
        assert get(s, "gpu_up") == 0
        assert get(s, "exporter_errors_total", kind="gpu_lost") >= 1
        assert get(s, "process_resident_memory_bytes", pid=str(servers["2.21"].pid)) > 0  # CPU metrics flow on
        exp.write(state)  # the driver is back: re-init after the backoff
        deadline = time.monotonic() + 10
        while get(exp.samples(), "gpu_up") != 1:
            assert time.monotonic() < deadline, "no re-init after the GPU came back"
            time.sleep(0.3)
        assert exp.proc.poll() is None
    finally:
        exp.stop()


def test_exposition_passes_promtool(tmp_path, servers):
    import shutil
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: run `make setup` (Debian package prometheus)"
    exp = Exporter(tmp_path, {"devices": [device(0, processes=[[servers["2.9"].pid, GiB]])]})
    try:
        text = exp.text()
    finally:
        exp.stop()
    check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr

"""The local runtime's monitoring: the exporter and Prometheus as processes with pid files.

Prometheus keeps its TSDB in .state/prometheus-data across `make down` (post-hoc
queries); `make clean` removes it. Bringing up more versions rewrites the scrape
config and reloads Prometheus in place.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
import urllib.request
from pathlib import Path

from fileio.atomic import write_atomic
from core import ports
from stack import procs, promconfig
from stack.local import ROOT, StackError, state_dir
from core import settings


def data_dir() -> Path:
    return state_dir().parent / "prometheus-data"


def _wait_http(url: str, pid: int, log_file: Path, what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not procs.alive(pid):
            raise StackError(f"{what} exited: {procs.log_tail(log_file, 2)}")
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise StackError(f"{what} did not answer at {url} within {timeout_s:.0f}s; see {log_file}")


def up_exporter(bind: str = "127.0.0.1", log=print) -> str:
    d = state_dir() / "exporter"
    d.mkdir(parents=True, exist_ok=True)
    pid_file, log_file = d / "exporter.pid", d / "exporter.log"
    port = ports.port(ports.EXPORTER)
    url = f"http://127.0.0.1:{port}/metrics"
    if procs.alive(procs.read_pid(pid_file), "exporter"):
        return url
    if procs.port_in_use(port, bind):
        raise StackError(f"port {port} (exporter) is in use by another process; stop it or set TFSB_PORT_OFFSET")
    # TFSB_NVML_MODULE swaps NVML at the hardware boundary (the tests' fake GPUs); TFSB_PYTHONPATH
    # tells where such a module lives.
    nvml = settings.nvml_module()
    path = os.pathsep.join(p for p in (str(ROOT), settings.extra_pythonpath()) if p)
    pid = procs.start([sys.executable, "-m", "exporter", "--port", str(port), "--bind", bind,
                       "--state-dir", str(state_dir()), "--nvml-module", nvml], pid_file, log_file,
                      env=dict(os.environ, PYTHONPATH=path), cwd=ROOT)
    _wait_http(url, pid, log_file, "the exporter")
    log(f"exporter: {url} (pid {pid})")
    return url


def running_versions(registry) -> list:
    return [v for v in registry.versions.values()
            if procs.alive(procs.read_pid(state_dir() / f"tf{v.name}" / "modelserver.pid"), "modelserver")]


def up_prometheus(registry, bind: str = "127.0.0.1", sla_p99_ms: float | None = None, log=print,
                  versions: list | None = None) -> str:
    """versions: the model servers to scrape (default: the local runtime's running ones); the docker
    runtime names its containers' versions, which publish the same loopback ports."""
    binary = shutil.which("prometheus")
    if not binary:
        raise StackError("the prometheus binary is missing: `make setup` installs Debian's prometheus package "
                         "(elsewhere: https://prometheus.io/download/, put `prometheus` on PATH)")
    d = state_dir() / "prometheus"
    d.mkdir(parents=True, exist_ok=True)
    sla_file = None
    if sla_p99_ms:
        sla_file = d / "sla.rules.yml"
        write_atomic(sla_file, promconfig.sla_rules_text(sla_p99_ms))
    (d / "targets").mkdir(exist_ok=True)  # load generators register here while they run (file_sd)
    cfg = d / "prometheus.yml"
    write_atomic(cfg, promconfig.render(promconfig.generate(
        running_versions(registry) if versions is None else versions, "local",
                                                                  str(sla_file) if sla_file else None)))
    pid_file, log_file = d / "prometheus.pid", d / "prometheus.log"
    port = ports.port(ports.PROMETHEUS)
    url = f"http://127.0.0.1:{port}"
    pid = procs.read_pid(pid_file)
    if procs.alive(pid, "prometheus"):
        req = urllib.request.Request(f"{url}/-/reload", method="POST")
        try:
            urllib.request.urlopen(req, timeout=5).close()
        except OSError as e:
            raise StackError(f"Prometheus did not reload its config: {e}") from None
        return url
    if procs.port_in_use(port, bind):
        raise StackError(f"port {port} (Prometheus) is in use by another process; stop it or set TFSB_PORT_OFFSET")
    pid = procs.start([binary, f"--config.file={cfg}", f"--storage.tsdb.path={data_dir()}",
                       f"--web.listen-address={bind}:{port}", "--web.enable-lifecycle",
                       "--storage.tsdb.retention.time=30d"], pid_file, log_file, cwd=ROOT)
    _wait_http(f"{url}/-/ready", pid, log_file, "Prometheus")
    log(f"Prometheus: {url} (pid {pid}, data {data_dir()})")
    return url

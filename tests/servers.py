"""Start real model servers for tests: the per-version venv, a free loopback port, a wait."""
from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from models.prepare import ROOT, ensure_example_model
from core.registry import load_registry
from core.venvs import ensure_venv, venv_python

CONFIGS = ROOT / "monitoring_configs"
TEST_VERSIONS = ("2.9", load_registry().newest.name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class Server:
    version: str
    rest: int
    grpc: int
    proc: subprocess.Popen
    log: Path
    base_path: Path
    args: tuple = ()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.rest}{path}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def version_python(version: str) -> str:
    reg = load_registry()
    return venv_python(ensure_venv(reg.get(version), reg, log=lambda *_: None))


def example_model(version: str, extra_layers: int = 0) -> Path:
    reg = load_registry()
    return ensure_example_model(reg.get(version), reg, extra_layers=extra_layers, log=lambda *_: None)


def run_modelserver(version: str, args: list, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run the server CLI to completion (for bad-flag and bad-config cases)."""
    return subprocess.run([version_python(version), "-m", "modelserver", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def start_modelserver(version: str, tmp: Path, base_path: Path | None = None, batching: Path | None = None,
                      extra: list = (), model_name: str = "my_model", wait: bool = True, config: bool = False) -> Server:
    """config: models come from the --model_config_file in extra; model_name is one of them to wait for."""
    base_path = base_path or (None if config else example_model(version))
    rest, grpc = free_port(), free_port()
    model = [] if config else [f"--model_name={model_name}", f"--model_base_path={base_path}"]
    cmd = [version_python(version), "-m", "modelserver", f"--port={grpc}", f"--rest_api_port={rest}", *model,
           f"--monitoring_config_file={CONFIGS / 'monitoring.config'}", *extra]
    if batching:
        cmd += ["--enable_batching", f"--batching_parameters_file={batching}"]
    log = tmp / f"modelserver-{version}-{rest}.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    server = Server(version, rest, grpc, proc, log, base_path, tuple(cmd))
    if wait:
        wait_available(server, model_name)
    return server


def wait_available(server: Server, model_name: str = "my_model", timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"model server exited {server.proc.returncode}: {server.log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(server.url(f"/v1/models/{model_name}"), timeout=1) as r:
                if b"AVAILABLE" in r.read():
                    return
        except OSError:
            pass
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"model server {server.version} not AVAILABLE in {timeout}s: {server.log.read_text()[-2000:]}")

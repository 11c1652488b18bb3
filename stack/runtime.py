"""Which runtime `make up` uses: docker when an engine answers, else local."""
from __future__ import annotations

import shutil
import subprocess


def docker_available() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pick_runtime(requested: str) -> str:
    if requested == "local":
        return "local"
    if requested == "docker":
        if not docker_available():
            raise RuntimeError("RUNTIME=docker but no docker engine answers (`docker info`); start dockerd "
                               "or use RUNTIME=local")
        return "docker"
    return "docker" if docker_available() else "local"

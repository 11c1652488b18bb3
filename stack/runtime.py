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
    if requested == "docker" or docker_available():
        # The compose runtime is built in its own step; until then say so plainly.
        raise RuntimeError("the docker runtime is not available yet in this build; use RUNTIME=local")
    return "local"

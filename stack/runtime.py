"""Which runtime `make up` uses: docker when an engine answers, else local."""
from __future__ import annotations

from core.errors import UsageError



def docker_client(timeout: float = 10):
    """The docker SDK's client of the local engine, or None when no engine answers."""
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        client.ping()
        return client
    except Exception:  # noqa: BLE001 - no SDK, no socket, no engine: all mean "no docker here"
        return None


def docker_available() -> bool:
    return docker_client() is not None


def pick_runtime(requested: str) -> str:
    if requested == "local":
        return "local"
    if requested == "docker":
        if not docker_available():
            raise UsageError("RUNTIME=docker but no docker engine answers (`docker info`); start dockerd "
                               "or use RUNTIME=local")
        return "docker"
    return "docker" if docker_available() else "local"

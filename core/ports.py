"""Where each part of the stack listens. TFSB_PORT_OFFSET shifts every port (tests use it to run
a whole stack beside a user's own). Every port anything binds or scrapes is computed here, and
checked here: after the offset it must be an unprivileged port, 1024..65535."""
from __future__ import annotations

from core.errors import UsageError
from core import settings

PROMETHEUS, EXPORTER, LOADGEN, GRAFANA = 9090, 9400, 9464, 3000
TFSERVING_GRPC, TFSERVING_REST = 8500, 8501  # inside a container or pod: TF Serving's own defaults
LOADGEN_WORKERS = 4  # loadgen --workers N serves /metrics on LOADGEN .. LOADGEN+N-1
LOW, HIGH = 1024, 65535


def offset() -> int:
    return settings.port_offset()


def _checked(base: int, what: str) -> int:
    p = base + offset()
    if not LOW <= p <= HIGH:
        raise UsageError(f"TFSB_PORT_OFFSET={offset()} puts {what} on port {p}, outside {LOW}..{HIGH}; "
                         f"choose an offset that keeps every port in range")
    return p


def port(base: int, what: str = "") -> int:
    return _checked(base, what or f"port {base}")


def rest(version) -> int:
    return _checked(version.ports.rest, f"REST of TF Serving {version.name}")


def grpc(version) -> int:
    return _checked(version.ports.grpc, f"gRPC of TF Serving {version.name}")


def host_variable(base: int) -> str:
    """The compose variable that holds the host port of `base` (docker-compose.yml's published ports)."""
    return f"TFSB_HOST_PORT_{base}"


def compose_env(versions) -> dict:
    """Every published port of docker-compose.yml after the offset, as compose reads them."""
    bases = [PROMETHEUS, EXPORTER, GRAFANA, LOADGEN] + [b for v in versions for b in (v.ports.grpc, v.ports.rest)]
    return {host_variable(b): str(port(b)) for b in bases}


def check_all(versions) -> None:
    """Every port of the stack in range, before anything is started or written."""
    for v in versions:
        rest(v), grpc(v)
    for base in (PROMETHEUS, EXPORTER, GRAFANA, *(LOADGEN + i for i in range(LOADGEN_WORKERS))):
        port(base)

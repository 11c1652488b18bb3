"""Where each part of the stack listens. TFSB_PORT_OFFSET shifts every port (tests use it
to run a whole stack beside a user's own)."""
from __future__ import annotations

import os

PROMETHEUS, EXPORTER, LOADGEN, GRAFANA = 9090, 9400, 9464, 3000
LOADGEN_WORKERS = 4  # loadgen --workers N serves /metrics on LOADGEN .. LOADGEN+N-1


def offset() -> int:
    try:
        return int(os.environ.get("TFSB_PORT_OFFSET", "0"))
    except ValueError:
        raise ValueError(f"TFSB_PORT_OFFSET must be an integer, got {os.environ['TFSB_PORT_OFFSET']!r}") from None


def port(base: int) -> int:
    return base + offset()


def rest(version) -> int:
    return version.ports.rest + offset()


def grpc(version) -> int:
    return version.ports.grpc + offset()

"""The load generator's errors, each with the README's exit code."""
from __future__ import annotations

from core.errors import BenchError


class RunError(BenchError, RuntimeError):
    """Something the user must fix before a run can start (exit 2)."""
    exit_code = 2


class ServerUnreachable(RunError):
    """No server answered before the run: the result is invalid (exit 3), not a usage error."""
    exit_code = 3


class ServerRefused(RunError):
    """A server answered, but refused the requests (no success, or errors above the budget): exit 3."""
    exit_code = 3

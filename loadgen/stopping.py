"""One cancellation path for every long command (loadgen run and search, compare, calibrate,
scenarios): the first SIGINT or SIGTERM asks everything to stop, a second exits at once.

Before this, each asyncio.run() installed its own handler for its own window: a signal cancelled
that window only, the cut window was kept as a valid measurement, and the command went on; between
windows the default handlers applied, so SIGTERM killed the process outright. Now the handlers are
process-wide (installed once by the command's main), a running measurement registers how to cancel
itself, and whoever measured checks `requested()` before keeping a result. The exit status of an
interrupted command is 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM), as a shell's.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

SIGNALS = (signal.SIGINT, signal.SIGTERM)
_state = {"signal": None}
_cancels: dict = {}          # token -> callable that stops the measurement in flight
_lock = threading.Lock()


class Interrupted(Exception):
    """Raised where a command notices the stop it was asked for; carries the exit status."""

    def __init__(self, what: str = ""):
        name = requested() or "SIGINT"
        super().__init__(f"interrupted by {name}" + (f": {what}" if what else ""))
        self.signal, self.exit_code = name, 128 + signal.Signals[name].value


def requested() -> str | None:
    """The name of the signal that asked to stop ("SIGINT"), or None."""
    return _state["signal"]


def _handler(signum, _frame) -> None:
    if _state["signal"] is not None:  # the second signal: no more waiting for a clean stop
        sys.stderr.write(f"\n{signal.Signals(signum).name} again: exiting now\n")
        sys.stderr.flush()
        os._exit(128 + signum)
    _state["signal"] = signal.Signals(signum).name
    sys.stderr.write(f"\n{_state['signal']}: stopping (the window in flight is kept as interrupted); "
                     "send it again to exit at once\n")
    sys.stderr.flush()
    with _lock:
        cancels = list(_cancels.values())
    for cancel in cancels:
        cancel()


def install() -> None:
    """The process-wide handlers; from the main thread, once, at the start of a command."""
    for sig in SIGNALS:
        signal.signal(sig, _handler)


def on_stop(token, cancel) -> None:
    """Call cancel() on the first signal (at once if one came already); forget(token) when done.
    cancel must be safe from a signal handler (e.g. loop.call_soon_threadsafe(task.cancel))."""
    with _lock:
        _cancels[token] = cancel
    if _state["signal"] is not None:
        cancel()


def forget(token) -> None:
    with _lock:
        _cancels.pop(token, None)


def check(what: str = "") -> None:
    """Raise Interrupted if a stop was asked for."""
    if _state["signal"] is not None:
        raise Interrupted(what)

"""The suite never touches the user's stack: `make test` right after `make demo` (whose stack stays up on
the default ports, its state in .state/, its runs in results/) must pass and leave all of it as it was.
conftest.py gives every test its own state, results, baselines and port offset; this proves it holds for
the commands that bind ports and write state: with the default ports taken, a stack goes up, a load runs
against it, it goes down, and the checkout's .state/ and results/ are unchanged, byte for byte."""
import errno
import hashlib
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from core import ports
from core.registry import load_registry

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def test_the_suite_has_its_own_state_results_and_ports():
    for var in ("TFSB_STATE", "TFSB_RESULTS", "TFSB_BASELINES"):
        assert not Path(os.environ[var]).resolve().is_relative_to(ROOT), (var, os.environ[var])
    assert ports.offset() != 0
    assert ports.port(ports.PROMETHEUS) != ports.PROMETHEUS


def _tree(root: Path) -> dict:
    """Every file under root with its content hash (the user's state as it is now). What a running stack itself
    keeps writing, its TSDB and its logs, counts by name only: a test writing there would have to start a
    process in that state directory, which its pid files (hashed) and targets (hashed) would show."""
    out = {}
    for p in sorted(root.rglob("*")) if root.exists() else []:
        rel = str(p.relative_to(root))
        if not p.is_file() or p.is_symlink() or rel.startswith("prometheus-data"):
            continue
        try:
            out[rel] = "log" if p.suffix == ".log" else hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError:  # a file the user's own stack rotates away meanwhile
            continue
    return out


def _hold(port: int) -> socket.socket | None:
    """Listen on a default port as the user's stack would; None where something already does."""
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError as e:
        s.close()
        assert e.errno == errno.EADDRINUSE, e
        return None
    s.listen()
    return s


def _run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_stack_up_load_and_down_leave_a_running_stack_and_its_state_alone():
    v = load_registry().newest
    defaults = [ports.PROMETHEUS, ports.EXPORTER, ports.LOADGEN, v.ports.rest, v.ports.grpc]
    user = {d: _tree(ROOT / d) for d in (".state", "results", "baselines")}
    held = [s for s in map(_hold, defaults) if s]
    try:
        up = _run("stack", "up", "--versions", v.name, "--runtime", "local")
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
        assert f"REST http://127.0.0.1:{ports.rest(v)}/" in up.stdout
        load = _run("loadgen", "run", "--versions", v.name, "--rate", "50", "--duration", "2s", "--summary-json", "-")
        assert load.returncode == 0, load.stdout[-2000:] + load.stderr[-2000:]
        assert '"completed"' in load.stdout
    finally:
        down = _run("stack", "down")
        for s in held:
            s.close()
    assert down.returncode == 0, down.stderr
    assert {d: _tree(ROOT / d) for d in user} == user, "the suite changed the user's .state, results or baselines"
    targets = Path(os.environ["TFSB_STATE"]) / "local"
    assert targets.exists(), "the stack of this test wrote nowhere: the isolation test proved nothing"

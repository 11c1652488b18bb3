"""A full disk under the results directory: a clear one-line error before the run starts
(no request sent, no server started), not a traceback after it."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_serving import FakeServing

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def full_disk(tmp_path):
    """A 16 KiB tmpfs, filled up. Mounting needs root (CI runs as root)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root; CI runs this as root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)], check=True)
    try:
        with open(mnt / "filler", "wb") as f:
            try:
                f.write(b"\0" * 65536)
            except OSError:
                pass  # ENOSPC: full, as intended
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def run(args, env=None):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), **(env or {})))


def test_loadgen_refuses_a_full_results_disk_before_sending(full_disk):
    with FakeServing() as srv:
        proc = run(["loadgen", "run", "--target", f"rest://127.0.0.1:{srv.port}", "--duration", "1s",
                    "--out", str(full_disk / "loadgen.json")])
        assert srv.requests == 0
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "No space left on device" in proc.stderr
    assert not (full_disk / "loadgen.json").exists()


def test_compare_refuses_a_full_results_disk_before_starting_anything(full_disk, tmp_path):
    state = tmp_path / "state"
    proc = run(["analysis", "compare", "--versions", "2.9", "--profile", "quick", "--runtime", "local"],
               env={"TFSB_RESULTS": str(full_disk), "TFSB_STATE": str(state), "TFSB_PORT_OFFSET": "13000"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "cannot write results" in proc.stderr and "No space left on device" in proc.stderr
    assert not state.exists()  # no server was started

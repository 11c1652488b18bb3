"""Every read from another server is bounded in bytes and in wall time (fileio/http.py): a page announcing 1 GiB
is refused before it is read, a page that never ends is cut at the byte bound, an answer trickled a byte at a
time is cut at the deadline; doctor, a compare with TARGETS and the load generator's metadata fetch each end
in one line naming the server and URL. The probe that found it: doctor at 5.4 GB RSS after 92 s, hung for ever
on a trickle; a compare on a trickling metrics page ran on for 8.5 minutes after its SIGTERM."""
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile import HostileServer

from fileio import http
from loadgen.payload import Unreachable, fetch_signatures
from loadgen.scenario import Target

ROOT = Path(__file__).resolve().parents[2]
MODES = ("announced-1GiB", "endless", "trickle", "garbage", "not-utf8")


@pytest.fixture(scope="module")
def hostile():
    servers = {m: HostileServer(m) for m in MODES}
    yield servers
    for s in servers.values():
        s.close()


@pytest.mark.parametrize("mode,error,within_s", [
    ("announced-1GiB", http.TooLarge, 1.0),   # refused on its Content-Length, nothing read
    ("endless", http.TooLarge, 3.0),          # cut after max_bytes
    ("trickle", http.TooSlow, 2.0 + 1.0),     # cut at the deadline, not one read timeout per byte
])
def test_a_read_is_bounded_in_bytes_and_time(hostile, mode, error, within_s):
    t0 = time.monotonic()
    with pytest.raises(error) as e:
        http.get(hostile[mode].url(), timeout_s=2.0, max_bytes=1 << 20)
    assert time.monotonic() - t0 < within_s
    assert hostile[mode].url() in str(e.value)


def test_doctor_names_each_bad_server_and_ends(hostile, tmp_path):
    targets = " ".join(f"{m.replace('-', '_')}=rest://127.0.0.1:{s.port}" for m, s in hostile.items())
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "stack", "doctor", "--targets", targets], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    took = time.monotonic() - t0
    assert out.returncode == 3, out.stdout + out.stderr  # servers that do not answer whole: unreachable
    assert "Traceback" not in out.stderr and took < 30, (took, out.stderr[-1500:])
    lines = {ln.split(":", 1)[0]: ln for ln in out.stdout.splitlines()}
    assert "announced 1,073,741,824 bytes" in lines["announced_1GiB"], out.stdout
    assert "more than the" in lines["endless"] and "did not answer whole within 5 s" in lines["trickle"], out.stdout
    for name in ("garbage", "not_utf8"):
        assert "is not Prometheus' text format" in lines[name] and hostile[name.replace("_", "-")].url() in lines[name]


def test_a_compare_on_a_trickling_target_ends_with_exit_3(hostile, tmp_path):
    s = hostile["trickle"]
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "analysis", "compare", "--targets", f"x=rest://127.0.0.1:{s.port}",
                          "--profile", "quick"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT), TFSB_RESULTS=str(tmp_path / "results"),
                                  PROMETHEUS=s.url("")))
    assert out.returncode == 3 and time.monotonic() - t0 < 40, out.stdout[-1500:] + out.stderr[-1500:]
    assert "Traceback" not in out.stderr and s.url("") in out.stdout + out.stderr


def test_the_load_generators_metadata_fetch_is_bounded(hostile):
    t = Target(version="x", host="127.0.0.1", port=hostile["endless"].port, protocol="rest", model="m")
    t0 = time.monotonic()
    with pytest.raises(Unreachable, match="more than the"):
        fetch_signatures(t, timeout=5)
    assert time.monotonic() - t0 < 10

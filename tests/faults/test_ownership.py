"""Every process we stop is ours, two `up`s never interleave, and a model version that fails to
load (copied non-atomically) is retried as TF Serving retries it."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from servers import example_model, start_modelserver

from stack import procs

ROOT = Path(__file__).resolve().parents[2]


def stack(env, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "stack", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_down_never_signals_a_pid_that_is_not_the_process_it_started(tmp_path):
    """A stale pid file whose pid now belongs to an unrelated process (after a crash and pid reuse)."""
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        pid_file = tmp_path / "state" / "local" / "tf2.9" / "modelserver.pid"
        pid_file.parent.mkdir(parents=True)
        pid_file.write_text(f"{stranger.pid} {procs.start_time(stranger.pid) - 1}\n")  # same pid, other start
        env = dict(os.environ, PYTHONPATH=str(ROOT), TFSB_STATE=str(tmp_path / "state"))
        down = stack(env, "down")
        assert down.returncode == 0, down.stderr
        assert "not the one started here" in down.stdout and not pid_file.exists()
        assert stranger.poll() is None  # still running: never signalled
    finally:
        stranger.kill()
        stranger.wait()


def test_pid_files_record_the_start_time_and_recognise_their_process(tmp_path):
    pid = procs.start(["sleep", "30"], tmp_path / "x.pid", tmp_path / "x.log")
    try:
        assert procs.read_pid(tmp_path / "x.pid") == pid and not procs.stale(tmp_path / "x.pid")
        assert procs.stop(tmp_path / "x.pid", log=lambda *_: None)
        assert not procs.alive(pid)
    finally:
        subprocess.run(["kill", "-9", str(pid)], capture_output=True)


def test_two_ups_or_downs_at_once_are_serialised_by_the_state_lock(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TFSB_STATE=str(tmp_path / "state"))
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, %r)\nfrom pathlib import Path\nfrom stack import procs\n"
        "with procs.state_lock(Path(%r), 'test'):\n    print('held', flush=True)\n    time.sleep(3)\n")
        % (str(ROOT), str(tmp_path / "state" / "local"))], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    t0 = time.monotonic()
    down = stack(env, "down")
    waited = time.monotonic() - t0
    holder.wait(10)
    assert down.returncode == 0 and waited >= 2.0, (waited, down.stderr)  # it waited for the other to finish


@pytest.mark.integration
def test_a_version_copied_non_atomically_is_retried_until_it_loads(tmp_path):
    base = tmp_path / "model"
    shutil.copytree(example_model("2.21") / "1", base / "1")
    s = start_modelserver("2.21", tmp_path, base_path=base,
                          extra=["--file_system_poll_wait_seconds=1", "--load_retry_interval_micros=1000000",
                                 "--max_num_load_retries=10"])
    try:
        (base / "2").mkdir()
        shutil.copy(base / "1" / "saved_model.pb", base / "2" / "saved_model.pb")  # variables/ not there yet
        deadline = time.monotonic() + 30
        while "failed to load my_model version 2 (attempt" not in s.log.read_text():
            assert time.monotonic() < deadline, s.log.read_text()[-2000:]
            time.sleep(0.3)
        shutil.copytree(base / "1" / "variables", base / "2" / "variables")
        deadline = time.monotonic() + 30
        while True:
            states = {v["version"]: v["state"] for v in
                      requests.get(s.url("/v1/models/my_model"), timeout=5).json()["model_version_status"]}
            if states.get("2") == "AVAILABLE":
                break
            assert time.monotonic() < deadline, (states, s.log.read_text()[-2000:])
            time.sleep(0.3)
        assert "Traceback" not in s.log.read_text()
    finally:
        s.stop()


@pytest.mark.integration
def test_a_non_numeric_version_directory_is_ignored_quietly(tmp_path):
    base = tmp_path / "model"
    shutil.copytree(example_model("2.21") / "1", base / "1")
    (base / "²").mkdir()  # str.isdigit() says yes, int() says no
    (base / "tmp-copy").mkdir()
    s = start_modelserver("2.21", tmp_path, base_path=base, extra=["--file_system_poll_wait_seconds=1"])
    try:
        time.sleep(2.5)  # two polls
        shutil.copytree(base / "1", base / "0002")
        deadline = time.monotonic() + 30
        while True:
            got = requests.get(s.url("/v1/models/my_model"), timeout=5).json()["model_version_status"]
            if any(v["version"] == "2" and v["state"] == "AVAILABLE" for v in got):
                break
            assert time.monotonic() < deadline, got
            time.sleep(0.3)
        assert "Traceback" not in s.log.read_text() and "polling model base paths failed" not in s.log.read_text()
    finally:
        s.stop()


def test_a_second_measurement_in_one_clone_is_refused_naming_the_first(tmp_path):
    """Two compares on one state directory: the second cold-started the first's servers, the first failed and the
    second finished exit 0 with a ceiling taken under the first's load. The second is refused at once (exit 2,
    nothing started); the lock is the kernel's, so a killed first leaves none behind."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TFSB_STATE=str(tmp_path / "state"), TFSB_PORT_OFFSET="14500",
               TFSB_RESULTS=str(tmp_path / "results"))
    cmd = [sys.executable, "-m", "analysis", "compare", "--versions", "2.9", "--profile", "quick", "--runtime", "local"]
    first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        lock = tmp_path / "state" / ".measuring"
        deadline = time.monotonic() + 60
        while not (lock.exists() and f"pid {first.pid}" in lock.read_text()):
            assert first.poll() is None and time.monotonic() < deadline, first.stdout.read().decode()[-1500:]
            time.sleep(0.1)
        for second in (cmd, [sys.executable, "-m", "analysis", "scenario", "batching", "--versions", "2.9"]):
            out = subprocess.run(second, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
            assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-1500:]
            assert f"`analysis compare --versions 2.9 --profile quick --runtime local` (pid {first.pid}" in out.stderr
            assert "is measuring on this clone's servers" in out.stderr and len(out.stderr.splitlines()) == 1
    finally:
        os.killpg(first.pid, 9)
        first.wait(30)
        stack(env, "down")
    again = subprocess.run([sys.executable, "-c", "from stack import procs; from pathlib import Path; import sys\n"
                            f"with procs.measurement_lock(Path({str(tmp_path / 'state')!r}), 'x'): print('held')"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
    assert again.stdout.strip() == "held", again.stderr  # the killed compare's lock went with it

"""Scenario files and flags: every mistake is one line and exit 2, before any request."""
import pytest
from fake_serving import FakeServing
from tests.test_loadgen.helpers import loadgen_summary, run_loadgen, steady

BAD = [
    ("wrong type", "targets: [rest://127.0.0.1:1]\nload: {mode: closed, concurrency: lots}\n", "load.concurrency"),
    ("negative rate", "targets: [rest://127.0.0.1:1]\nload: {mode: poisson, rate: -5}\n", "load.rate"),
    ("zero duration", "targets: [rest://127.0.0.1:1]\nload: {duration: 0s}\n", "load.duration must be > 0"),
    ("bad duration", "targets: [rest://127.0.0.1:1]\nload: {duration: forever}\n", "load.duration"),
    ("unknown mode", "targets: [rest://127.0.0.1:1]\nload: {mode: burst}\n", "load.mode"),
    ("unknown field", "targets: [rest://127.0.0.1:1]\nload: {concurency: 3}\n", "concurency"),
    ("unknown top field", "targts: []\n", "targts"),
    ("no targets", "load: {concurrency: 2}\n", "no target"),
    ("bad target", "targets: [http://x]\n", "expected [VERSION=]rest|grpc"),
    ("target without address", "targets: [{protocol: rest}]\n", "address"),
    ("bad steps", "targets: [rest://127.0.0.1:1]\nload: {mode: poisson, steps: [50, fast]}\n", "load.steps[1]"),
    ("bool as number", "targets: [rest://127.0.0.1:1]\nload: {concurrency: true}\n", "load.concurrency"),
    ("not yaml", "targets: [unclosed\n", "not valid YAML"),
    ("not a mapping", "- 1\n- 2\n", "mapping"),
    ("negative threshold", "targets: [rest://127.0.0.1:1]\nthresholds: {max_p99_ms: -1}\n", "max_p99_ms"),
    # the hardening issue's cases: every user-controlled size bounded, every path name checked
    ("alias bomb", "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                   "name: *b\ntargets: [rest://127.0.0.1:1]\n", "aliases (*name) are not allowed"),
    ("rate beyond one process", "targets: [rest://127.0.0.1:1]\nload: {rate: 1.0e+12}\n", "at most 1,000,000"),
    ("concurrency beyond one process", "targets: [rest://127.0.0.1:1]\nload: {concurrency: 100000}\n",
     "at most 10000"),
    ("run id escaping results", "targets: [rest://127.0.0.1:1]\nrun_id: ../..\n", "run_id '../..'"),
    ("unquoted version", "targets: [{version: 2.10, protocol: rest, address: '127.0.0.1:1'}]\n",
     "version 2.1 is a number; write it in quotes"),
    # numbers in configs: YAML's .inf and .nan are floats, and nan passes every `x <= 0` check
    ("infinite duration", "targets: [rest://127.0.0.1:1]\nload: {duration: .inf}\n", "load.duration: must be a finite duration"),
    ("nan duration", "targets: [rest://127.0.0.1:1]\nload: {duration: .nan}\n", "load.duration: must be a finite duration"),
    ("nan timeout", "targets: [rest://127.0.0.1:1]\nload: {timeout: .nan}\n", "load.timeout: must be a finite duration"),
    ("infinite warmup", "targets: [rest://127.0.0.1:1]\nload: {warmup: .inf}\n", "load.warmup: must be a finite duration"),
    ("nan rate", "targets: [rest://127.0.0.1:1]\nload: {mode: poisson, rate: .nan}\n", "load.rate: must be a finite number"),
    ("nan step", "targets: [rest://127.0.0.1:1]\nload: {mode: poisson, steps: [10, .nan]}\n", "load.steps[1]: must be a finite number"),
    ("nan p99 threshold", "targets: [rest://127.0.0.1:1]\nthresholds: {max_p99_ms: .nan}\n", "thresholds.max_p99_ms: must be a finite"),
    ("infinite linger", "targets: [rest://127.0.0.1:1]\nlinger: .inf\n", "linger: must be a finite duration"),
    ("duration over a day", "targets: [rest://127.0.0.1:1]\nload: {duration: 25h}\n", "load.duration: must be at most 24h"),
]


@pytest.mark.parametrize("case,text,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_scenario_file(tmp_path, case, text, needle):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    proc = run_loadgen(["run", "--scenario", str(f), "--out", str(tmp_path / "out.json")])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("loadgen: error:"), proc.stderr
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr and not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("flags,needle", [
    (["--versions", "3.7"], "unknown version '3.7'"),
    (["--target", "rest://127.0.0.1:1", "--duration=-3s"], "must not be negative"),
    (["--target", "rest://127.0.0.1:1", "--rate", "fast"], "invalid float value"),
    (["--target", "rest://127.0.0.1:1", "--steps", "50 lots"], "--steps"),
    (["--target", "rest://127.0.0.1:1", "--workers", "0"], "workers"),
    (["--target", "rest://127.0.0.1:1", "--rate", "1e9", "--duration", "2s"], "at most 1,000,000 requests/s"),
    (["--target", "rest://127.0.0.1:1", "--rate", "1e12"], "at most 1,000,000 requests/s"),
    (["--target", "rest://127.0.0.1:1", "--run-id", "../x"], "run id '../x'"),
    (["--target", "rest://127.0.0.1:1", "--rate", "nan"], "load.rate: must be a finite number"),
    (["--target", "rest://127.0.0.1:1", "--concurrency", "2", "--timeout", "9" * 400 + "s"], "load.timeout: must be a finite"),
    (["--target", "rest://127.0.0.1:1", "--max-error-ratio", "nan"], "--max-error-ratio: expected a number >= 0"),
])
def test_bad_flags(tmp_path, flags, needle):
    proc = run_loadgen(["run", *flags, "--out", str(tmp_path / "o.json")])
    assert proc.returncode == 2 and needle in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_scenario_file_runs_a_step_ramp_with_one_phase_per_step(tmp_path):
    with FakeServing() as srv:
        f = tmp_path / "ramp.yaml"
        f.write_text(f"name: ramp\ntargets:\n  - {{version: '2.9', protocol: rest, address: '127.0.0.1:{srv.port}'}}\n"
                     "load: {mode: constant, steps: [50, 100, 200], step_duration: 1s, warmup: 0s, min_requests: 10}\n"
                     "metrics_port: 0\n")
        proc, summary = loadgen_summary(tmp_path, ["run", "--scenario", str(f)])
    assert proc.returncode == 0, proc.stderr
    phases = summary["targets"][0]["phases"]
    assert list(phases) == ["step1", "step2", "step3"]
    assert [p["offered_rate"] for p in phases.values()] == [50, 100, 200]
    for p, rate in zip(phases.values(), (50, 100, 200)):
        assert p["scheduled"] == rate  # a constant schedule: exactly rate x 1 s
        assert p["ok"] == p["sent"] == rate
    assert [m[0] for m in summary["phase_marks"]] == ["step1", "step2", "step3"]


def test_unwritable_results_dir_fails_before_the_run(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with FakeServing() as srv:
        proc = run_loadgen(["run", "--target", f"rest://127.0.0.1:{srv.port}", "--duration", "1s",
                            "--out", str(blocker / "sub" / "loadgen.json")])
        assert srv.requests == 0
    assert proc.returncode == 2 and "cannot write results" in proc.stderr


def test_a_rate_without_a_mode_is_an_open_loop_and_metrics_follow_the_port_offset(tmp_path, monkeypatch):
    with FakeServing() as srv:
        f = tmp_path / "rate.yaml"
        f.write_text(f"targets: ['rest://127.0.0.1:{srv.port}']\nload: {{rate: 50, duration: 1s, warmup: 0s, "
                     "min_requests: 10}\n")
        monkeypatch.setenv("TFSB_PORT_OFFSET", "19000")  # restored after the test: the suite's own offset stays
        proc, summary = loadgen_summary(tmp_path, ["run", "--scenario", str(f)])
    assert proc.returncode == 0, proc.stderr
    assert summary["mode"] == "poisson" and 30 <= steady(summary)["sent"] <= 80  # 50/s, not a closed loop
    assert summary["config"]["metrics_port"] == 9464 + 19000


def test_results_go_to_tfsb_results_and_an_early_failure_leaves_no_empty_directory(tmp_path):
    import os
    import subprocess
    import sys

    from tests.test_loadgen.helpers import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT), TFSB_RESULTS=str(tmp_path / "results"))
    with FakeServing() as srv:
        ok = subprocess.run([sys.executable, "-m", "loadgen", "run", "--target", f"rest://127.0.0.1:{srv.port}",
                             "--concurrency", "1", "--duration", "1s", "--warmup", "0", "--min-requests", "1",
                             "--quiet", "--run-id", "good", "--metrics-port", "0"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "results" / "good" / "loadgen.json").exists()
    bad = subprocess.run([sys.executable, "-m", "loadgen", "run", "--target", "rest://127.0.0.1:1", "--quiet",
                          "--run-id", "unreachable", "--metrics-port", "0"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 3 and "cannot reach" in bad.stderr
    assert not (tmp_path / "results" / "unreachable").exists()


def test_open_loop_schedules_stay_small_at_any_rate_and_duration():
    import tracemalloc

    from loadgen.schedule import CHUNK, chunks

    tracemalloc.start()
    n = 0
    for i, c in enumerate(chunks("poisson", 1e6, 3600.0, 1)):  # 3.6 billion arrivals, drawn as consumed
        n += len(c)
        if i == 50:
            break
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert n == 51 * CHUNK and peak < 4 << 20


@pytest.fixture
def tiny_disk(tmp_path):
    """A 256 KiB tmpfs: room for the pre-run probe, filled by the test mid-run (a full results disk)."""
    import subprocess

    d = tmp_path / "tiny"
    d.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(d)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root (CI and this machine run as root); the full-disk case needs it")
    yield d
    subprocess.run(["umount", "-l", str(d)], check=False)


def test_a_full_results_disk_mid_run_prints_the_table_and_one_line_naming_the_path(tiny_disk):
    import os
    import subprocess
    import sys
    import time

    from tests.test_loadgen.helpers import ROOT

    out = tiny_disk / "loadgen.json"
    with FakeServing() as srv:
        proc = subprocess.Popen([sys.executable, "-m", "loadgen", "run", "--target", f"rest://127.0.0.1:{srv.port}",
                                 "--concurrency", "2", "--duration", "8s", "--warmup", "0", "--min-requests", "1",
                                 "--quiet", "--metrics-port", "0", "--out", str(out)], cwd=ROOT,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(2.0)  # past the writability probe: now the disk fills up
        fd = os.open(tiny_disk / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:  # ENOSPC: full
            pass
        finally:
            os.close(fd)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2, stdout + stderr
    assert "Traceback" not in stderr
    errors = [ln for ln in stderr.splitlines() if ln.startswith("loadgen: error:")]
    assert len(errors) == 1 and f"cannot write {out}" in errors[0] and "No space left" in errors[0], stderr
    assert "steady" in stdout and "valid" in stdout  # the table, from the summary kept in memory
    assert not [p.name for p in tiny_disk.iterdir() if ".tmp" in p.name], "a temp file was left behind"

"""Faults in the real local stack (two TF versions, exporter, Prometheus; loopback; bounded):
a model server killed with SIGKILL mid-run, Prometheus killed and restarted mid-compare, a
compare and a load generator killed mid-run. Each: what the user sees, what Prometheus
records, and that nothing finished is lost."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from servers import TEST_VERSIONS

from analysis import promql
from stack.procs import alive
from stack.targets import query

ROOT = Path(__file__).resolve().parents[2]
OFFSET = 12000
PROM = f"http://127.0.0.1:{9090 + OFFSET}"
A, B = TEST_VERSIONS

pytestmark = pytest.mark.integration
# quick's levels, windows and repeats (the faults need whole cells, a run long enough for a Prometheus
# restart), without its max-QPS search and with a short ceiling: none of these tests reads them.
FAULTS_PROFILE = ("concurrency: [4, 16]\nwindow_s: 4\nwarmup_s: 1.5\nsearch_probes: 0\nceiling_windows: 2\n"
                  "ceiling_pinned_windows: 0\nsoak_s: 0\n"
                  "ceiling_window_s: 0.5\noptrace_processes: 0\nrepeat: 2\n")


def python_m(env, *args, timeout=600):
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def wait_until(fn, timeout: float, what: str, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:.0f}s")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    e = dict(os.environ, TFSB_PORT_OFFSET=str(OFFSET), TFSB_STATE=str(tmp / "state"),
             TFSB_RESULTS=str(tmp / "results"), PYTHONPATH=str(ROOT))
    up = python_m(e, "stack", "up", "--versions", f"{A} {B}", "--runtime", "local")
    assert up.returncode == 0, up.stdout + up.stderr
    e["_tmp"] = str(tmp)
    (tmp / "faults.yaml").write_text(FAULTS_PROFILE)
    e["_profile"] = str(tmp / "faults.yaml")
    yield e
    python_m(e, "stack", "down")


def pid_of(env, version: str) -> int:
    return int((Path(env["_tmp"]) / "state" / "local" / f"tf{version}" / "modelserver.pid").read_text().split()[0])


def test_model_server_killed_mid_run(env):
    out = Path(env["_tmp"]) / "kill9.json"
    load = subprocess.Popen([sys.executable, "-m", "loadgen", "run", "--versions", f"{A} {B}", "--concurrency", "2",
                             "--duration", "16s", "--warmup", "1s", "--timeout", "1s", "--quiet",
                             "--metrics-port", str(9464 + OFFSET), "--out", str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(6)
    victim = pid_of(env, A)
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = load.communicate(timeout=120)
    assert "Traceback" not in stderr, stderr
    summary = json.loads(out.read_text())
    by_name = {t["version"]: t for t in summary["targets"]}
    killed, other = by_name[A], by_name[B]
    errors = killed["phases"]["steady"]["errors"]
    assert errors and set(errors) <= {"connection_refused", "connection_reset", "server_disconnected", "timeout"}, \
        errors
    assert killed["valid"] is False and other["valid"] is True
    assert other["phases"]["steady"]["errors"] == {} and other["phases"]["steady"]["ok"] > 50
    # Prometheus: the ModelServerDown alert for exactly that version goes pending, then firing.
    alerts = wait_until(lambda: query(PROM, 'ALERTS{alertname="ModelServerDown"}'), 40, "ModelServerDown")
    assert {a["metric"]["version"] for a in alerts} == {A}
    st = python_m(env, "stack", "status")
    assert st.returncode == 1 and re.search(rf"modelserver {re.escape(A)}\s+DOWN", st.stdout), st.stdout
    again = python_m(env, "stack", "up", "--versions", f"{A} {B}", "--runtime", "local")
    assert again.returncode == 0, again.stdout + again.stderr
    assert pid_of(env, A) != victim and alive(pid_of(env, A))
    wait_until(lambda: python_m(env, "stack", "status").returncode == 0, 30, "status all up after make up")


def _first_cell_started(results: Path) -> bool:
    for f in results.glob("*/compare.json"):
        try:
            return len(json.loads(f.read_text())["cells"]) >= 1
        except (ValueError, KeyError):
            return False
    return False


def test_prometheus_restart_mid_compare_keeps_data_and_the_report_marks_the_gap(env):
    results = Path(env["TFSB_RESULTS"])
    prom_pid_file = Path(env["_tmp"]) / "state" / "local" / "prometheus" / "prometheus.pid"
    killed_at = {}

    def chaos():
        wait_until(lambda: _first_cell_started(results), 240, "first measurement")
        killed_at["before"] = time.time() - 1
        killed_at["pid"] = int(prom_pid_file.read_text().split()[0])
        os.kill(killed_at["pid"], signal.SIGKILL)
        killed_at["t"] = time.time()
        time.sleep(8)
        killed_at["up"] = python_m(env, "stack", "up", "--versions", f"{A} {B}", "--runtime", "local")
    t = threading.Thread(target=chaos)
    t.start()
    run = python_m(env, "analysis", "compare", "--versions", B, "--profile", env["_profile"], "--repeat", "2",
                   "--runtime", "local", timeout=900)
    t.join(60)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert killed_at["up"].returncode == 0, killed_at["up"].stderr
    assert int(prom_pid_file.read_text().split()[0]) != killed_at["pid"]
    # Scraped before the kill, still there after the restart (TSDB on disk, WAL replayed).
    before = promql.instant(f'up{{job="tfserving",version="{B}"}}', killed_at["before"], PROM)
    assert before and before[0]["value"][1] == "1"
    run_id = re.search(r"run id (\S+)", run.stdout).group(1)
    rep = json.loads((results / run_id / "report.json").read_text())
    assert rep["gaps"], "the report found no gap"
    (a, b), = [g for g in rep["gaps"] if g[0] <= killed_at["t"] + 2 and killed_at["t"] <= g[1]]
    assert b - a >= 6
    assert "Gap in the Prometheus data" in (results / run_id / "report.md").read_text()


def test_compare_killed_mid_run_keeps_finished_cells_reports_partial_and_resumes(env):
    results = Path(env["TFSB_RESULTS"]) / "killed"
    e = dict(env, TFSB_RESULTS=str(results))
    cmd = [sys.executable, "-m", "analysis", "compare", "--versions", B, "--profile", env["_profile"], "--repeat", "2",
           "--runtime", "local", "--run", "killed-run"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: _first_cell_started(results), 240, "first measurement")
    proc.kill()
    proc.wait(30)
    run = json.loads((results / "killed-run" / "compare.json").read_text())  # atomic: always whole JSON
    done = len(run["cells"])
    assert run["status"] == "running" and 1 <= done < 4
    rep = python_m(e, "analysis", "report", "--run", "killed-run")
    assert rep.returncode == 0, rep.stderr
    assert f"**Partial run**: {done} of 4 measurements finished" in rep.stdout
    resumed = python_m(e, "analysis", "compare", "--versions", B, "--profile", env["_profile"], "--repeat", "2",
                       "--runtime", "local", "--run", "killed-run", timeout=900)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert f"{done} measurements already done" in resumed.stdout and "Partial run" not in resumed.stdout
    final = json.loads((results / "killed-run" / "compare.json").read_text())
    assert final["status"] == "done" and len(final["cells"]) == 4
    assert all(final["cells"][k] == v for k, v in run["cells"].items())  # finished cells kept as they were


def test_loadgen_killed_mid_run_leaves_a_whole_partial_summary(env):
    out = Path(env["_tmp"]) / "killed-loadgen.json"
    load = subprocess.Popen([sys.executable, "-m", "loadgen", "run", "--versions", B, "--concurrency", "2",
                             "--duration", "60s", "--warmup", "1s", "--quiet", "--metrics-port", "0",
                             "--out", str(out)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_until(lambda: out.exists() and json.loads(out.read_text())["targets"][0]["phases"].get("steady"), 40,
               "a partial summary with steady-state data", every=0.5)
    time.sleep(5.5)  # one more periodic write
    load.kill()
    load.wait(10)
    summary = json.loads(out.read_text())
    assert summary["partial"] is True
    st = summary["targets"][0]["phases"]["steady"]
    assert st["ok"] > 100 and st["errors"] == {} and st["latency_ms"]["p99"] > 0
    assert not list(out.parent.glob(f".{out.name}.tmp*")), "a temporary file was left behind"


@pytest.mark.parametrize("protocol,workers,sig", [("grpc", 1, signal.SIGINT), ("rest", 1, signal.SIGTERM),
                                                   ("rest", 2, signal.SIGTERM)])
def test_a_signal_stops_loadgen_within_a_second_and_the_cut_window_is_invalid(env, protocol, workers, sig):
    """The first SIGINT/SIGTERM stops sending at once (gRPC took 55 s), the summary keeps the cut
    window marked interrupted (it once said "valid over 60.0 s"), and the exit status says so."""
    out = Path(env["_tmp"]) / f"signalled-{protocol}-{workers}.json"
    load = subprocess.Popen([sys.executable, "-m", "loadgen", "run", "--versions", B, "--protocol", protocol,
                             "--concurrency", "2", "--workers", str(workers), "--duration", "60s", "--warmup", "1s",
                             "--quiet", "--metrics-port", "0", "--out", str(out)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(7 if workers == 1 else 12)  # into the steady window (workers: spawn and import first)
    assert load.poll() is None, load.communicate()
    sent_at = time.monotonic()
    load.send_signal(sig)
    stdout, stderr = load.communicate(timeout=30)
    took = time.monotonic() - sent_at
    assert load.returncode == 128 + sig, stdout + stderr
    assert took < 3.0, f"{took:.1f}s from the signal to the exit"
    assert "Traceback" not in stderr and f"interrupted by {sig.name}" in stdout
    summary = json.loads(out.read_text())
    assert summary["interrupted"] == sig.name and summary["valid"] is False
    st = summary["targets"][0]["phases"]["steady"]
    assert st["valid"] is False and f"interrupted by {sig.name}" in st["invalid_reasons"]
    assert st["ok"] > 10 and 1.0 < st["seconds"] < 20.0, st["seconds"]  # the time it ran, not the 60 s asked


def test_a_signalled_compare_saves_an_interrupted_run_without_the_cut_cell_and_reports_it(env):
    results = Path(env["_tmp"]) / "signalled"
    e = dict(env, TFSB_RESULTS=str(results))
    cmd = [sys.executable, "-m", "analysis", "compare", "--versions", B, "--profile", env["_profile"], "--repeat", "2",
           "--runtime", "local", "--run", "sig-run"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: _first_cell_started(results), 240, "first measurement")
    time.sleep(2.0)  # inside the second cell's window
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stdout[-2000:] + stderr[-2000:]
    assert "Traceback" not in stderr and "run sig-run is saved as interrupted" in stderr
    run = json.loads((results / "sig-run" / "compare.json").read_text())
    assert run["status"] == "interrupted" and run["interrupted"]["signal"] == "SIGINT"
    window = run["config"]["profile"]["window_s"]
    assert 1 <= len(run["cells"]) < 4
    for cell in run["cells"].values():  # whole cells only: the cut window was never saved
        assert cell["client"]["seconds"] >= 0.95 * window and cell["server"] is not None, cell["client"]["seconds"]
    rep = python_m(e, "analysis", "report", "--run", "sig-run")
    assert rep.returncode == 0, rep.stderr
    assert f"**Partial run**: {len(run['cells'])} of 4 measurements finished (interrupted by SIGINT)" in rep.stdout
    assert "Missing: `" in rep.stdout

"""The compare and the batching scenario in the docker runtime, with no RUNTIME given (auto picks
docker where an engine answers): containers of the offline images (official entrypoint layout,
healthchecks running every 5 s), cold starts by recreating them, memory per container from its
cgroup, and the client = server reconciliation exact although the healthchecks' status GETs hit
the same servers. One shared engine and cached images (tests/conftest.py)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from servers import TEST_VERSIONS

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
PROFILE = ("concurrency: [4]\nwindow_s: 3\nwarmup_s: 1\nsearch_probes: 0\nceiling_windows: 2\n"
           "ceiling_pinned_windows: 0\nsoak_s: 0\n"
           "ceiling_window_s: 0.5\noptrace_processes: 0\nrepeat: 2\n")  # the op table: test_compare


@pytest.fixture(scope="module")
def denv(offline_images, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("docker-compare")
    (tmp / "p.yaml").write_text(PROFILE)
    e = dict(os.environ, **offline_images["env"], COMPOSE_PROJECT_NAME="tfsbdockertest", TFSB_PORT_OFFSET="12000",
             TFSB_STATE=str(tmp / "state"), TFSB_RESULTS=str(tmp / "results"), PYTHONPATH=str(ROOT),
             PROFILE=str(tmp / "p.yaml"))
    e.pop("RUNTIME")  # auto
    yield e
    subprocess.run([sys.executable, "-m", "stack", "down"], cwd=ROOT, env=e, capture_output=True, timeout=300)


def analysis(env, *args):
    proc = subprocess.run([sys.executable, "-m", "analysis", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _inspect(name: str) -> dict:
    return json.loads(subprocess.run(["docker", "inspect", name], capture_output=True, text=True).stdout)[0]


def test_compare_runs_on_containers_with_exact_reconciliation(denv, offline_images):
    out = analysis(denv, "compare", "--versions", " ".join(TEST_VERSIONS))
    assert "runtime docker" in out.splitlines()[0]
    run_id = re.search(r"run id (\S+)", out).group(1)
    d = Path(denv["TFSB_RESULTS"]) / run_id
    run, rep = json.loads((d / "compare.json").read_text()), json.loads((d / "report.json").read_text())
    assert run["config"]["runtime"] == "docker" and run["status"] == "done"
    for v in TEST_VERSIONS:
        cs = run["cold_start"][v]
        assert 0 < cs["to_available_s"] <= cs["to_first_predict_s"] and cs["container_create_s"] > 0
        assert run["preflight"][v] == []  # every metric the rules, panels and compare read, as they read it
        info = _inspect(f"tfsbdockertest-bench-tfserving-{v.replace('.', '-')}")
        assert info["Config"]["Image"] == offline_images[v] and info["State"]["Health"]["Status"] == "healthy"
        assert info["Config"]["Entrypoint"] == ["/usr/bin/tensorflow_model_server"]
    cells = list(run["cells"].values())
    assert len(cells) == 2 * len(TEST_VERSIONS)
    for c in cells:
        assert c["valid"]
        b = c["breakdown"]
        assert 0 < b["runtime_ms"] < b["server_ms"] < b["client_ms"] and b["precision_ms"] < 0.01
        assert c["container"]["memory_bytes"] > 50 * 2**20
        assert c["container"]["memory_peak_bytes"] >= c["container"]["memory_bytes"]
        assert c["container"]["cpu_cores"] > 0
    # The healthchecks hit every server while it was measured, and none of their GETs was counted.
    assert all(c["client_vs_server"]["exact"] and c["client_vs_server"]["ok"] for c in rep["crosscheck"])
    assert all(c["server_vs_prometheus"]["ok"] for c in rep["crosscheck"])
    from stack import counters
    from core.registry import load_registry
    reg = load_registry()
    for v in TEST_VERSIONS:
        port = reg.get(v).ports.rest + 12000
        assert counters.read(f"http://127.0.0.1:{port}/monitoring/prometheus/metrics")["status_gets"] >= 1
    md = (d / "report.md").read_text()
    assert "## Memory and CPU per container (cgroup)" in md and "the pip build of its TensorFlow release" in md
    assert "the container was created in" in md


def test_calibrate_runs_two_containers_of_one_image(denv, offline_images):
    v = TEST_VERSIONS[-1]
    out = analysis(denv, "calibrate", "--version", v)
    run_id = re.search(r"run id (\S+)", out).group(1)
    rep = json.loads((Path(denv["TFSB_RESULTS"]) / run_id / "report.json").read_text())
    assert rep["config"]["versions"] == [v, f"{v}-b"] and rep["config"]["runtime"] == "docker"
    assert {r["version"] for r in rep["rows"]} == {v, f"{v}-b"}
    assert all(c["client_vs_server"]["exact"] and c["client_vs_server"]["ok"] for c in rep["crosscheck"])
    a, b = (_inspect(f"tfsbdockertest-bench-tfserving-{n.replace('.', '-')}") for n in (v, f"{v}-b"))
    assert a["Config"]["Image"] == b["Config"]["Image"] == offline_images[v]
    assert a["Config"]["Labels"]["tfsb.version"] == v and b["Config"]["Labels"]["tfsb.version"] == f"{v}-b"


def test_batching_scenario_recreates_the_container_per_mode(denv):
    v = TEST_VERSIONS[0]
    out = analysis(denv, "scenario", "batching", "--versions", v, "--repeat", "1")
    assert "runtime docker" in out
    res = json.loads(Path(re.search(r"written: (\S+)scenario\.md", out).group(1) + "scenario.json").read_text())
    assert res["runtime"] == "docker"
    for r in res["rows"]:
        assert r["off"]["valid"] and r["on"]["valid"] and r["off"]["errors"] == r["on"]["errors"] == 0
        assert r["off"]["mean_batch"] is None and r["on"]["mean_batch"] >= 1.0
    flags = _inspect(f"tfsbdockertest-bench-tfserving-{v.replace('.', '-')}")["Config"]["Cmd"]
    assert "--enable_batching=true" in flags  # left as `make up` makes it

"""compare against servers and a Prometheus that something else started (TARGETS, PROMETHEUS): what a
cluster's port-forwards give. Two real model servers and a real Prometheus labelling them, nothing
brought up by the compare itself; the report reconciles against that Prometheus."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prom import Prometheus
from servers import TEST_VERSIONS, start_modelserver

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
NEWEST = TEST_VERSIONS[-1]


@pytest.fixture(scope="module")
def external(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("external")
    servers = [start_modelserver(NEWEST, tmp / n) for n in ("a", "b") if (tmp / n).mkdir() is None]
    names = [NEWEST, "canary"]  # a registry version (its ceiling is measured) and a free label (it is not)
    prom = Prometheus(tmp, {"tfserving": [(f"127.0.0.1:{s.rest}", {"version": n}) for s, n in zip(servers, names)]},
                      metrics_paths={"tfserving": "/monitoring/prometheus/metrics"}).start()
    profile = tmp / "tiny.yaml"
    profile.write_text("concurrency: [4]\nrates: []\nwindow_s: 3\nwarmup_s: 1\nsearch_probes: 0\n"
                       "ceiling_windows: 2\nceiling_pinned_windows: 0\nsoak_s: 0\nceiling_window_s: 0.5\n")
    env = dict(os.environ, TFSB_STATE=str(tmp / "state"), TFSB_RESULTS=str(tmp / "results"), PYTHONPATH=str(ROOT),
               TFSB_PORT_OFFSET="11000")
    targets = " ".join(f"{n}=grpc://127.0.0.1:{s.grpc},rest://127.0.0.1:{s.rest}" for s, n in zip(servers, names))
    out = subprocess.run([sys.executable, "-m", "analysis", "compare", "--targets", targets, "--prometheus",
                          f"http://127.0.0.1:{prom.port}", "--profile", str(profile), "--repeat", "2",
                          "--protocol", "both"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    yield out, tmp, servers, prom
    prom.stop()
    for s in servers:
        s.stop()


def test_compare_drives_servers_it_did_not_start(external):
    out, tmp, servers, prom = external
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run_id = re.search(r"run id (\S+)", out.stdout).group(1)
    data = json.loads((tmp / "results" / run_id / "compare.json").read_text())
    assert data["config"]["runtime"] == "external" and data["config"]["prometheus"] == f"http://127.0.0.1:{prom.port}"
    assert data["config"]["batching"] == [None] and data["cold_start"] == {}
    cells = data["cells"].values()
    assert len(cells) == 2 * 2 * 2  # two servers x two protocols x two repeats, one level
    assert all(c["valid"] and c["client"]["errors"] == {} and c["breakdown"]["runtime_ms"] > 0 for c in cells)
    assert data["ceiling"][NEWEST]["rows_per_s"]["1"] and "not a version" in data["ceiling"]["canary"]["skipped"]
    assert all(s.proc.poll() is None for s in servers)  # neither restarted nor stopped
    assert not list((tmp / "state").rglob("*.pid"))  # and nothing of its own started


def test_report_reconciles_against_their_prometheus(external):
    out, tmp, _, _ = external
    run_id = re.search(r"run id (\S+)", out.stdout).group(1)
    rep = json.loads((tmp / "results" / run_id / "report.json").read_text())
    assert len(rep["crosscheck"]) == 8
    for c in rep["crosscheck"]:
        assert c["client_vs_server"]["ok"], c
        assert c["server_vs_prometheus"]["ok"] and c["server_vs_prometheus"]["prometheus"] is not None, c
    assert rep["gaps"] == []
    md = (tmp / "results" / run_id / "report.md").read_text()
    assert "Servers started elsewhere" in md and "batching deployed" in md
    assert "TF ceiling of canary not measured" in md and "share cores" not in md


def test_targets_syntax():
    from stack.external import parse_targets

    a, b = parse_targets("2.9=grpc://h1:8500 new=rest://[::1]:8601,grpc://[::1]:8600,metrics=http://m:9/x")
    assert (a.name, a.host, a.grpc, a.rest) == ("2.9", "h1", 8500, None)
    assert a.metrics_url == "http://h1:8501/monitoring/prometheus/metrics"  # TF Serving's 8500/8501 pairing
    assert (b.host, b.rest, b.grpc, b.metrics_url) == ("::1", 8601, 8600, "http://m:9/x")

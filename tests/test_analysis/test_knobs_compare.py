"""make compare KNOBS="onednn=0,1": one version, each oneDNN setting a server of its own, interleaved like
versions, its ceiling and op table run with the same setting, and a verdict on oneDNN in the report."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration
# one level, no search: the knob's plumbing and verdicts are checked here, the protocol in test_compare
PROFILE = ("concurrency: [4]\nwindow_s: 3\nwarmup_s: 1\nsearch_probes: 0\nceiling_windows: 4\n"
           "ceiling_pinned_windows: 0\nsoak_s: 0\n"
           "ceiling_window_s: 0.5\noptrace_processes: 2\noptrace_calls: 100\nrepeat: 2\n")


@pytest.fixture(scope="module")
def knob_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("knobs")
    (tmp / "knobs.yaml").write_text(PROFILE)
    env = dict(os.environ, TFSB_PORT_OFFSET="15500", TFSB_STATE=str(tmp / "state"), TFSB_RESULTS=str(tmp / "results"),
               PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "analysis", "compare", "--versions", "2.9", "--knobs", "onednn=0,1",
                          "--profile", str(tmp / "knobs.yaml"), "--runtime", "local"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    try:
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        run_id = re.search(r"run id (\S+)", out.stdout).group(1)
        environs = {}
        for name in ("2.9-onednn0", "2.9-onednn1"):  # what the running servers were started with
            pid = (tmp / "state" / "local" / f"tf{name}" / "modelserver.pid").read_text().split()[0]
            raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            environs[name] = dict(e.decode().split("=", 1) for e in raw if b"=" in e)
        yield tmp / "results" / run_id, environs
    finally:
        subprocess.run([sys.executable, "-m", "stack", "down"], cwd=ROOT, env=env, capture_output=True, timeout=120)


def test_each_setting_is_a_server_started_with_it(knob_run):
    d, environs = knob_run
    assert environs["2.9-onednn0"]["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert environs["2.9-onednn1"]["TF_ENABLE_ONEDNN_OPTS"] == "1"
    run = json.loads((d / "compare.json").read_text())
    assert run["config"]["versions"] == ["2.9-onednn0", "2.9-onednn1"]
    assert run["config"]["servers"]["2.9-onednn1"]["knobs"] == {"onednn": "1"}
    order = [c["version"] for c in sorted(run["cells"].values(), key=lambda c: c["start"])]
    assert order == ["2.9-onednn0", "2.9-onednn1", "2.9-onednn1", "2.9-onednn0"]  # interleaved, flipped per repeat
    assert {run["ceiling"][n]["tensorflow"] for n in order} == {"2.9.3"}  # one venv, one TF, two settings
    assert all(len(run["optrace"][n]["pids"]) == 2 for n in set(order))


def test_the_report_gives_a_verdict_on_onednn(knob_run):
    d, _ = knob_run
    rep = json.loads((d / "report.json").read_text())
    ceiling = next(c for c in rep["ceiling"] if c["version"] == "2.9-onednn1")
    assert ceiling["vs_baseline"]["verdict"] in ("faster", "slower", "no significant difference")
    assert ceiling["vs_baseline"]["p"] is not None
    md = (d / "report.md").read_text()
    first = md.split("## ")[0]
    assert "**2.9-onednn1 vs 2.9-onednn0, 1 row per request" in first
    assert ("**Knobs**: 2.9-onednn0 runs TF 2.9.3 with TF_ENABLE_ONEDNN_OPTS=0; 2.9-onednn1 runs TF 2.9.3 with "
            "TF_ENABLE_ONEDNN_OPTS=1") in first
    assert "In-process at 1 row (no serving path), 2.9-onednn1's TensorFlow (2.9.3)" in first

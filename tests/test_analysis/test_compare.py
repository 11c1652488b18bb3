"""make compare end to end in the local runtime (quick profile, two versions, two repeats), its
report (tables, charts, HTML in a real browser), PromQL post hoc, and the regression gate."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.image
import pytest
from servers import TEST_VERSIONS, example_model

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def analysis(env, *args, timeout=900):
    return subprocess.run([sys.executable, "-m", "analysis", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare")
    e = dict(os.environ, TFSB_PORT_OFFSET="22000", TFSB_STATE=str(tmp / "state"), TFSB_RESULTS=str(tmp / "results"),
             TFSB_BASELINES=str(tmp / "baselines"), PYTHONPATH=str(ROOT))
    yield e
    subprocess.run([sys.executable, "-m", "stack", "down"], cwd=ROOT, env=e, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def run(env):
    out = analysis(env, "compare", "--versions", " ".join(TEST_VERSIONS), "--profile", "quick", "--repeat", "2",
                   "--runtime", "local")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run_id = re.search(r"run id (\S+)", out.stdout).group(1)
    return run_id, Path(env["TFSB_RESULTS"]) / run_id, out.stdout


def test_protocol_interleaves_versions_and_repeats(run):
    _, d, _ = run
    data = json.loads((d / "compare.json").read_text())
    cells = sorted(data["cells"].values(), key=lambda c: c["start"])
    assert len(cells) == 2 * 2 * len(TEST_VERSIONS)  # 2 levels x 2 repeats x versions
    order = [c["version"] for c in cells]
    assert order[:4] == [TEST_VERSIONS[0], TEST_VERSIONS[1]] * 2  # ABAB, not AABB
    assert [c["repeat"] for c in cells] == [0] * 4 + [1] * 4
    assert all(c["valid"] and c["client"]["errors"] == {} for c in cells)
    assert set(data["cold_start"]) == set(TEST_VERSIONS)
    assert all(0 < cs["to_available_s"] <= cs["to_first_predict_s"] for cs in data["cold_start"].values())
    assert data["status"] == "done" and data["environment"]["tensorflow"]


def test_report_tables_stats_and_crosscheck(run):
    _, d, stdout = run
    rep = json.loads((d / "report.json").read_text())
    assert {r["version"] for r in rep["rows"]} == set(TEST_VERSIONS)
    for r in rep["rows"]:
        assert r["repeats"] == 2
        assert r["achieved_qps"]["mean"] > 50 and r["achieved_qps"]["ci_low"] < r["achieved_qps"]["mean"]
        assert r["p99_ms"]["mean"] >= r["p50_ms"]["mean"] > 0
        assert r["server_p99_ms"]["mean"] > 0 and r["rss_mib"]["mean"] > 100 and r["cpu_s_per_1k"]["mean"] > 0
        if r["version"] != rep["baseline_version"]:
            assert r["p99_ms_vs_baseline"]["verdict"] in ("faster", "slower", "no significant difference")
    assert all(c["consistent"] for c in rep["crosscheck"]), rep["crosscheck"]
    assert all(v is not None and v > 0 for v in rep["max_stable_qps"].values())
    md = (d / "report.md").read_text()
    assert "Max stable QPS" in md and "Cold start" in md and "windows consistent" in md
    assert (d / "report.csv").read_text().count("\n") == len(rep["rows"]) + 1
    assert "## Max stable QPS" in stdout


def test_html_report_renders_offline_in_chromium(run, tmp_path):
    _, d, _ = run
    page = (d / "report.html").read_text()
    assert page.count("<svg") == 5  # QPS vs P99, CDF, and three dashboard-query charts
    assert "<script" not in page and "<link" not in page and "src=" not in page  # nothing to fetch: offline
    chromium = shutil.which("chromium")
    assert chromium, "chromium missing: `make setup` installs Debian's chromium"
    shot = tmp_path / "report.png"
    proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,2400",
                           "--enable-logging=stderr", "--v=0", f"--screenshot={shot}", f"file://{d / 'report.html'}"],
                          capture_output=True, text=True, timeout=120)
    assert shot.exists(), proc.stderr[-2000:]
    assert "Uncaught" not in proc.stderr and "CONSOLE" not in proc.stderr.upper().replace("CONSOLE_", "")
    img = matplotlib.image.imread(str(shot))
    non_white = (img[..., :3].mean(axis=2) < 0.9).mean()
    assert non_white > 0.03, f"the page looks blank ({non_white:.3%} non-white)"


def test_post_hoc_promql_over_the_run_window(run, env):
    run_id, _, _ = run
    q = analysis(env, "query", "--run", run_id,
                 "max by (version) (max_over_time(version:tfserving_requests:rate1m[$window]))")
    assert q.returncode == 0, q.stderr
    found = dict(re.findall(r'version="([^"]+)"\} ([0-9.e+]+)', q.stdout))
    assert set(found) == set(TEST_VERSIONS) and all(float(v) > 10 for v in found.values())
    bad = analysis(env, "query", "--run", run_id, "sum(rate(")
    assert bad.returncode == 2 and "error" in bad.stderr and "Traceback" not in bad.stderr


def test_regression_gate_passes_the_same_model_and_fails_a_slower_one(run, env):
    run_id, _, _ = run
    name = "gate-test"
    b = analysis(env, "baseline", "--run", run_id, "--name", name, "--force")
    assert b.returncode == 0, b.stderr
    again = analysis(env, "baseline", "--run", run_id, "--name", name)
    assert again.returncode == 2 and "FORCE=1" in again.stderr
    v = TEST_VERSIONS[0]
    # 50%: windows of 4 s on a shared 2-core box move by tens of percent; the slow model is ~100x slower.
    same = analysis(env, "regress", "--baseline", name, "--version", v, "--tolerance", "0.5")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "PASS" in same.stdout
    slow = example_model(v, extra_layers=16)  # sixteen 2048x2048 layers: many times the work
    worse = analysis(env, "regress", "--baseline", name, "--version", v, "--tolerance", "0.5",
                     "--model", str(slow))
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "REGRESSED" in worse.stdout and "FAIL" in worse.stdout

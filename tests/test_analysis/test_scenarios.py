"""The seeds' scenarios against real model servers (newest TF, local runtime): batching on vs off,
REST vs gRPC, the batching sweep with its Pareto front, and a hot model update under load."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from servers import TEST_VERSIONS

ROOT = Path(__file__).resolve().parents[2]
V = TEST_VERSIONS[-1]
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scenarios")
    e = dict(os.environ, TFSB_PORT_OFFSET="17000", TFSB_STATE=str(tmp / "state"), TFSB_RESULTS=str(tmp / "results"),
             PYTHONPATH=str(ROOT))
    yield e
    subprocess.run([sys.executable, "-m", "stack", "down"], cwd=ROOT, env=e, capture_output=True, timeout=120)


def scenario(env, *args) -> tuple:
    proc = subprocess.run([sys.executable, "-m", "analysis", "scenario", *args, "--versions", V, "--repeat", "1"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    md = Path(re.search(r"written: (\S+scenario\.md)", proc.stdout).group(1))
    return json.loads((md.parent / "scenario.json").read_text()), md.read_text()


@pytest.mark.parametrize("name,a,b", [("batching", "off", "on"), ("protocols", "rest", "grpc")])
def test_side_by_side_scenarios(env, name, a, b):
    res, md = scenario(env, name)
    assert [r["concurrency"] for r in res["rows"]] == [4, 16]  # the quick profile's levels
    for r in res["rows"]:
        for side in (a, b):
            assert r[side]["valid"] and r[side]["errors"] == 0 and r[side]["qps"] > 50 and r[side]["p99_ms"] > 0
        assert r["qps_ratio"] == pytest.approx(r[b]["qps"] / r[a]["qps"])
        assert f"| {V} | {r['concurrency']} | {r[a]['qps']:.1f} | {r[b]['qps']:.1f} | {r['qps_ratio']:.2f}x |" in md


def test_sweep_restarts_per_config_and_finds_the_pareto_front(env):
    res, md = scenario(env, "sweep", "--max-batch", "1 32", "--timeout-us", "1000", "--threads", "1",
                       "--concurrency", "16")
    points = {p["max_batch_size"]: p for p in res["points"]}
    assert set(points) == {1, 32} and all(p["valid"] and p["errors"] == 0 for p in points.values())
    configs = sorted(p.name for p in (Path(env["TFSB_RESULTS"]) / res["run_id"] / "batching").iterdir())
    assert configs == ["b1-t1000-k1.config", "b32-t1000-k1.config"]
    # Each config really ran as written (the server's own batch-size counters, not a speed ratio, which
    # depends on how light the serving path is): batches of exactly 1, then batches of several of the
    # 16 requests in flight.
    assert points[1]["mean_batch"] == 1.0 and points[32]["mean_batch"] > 2, points
    assert f"| {points[1]['qps']:.1f} | {points[1]['p99_ms']:.2f} | 1.0 |" in md
    for p in res["points"]:
        dominated = any(q["qps"] >= p["qps"] and q["p99_ms"] <= p["p99_ms"] and q is not p for q in res["points"])
        assert (p in res["pareto"]) != dominated
    ok = [p for p in res["points"] if p["p99_ms"] <= res["sla_p99_ms"]]
    best = max(ok, key=lambda p: p["qps"])
    assert res["best"] == best and f"Best under the SLA: max_batch_size {best['max_batch_size']}," in md


def test_hot_update_under_load_switches_without_errors(env):
    res, md = scenario(env, "hot-update", "--rate", "80")
    [row] = res["rows"]
    assert row["errors"] == 0
    assert row["switch_s"] is not None and 0 < row["switch_s"] < 10  # poll every 1 s, load and warm up
    assert all(row["p99_ms"][k] > 0 for k in ("before", "during", "after"))
    assert f"| {V} | 80/s | {row['switch_s']:.2f} | 0 |" in md


def test_reload_cycles_give_memory_after_each_cycle_and_a_growth_verdict(env):
    """Issue 35: N reloads under load, per version: each cycle switches without errors, the RSS after it comes from
    the exporter through Prometheus, and RSS over the cycles is fitted (scipy) to a verdict per cycle."""
    from scipy import stats as st

    res, md = scenario(env, "reload", "--rate", "60", "--cycles", "4", "--cycle-s", "5")
    [row] = res["rows"]
    assert row["version"] == V and len(row["cycles"]) == 4 and row["errors"] == 0
    for c in row["cycles"]:
        assert c["switch_s"] is not None and 0 < c["switch_s"] < 5, c  # polled every second
        assert c["errors"] == 0 and c["p99_ms"] > 0 and 50 * 2**20 < c["rss_bytes"] < 8 * 2**30, c
    rss = [row["rss_before_mib"]] + [c["rss_bytes"] / 2**20 for c in row["cycles"]]
    fit = st.linregress(range(5), rss)
    g = row["growth_per_cycle"]
    assert g["slope"] == pytest.approx(fit.slope) and g["ci_low"] < g["slope"] < g["ci_high"] or fit.stderr == 0
    assert g["verdict"] in ("flat", "grows", "shrinks", "undecided")
    assert f"| {V} | 1 | {row['cycles'][0]['switch_s']:,.2f} | 0 |" in md
    assert re.search(rf"\| {re.escape(V)} \| [+-][\d.]+ MiB \[[+-][\d.]+, [+-][\d.]+\] \| {g['verdict']} \| 0 \|", md), md


def test_neighbour_model_loads_reloads_and_unloads_beside_a_loaded_model(env):
    """Issue 35 (serving#1866): model A under load while B joins the server's config, gets a new version and
    leaves; per variant of --num_load_threads (a knob), A's P99 per phase against before, B's step times."""
    from servers import example_model

    b = example_model(V, extra_layers=1)  # another model than A's: its restore is the neighbour's work
    res, md = scenario(env, "neighbour", "--neighbour", str(b), "--rate", "60", "--phase-s", "4",
                       "--knobs", "load_threads=0,1")
    assert [r["version"] for r in res["rows"]] == [f"{V}-load0", f"{V}-load1"]
    for r in res["rows"]:
        assert r["error"] == "", r["error"]
        ph = r["phases"]
        assert list(ph) == ["before", "load", "reload", "unload"]
        assert all(p["errors"] == 0 and p["ok"] >= 160 and p["p99_ms"] > 0 for p in ph.values()), ph
        assert all(0 < ph[n]["b_s"] < 4 for n in ("load", "reload", "unload")), ph  # each step done in its phase
        assert ph["load"]["p99_ratio"] == pytest.approx(ph["load"]["p99_ms"] / ph["before"]["p99_ms"])
        assert f"| {r['version']} | load | {ph['load']['p99_ms']:,.2f} | {ph['load']['p99_ratio']:.2f}x |" in md
    pid = (Path(env["TFSB_STATE"]) / "local" / f"tf{V}-load1" / "modelserver.pid").read_text().split()[0]
    assert b"--num_load_threads=1" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")

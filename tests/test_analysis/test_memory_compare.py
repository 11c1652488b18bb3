"""Issue 35's memory verdicts end to end on the local runtime: a model whose memory really grows (models/growing.py)
called growing beside the example model called flat in one run, and the allocator as a knob."""
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
# one level, the shortest ceiling, no search or op table: the soak (12 s, 6 RSS samples) is what is checked
PROFILE = ("concurrency: [8]\nwindow_s: 2\nwarmup_s: 1\nsearch_probes: 0\nceiling_windows: 2\nceiling_window_s: 0.5\n"
           "ceiling_pinned_windows: 0\noptrace_processes: 0\nrepeat: 2\nsoak_s: 12\n")
V = TEST_VERSIONS[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("memory")
    (tmp / "memory.yaml").write_text(PROFILE)
    e = dict(os.environ, TFSB_PORT_OFFSET="16000", TFSB_STATE=str(tmp / "state"), TFSB_RESULTS=str(tmp / "results"),
             PYTHONPATH=str(ROOT), _PROFILE=str(tmp / "memory.yaml"))
    yield e
    subprocess.run([sys.executable, "-m", "stack", "down"], cwd=ROOT, env=e, capture_output=True, timeout=120)


def analysis(env, *args, profile: str = "") -> tuple:
    out = subprocess.run([sys.executable, "-m", "analysis", *args, "--profile", profile or env["_PROFILE"],
                          "--runtime", "local",
                          "--rows", "1", "--protocol", "grpc", "--batching", "off"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    d = Path(env["TFSB_RESULTS"]) / re.search(r"run id (\S+)", out.stdout).group(1)
    return json.loads((d / "report.json").read_text()), (d / "report.md").read_text(), out.stdout


def test_a_growing_model_is_called_growing_and_the_example_model_flat_in_the_same_run(env):
    rep, md, stdout = analysis(env, "calibrate", "--version", V, "--model-b", "growing", "--cold-starts", "2")
    mem = {r["version"]: r for r in rep["memory"]["rows"]}
    flat, grows = mem[V], mem[f"{V}-b"]
    assert flat["growth"]["verdict"] == "flat", flat
    assert grows["growth"]["verdict"] == "grows", grows
    # 64 new hash-table entries per call: tens of MiB per 10k requests, and the peak shows it
    assert 5 < grows["growth"]["per_10k"][1] <= grows["growth"]["per_10k"][0] < 200, grows["growth"]
    assert grows["peak_mib"] > grows["after_load_mib"] + 10, grows
    assert grows["vs_baseline"]["verdict"] == "grows more" and grows["vs_baseline"]["significant"]
    first = md.split("## ")[0]
    assert re.search(rf"{re.escape(V)}-b [\d,]+ MiB after load, peak [\d,]+, grows [\d.]+ MiB per 10k requests "
                     rf"\[[\d.]+, [\d.]+\] \([\d,]+ MiB per hour at [\d,]+ req/s\), grows more than {re.escape(V)}",
                     first), first
    assert "| version | after load MiB | steady MiB | peak MiB | soak | growth | vs base |" in md
    # COLD_STARTS=2: two fresh servers per version, alternating, each with its peak RSS, and verdicts on them
    cold = {r["version"]: r for r in rep["cold_starts"]["rows"]}
    assert set(cold) == {V, f"{V}-b"} and all(r["n"] == 2 for r in cold.values())
    for r in cold.values():
        assert 0 < r["to_available_s"]["mean"] < 120 and r["first_request_ms"]["mean"] > 0
        assert 50 < r["peak_rss_mib"]["mean"] < 8192 and r["peak_rss_mib"]["ci_low"] is not None
    assert {d["verdict"] for k in ("to_available_s", "first_request_ms", "peak_rss_mib")
            for d in [cold[f"{V}-b"][f"{k}_vs_baseline"]]} <= {"less", "more", "no significant difference"}
    assert rep["families"]["cold start"] == 3
    assert "## Cold start (2 fresh servers per version, alternating)" in md
    order = [ln.split()[2] for ln in stdout.splitlines() if ln.strip().startswith("cold start ")]
    assert order == [V, f"{V}-b", f"{V}-b", V], order  # ABBA


ALIAS_UP = """
from stack import local
from core.registry import load_registry
reg = load_registry().with_alias("{v}")
local.up_version(reg.get("{v}-b"), reg, log=lambda *_: None)
"""


def test_the_allocator_is_a_knob_with_a_memory_verdict_per_allocator(env):
    # a calibrate's second server (up already after the test above) holds the ports the first variant takes
    up = subprocess.run([sys.executable, "-c", ALIAS_UP.format(v=V)], cwd=ROOT, env=env, capture_output=True,
                        text=True, timeout=300)
    assert up.returncode == 0, up.stderr[-2000:]
    alias_pid = int((Path(env["TFSB_STATE"]) / "local" / f"tf{V}-b" / "modelserver.pid").read_text().split()[0])
    short = Path(env["_PROFILE"]).with_name("short-soak.yaml")  # a verdict of any kind per allocator: 4-5 samples do
    short.write_text(PROFILE.replace("soak_s: 12", "soak_s: 8"))
    rep, md, stdout = analysis(env, "compare", "--versions", V, "--knobs", "malloc=glibc,jemalloc", profile=str(short))
    names = [f"{V}-glibc", f"{V}-jemalloc"]
    assert rep["config"]["versions"] == names
    maps = {}
    for name in names:  # what the running servers really loaded
        pid = (Path(env["TFSB_STATE"]) / "local" / f"tf{name}" / "modelserver.pid").read_text().split()[0]
        maps[name] = Path(f"/proc/{pid}/maps").read_text()
    assert "libjemalloc.so.2" in maps[f"{V}-jemalloc"] and "libjemalloc" not in maps[f"{V}-glibc"]
    mem = {r["version"]: r for r in rep["memory"]["rows"]}
    assert set(mem) == set(names)
    for r in mem.values():
        assert r["growth"]["verdict"] in ("flat", "grows", "shrinks", "undecided") and r["after_load_mib"] > 50, r
    assert mem[f"{V}-jemalloc"]["vs_baseline"]["verdict"] in ("no significant difference", "grows more", "grows less")
    assert {c["version"] for c in rep["ceiling"]} == set(names)  # the ceiling runs each allocator too
    assert f"{V}-jemalloc runs TF" in md and "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2" in md
    # the stack's own server on the port a variant takes is stopped, not a refusal (issue 37's probe: "a knob
    # compare leaves servers that block the next": it exited 3, "port ... is taken by another process")
    assert not Path(f"/proc/{alias_pid}").exists()

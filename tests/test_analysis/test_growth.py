"""The memory verdicts' arithmetic (analysis/growth.py), the machine line (analysis/machine.py) and the knobs issue 35
added (stack/knobs.py: the allocator, --num_load_threads, --enable_model_warmup), on values whose answers are known."""
import numpy as np
import pytest

from analysis import growth, machine
from stack import knobs


def soak(mib_per_s: float, noise_mib: float = 0.0, seconds: int = 20, qps: float = 1000.0, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    t = np.arange(0, seconds + 0.1, 2.0)
    mib = 600 + mib_per_s * t + rng.normal(0, noise_mib, len(t)) if noise_mib else 600 + mib_per_s * t
    return {"start": 100.0, "end": 100.0 + seconds, "ok": int(qps * seconds), "achieved_qps": qps, "valid": True,
            "samples": [[100.0 + a, b * 2**20] for a, b in zip(t, mib)]}


def test_growth_is_the_least_squares_slope_per_10k_requests_and_per_hour():
    s = soak(0.5, noise_mib=0.2)
    g = growth.fit(s)
    t = np.array([p[0] for p in s["samples"]])
    slope = np.polyfit(t, np.array([p[1] for p in s["samples"]]) / 2**20, 1)[0]
    assert g["per_10k"][0] == pytest.approx(slope * 10, rel=1e-9)  # 1,000 req/s: 10k requests in 10 s
    assert g["per_hour"][0] == pytest.approx(slope * 3600, rel=1e-9)
    assert g["per_10k"][1] < g["per_10k"][0] < g["per_10k"][2] and g["n"] == 11 and g["df"] == 9
    assert g["verdict"] == "grows"  # 5 MiB per 10k requests, well above the floor


@pytest.mark.parametrize("mib_per_s,noise,verdict", [
    (0.0, 0.0, "flat"), (0.01, 0.05, "flat"), (1.0, 0.1, "grows"), (-1.0, 0.1, "shrinks"), (0.0, 8.0, "undecided")])
def test_each_verdict_follows_the_interval_and_the_floor(mib_per_s, noise, verdict):
    assert growth.fit(soak(mib_per_s, noise))["verdict"] == verdict


def test_no_verdict_from_too_few_samples_an_invalid_soak_or_no_request():
    assert growth.fit(soak(1.0, seconds=4)) is None  # 3 samples
    assert growth.fit({**soak(1.0), "valid": False}) is None
    assert growth.fit({**soak(1.0), "ok": 0}) is None
    assert growth.fit(None) is None


def test_versus_the_baseline_is_welch_on_the_slopes_and_called_only_beyond_the_floor():
    flat, grows = growth.fit(soak(0.0, 0.05)), growth.fit(soak(1.0, 0.05))
    d = growth.versus(grows, flat)
    assert d["diff"] == pytest.approx(grows["per_10k"][0] - flat["per_10k"][0])
    assert d["ci_low"] < d["diff"] < d["ci_high"] and d["p"] < 1e-6
    same = growth.versus(flat, flat)
    assert same["diff"] == 0 and same["p"] == pytest.approx(1.0)
    run = {"config": {"versions": ["a", "b", "c"]}, "memory": {"a": {"after_load_bytes": 2**29}},
           "soak": {"a": soak(0.0, 0.05), "b": soak(1.0, 0.05, seed=2), "c": soak(0.02, 0.05, seed=3)}}
    t = growth.table(run, {"a": 512.0})
    rows = {r["version"]: r for r in t["rows"]}
    assert t["tests"] == 2 and rows["a"]["after_load_mib"] == 512 and rows["a"]["steady_mib"] == 512
    assert rows["b"]["vs_baseline"]["verdict"] == "grows more"
    assert rows["c"]["vs_baseline"]["verdict"] == "no significant difference"  # within the floor, however sure


def test_cpu_flags_and_the_onednn_default_each_release_applies(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_vnni\n")
    flags = machine.cpu_flags(str(info))
    assert flags["AVX2"] and flags["AVX512_VNNI"] and not flags["AVX512_BF16"] and not flags["AMX_TILE"]
    assert machine.cpu_flags(str(tmp_path / "none")) == {}
    assert machine.onednn("2.9.3", flags, {}) == "on (default: AVX512_VNNI)"
    assert machine.onednn("2.8.4", flags, {}) == "off (default before 2.9)"
    assert machine.onednn("2.21.0", {**flags, "AVX512_VNNI": False}, {}).startswith("off (default: no AVX512_VNNI")
    assert machine.onednn("2.6.5", flags, {"TF_ENABLE_ONEDNN_OPTS": "1"}) == "on (TF_ENABLE_ONEDNN_OPTS=1)"
    assert machine.onednn("2.21.0", flags, {"TF_ENABLE_ONEDNN_OPTS": "0"}) == "off (TF_ENABLE_ONEDNN_OPTS=0)"
    line = machine.line({"cpu": "X", "cpus": 2, "cpu_flags": flags, "onednn": {"2.9": "on (default: AVX512_VNNI)"}})
    assert line.startswith("Machine: X, 2 cores; AVX2, AVX512F, AVX512_VNNI; not AVX512_BF16")
    assert line.endswith("oneDNN: 2.9 on (default: AVX512_VNNI).")


def test_the_allocator_knob_preloads_debians_libraries(tmp_path, monkeypatch):
    combos = knobs.parse("malloc=glibc,jemalloc,tcmalloc")
    assert [knobs.label(c) for c in combos] == ["glibc", "jemalloc", "tcmalloc"]
    env = [knobs.env(c) for c in combos]
    assert env[0] == {"LD_PRELOAD": ""}  # glibc: nothing preloaded, nor inherited
    assert env[1] == {"LD_PRELOAD": str(knobs.LIB_DIR / "libjemalloc.so.2")}
    assert env[2] == {"LD_PRELOAD": str(knobs.LIB_DIR / "libtcmalloc_minimal.so.4")}
    with pytest.raises(knobs.KnobError, match="malloc takes glibc or jemalloc or tcmalloc, got 'mimalloc'"):
        knobs.parse("malloc=mimalloc")
    monkeypatch.setattr(knobs, "LIB_DIR", tmp_path)  # a machine without the packages
    with pytest.raises(knobs.KnobError, match=r"malloc=jemalloc needs .*libjemalloc.so.2 .*apt-get install libjemalloc2"):
        knobs.check_preload(combos[1])
    knobs.check_preload(combos[0])  # glibc needs nothing


def test_server_only_knobs_reach_the_server_and_never_the_ceiling():
    """load_threads and warmup are TF Serving flags: the in-process ceiling (which takes TF's thread flags only)
    must not get them, or its processes would refuse an unknown flag."""
    combos = knobs.parse("load_threads=0,2 warmup=0,1")
    assert [knobs.label(c) for c in combos] == ["load0-warmup0", "load0-warmup1", "load2-warmup0", "load2-warmup1"]
    assert knobs.flags(combos[1]) == ["--num_load_threads=0", "--enable_model_warmup=true"]
    assert knobs.flags(combos[2]) == ["--num_load_threads=2", "--enable_model_warmup=false"]
    assert all(knobs.threads(c) == {} for c in combos)
    assert knobs.flags(knobs.parse("intra_op=2")[0]) == ["--tensorflow_intra_op_parallelism=2"]
    assert knobs.threads(knobs.parse("intra_op=2")[0]) == {"intra_op": 2}

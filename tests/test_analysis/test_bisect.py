"""make bisect: the search over releases, the releases PyPI offers and the pins a release gets.
(The measurements themselves are the ceiling's and the op table's, tested in test_compare.)"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.bisect import first_beyond, markdown, report, search
from analysis.releases import derived, newest_per_minor
from core.registry import load_registry

ROOT = Path(__file__).resolve().parents[2]
SLOW, FAST = [100.0, 101.0, 99.0, 100.5], [120.0, 121.0, 119.0, 120.5]  # rows/s of four processes


def _search(ceilings: dict):
    names, asked = list(ceilings), []

    def measure(n):
        asked.append(n)
        return ceilings[n]
    low, high, got = search(names, measure, lambda a, b: sum(b) - sum(a))
    return low, high, asked


def test_the_search_finds_the_first_release_beyond_noise_measuring_few():
    ceilings = {f"2.{m}": SLOW if m < 15 else FAST for m in range(9, 22)}
    low, high, asked = _search(ceilings)
    assert (low, high) == ("2.14", "2.15")
    assert len(asked) <= 2 + 4 and asked[:2] == ["2.9", "2.21"]  # the ends, then log2(11) steps


def test_a_change_in_the_other_direction_or_noise_is_not_a_step():
    # the overall difference is a speed-up; a release slower than FROM is not where it happened
    ceilings = {"2.9": SLOW, "2.10": [80.0, 81.0, 79.0, 80.5], "2.11": SLOW, "2.12": FAST}
    assert _search(ceilings)[:2] == ("2.11", "2.12")
    noisy = {"2.9": SLOW, "2.10": [90.0, 110.0, 95.0, 105.0], "2.11": [99.0, 101.0, 100.0, 100.2]}
    low, high, asked = _search(noisy)
    assert high is None and asked == ["2.9", "2.11"]  # the ends do not differ: nothing between is measured


def test_a_release_that_cannot_be_installed_is_stepped_over():
    ceilings = {"2.9": SLOW, "2.10": SLOW, "2.11": None, "2.12": FAST, "2.13": FAST}
    low, high, asked = _search(ceilings)
    assert (low, high) == ("2.10", "2.12") and "2.11" in asked


def _every(ceilings: dict) -> dict:
    """A finished EVERY=1 result of these releases (the shape run_bisect saves)."""
    names = list(ceilings)
    return {"id": "bisect-t", "from": names[0], "to": names[-1], "rows": 32, "python": "3.10", "every": True,
            "releases": names, "tensorflow": {n: n + ".0" for n in names}, "skipped": {}, "optrace": {},
            "ceiling": {n: {"tensorflow": n + ".0", "rows_per_s": {"32": v}, "cpu_us_per_call": {}}
                        for n, v in ceilings.items()}}


def test_every_release_names_a_regression_that_recovered_which_a_binary_search_misses():
    ceilings = {"2.9": SLOW, "2.10": SLOW, "2.11": FAST, "2.12": SLOW}
    assert _search(ceilings)[1] is None  # the ends are alike: the search stops there
    out = _every(ceilings)
    out["pair"] = list(first_beyond(out))
    assert out["pair"] == ["2.10", "2.11"]
    text = markdown(out, report(out))
    assert "**First release beyond noise: 2.11 (TensorFlow 2.11.0)**: +20%" in text and "faster than 2.9" in text
    rows = [ln.split(" | ")[0] for ln in text.splitlines() if ln.startswith("| 2.")]
    assert rows == ["| 2.9", "| 2.10", "| 2.11", "| 2.12"] and "not needed by the search" not in text


def test_every_release_alike_is_no_release_beyond_noise():
    out = _every({"2.9": SLOW, "2.10": [99.0, 101.0, 100.0, 100.2], "2.11": SLOW})
    assert first_beyond(out) == ("2.9", None)
    out["pair"] = None
    assert "**No release beyond noise**: no release's ceiling from 2.9 to 2.11" in markdown(out, report(out))


def test_releases_are_the_newest_final_of_each_minor_with_a_wheel_for_the_interpreter():
    files = {"2.10.0": ["tensorflow_cpu-2.10.0-cp310-cp310-manylinux_2_17_x86_64.whl"],
             "2.10.1": ["tensorflow_cpu-2.10.1-cp310-cp310-manylinux_2_17_x86_64.whl"],
             "2.11.0rc1": ["tensorflow_cpu-2.11.0rc1-cp310-cp310-manylinux_2_17_x86_64.whl"],
             "2.15.0.post1": ["tensorflow_cpu-2.15.0.post1-cp310-cp310-manylinux_2_17_x86_64.whl"],
             "2.15.1": ["tensorflow_cpu-2.15.1-cp311-cp311-manylinux_2_17_x86_64.whl"]}
    assert newest_per_minor(files, "3.10") == {(2, 10): "2.10.1"}
    assert newest_per_minor(files) == {(2, 10): "2.10.1", (2, 15): "2.15.1"}


def test_a_release_the_registry_does_not_name_is_pinned_like_its_nearest_neighbour():
    reg = load_registry()
    near_29 = derived(reg, "2.10", "2.10.1", "2.10.1", "3.10")
    assert near_29.pip == ("tensorflow-cpu==2.10.1", "numpy<1.24", "protobuf<3.20")
    assert near_29.serving_api == "tensorflow-serving-api==2.10.1" and near_29.python == "3.10"
    assert derived(reg, "2.14", "2.14.1", None, "3.10").pip == ("tensorflow-cpu==2.14.1", "numpy<1.24",
                                                                "grpcio==1.74.0")
    assert derived(reg, "2.18", "2.18.1", "2.18.1", "3.10").pip == ("tensorflow-cpu==2.18.1",)  # as 2.21


@pytest.mark.parametrize("args, needle", [
    (["--from", "2.21", "--to", "2.9"], "FROM must be an older release than TO"),
    (["--from", "2.9", "--to", "3.0"], "unknown version '3.0'"),
    (["--rows", "1 32"], "ROWS must be one row count"),
    (["--processes", "1"], "PROCESSES must be an integer >= 2"),
    (["--every", "yes"], "EVERY must be 1")])
def test_bad_bisect_input_is_one_line_and_exit_2(args, needle, tmp_path):
    env = dict(os.environ, TFSB_RESULTS=str(tmp_path), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "analysis", "bisect", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not list(tmp_path.iterdir())

"""How precise is the TF ceiling? An A/A of one version's in-process ceiling: fresh processes, one
window each, as the compare runs them, for a few window lengths; prints, per setting, the spread of
wall-clock rows/s and of CPU µs per call across processes and the minimum detectable effect (MDE,
80% power) a compare with that many processes per version reaches, alone (alpha 5%) and at the
strictest level of a Holm family of 17 tests (the quick profile's report at one row count).

    .venv/bin/python benchmarks/ceiling_noise.py [--version 2.21] [--rows 1] [--processes 8]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import stats  # noqa: E402
from analysis.ceiling import measure_one  # noqa: E402
from models.prepare import ensure_example_model  # noqa: E402
from core.registry import load_registry  # noqa: E402
from core.venvs import ensure_venv, venv_python  # noqa: E402


def row(name: str, values: list, n: int) -> str:
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    rel = sd / mean
    alone, holm = stats.min_detectable(rel, n, 0.05), stats.min_detectable(rel, n, 0.05 / 17)
    return f"{name:<22} {mean:>10.1f} {rel:>7.1%} {alone:>9.1%} {holm:>10.1%}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--version", default="")
    p.add_argument("--rows", type=int, default=1)
    p.add_argument("--processes", type=int, default=8)
    p.add_argument("--windows-s", default="0.5 1 2", help="window lengths to try, seconds")
    p.add_argument("--pin", default="", help='cores to pin every process to, e.g. "1" (default: none)')
    a = p.parse_args()
    reg = load_registry()
    v = reg.get(a.version) if a.version else reg.newest
    python = venv_python(ensure_venv(v, reg, log=lambda *_: None))
    model = ensure_example_model(v, reg, log=lambda *_: None) / "1"
    print(f"TF {v.tensorflow}, {a.rows} row(s), {a.processes} fresh processes per setting, "
          + (f"pinned to cores {a.pin}" if a.pin else "not pinned"))
    print(f"{'window / figure':<22} {'mean':>10} {'CV':>7} {'MDE 5%':>9} {'MDE Holm17':>10}   seconds")
    for w in map(float, a.windows_s.split()):
        t0 = time.monotonic()
        cpus = [int(c) for c in a.pin.split()] or None
        got = [measure_one(python, model, [a.rows], 1, w, cpus) for _ in range(a.processes)]
        took = time.monotonic() - t0
        wall = [g["rows_per_s"][str(a.rows)][0] for g in got]
        cpu = [g["cpu_us_per_call"][str(a.rows)][0] for g in got]
        print(row(f"{w:g}s rows/s (wall)", wall, a.processes) + f"   {took:.0f}")
        print(row(f"{w:g}s CPU us/call", cpu, a.processes))
    return 0


if __name__ == "__main__":
    sys.exit(main())

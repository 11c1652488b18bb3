"""Memory verdicts: does a server's RSS grow with use, and more than the baseline's?

Growth is the least-squares slope of RSS over the soak's samples (scipy's linregress), with a Student's t 95%
interval, stated per 10k requests (the soak's own rate converts it) and per hour. A version is called
- "grows" when the whole interval lies above FLOOR (1 MiB per 10k requests: at 1,000 req/s, 360 MiB an hour;
  an allocator settling after a compare's cells moves RSS by less),
- "flat" when the whole interval lies within ±FLOOR,
- "shrinks" when it lies below -FLOOR, and "undecided" otherwise (the soak was too short or too noisy: the
  interval says by how much).
Against the baseline: the difference of slopes (Welch-Satterthwaite degrees of freedom), Holm-corrected within
the report's memory family, called only when significant and larger than FLOOR.
Consecutive RSS samples are not independent (an allocator's step stays), so the interval is narrower than a
textbook's would be for independent points; the floor is what keeps that from calling a settled server growing,
and the A/A of the suite (the example model must be called flat) checks it.
"""
from __future__ import annotations

import math

from scipy import stats as st

from analysis import stats
from stack.promconfig import SCRAPE_INTERVAL_S

FLOOR_MIB_PER_10K = 1.0
FAMILY = "memory"
MIN_SAMPLES = 4


def fit(soak: dict | None) -> dict | None:
    """{"per_10k": [slope, lo, hi], "per_hour": [...], "se_10k", "df", "n", "verdict"} or None (too few samples)."""
    if not soak or not soak.get("valid", True) or soak["end"] <= soak["start"] or not soak["ok"]:
        return None
    pts = [(t, b) for t, b in soak["samples"] if soak["start"] <= t <= soak["end"] + SCRAPE_INTERVAL_S]
    if len(pts) < MIN_SAMPLES:
        return None
    t = [p[0] - soak["start"] for p in pts]
    mib = [p[1] / 2**20 for p in pts]
    slope, se, df = line(t, mib)
    q = st.t.ppf(0.5 + stats.LEVEL / 2, df)
    seconds_per_10k = 1e4 / (soak["ok"] / (soak["end"] - soak["start"]))
    per_10k = [x * seconds_per_10k for x in (slope, slope - q * se, slope + q * se)]
    per_hour = [x * 3600 for x in (slope, slope - q * se, slope + q * se)]
    return {"per_10k": per_10k, "per_hour": per_hour, "se_10k": se * seconds_per_10k, "df": df, "n": len(pts),
            "qps": soak["ok"] / (soak["end"] - soak["start"]), "first_mib": mib[0], "last_mib": mib[-1],
            "verdict": verdict(per_10k[1], per_10k[2])}


def line(x: list, y: list) -> tuple:
    """(slope, its standard error, degrees of freedom) of y over x by least squares (scipy's linregress)."""
    if len(set(y)) == 1:  # not one page moved: linregress has no correlation to give (nan), the slope is 0
        return 0.0, 0.0, len(x) - 2
    r = st.linregress(x, y)
    return float(r.slope), float(r.stderr), len(x) - 2


def per_step(x: list, y: list, floor: float) -> dict:
    """The slope of y per unit of x with its 95% interval and verdict against `floor` (a reload cycle's growth)."""
    slope, se, df = line(x, y)
    q = st.t.ppf(0.5 + stats.LEVEL / 2, df)
    lo, hi = slope - q * se, slope + q * se
    return {"slope": slope, "ci_low": lo, "ci_high": hi, "df": df, "verdict": verdict(lo, hi, floor)}


def verdict(lo: float, hi: float, floor: float = FLOOR_MIB_PER_10K) -> str:
    if lo > floor:
        return "grows"
    if hi < -floor:
        return "shrinks"
    if -floor < lo and hi < floor:
        return "flat"
    return "undecided"


def versus(a: dict, b: dict) -> dict:
    """a's growth minus b's (per 10k requests), its interval and p (Welch-Satterthwaite)."""
    d = a["per_10k"][0] - b["per_10k"][0]
    va, vb = a["se_10k"] ** 2, b["se_10k"] ** 2
    se = math.sqrt(va + vb)
    if se == 0:
        return {"diff": d, "ci_low": d, "ci_high": d, "p": 0.0 if d else 1.0}
    df = (va + vb) ** 2 / (va ** 2 / a["df"] + vb ** 2 / b["df"])
    q = st.t.ppf(0.5 + stats.LEVEL / 2, df)
    return {"diff": d, "ci_low": d - q * se, "ci_high": d + q * se, "p": float(2 * st.t.sf(abs(d) / se, df))}


def table(run: dict, steady_mib: dict) -> dict:
    """{"rows": [per server: after load, steady, peak, growth, vs baseline], "tests": n}; steady_mib: the mean RSS
    of each server's cells (the throughput table's)."""
    versions = run["config"]["versions"]
    mem, soaks = run.get("memory") or {}, run.get("soak") or {}
    fits = {v: fit(soaks.get(v)) for v in versions}
    base = fits.get(versions[0])
    rows, tests = [], []
    for v in versions:
        m = mem.get(v, {})
        row = {"version": v, "after_load_mib": _mib(m.get("after_load_bytes")), "steady_mib": steady_mib.get(v),
               "peak_mib": _mib(m.get("peak_bytes")), "growth": fits[v], "soak": _soak_info(soaks.get(v))}
        if v != versions[0] and base and fits[v]:
            row["vs_baseline"] = versus(fits[v], base)
            tests.append(row["vs_baseline"])
        rows.append(row)
    for t, sig in zip(tests, stats.holm([t["p"] for t in tests])):
        t["significant"], t["family"] = sig, FAMILY
        t["verdict"] = ("no significant difference" if not sig or abs(t["diff"]) <= FLOOR_MIB_PER_10K
                        else "grows more" if t["diff"] > 0 else "grows less")
    return {"rows": rows, "tests": len(tests)}


def _mib(b) -> float | None:
    return None if b is None else b / 2**20


def _soak_info(s: dict | None) -> dict | None:
    if not s:
        return None
    return {"seconds": s["end"] - s["start"], "ok": s["ok"], "qps": s["achieved_qps"], "level": s.get("level"),
            "protocol": s.get("protocol"), "valid": s.get("valid", True), "samples": len(s["samples"])}

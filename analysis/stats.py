"""Means, 95% confidence intervals over repeats, and verdicts that call noise noise.

Student's t (Welch for differences): with 3 repeats the interval is wide, and a
difference that stays inside it is reported as "no significant difference".
"""
from __future__ import annotations

import math

# Two-sided 95% critical values of Student's t by degrees of freedom (scipy is not needed for these).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000}


def t95(df: float) -> float:
    if df < 1:
        return float("inf")
    keys = sorted(_T95)
    for k in keys:
        if df <= k:
            return _T95[k]
    return 1.96


def mean_ci(xs: list) -> dict:
    """{"mean", "ci_low", "ci_high", "n"}; one sample has an unbounded interval."""
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    n = len(xs)
    if n == 0:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    m = sum(xs) / n
    if n == 1:
        return {"mean": m, "ci_low": None, "ci_high": None, "n": 1}
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    half = t95(n - 1) * sd / math.sqrt(n)
    return {"mean": m, "ci_low": m - half, "ci_high": m + half, "n": n}


def diff_ci(a: list, b: list) -> dict:
    """Welch's 95% interval for mean(a) - mean(b)."""
    a = [x for x in a if x is not None]
    b = [x for x in b if x is not None]
    if len(a) < 2 or len(b) < 2:
        d = (sum(a) / len(a) - sum(b) / len(b)) if a and b else None
        return {"diff": d, "ci_low": None, "ci_high": None}
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1) / len(a)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return {"diff": ma - mb, "ci_low": ma - mb, "ci_high": ma - mb}
    df = (va + vb) ** 2 / ((va ** 2 / (len(a) - 1)) + (vb ** 2 / (len(b) - 1)))
    half = t95(df) * se
    return {"diff": ma - mb, "ci_low": ma - mb - half, "ci_high": ma - mb + half}


def verdict(d: dict, higher_is_better: bool) -> str:
    """faster / slower (or better / worse) only when the whole interval is on one side of 0."""
    lo, hi = d.get("ci_low"), d.get("ci_high")
    if lo is None or hi is None:
        return "too few repeats"
    if lo > 0:
        return "faster" if higher_is_better else "slower"
    if hi < 0:
        return "slower" if higher_is_better else "faster"
    return "no significant difference"

"""Means, 95% intervals and verdicts that call noise noise (scipy does the distributions).

* A mean over repeats: Student's t interval, exact quantile (`scipy.stats.t.ppf`).
* A difference of means (QPS, the latency breakdown, the TF ceiling): Welch's t, with its
  degrees of freedom unrounded.
* A difference of P99s: P99 is no mean and its per-window values are not normal, so it is
  compared with the Mann-Whitney U test on the per-window values (exact p-value), with the
  Hodges-Lehmann shift and its distribution-free interval.
* Every verdict of one report is one family: Holm's step-down correction keeps the chance of
  any false "faster"/"slower" in a report at or below 5%, which is what an A/A run checks.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats as st

LEVEL = 0.95
ALPHA = 1 - LEVEL


def _clean(xs) -> list:
    return [float(x) for x in xs if x is not None and not math.isnan(float(x))]


def mean_ci(xs, level: float = LEVEL) -> dict:
    """{"mean", "ci_low", "ci_high", "n"}; one sample has no interval."""
    xs = _clean(xs)
    n = len(xs)
    if n == 0:
        return {"mean": None, "ci_low": None, "ci_high": None, "n": 0}
    m = float(np.mean(xs))
    if n == 1:
        return {"mean": m, "ci_low": None, "ci_high": None, "n": 1}
    half = float(st.t.ppf(0.5 + level / 2, n - 1)) * float(np.std(xs, ddof=1)) / math.sqrt(n)
    return {"mean": m, "ci_low": m - half, "ci_high": m + half, "n": n}


def welch(a, b, level: float = LEVEL) -> dict:
    """mean(a) - mean(b): Welch's interval and two-sided p-value (df unrounded)."""
    a, b = _clean(a), _clean(b)
    out = {"method": "welch", "diff": None, "ci_low": None, "ci_high": None, "p": None, "df": None}
    if not a or not b:
        return out
    ma, mb = float(np.mean(a)), float(np.mean(b))
    out["diff"] = ma - mb
    if len(a) < 2 or len(b) < 2:
        return out
    va, vb = float(np.var(a, ddof=1)) / len(a), float(np.var(b, ddof=1)) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:  # identical repeats on both sides: the difference is exact
        return {**out, "ci_low": ma - mb, "ci_high": ma - mb, "p": 1.0 if ma == mb else 0.0, "df": math.inf}
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if va and vb else \
        (len(a) - 1 if va else len(b) - 1)
    half = float(st.t.ppf(0.5 + level / 2, df)) * se
    p = float(2 * st.t.sf(abs(ma - mb) / se, df))
    return {**out, "ci_low": ma - mb - half, "ci_high": ma - mb + half, "p": p, "df": float(df)}


def mann_whitney(a, b, level: float = LEVEL) -> dict:
    """Shift of a against b: the Hodges-Lehmann estimate (median of the pairwise differences),
    the two-sided Mann-Whitney p-value, and the interval of shifts the test does not reject
    at this level (None where the samples are too small to bound it)."""
    a, b = _clean(a), _clean(b)
    out = {"method": "mann-whitney", "diff": None, "ci_low": None, "ci_high": None, "p": None}
    if not a or not b:
        return out
    diffs = np.unique(np.subtract.outer(np.asarray(a), np.asarray(b)).ravel())
    out["diff"] = float(np.median(np.subtract.outer(np.asarray(a), np.asarray(b))))
    if len(a) < 2 or len(b) < 2:
        return out
    out["p"] = _mwu_p(a, b)
    # U(a - d, b) only changes where d crosses a pairwise difference, so the test is run once
    # between each pair of neighbouring differences; the accepted stretch, closed, is the interval.
    edges = np.concatenate([[diffs[0] - 1.0], diffs, [diffs[-1] + 1.0]])
    accepted = [j for j in range(len(edges) - 1)
                if _mwu_p([x - (edges[j] + edges[j + 1]) / 2 for x in a], b) >= 1 - level]
    if accepted and accepted[0] > 0 and accepted[-1] < len(edges) - 2:
        out["ci_low"], out["ci_high"] = float(edges[accepted[0]]), float(edges[accepted[-1] + 1])
    return out


def _mwu_p(a, b) -> float:
    """Two-sided Mann-Whitney p-value: the exact permutation distribution for the small samples
    of a report (ties included), the normal approximation beyond."""
    if len(a) + len(b) <= 20:
        method = st.PermutationMethod(n_resamples=math.comb(len(a) + len(b), len(a)))
    else:
        method = "asymptotic"
    return float(st.mannwhitneyu(a, b, alternative="two-sided", method=method).pvalue)


def compare(values: list, base: list, test, higher_is_better: bool) -> dict:
    """test(values, base) (welch, mann_whitney), with the difference and its interval relative to the base's mean."""
    d = test(values, base)
    base_mean = mean_ci(base)["mean"]
    rel = [None if x is None or not base_mean else x / abs(base_mean) for x in (d["diff"], d["ci_low"], d["ci_high"])]
    return {**d, "rel": rel[0], "rel_ci_low": rel[1], "rel_ci_high": rel[2], "higher_is_better": higher_is_better}


def holm(pvalues: list, alpha: float = ALPHA) -> list:
    """Holm's step-down procedure: which of the p-values are significant (None: no test)."""
    idx = [i for i, p in enumerate(pvalues) if p is not None]
    order = sorted(idx, key=lambda i: pvalues[i])
    m, out = len(order), [None if p is None else False for p in pvalues]
    for rank, i in enumerate(order):
        if pvalues[i] > alpha / (m - rank):
            break
        out[i] = True
    return out


def verdict(d: dict, significant: bool | None, higher_is_better: bool) -> str:
    """faster / slower only when the (Holm-corrected) test says the difference is real."""
    if d.get("p") is None or significant is None:
        return "too few repeats"
    if not significant:
        return "no significant difference"
    better = (d["diff"] > 0) == higher_is_better
    return "faster" if better else "slower"


def min_detectable(sd: float, n: int, alpha: float, power: float = 0.8) -> float | None:
    """The smallest difference of means a two-sided Welch test of n vs n repeats with this noise
    detects with the given power at level alpha: (t_{1-alpha/2} + t_{power}) * sd * sqrt(2/n)."""
    if n < 2 or sd is None or math.isnan(sd):
        return None
    df = 2 * (n - 1)
    return float((st.t.ppf(1 - alpha / 2, df) + st.t.ppf(power, df)) * sd * math.sqrt(2 / n))


def min_repeats_mann_whitney(alpha: float) -> int:
    """Repeats per version the exact two-sided Mann-Whitney test needs before any p-value can be
    below alpha (its smallest p-value with n vs n is 2 / C(2n, n))."""
    n = 2
    while 2 / math.comb(2 * n, n) > alpha:
        n += 1
    return n

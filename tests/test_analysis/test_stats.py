"""Confidence intervals and verdicts: a real difference is called, noise is called noise."""
import pytest

from analysis.stats import diff_ci, mean_ci, verdict


def test_mean_ci_uses_student_t():
    ci = mean_ci([10.0, 12.0, 14.0])  # mean 12, sd 2, t(2) = 4.303
    assert ci["mean"] == 12 and ci["n"] == 3
    assert ci["ci_high"] - 12 == pytest.approx(4.303 * 2 / 3 ** 0.5)
    assert mean_ci([5.0])["ci_low"] is None and mean_ci([])["mean"] is None


def test_clear_difference_gets_a_verdict_and_noise_does_not():
    fast, slow = [10.0, 10.2, 9.9, 10.1], [14.9, 15.2, 15.0, 15.1]
    d = diff_ci(slow, fast)
    assert d["ci_low"] > 0 and verdict(d, higher_is_better=False) == "slower"
    assert verdict(diff_ci(fast, slow), higher_is_better=False) == "faster"
    assert verdict(diff_ci([100.0, 200.0, 150.0], [140.0, 160.0, 130.0]), True) == "no significant difference"
    assert verdict(diff_ci([1.0], [2.0]), True) == "too few repeats"

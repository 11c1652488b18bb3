"""When to send: seeded, pre-computed arrival schedules for the open loop.

As in MLPerf LoadGen's Server scenario, the arrival times are drawn before the
run starts, so the generator's own speed never changes what load is offered.
"""
from __future__ import annotations

import numpy as np


def arrivals(mode: str, rate: float, seconds: float, seed: int) -> np.ndarray:
    """Send offsets in seconds from the phase start: constant spacing or Poisson (exponential gaps)."""
    n = int(rate * seconds)
    if n <= 0:
        return np.zeros(0)
    if mode == "constant":
        return np.arange(n, dtype=np.float64) / rate
    rng = np.random.default_rng(seed)
    # Draw a few more gaps than the mean needs, then keep those inside the window.
    gaps = rng.exponential(1.0 / rate, size=int(n * 1.1 + 10 * np.sqrt(n) + 10))
    t = np.cumsum(gaps) - gaps[0]
    while t[-1] < seconds:  # astronomically rare: extend rather than cut the phase short
        more = rng.exponential(1.0 / rate, size=n // 10 + 10)
        t = np.concatenate([t, t[-1] + np.cumsum(more)])
    return t[t < seconds]

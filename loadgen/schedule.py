"""When to send: seeded arrival schedules for the open loop, generated lazily in chunks.

As in MLPerf LoadGen's Server scenario, arrival times follow from the seed alone, never from the
generator's own speed. They are produced a chunk at a time as the run consumes them, so memory
stays a few hundred KiB whatever rate x duration is asked; a rate above MAX_RATE is refused (one
process cannot send that; use --workers or shards).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np
from core.errors import UsageError

MAX_RATE = 1_000_000.0  # requests per second per process
CHUNK = 16384


def check_rate(rate: float, field: str = "rate") -> float:
    if not 0 < rate <= MAX_RATE:
        raise UsageError(f"{field} must be > 0 and at most {MAX_RATE:,.0f} requests/s per process, got {rate:g}")
    return rate


def chunks(mode: str, rate: float, seconds: float, seed: int, shard: tuple = (0, 1)) -> Iterator[np.ndarray]:
    """Send offsets in seconds from the phase start, ascending, in chunks of at most CHUNK:
    constant spacing, or Poisson (exponential gaps, the first arrival at 0). shard (i, n): only the
    arrivals whose place in the whole schedule is i modulo n, so n shards drawing with the same seed
    send, together, exactly the one schedule of the whole rate."""
    i, n = shard
    if n > 1:
        start = 0
        for c in chunks(mode, rate, seconds, seed):
            yield c[(np.arange(start, start + len(c)) % n) == i]
            start += len(c)
        return
    check_rate(rate)
    if int(rate * seconds) <= 0:  # less than one request in the window: none
        return
    if mode == "constant":
        n = int(rate * seconds)
        for start in range(0, n, CHUNK):
            yield np.arange(start, min(n, start + CHUNK), dtype=np.float64) / rate
        return
    rng = np.random.default_rng(seed)
    t = None
    while True:
        gaps = rng.exponential(1.0 / rate, size=CHUNK)
        offsets = np.cumsum(gaps) - gaps[0] if t is None else t + np.cumsum(gaps)
        t = offsets[-1]
        if t >= seconds:
            yield offsets[offsets < seconds]
            return
        yield offsets


def arrivals(mode: str, rate: float, seconds: float, seed: int) -> np.ndarray:
    """The whole schedule at once (tests and short phases)."""
    parts = list(chunks(mode, rate, seconds, seed))
    return np.concatenate(parts) if parts else np.zeros(0)

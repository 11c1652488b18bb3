"""Load profiles of the compare protocol. quick: a few minutes for two versions; standard: longer
windows, more levels, the seeds' 50 -> 200 -> 500 -> 1000 ramp."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str
    concurrency: tuple       # closed-loop levels
    rates: tuple             # open-loop (Poisson) levels, req/s
    window_s: float          # steady-state measurement window per level
    warmup_s: float
    search_low: float
    search_high: float
    search_window_s: float
    search_probes: int
    sla_p99_ms: float = 50.0


PROFILES = {
    "quick": Profile("quick", concurrency=(4, 16), rates=(), window_s=4, warmup_s=1.5, search_low=100,
                     search_high=3000, search_window_s=4, search_probes=4),
    "standard": Profile("standard", concurrency=(1, 8, 32), rates=(50, 200, 500, 1000), window_s=20, warmup_s=5,
                        search_low=50, search_high=10000, search_window_s=10, search_probes=8),
}


def get(name: str) -> Profile:
    if name not in PROFILES:
        raise ValueError(f"unknown PROFILE {name!r}; known: {', '.join(PROFILES)}")
    return PROFILES[name]

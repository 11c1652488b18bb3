"""Load profiles of the compare protocol: built in (quick, standard) or a YAML file of the user's.

    quick      a few minutes for two versions
    standard   longer windows, more levels, the seeds' 50 -> 200 -> 500 -> 1000 ramp
    my.yaml    any of the fields below; the rest default to quick's; every bad field is named

    # my.yaml
    concurrency: [1, 8, 32]     # closed-loop levels
    rates: [100, 400]           # open-loop (Poisson) levels, req/s
    window_s: 10                # steady window of each measurement
    repeat: 5
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from core.errors import UsageError


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
    search_probes: int       # 0: no max-QPS search
    sla_p99_ms: float = 50.0
    repeat: int = 3
    ceiling_windows: int = 5     # in-process TF ceiling on the servers' cores: fresh processes per version, one window each
    ceiling_window_s: float = 1.0
    ceiling_pinned_windows: int = 4  # the same pinned to one core ("kernels alone", a diagnostic; 0: none)
    optrace_processes: int = 4   # the op table: fresh traced processes per version (0: none)
    optrace_calls: int = 200     # traced calls per process and row count
    soak_s: float = 0.0          # per version: a steady load while RSS is sampled, for the growth verdict (0: none,
                                 # as in runs and baselines written before the field)


PROFILES = {
    "quick": Profile("quick", concurrency=(4, 16), rates=(), window_s=4, warmup_s=1.5, search_low=100,
                     search_high=3000, search_window_s=4, search_probes=4, repeat=3,
                     # ten processes of 0.5 s on the servers' cores (analysis.ceiling.ceiling_core): about 6%
                     # spread per process unpinned here, so a 10% difference is detectable at the headline's Holm
                     # level; four pinned ones for the "kernels alone" diagnostic (3-5% spread)
                     ceiling_windows=10, ceiling_window_s=0.5, ceiling_pinned_windows=4,
                     # 10 Prometheus samples of RSS per version: the example model's flat line is told from a growth
                     # of 1 MiB per 10k requests at its 1,300-1,800 req/s here (analysis/growth.py)
                     soak_s=20),
    "standard": Profile("standard", concurrency=(1, 8, 32), rates=(50, 200, 500, 1000), window_s=20, warmup_s=5,
                        search_low=50, search_high=10000, search_window_s=10, search_probes=8, repeat=5,
                        soak_s=120),
}

_LEVELS = {"concurrency": int, "rates": float}
_NUMBERS = {  # field: (type, smallest allowed value, the smallest itself allowed)
    "window_s": (float, 0, False), "warmup_s": (float, 0, True), "search_low": (float, 0, False),
    "search_high": (float, 0, False), "search_window_s": (float, 0, False), "search_probes": (int, 0, True),
    "sla_p99_ms": (float, 0, False), "repeat": (int, 1, True), "ceiling_windows": (int, 2, True),
    "ceiling_pinned_windows": (int, 0, True),
    "ceiling_window_s": (float, 0, False), "optrace_processes": (int, 0, True), "optrace_calls": (int, 1, True),
    "soak_s": (float, 0, True),
}


def _number(value, kind, low, inclusive):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or (kind is int and not float(value).is_integer()):
        return None
    ok = value >= low if inclusive else value > low
    return kind(value) if ok else None


def from_mapping(raw: dict, where: str, base: Profile | None = None) -> Profile:
    """A Profile from a mapping; every bad field is reported, all of them in one error."""
    base = base or PROFILES["quick"]
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: a profile is a mapping of fields (concurrency, rates, window_s, ...)")
    fields = {f.name for f in dataclasses.fields(Profile)}
    errors = [f"unknown field {k!r} (known: {', '.join(sorted(fields - {'name'}))})"
              for k in raw if k not in fields or k == "name"]
    values = {}
    for k, kind in _LEVELS.items():
        if k not in raw:
            continue
        v = raw[k]
        levels = [_number(x, kind, 0, False) for x in v] if isinstance(v, list) else [None]
        if None in levels:
            errors.append(f"{k} must be a list of numbers > 0{' (whole numbers)' if kind is int else ''}, got {v!r}")
        else:
            values[k] = tuple(sorted(set(levels)))
    for k, (kind, low, inclusive) in _NUMBERS.items():
        if k in raw:
            v = _number(raw[k], kind, low, inclusive)
            if v is None:
                what = "a whole number" if kind is int else "a number"
                errors.append(f"{k} must be {what} {'>=' if inclusive else '>'} {low}, got {raw[k]!r}")
            else:
                values[k] = v
    p = dataclasses.replace(base, name=Path(where).stem, **values) if not errors else None
    if p and not p.concurrency and not p.rates:
        errors.append("concurrency and rates are both empty: nothing to measure")
    if p and p.search_probes and not p.search_low < p.search_high:
        errors.append(f"search_low ({p.search_low:g}) must be below search_high ({p.search_high:g})")
    if errors:
        raise UsageError(f"PROFILE {where}: " + "; ".join(errors))
    return p


def get(name: str) -> Profile:
    """quick, standard, or the path of a YAML profile."""
    if name in PROFILES:
        return PROFILES[name]
    if not name.endswith((".yaml", ".yml")):
        raise UsageError(f"unknown PROFILE {name!r}; known: {', '.join(PROFILES)}, or a path to a .yaml profile")
    from core.safe_yaml import YamlError, load_path

    try:
        raw = load_path(name)
    except YamlError as e:
        raise UsageError(f"PROFILE {e}") from None
    return from_mapping(raw, name)

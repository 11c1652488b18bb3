"""What a compare measures: its settings (the dimensions a user shapes) and every cell, in order.

A cell is one measurement window: (batching, rows per request, repeat, protocol, load level,
version). Versions are interleaved inside every level, and their order flips from one repeat to
the next (ABBA...), so neither drift of the machine nor going first favours a version. Batching
is the outermost dimension: switching it restarts the servers.
"""
from __future__ import annotations

import dataclasses

from analysis.profiles import Profile
from core.errors import UsageError

BATCHING = {"on": [True], "off": [False], "both": [True, False]}
PROTOCOLS = {"rest": ["rest"], "grpc": ["grpc"], "both": ["rest", "grpc"]}


@dataclasses.dataclass(frozen=True)
class Settings:
    versions: tuple          # server names, baseline first
    rows: tuple              # rows per request
    batching: tuple          # (True,), (False,) or (True, False); (None,): as deployed (external servers)
    protocols: tuple
    profile: Profile
    repeat: int
    sla_p99_ms: float
    api: str = "auto"                   # TF Serving's API: the signature's method_name, or named (loadgen/requestset.py)
    signature: str = "serving_default"
    requests: int = 64                  # distinct requests per (server, protocol, rows), cycled
    requests_file: str = ""             # REQUESTS=: warmup, a TFRecord, JSON lines (loadgen/recordfile.py)
    cold_starts: int = 1                # COLD_STARTS=: fresh servers per version, timed (analysis/coldstart.py)

    def as_dict(self) -> dict:
        return {"versions": list(self.versions), "rows": list(self.rows), "batching": list(self.batching),
                "protocols": list(self.protocols), "profile": dataclasses.asdict(self.profile),
                "repeat": self.repeat, "sla_p99_ms": self.sla_p99_ms, "api": self.api, "signature": self.signature,
                "requests": self.requests, "requests_file": self.requests_file, "cold_starts": self.cold_starts}


def parse_rows(text: str) -> tuple:
    try:
        rows = [int(x) for x in str(text).replace(",", " ").split()]
    except ValueError:
        raise UsageError(f"ROWS must be whole numbers of rows per request, e.g. \"1 32\"; got {text!r}") from None
    if not rows or min(rows) < 1:
        raise UsageError(f"ROWS must be whole numbers >= 1, got {text!r}")
    return tuple(sorted(set(rows)))


def parse_choice(text: str, what: str, table: dict) -> tuple:
    if text not in table:
        raise UsageError(f"{what} must be one of {', '.join(table)}, got {text!r}")
    return tuple(table[text])


def parse_sla(text) -> float | None:
    if text in (None, ""):
        return None
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v > 0 or v == float("inf"):
        raise UsageError(f"SLA_MS must be a number of milliseconds > 0, got {text!r}")
    return v


def levels(p: Profile) -> list:
    return [("closed", c) for c in p.concurrency] + [("poisson", r) for r in p.rates]


def cells(s: Settings) -> list:
    """Every measurement, in execution order."""
    out = []
    for batching in s.batching:
        for r in range(s.repeat):
            order = list(s.versions) if r % 2 == 0 else list(reversed(s.versions))
            for proto in s.protocols:
                for rows in s.rows:
                    for mode, level in levels(s.profile):
                        out += [{"batching": batching, "rows": rows, "repeat": r, "protocol": proto, "mode": mode,
                                 "level": level, "version": v} for v in order]
    return out


def batching_name(b) -> str:
    """on / off, or "deployed" for servers something else started (their batching is theirs)."""
    return "deployed" if b is None else ("on" if b else "off")


def key(c: dict) -> str:
    return (f"{batching_name(c['batching'])}/{c['rows']}/{c['repeat']}/{c['protocol']}/{c['mode']}/"
            f"{c['level']}/{c['version']}")


def group(c: dict) -> tuple:
    """What repeats of one measurement share: the row of the report, less the version."""
    return (c["batching"], c["rows"], c["protocol"], c["mode"], c["level"])

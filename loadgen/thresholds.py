"""k6-style pass/fail criteria: `--threshold 'p95<20ms'`, evaluated on every measured phase.

    METRIC OP VALUE[:abort]
    METRIC  p50 p90 p95 p99 p999 avg max (client-side latency), error_ratio, rate (achieved req/s)
    OP      < <= > >=
    VALUE   a latency with its unit (20ms, 1.5s, 800us), a ratio (0.01) or a rate (450)
    :abort  end the run as soon as the criterion is broken (checked every second on what was measured)

A broken threshold makes the exit code 1 (3 when the result is invalid anyway).
"""
from __future__ import annotations

import dataclasses
import operator
import re
from core.errors import UsageError

LATENCY = ("p50", "p90", "p95", "p99", "p999", "avg", "max")
METRICS = LATENCY + ("error_ratio", "rate")
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_EXPR = re.compile(r"\s*([a-z0-9_]+)\s*(<=|>=|<|>)\s*([0-9.eE+-]+)\s*(us|ms|s)?\s*(:abort)?\s*")
_UNIT_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


class ThresholdError(UsageError):
    """An expression that cannot be a threshold; the message says which part."""


@dataclasses.dataclass(frozen=True)
class Threshold:
    metric: str
    op: str
    value: float        # milliseconds for latencies
    abort: bool = False
    text: str = ""

    def value_of(self, st: dict) -> float | None:
        """The phase statistic this threshold reads (None when the phase has no such value yet)."""
        if self.metric == "error_ratio":
            return st.get("error_ratio")
        if self.metric == "rate":
            return st.get("achieved_qps")
        return st.get("latency_ms", {}).get(self.metric)

    def holds(self, st: dict) -> bool:
        v = self.value_of(st)
        return v is not None and OPS[self.op](v, self.value)


def parse(text: str) -> Threshold:
    m = _EXPR.fullmatch(text)
    if not m:
        raise ThresholdError(f"threshold {text!r}: expected METRIC OP VALUE[:abort], e.g. 'p95<20ms'")
    metric, op, number, unit, abort = m.groups()
    if metric not in METRICS:
        raise ThresholdError(f"threshold {text!r}: metric must be one of {', '.join(METRICS)}")
    try:
        value = float(number)
    except ValueError:
        raise ThresholdError(f"threshold {text!r}: {number!r} is not a number") from None
    if metric in LATENCY:
        if not unit:
            raise ThresholdError(f"threshold {text!r}: a latency needs its unit (us, ms or s), e.g. 'p95<20ms'")
        value *= _UNIT_MS[unit]
    elif unit:
        raise ThresholdError(f"threshold {text!r}: {metric} takes a plain number, no unit")
    return Threshold(metric, op, value, bool(abort), text.strip())


def describe(t: Threshold, got) -> str:
    unit = " ms" if t.metric in LATENCY else ("/s" if t.metric == "rate" else "")
    shown = "n/a" if got is None else f"{got:.4g}{unit}"
    return f"{t.text}: got {shown}"


def broken(thresholds: list, phases: dict) -> list:
    """[(target phase, threshold, description)] of every threshold a measured phase breaks."""
    out = []
    for where, st in phases.items():
        for t in thresholds:
            if not t.holds(st):
                out.append((where, t, f"{where}: {describe(t, t.value_of(st))}"))
    return out

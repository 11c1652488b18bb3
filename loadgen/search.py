"""The maximum stable QPS under an SLA, by bisection over open-loop rates.

A rate is stable when, over a steady window after a warmup, the result is valid
(the generator kept up, enough requests), P99 <= the SLA and the error ratio is
below its bound. The search narrows [low, high] geometrically, then measures the
best rate once more: a maximum that does not hold twice is not reported.
"""
from __future__ import annotations

import copy
import dataclasses
import math
import time

from loadgen.app import build_payloads, check_writable, measure
from loadgen.scenario import parse_duration
from loadgen.summary import write_json_atomic


@dataclasses.dataclass(frozen=True)
class Sla:
    """What a stable rate must hold: P99 at most p99_ms, an error ratio below error_ratio."""
    p99_ms: float
    error_ratio: float = 0.01


def probe(s, payloads, rate: float, index: int, sla: Sla) -> list:
    """[(target name, stable, p99 ms, error ratio, achieved qps, why)] at `rate`."""
    p = copy.deepcopy(s)
    p.load.mode = "poisson" if s.load.mode == "closed" else s.load.mode
    p.load.rate, p.load.steps = rate, []
    p.load.seed = s.load.seed + index
    summary = measure(p, payloads)
    out = []
    for t in summary["targets"]:
        st = t["phases"]["steady"]
        p99 = st["latency_ms"].get("p99", float("inf"))
        why = list(st["invalid_reasons"])
        if p99 > sla.p99_ms:
            why.append(f"P99 {p99:.2f} ms > SLA {sla.p99_ms:g} ms")
        if st["error_ratio"] >= sla.error_ratio:
            why.append(f"error ratio {st['error_ratio']:.4f} >= {sla.error_ratio:g}")
        out.append((t["name"], not why, p99, st["error_ratio"], st["achieved_qps"], "; ".join(why)))
    return out


def search_one(s, payloads, low: float, high: float, precision: float, max_probes: int, sla: Sla, log=print,
               settle_s: float = 2.0) -> dict:
    probes = []

    def stable(rate: float) -> bool:
        [(name, ok, p99, err, qps, why)] = probe(s, payloads, rate, len(probes), sla)
        if not ok:
            # An overloaded server keeps working through its backlog for a while: let it drain, and
            # give a window that failed for the generator's own reasons (send lag, rate) one retry.
            time.sleep(settle_s)
            if "send lag" in why or "scheduled requests" in why:
                [(name, ok, p99, err, qps, why)] = probe(s, payloads, rate, len(probes) + 100, sla)
        probes.append({"rate": rate, "stable": ok, "p99_ms": p99, "error_ratio": err, "achieved_qps": qps,
                       "why": why})
        log(f"  {name} @ {rate:8.1f}/s: {'stable' if ok else 'UNSTABLE'}  p99 {p99:.2f} ms  errors {err:.4f}"
            + (f"  ({why})" if why else ""))
        return ok

    if not stable(low):
        return {"max_stable_qps": None, "probes": probes, "note": f"not stable even at the low bound {low:g}/s"}
    while len(probes) < max_probes and high / low - 1 > precision:
        mid = math.sqrt(low * high)
        if stable(mid):
            low = mid
        else:
            high = mid
        if high / low - 1 <= precision and len(probes) < max_probes:
            if not stable(low):  # confirm: the maximum must hold in a second window
                high, low = low, low / (1 + 4 * precision)
    best = [p for p in probes if p["stable"] and p["rate"] <= low * (1 + 1e-9)]
    qps = max((p["achieved_qps"] for p in best), default=None)
    return {"max_stable_qps": qps, "max_stable_rate": low, "probes": probes}


def search_max_qps(s, args) -> int:
    sla = Sla(parse_duration(args.sla_p99, "--sla-p99") * 1000, args.sla_error_ratio)
    if not 0 < args.low < args.high:
        from loadgen.scenario import ScenarioError
        raise ScenarioError("--low must be > 0 and below --high")
    out = s.out.replace("loadgen.json", "search.json")
    check_writable(out)
    payloads = build_payloads(s)
    results, code = {}, 0
    for t in s.targets:
        one = copy.deepcopy(s)
        one.targets = [t]
        print(f"searching {t.name}: SLA P99 <= {sla.p99_ms:g} ms, errors < {sla.error_ratio:g}, "
              f"{args.low:g}..{args.high:g}/s, windows of {s.load.duration:g}s")
        r = search_one(one, {t.name: payloads[t.name]}, args.low, args.high, args.precision, args.max_probes, sla)
        results[t.name] = r
        if r["max_stable_qps"] is None:
            print(f"{t.name}: no stable rate: {r['note']}")
            code = 1
        else:
            print(f"{t.name}: max stable QPS {r['max_stable_qps']:.1f} (rate {r['max_stable_rate']:.1f}/s)")
    write_json_atomic(out, {"run_id": s.run_id, "sla_p99_ms": sla.p99_ms, "sla_error_ratio": sla.error_ratio,
                            "results": results})
    print(f"search results: {out}")
    return code

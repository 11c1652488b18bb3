"""`make bisect FROM=2.9 TO=2.21 [ROWS=32]`: in which TensorFlow release the ceiling changed.

Measures the in-process ceiling (analysis/ceiling.py) of FROM and TO, then of the releases between
them by binary search: a release whose ceiling differs from FROM's significantly (Welch, p < 0.05)
in the direction of the overall difference moves the upper end down to it, any other the lower
end up, until the two ends are adjacent releases. The upper one is the first release beyond noise;
that pair gets the op table (analysis/optable.py) and every release measured is reported with its
interval against FROM (one Holm family). Venvs and exports are made on demand and cached like any
version's; a release that cannot be installed is named with the reason and the search steps past it.
With every=True (`EVERY=1`) it measures every release instead, all interleaved process by process
(ABBA, so drift over the run spreads over all of them), and names the first release that differs
from FROM after Holm in either direction: a binary search assumes one step, and misses a release
that regressed and recovered between two ends that are alike.
Results: results/<id>/bisect.json (after every release) and bisect.md.
"""
from __future__ import annotations

import dataclasses
import time

from analysis import ceiling, optable, rows as rows_mod, runstore, stats
from analysis.releases import between
from fileio.atomic import write_atomic
from loadgen.cli import new_run_id
from loadgen.summary import write_json_atomic
from core.venvs import VenvError

ALPHA = 0.05


def differs(a: list, b: list, direction: float) -> bool:
    """a's ceiling differs from b's beyond noise in the sign of `direction` (rows/s)."""
    d = stats.welch(a, b)
    return d["p"] is not None and d["p"] < ALPHA and d["diff"] * direction > 0


def search(names: list, measure, direction_of) -> tuple:
    """Binary search over names (oldest first) for the adjacent pair where measure(name) (a list of
    rows/s, or None when the release cannot be measured) changes beyond noise in the direction of
    direction_of(first, last). Returns (lower, upper or None when the ends do not differ, measured)."""
    got = {}

    def value(n):
        if n not in got:
            got[n] = measure(n)
        return got[n]

    lo, hi = 0, len(names) - 1
    if value(names[lo]) is None or value(names[hi]) is None:
        return names[lo], None, got
    direction = direction_of(got[names[lo]], got[names[hi]])
    if not differs(got[names[hi]], got[names[lo]], direction):
        return names[lo], None, got
    while hi - lo > 1:
        candidates = list(range(lo + 1, hi))
        mid = candidates[len(candidates) // 2]
        while value(names[mid]) is None:  # not installable: the next measurable one, outwards from the middle
            candidates.remove(mid)
            if not candidates:
                return names[lo], names[hi], got
            mid = min(candidates, key=lambda i: abs(i - (lo + hi) / 2))
        if differs(got[names[mid]], got[names[lo]], direction):
            hi = mid
        else:
            lo = mid
    return names[lo], names[hi], got


def run_bisect(registry, lo, hi, rows: int, profile, model=None, log=print, pin: bool = True,
               every: bool = False) -> dict:
    """Measure and search (or, every=True, measure all); the result dict is saved after every process.
    profile: its ceiling_* fields (processes per release, window), optrace_* (the op table of the pair)."""
    from stack.runtimes import serving_for

    versions, skipped = between(registry, lo, hi, lo.python)
    by_name = {v.name: v for v in versions}
    registry = dataclasses.replace(registry, versions={**registry.versions, **by_name})  # releases it does not name
    bid = "bisect-" + new_run_id()
    out = {"id": bid, "from": lo.name, "to": hi.name, "rows": rows, "python": lo.python, "created": time.time(),
           "releases": [v.name for v in versions], "tensorflow": {v.name: v.tensorflow for v in versions},
           "skipped": dict(skipped), "ceiling": {}, "optrace": {}, "pinned": pin, "every": every}
    path = runstore.results_dir() / bid
    log(f"bisect {lo.name} .. {hi.name} at {rows} row{'s' if rows > 1 else ''} per call, Python {lo.python}: releases "
        + ", ".join(f"{v.name} ({v.tensorflow})" for v in versions)
        + (f"; not measurable: {', '.join(skipped)}" if skipped else ""))

    def save():
        write_json_atomic(str(path / "bisect.json"), out)

    def measure(name):
        v = by_name[name]
        serving = serving_for("local", registry, [v], model, log=lambda *_: None)
        try:
            log(f"  {name} (TensorFlow {v.tensorflow}): venv and model ...")
            ceiling.measure_all(serving, serving.servers, [rows], profile.ceiling_windows, profile.ceiling_window_s,
                                out["ceiling"], save, log=lambda m: None, pin=pin)
        except (VenvError, ceiling.CeilingError, OSError) as e:
            out["ceiling"].pop(name, None)
            skip(out, name, e, save, log)
            return None
        vals = out["ceiling"][name]["rows_per_s"][str(rows)]
        ci = stats.mean_ci(vals)
        log(f"  {name} (TensorFlow {v.tensorflow}): {ci['mean']:,.0f} rows/s [{ci['ci_low']:,.0f}, {ci['ci_high']:,.0f}] "
            f"over {len(vals)} processes")
        return vals

    names = [v.name for v in versions]
    if every:
        low, high = measure_every(registry, versions, rows, profile, model, out, save, log, pin)
    else:
        low, high, _ = search(names, measure, lambda a, b: stats.mean_ci(b)["mean"] - stats.mean_ci(a)["mean"])
    out["pair"] = [low, high] if high else None
    ends = [low, high] if high else [names[0], names[-1]]  # no step found: why the two ends are alike
    if all(n in out["ceiling"] for n in ends) and profile.optrace_processes:
        log(f"  op table of {ends[0]} and {ends[1]} ...")
        serving = serving_for("local", registry, [by_name[n] for n in ends], model,
                               log=lambda *_: None)
        optable.measure_all(serving, serving.servers, [rows], profile.optrace_processes, profile.optrace_calls,
                            out["optrace"], save, log=lambda m: None, pin=pin)
    out["optrace_pair"] = ends
    out["finished"] = time.time()
    save()
    return out


def skip(out: dict, name: str, error: Exception, save, log) -> None:
    """Record (and say) why a release cannot be measured; the report lists it."""
    out["skipped"][name] = str(error).splitlines()[0][:300]
    save()
    log(f"  {name}: not measurable: {out['skipped'][name]}")


def measure_every(registry, versions: list, rows: int, profile, model, out: dict, save, log, pin: bool) -> tuple:
    """Every release's ceiling, processes interleaved across all of them; (the measured release before
    the first one that differs from the first after Holm, that one) or (first, None)."""
    from stack.runtimes import serving_for

    ready = []
    for i, v in enumerate(versions, 1):  # venvs and exports first: a release that cannot be installed is skipped
        serving = serving_for("local", registry, [v], model, log=lambda *_: None)
        log(f"  [{i}/{len(versions)}] {v.name} (TensorFlow {v.tensorflow}): venv and model ...")
        try:
            serving.ceiling_command(serving.servers[0])
            ready.append(v)
        except (VenvError, OSError) as e:
            skip(out, v.name, e, save, log)
    if len(ready) < 2 or ready[0].name != versions[0].name:
        return versions[0].name, None
    serving = serving_for("local", registry, ready, model, log=lambda *_: None)
    ceiling.measure_all(serving, serving.servers, [rows], profile.ceiling_windows, profile.ceiling_window_s,
                        out["ceiling"], save, log=log, pin=pin)
    return first_beyond(out)


def first_beyond(out: dict) -> tuple:
    """(the measured release before the first whose ceiling differs from FROM's after Holm, that one),
    or (FROM, None) when none does."""
    built = report(out)["releases"]
    for prev, c in zip(built, built[1:]):
        if (c.get("vs_baseline") or {}).get("verdict") in ("faster", "slower"):
            return prev["version"], c["version"]
    return out["from"], None


def report(out: dict) -> dict:
    """Every measured release against FROM, and the pair's op table, with the compare's statistics."""
    measured = [n for n in out["releases"] if n in out["ceiling"]]
    run = {"config": {"versions": measured, "rows": [out["rows"]]}, "cells": {}, "ceiling": out["ceiling"]}
    built = rows_mod.build(run, {})
    pair, ends = {}, out.get("optrace_pair") or []
    if ends and all(n in out["ceiling"] for n in ends):
        pair_run = {"config": {"versions": ends, "rows": [out["rows"]]}, "cells": {},
                    "ceiling": {n: out["ceiling"][n] for n in ends}, "optrace": out["optrace"]}
        pair = rows_mod.build(pair_run, {})
        pair.update(baseline_version=ends[0], config=pair_run["config"])
    return {"releases": built["ceiling"], "pair": pair}


def markdown(out: dict, rep: dict) -> str:
    from analysis.report_text import _fmt, op_table
    from analysis.verdict_text import op_lines, vs_text

    rows = out["rows"]
    lines = [f"# TensorFlow bisect {out['from']} .. {out['to']}, {rows} row{'s' if rows > 1 else ''} per call, "
             f"run {out['id']}", ""]
    if out.get("pair") and out.get("every"):
        lo, hi = out["pair"]
        d = next(c["vs_baseline"] for c in rep["releases"] if c["version"] == hi)
        lines.append(f"**First release beyond noise: {hi} (TensorFlow {out['tensorflow'][hi]})**: {vs_text(d)} than "
                     f"{out['from']} (Holm over every release measured); the op table is of {lo} and {hi}.")
    elif out.get("pair"):
        lo, hi = out["pair"]
        lines.append(f"**First release beyond noise: {hi} (TensorFlow {out['tensorflow'][hi]})**, against {lo} "
                     f"(TensorFlow {out['tensorflow'][lo]}), in the direction of {out['to']} against {out['from']}.")
    elif out.get("every"):
        lines.append(f"**No release beyond noise**: no release's ceiling from {out['from']} to {out['to']} differs "
                     f"from {out['from']}'s at {rows} row{'s' if rows > 1 else ''} per call after Holm "
                     f"({len(rep['releases'])} releases measured, every one).")
    else:
        lines.append(f"**No release beyond noise**: the ceilings of {out['from']} and {out['to']} do not differ "
                     f"significantly at {rows} row{'s' if rows > 1 else ''} per call (Welch, p >= {ALPHA}), or one of them could not be measured.")
    if rep["pair"]:
        lines += op_lines(rep["pair"])
    where = "every process pinned to one core" if out.get("pinned", True) else \
        "every process on all cores (PIN=0: TensorFlow's threads spread as a server's do)"
    lines += ["", f"In-process ceiling (analysis/ceiling.py), {where}, Python {out['python']}; "
              f"mean ± 95% CI over fresh processes; vs {out['from']} in one Holm family.", "",
              "| release | TensorFlow | rows/s | CPU µs per call | vs " + out["from"] + " |", "|---|---|---|---|---|"]
    for c in rep["releases"]:
        d = c.get("vs_baseline")
        lines.append(f"| {c['version']} | {c['tensorflow']} | {_fmt(c['ceiling_rows_per_s'], 0)} | "
                     f"{_fmt(c.get('cpu_us_per_call'), 1)} | {'baseline' if d is None else vs_text(d)} |")
    lines += [f"- {n}: not measured: {why}" for n, why in out["skipped"].items()]
    lines += [f"- {n}: not needed by the search" for n in out["releases"] if n not in out["ceiling"]
              and n not in out["skipped"]]
    if rep["pair"] and rep["pair"].get("optable"):
        lines += op_table(rep["pair"])
    return "\n".join(lines) + "\n"


def write(out: dict) -> str:
    d = runstore.results_dir() / out["id"]
    text = markdown(out, report(out))
    write_atomic(d / "bisect.md", text)
    return text

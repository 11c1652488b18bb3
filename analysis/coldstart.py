"""Cold start as a measured dimension: COLD_STARTS=N fresh servers per version (a process, or a container), the
versions alternating (ABBA...), each timed from start to AVAILABLE and to its first successful request (the first of
its own request set), with its peak RSS by then (the kernel's VmHWM; a container's cgroup peak). With N >= 2 each
figure gets an interval and a Welch test against the baseline's, Holm-corrected within the cold-start family: a
release that takes minutes to become ready (serving#1663) is a regression like any other. The model's warmup
records (assets.extra/tf_serving_warmup_requests) are replayed before AVAILABLE, as TF Serving does, so they are
inside the time to AVAILABLE.
"""
from __future__ import annotations

import time

from analysis import runstore, stats

FAMILY = "cold start"
FIGURES = (("to_available_s", "to AVAILABLE s", 1), ("first_request_ms", "first request ms", 1),
           ("peak_rss_mib", "peak RSS MiB", 0))


def measure(run: dict, servers: list, count: int, cold_start, log, busy) -> None:
    """count cold starts of every server not done yet; cold_start(server) -> dict or None (started elsewhere)."""
    done = run.setdefault("cold_starts", {})
    for i in range(count):
        for s in servers if i % 2 == 0 else servers[::-1]:
            got = done.setdefault(s.name, [])
            if len(got) > i:
                continue
            t0 = time.time()
            cs = cold_start(s)
            if cs is None:  # a server started elsewhere: nothing to time
                done.pop(s.name, None)
                continue
            got.append(cs)
            run["cold_start"].setdefault(s.name, cs)  # the first, as runs before COLD_STARTS kept it
            busy(s.name, t0)
            runstore.save(run)
            peak = f", peak RSS {cs['peak_rss_bytes'] / 2**20:,.0f} MiB" if cs.get("peak_rss_bytes") else ""
            log(f"  cold start {s.name} ({i + 1}/{count}): AVAILABLE after {cs['to_available_s']:.1f}s, first "
                f"request {cs['first_request_ms']:.1f} ms{peak}")


def _values(starts: list, key: str) -> list:
    if key == "peak_rss_mib":
        return [c["peak_rss_bytes"] / 2**20 for c in starts if c.get("peak_rss_bytes")]
    return [c[key] for c in starts if c.get(key) is not None]


def table(run: dict) -> dict:
    """{"rows": [per server: each figure's mean and interval, and against the baseline's], "tests": n}."""

    versions = run["config"]["versions"]
    starts = run.get("cold_starts") or {v: [c] for v, c in (run.get("cold_start") or {}).items()}
    base = starts.get(versions[0], [])
    rows, tests = [], []
    for v in versions:
        if v not in starts:
            continue
        row = {"version": v, "n": len(starts[v])}
        for key, _, _ in FIGURES:
            got = _values(starts[v], key)
            row[key] = stats.mean_ci(got) if got else None
            ref = _values(base, key)
            if v != versions[0] and len(got) >= 2 and len(ref) >= 2:
                row[f"{key}_vs_baseline"] = d = stats.compare(got, ref, stats.welch, False)
                tests.append(d)
        rows.append(row)
    for t, sig in zip(tests, stats.holm([t["p"] for t in tests])):
        t["significant"], t["family"] = sig, FAMILY
        t["verdict"] = "no significant difference" if not sig else "less" if t["diff"] < 0 else "more"
    return {"rows": rows, "tests": len(tests)}


def section(rep: dict) -> list:
    from analysis.verdict_text import fmt_pct

    cs = rep.get("cold_starts") or {}
    if not cs.get("rows"):
        return []
    n = max(r["n"] for r in cs["rows"])
    out = ["", f"## Cold start ({n} fresh server{'s' if n > 1 else ''} per version, alternating)", "",
           "From the server's start to AVAILABLE (the model loaded and warmed up with its warmup records), the "
           "first request of its request set, and the peak RSS by then. Mean ± 95% CI; against the baseline, Welch, "
           f"Holm-corrected within the cold-start family ({cs['tests']} tests).", "",
           "| version | n | " + " | ".join(label for _, label, _ in FIGURES) + " | vs base |", "|" + "---|" * 6]
    for r in cs["rows"]:
        figs = [("n/a" if r[k] is None else _ci(r[k], digits)) for k, _, digits in FIGURES]
        vs = "; ".join(f"{label} {fmt_pct(r[k + '_vs_baseline']['rel'])} {r[k + '_vs_baseline']['verdict']}"
                       for k, label, _ in FIGURES if r.get(k + "_vs_baseline"))
        out.append(f"| {r['version']} | {r['n']} | " + " | ".join(figs) + f" | {vs or 'n/a'} |")
    return out


def _ci(ci: dict, digits: int) -> str:
    if ci["ci_low"] is None:
        return f"{ci['mean']:,.{digits}f}"
    return f"{ci['mean']:,.{digits}f} ± {ci['ci_high'] - ci['mean']:,.{digits}f}"

"""From cells to the report's rows: a mean and interval over repeats for every figure, each version
against the baseline version, and the verdicts corrected (Holm) within the family each belongs to.

Families: the headline (per cell QPS, P99 and the TF runtime; the ceiling per row count) answers the question
asked, "is this version's TensorFlow or serving faster"; the diagnostics (the breakdown's other stages: client,
transport, server, front end, queue; the ceiling pinned to one core) and the op table explain a headline difference and are corrected each within themselves, so
adding diagnostics never costs a headline verdict its power (54 tests in one family once turned a 31-36%
TF runtime difference whose interval excluded zero into "no significant difference").

A row is one (batching, rows per request, protocol, load level, version); its figures:
client side (exact, from the load generator), the breakdown from the server's own counters
(stack/counters.py), memory and CPU from Prometheus, and the efficiency: delivered rows/s
over the version's in-process TensorFlow ceiling at that request size.
"""
from __future__ import annotations

from analysis import optable as optable_mod, outputs as outputs_mod, stats
from analysis.plan import group

BREAKDOWN = ["client_ms", "transport_ms", "server_ms", "frontend_ms", "queue_ms", "runtime_ms"]
# Compared with the baseline: (figure, higher is better, test)
COMPARED = [("achieved_qps", True, stats.welch), ("p99_ms", False, stats.mann_whitney)] + \
           [(b, False, stats.welch) for b in BREAKDOWN]
HEADLINE, DIAGNOSTIC, OPS = "headline", "diagnostic", "op table"  # the Holm families
FAMILY = {name: HEADLINE if name in ("achieved_qps", "p99_ms", "runtime_ms") else DIAGNOSTIC for name, _, _ in COMPARED}
DESCRIBED = ["rows_per_s", "efficiency", "p50_ms", "p90_ms", "p95_ms", "error_ratio", "rss_mib", "gpu_mib", "cpu_s_per_1k",
             "precision_ms", "container_mib", "container_peak_mib", "container_cpu_cores"]


def ceiling_values(run: dict, version: str, rows: int, key: str = "ceiling") -> list:
    got = (run.get(key) or {}).get(version, {}).get("rows_per_s", {})
    return list(got.get(str(rows), []))


def cell_values(cell: dict, prom: dict, ceiling_mean: float | None) -> dict:
    st, lat = cell["client"], cell["client"]["latency_ms"]
    rows_per_s = st["achieved_qps"] * cell["rows"]
    cpu, b = prom.get("cpu_seconds"), cell.get("breakdown") or {}
    return {"achieved_qps": st["achieved_qps"], "rows_per_s": rows_per_s,
            "efficiency": rows_per_s / ceiling_mean if ceiling_mean else None,
            "p50_ms": lat.get("p50"), "p90_ms": lat.get("p90"), "p95_ms": lat.get("p95"), "p99_ms": lat.get("p99"),
            **{k: b.get(k) for k in BREAKDOWN}, "error_ratio": st["error_ratio"],
            "rss_mib": prom["rss_bytes"] / 2**20 if prom.get("rss_bytes") is not None else None,
            "gpu_mib": prom["gpu_bytes"] / 2**20 if prom.get("gpu_bytes") is not None else None,
            "cpu_s_per_1k": cpu / st["completed"] * 1000 if cpu is not None and st["completed"] else None,
            "precision_ms": b.get("precision_ms"), **_container(cell.get("container"))}


def _container(c: dict | None) -> dict:
    """A docker cell's container figures (its cgroup); None elsewhere."""
    c = c or {}
    mib = {k: c[k] / 2**20 if c.get(k) is not None else None for k in ("memory_bytes", "memory_peak_bytes")}
    return {"container_mib": mib["memory_bytes"], "container_peak_mib": mib["memory_peak_bytes"],
            "container_cpu_cores": c.get("cpu_cores")}


def _bucket_span(buckets: list) -> list | None:
    got = [b for b in buckets if b]
    return [min(b[0] for b in got), max(b[1] for b in got)] if got else None


def build(run: dict, prom_by_key: dict) -> dict:
    """{"rows": [...], "ceiling": [...], "tests": n, "mde": {...}} with verdicts filled in."""
    versions = run["config"]["versions"]
    baseline = versions[0]
    ceil_mean = {(v, r): stats.mean_ci(ceiling_values(run, v, r))["mean"]
                 for v in versions for r in run["config"]["rows"]}
    groups: dict = {}
    for k, cell in run["cells"].items():
        if not cell.get("valid", True):  # never averaged into a verdict: the report lists it (reconciliation)
            continue
        vals = cell_values(cell, prom_by_key.get(k, {}), ceil_mean.get((cell["version"], cell["rows"])))
        groups.setdefault((group(cell), cell["version"]), []).append((vals, cell.get("server_p99_bucket")))
    order = {v: i for i, v in enumerate(versions)}
    rows, tests = [], {HEADLINE: [], DIAGNOSTIC: [], OPS: []}
    for (g, version), items in sorted(groups.items(), key=lambda kv: (kv[0][0][0] is False, *kv[0][0][1:],
                                                                       order.get(kv[0][1], 99))):
        batching, nrows, proto, mode, level = g
        vals = [v for v, _ in items]
        row = {"batching": batching, "rows_per_request": nrows, "protocol": proto, "mode": mode, "level": level,
               "version": version, "repeats": len(items), "server_p99_bucket_ms": _bucket_span([b for _, b in items])}
        for name in [n for n, _, _ in COMPARED] + DESCRIBED:
            row[name] = stats.mean_ci([v[name] for v in vals])
        row["ceiling_rows_per_s"] = ceil_mean.get((version, nrows))
        base = groups.get((g, baseline))
        if version != baseline and base:
            for name, better, test in COMPARED:
                cmp = stats.compare([v[name] for v in vals], [b[name] for b, _ in base], test, better)
                row[f"{name}_vs_baseline"] = cmp
                tests[FAMILY[name]].append(cmp)
        rows.append(row)
    ceiling = ceiling_rows(run, "ceiling", tests[HEADLINE])
    pinned = ceiling_rows(run, "ceiling_pinned", tests[DIAGNOSTIC])
    optable = optable_mod.table(run, versions, tests[OPS])
    for family, members in tests.items():
        for t, sig in zip(members, stats.holm([t["p"] for t in members])):
            t["significant"], t["family"] = sig, family
            t["verdict"] = stats.verdict(t, sig, t["higher_is_better"])
    sizes = {family: len(members) for family, members in tests.items()}
    for r in rows:  # the TF runtime's own noise, per cell, at the headline's strictest level
        r["runtime_ms_mde"] = cell_mde(r["runtime_ms"], sizes[HEADLINE])
    mde = {}
    for family in (HEADLINE, DIAGNOSTIC):
        mde.update(detectable(rows, sizes[family], [c for c in COMPARED if FAMILY[c[0]] == family]))
    mde.update(detectable([{"ceiling_rows_per_s": c["ceiling_rows_per_s"]} for c in ceiling], sizes[HEADLINE],
                          [("ceiling_rows_per_s", True, stats.welch)]))
    mde.update({f"{k}_pinned": m for k, m in detectable(
        [{"ceiling_rows_per_s": c["ceiling_rows_per_s"]} for c in pinned], sizes[DIAGNOSTIC],
        [("ceiling_rows_per_s", True, stats.welch)]).items()})
    return {"rows": rows, "ceiling": ceiling, "ceiling_pinned": pinned, "optable": optable, "tests": sizes[HEADLINE],
            "families": sizes, "mde": mde, "outputs": outputs_mod.rows(run)}


def ceiling_rows(run: dict, key: str, tests: list) -> list:
    """The ceiling (key "ceiling": on the servers' cores; "ceiling_pinned": one core) per row count and
    version, each against the baseline's (appended to `tests`, its Holm family)."""
    versions, out = run["config"]["versions"], []
    measured = run.get(key) or {}
    for nrows in run["config"]["rows"]:
        base = ceiling_values(run, versions[0], nrows, key)
        for v in versions:
            got = ceiling_values(run, v, nrows, key)
            if not got:
                continue
            c = {"version": v, "rows_per_request": nrows, "tensorflow": measured[v].get("tensorflow"),
                 "ceiling_rows_per_s": stats.mean_ci(got), "cores": measured[v].get("cores")}
            cpu = measured[v].get("cpu_us_per_call", {}).get(str(nrows))
            if cpu:  # runs before this field: absent
                c["cpu_us_per_call"] = stats.mean_ci(cpu)
            if v != versions[0] and base:
                c["vs_baseline"] = stats.compare(got, base, stats.welch, True)
                tests.append(c["vs_baseline"])
            out.append(c)
    return out


def cell_mde(ci: dict, tests: int) -> float | None:
    """The smallest relative difference of this cell's figure its repeats can call (80% power, alpha / tests)."""
    if ci["n"] < 2 or not ci["mean"] or ci["ci_low"] is None:
        return None
    sd = (ci["ci_high"] - ci["mean"]) * ci["n"] ** 0.5 / stats.st.t.ppf(0.5 + stats.LEVEL / 2, ci["n"] - 1)
    return stats.min_detectable(sd / abs(ci["mean"]), ci["n"], stats.ALPHA / max(1, tests))


def detectable(rows: list, tests: int, compared=COMPARED) -> dict:
    """Per compared figure: the smallest relative difference this report's noise lets a verdict
    call, at the strictest level Holm applies (alpha / number of tests), with 80% power (the
    ceiling's too, its processes being the repeats)."""
    alpha = stats.ALPHA / max(1, tests)
    out = {}
    for name, _, test in compared:
        rel_sd, ns = [], []
        for r in rows:
            ci = r[name]
            if ci["n"] >= 2 and ci["mean"] and ci["ci_low"] is not None:
                half = ci["ci_high"] - ci["mean"]
                sd = half * ci["n"] ** 0.5 / stats.st.t.ppf(0.5 + stats.LEVEL / 2, ci["n"] - 1)
                rel_sd.append(sd / abs(ci["mean"]))
                ns.append(ci["n"])
        if not rel_sd:
            continue
        n = min(ns)
        entry = {"repeats": n, "alpha": alpha, "method": "welch" if test is stats.welch else "mann-whitney"}
        if test is stats.mann_whitney:
            entry["min_repeats"] = stats.min_repeats_mann_whitney(alpha)
        rel_sd.sort()
        entry["relative"] = stats.min_detectable(rel_sd[len(rel_sd) // 2], n, alpha)
        out[name] = entry
    return out

"""The first lines of a report: the answer in sentences, then what limits it.

    **2.21 vs 2.9, 32 rows per request, grpc, batching on:** TensorFlow runtime +18% [+12%, +24%]
    slower at c4, ...; end-to-end QPS: no significant difference at c4, c16; TensorFlow is 41% of
    a request's time on 2.9, 47% on 2.21.
"""
from __future__ import annotations

import time

from analysis.plan import batching_name


def fmt_pct(x) -> str:
    return "n/a" if x is None else f"{x * 100:+.0f}%"


def verdict_words(d: dict) -> str:
    """The verdict as the tables write it. A 95% interval that excludes zero next to "no significant
    difference" reads as a contradiction unless it says why: the interval is per comparison, the
    verdict is corrected for every comparison of the report (Holm)."""
    lo, hi = d.get("rel_ci_low"), d.get("rel_ci_high")
    if d["verdict"] == "no significant difference" and lo is not None and hi is not None and lo * hi > 0:
        return "no significant difference (after Holm)"
    return d["verdict"]


def vs_text(d: dict) -> str:
    """'+18% [+12%, +24%] slower': the relative difference, its interval and the verdict."""
    if d.get("rel") is None:
        return d["verdict"]
    ci = f" [{fmt_pct(d['rel_ci_low'])}, {fmt_pct(d['rel_ci_high'])}]" if d.get("rel_ci_low") is not None else ""
    return f"{fmt_pct(d['rel'])}{ci} {verdict_words(d)}"


def _level(r: dict) -> str:
    return f"c{r['level']:g}" if r["mode"] == "closed" else f"{r['level']:g}/s"


def _claims(rows: list, name: str) -> str:
    """'+18% [+12%, +24%] slower at c4; no significant difference at c16' over a row group."""
    parts: dict = {}
    for r in rows:
        d = r.get(f"{name}_vs_baseline")
        if not d:
            continue
        if d["verdict"] in ("faster", "slower"):
            parts.setdefault(vs_text(d), []).append(_level(r))
        else:
            parts.setdefault(d["verdict"], []).append(_level(r))
    return "; ".join(f"{claim} at {', '.join(levels)}" for claim, levels in parts.items())


def _mean_of(rows: list, name: str) -> float | None:
    got = [r[name]["mean"] for r in rows if r[name]["mean"] is not None]
    return sum(got) / len(got) if got else None


def _share(rows: list) -> str | None:
    got = [r["runtime_ms"]["mean"] / r["client_ms"]["mean"] for r in rows
           if r["runtime_ms"]["mean"] is not None and r["client_ms"]["mean"]]
    return f"{sum(got) / len(got):.0%}" if got else None


def headline(rep: dict) -> list:
    base = rep["baseline_version"]
    versions = rep["config"]["versions"]
    groups: dict = {}
    for r in rep["rows"]:
        groups.setdefault((r["batching"], r["rows_per_request"], r["protocol"]), {}).setdefault(r["version"], []).append(r)
    out = []
    for (batching, nrows, proto), by_version in groups.items():
        for v in versions[1:]:
            rows = by_version.get(v)
            if not rows:
                continue
            parts = []
            runtime = _claims(rows, "runtime_ms")
            if runtime:
                parts.append(f"TensorFlow runtime {runtime}")
            qps = _claims(rows, "achieved_qps")
            if qps:
                parts.append(f"end-to-end QPS {qps}")
            shares = [(name, _share(by_version.get(name, []))) for name in (base, v)]
            if all(s for _, s in shares):
                parts.append(f"TensorFlow is {shares[0][1]} of a request's time on {base} and {shares[1][1]} on {v}")
            rss = _mean_of(rows, "rss_mib"), _mean_of(by_version.get(base, []), "rss_mib")
            if None not in rss:
                parts.append(f"memory {rss[0] - rss[1]:+.0f} MiB RSS")
            out.append(f"**{v} vs {base}, {nrows} row{'s' if nrows > 1 else ''} per request, {proto}, batching "
                       f"{batching_name(batching)}:** " + "; ".join(parts) + ".")
    pinned = {(c["version"], c["rows_per_request"]): c.get("vs_baseline") for c in rep.get("ceiling_pinned", [])}
    for c in rep["ceiling"]:
        d = c.get("vs_baseline")
        if not d or d.get("rel") is None:
            continue
        if d["verdict"] in ("faster", "slower"):
            claim = f"{abs(d['rel']):.0%} {'more' if d['rel'] > 0 else 'fewer'} rows/s than {base}'s " \
                    f"[{fmt_pct(d['rel_ci_low'])}, {fmt_pct(d['rel_ci_high'])}]: {d['verdict']}"
        else:
            claim = f"no significant difference from {base}'s ({fmt_pct(d['rel'])})"
        rows = f"{c['rows_per_request']} row{'s' if c['rows_per_request'] > 1 else ''}"
        cores = c.get("cores") or []
        where = "" if not cores else f" on the servers' {len(cores)} cores" if len(cores) > 1 else " pinned to one core"
        out.append(f"In-process at {rows} (no serving path), {c['version']}'s TensorFlow "
                   f"({c['tensorflow']}) does {c['ceiling_rows_per_s']['mean']:,.0f} rows/s{where}: {claim}."
                   + kernels_alone(d, pinned.get((c["version"], c["rows_per_request"]))))
    out += op_lines(rep)
    out += output_lines(rep)
    return out or ["No comparison: the run has one version or no finished measurement."]


def output_lines(rep: dict) -> list:
    """"Outputs: 2.21 answers differently from 2.9 on probabilities: ..." where a version's answers to the same
    requests differ beyond 1e-5 (wrong-but-fast is a regression too); nothing where they agree."""
    out = []
    for r in rep.get("outputs") or []:
        if r["verdict"] in ("identical", "within 1e-5"):
            continue
        size = f": max abs {r['max_abs']:.3g} (relative {r['max_rel']:.3g})" if r.get("max_abs") is not None else ""
        worst = f", worst request {r['worst_request'] + 1}" if r.get("worst_request") is not None else ""
        out.append(f"**Outputs:** {r['version']} answers differently from {rep['baseline_version']} on "
                   f"`{r['output']}` ({r['verdict']}){size}{worst}.")
    return out


def kernels_alone(d: dict, p: dict | None) -> str:
    """What the pinned one-core ceiling adds to the headline one: whether a difference lives in the kernels or in
    how a release's thread pools spread a call over the cores (" On one core the two are equal (+0%): its thread
    pools, not its kernels.")."""
    if not p or p.get("rel") is None:
        return ""
    real, alone = d["verdict"] in ("faster", "slower"), p["verdict"] in ("faster", "slower")
    if real and not alone:
        return (f" On one core (kernels alone) the two are equal ({fmt_pct(p['rel'])}): the difference is in its "
                "thread pools, not its kernels.")
    if alone and not real:
        return (f" On one core (kernels alone) it is {vs_text(p)}: its kernels differ, but with the thread pools "
                "of these cores that does not show.")
    if real and p["verdict"] != d["verdict"]:
        return f" On one core (kernels alone) it is {vs_text(p)}: its thread pools turn the kernels' difference around."
    return f" On one core (kernels alone): {vs_text(p)}." if real else ""


def op_lines(rep: dict) -> list:
    """"At 32 rows, 2.21's TensorFlow call takes 6.1 µs less than 2.9's; op by op: MatMul -5.2 µs, AddV2
    -1.5 µs (significant op types: -6.7 µs of the -6.1 µs)." from the op table (analysis/optable.py)."""
    from analysis.optable import attribution

    out = []
    for a in attribution(rep):
        d, rows = a["ceiling_us_per_call_diff"], a["rows_per_request"]
        ops = ", ".join(f"{op} {diff:+.1f} µs" for op, diff in a["ops"][:4]) or "no op type differs significantly"
        more = f" and {len(a['ops']) - 4} more" if len(a["ops"]) > 4 else ""
        cover = f" (significant op types: {a['ops_sum_us']:+.1f} µs of the {d:+.1f} µs)" if a["ops"] else \
            f" (all op types together: {a['all_ops_sum_us']:+.1f} µs)"
        out.append(f"At {rows} row{'s' if rows > 1 else ''}, a call of {a['version']}'s TensorFlow takes {abs(d):.1f} µs "
                   f"{'more' if d > 0 else 'less'} than {rep['baseline_version']}'s in-process"
                   f"{'' if a['ceiling_significant'] else ' (not significant)'}; op by op: {ops}{more}{cover}.")
    return out


def notes(rep: dict) -> list:
    """What a reader must know before trusting the figures: shared cores, invalid windows, holes."""
    out = []
    pl = rep.get("placement") or {}
    if pl and not pl.get("isolated") and rep["config"].get("runtime") != "external":
        out.append(f"> **Client and servers share cores** ({pl.get('reason')}): end-to-end QPS and latency include "
                   "the load generator's own CPU time; the TF runtime and ceiling figures do not.")
    elif pl:
        out.append(f"> Placement: load generator on cores {pl['client']}, model servers on cores {pl['servers']}.")
    for lines in ((rep.get("_run") or {}).get("preflight") or {}).values():
        out += [f"> **Preflight:** {line}" for line in lines]
    if rep["config"].get("runtime") == "external":
        out.append(f"> **Servers started elsewhere** (TARGETS), scraped by {rep['config'].get('prometheus')}: their "
                   "batching is as deployed, no cold start was timed, and client and servers may not share a machine.")
    knobbed = {n: s["knobs"] for n, s in (rep["config"].get("servers") or {}).items() if s.get("knobs")}
    if knobbed:  # which server is which setting: the verdicts above name servers
        from stack.knobs import describe

        out.append("> **Knobs**: " + "; ".join(f"{n} runs TF {rep['config']['servers'][n]['tensorflow']} with "
                                               f"{describe(tuple(k.items()))}" for n, k in knobbed.items())
                   + ". Each setting is a server of its own, interleaved like versions; its ceiling runs with the "
                   "same setting.")
    for n, path in sorted((rep["config"].get("model_for") or {}).items()):
        out.append(f"> **Positive control**: {n} serves {path} (MODEL_B), not the model {rep['baseline_version']} "
                   "serves: its verdicts must find that difference, or the protocol cannot see one of its size.")
    pythons = {v: c["python"] for v, c in (rep.get("_run") or {}).get("ceiling", {}).items() if c.get("python")}
    if rep["config"].get("runtime") == "local" and len(set(pythons.values())) > 1:
        # TF 2.6-2.11 have wheels for Python 3.9 only, the newest for 3.11: the drop-in's own front end
        # runs at each interpreter's speed, which real TF Serving (C++) does not.
        out.append("> **The drop-in runs on different Pythons** (" + ", ".join(
            f"{v}: {p}" for v, p in sorted(pythons.items())) + "): end-to-end QPS and latency compare the "
            "interpreters too; the TF runtime and ceiling figures do not.")
    for v, c in sorted((rep.get("_run") or {}).get("ceiling", {}).items()):
        if "skipped" in c:
            out.append(f"> TF ceiling of {v} not measured: {c['skipped']}.")
    if rep["status"] != "done":
        why = ("interrupted by " + rep["interrupted"] if rep.get("interrupted") else
               "stopped by an error: " + rep["failed"] if rep.get("failed") else "the compare was interrupted")
        missing = rep.get("missing") or []
        out.append(f"> **Partial run**: {len(rep['crosscheck'])} of {rep['planned']} measurements finished ({why}); "
                   f"`make compare ... RUN={rep['run_id']}` resumes it. Missing: "
                   + ", ".join(f"`{k}`" for k in missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
                   + ".")
    invalid = [c for c in rep["crosscheck"] if not c["valid"]]
    if invalid:
        out.append(f"> **{len(invalid)} invalid window(s)** (generator saturated, send lag, too few requests or "
                   "server unreachable): see the reconciliation list below.")
    bad = [c for c in rep["crosscheck"] if not c["client_vs_server"]["ok"] or (
        not c["server_vs_prometheus"]["ok"] and c["server_vs_prometheus"]["prometheus"] is not None)]
    if bad:
        out.append(f"> **Counts disagree in {len(bad)} window(s)**: something else talked to a server, or a request "
                   "was lost; see below.")
    if rep["gaps"] is None:
        out.append("> Prometheus did not answer: memory and CPU are n/a and gaps could not be checked.")
    for a, b in rep["gaps"] or []:
        since = time.strftime("%H:%M:%S", time.localtime(a))
        out.append(f"> **Gap in the Prometheus data**: {b - a:.0f} s from {since} (Prometheus down or not "
                   "scraping); windows overlapping it show memory and CPU as n/a.")
    return out + [""] if out else []

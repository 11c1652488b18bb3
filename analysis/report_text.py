"""The report's text forms: the answer first (analysis/verdict_text.py), then what limits it, then
the tables (also shown in the HTML page), and the CSV."""
from __future__ import annotations

import csv
import io

from analysis import coldstart, machine, memory_text
from analysis.plan import batching_name
from analysis.rows import BREAKDOWN, COMPARED, DESCRIBED
from analysis.verdict_text import headline, notes, vs_text
from stack import knobs

LABELS = {"ceiling_rows_per_s": "TF ceiling (in-process, servers' cores)",
          "ceiling_rows_per_s_pinned": "TF ceiling (in-process, one core)", "achieved_qps": "QPS", "rows_per_s": "rows/s",
          "efficiency": "of TF ceiling", "p50_ms": "P50 ms",
          "p90_ms": "P90 ms", "p99_ms": "P99 ms", "error_ratio": "errors", "rss_mib": "RSS MiB",
          "gpu_mib": "GPU MiB", "cpu_s_per_1k": "CPU s/1k req", "client_ms": "client", "transport_ms": "transport",
          "server_ms": "server", "frontend_ms": "front end", "queue_ms": "queue", "runtime_ms": "TF runtime"}


def _python(rep: dict, version: str) -> str:
    """The " (Python 3.10.16; aiohttp 3.13.5, grpcio 1.80.1, ...)" after a version: the interpreter and
    front-end packages of its own runtime, where its ceiling ran."""
    c = (rep.get("_run") or {}).get("ceiling", {}).get(version) or {}
    pkgs = ", ".join(f"{k} {v}" for k, v in sorted((c.get("packages") or {}).items()))
    return f" (Python {c['python']}" + (f"; {pkgs}" if pkgs else "") + ")" if c.get("python") else ""


def unstable_above(search: dict) -> str:
    """The search's resolution: the lowest rate above the maximum that failed. Without it two versions
    stopped on the same probe read as equally fast, whatever lies between that probe and the next."""
    top = search.get("max_stable_rate")
    failed = [p["rate"] for p in search.get("probes", []) if not p["stable"] and top and p["rate"] > top]
    return f" (unstable at {min(failed):.0f}/s)" if failed else ""


def _fmt(ci: dict, digits: int = 2) -> str:
    if not ci or ci.get("mean") is None:
        return "n/a"
    if ci.get("ci_low") is None:
        return f"{ci['mean']:.{digits}f}"
    return f"{ci['mean']:.{digits}f} ± {(ci['ci_high'] - ci['ci_low']) / 2:.{digits}f}"


def _vs(row: dict, name: str, baseline: str) -> str:
    d = row.get(f"{name}_vs_baseline")
    if d is None:
        return "baseline" if row["version"] == baseline else ""
    return vs_text(d)


def _mde(row: dict) -> str:
    """" (detects >= 55%)": the smallest TF runtime difference this cell's repeats can call."""
    m = row.get("runtime_ms_mde")
    return f" (detects >= {m:.0%})" if m is not None else ""


def _bucket(b) -> str:
    if not b:
        return "n/a"
    return f"> {b[0]:.3g} ms" if b[1] == float("inf") else f"{b[0]:.3g}–{b[1]:.3g} ms"


def load_name(r: dict) -> str:
    level = f"c{r['level']:g}" if r["mode"] == "closed" else f"{r['level']:g}/s"
    return f"{batching_name(r['batching'])} | {r['rows_per_request']} | {r['protocol']} | {level}"


def markdown(rep: dict) -> str:
    base = rep["baseline_version"]
    cfg = rep["config"]
    out = [f"# TF Serving comparison, run {rep['run_id']}", "", *headline(rep), *memory_text.first_lines(rep),
           machine.line(rep["environment"]), "", *notes(rep)]
    out += ["## Throughput and latency", "",
            f"Mean ± 95% CI over {cfg['repeat']} repeats; client side exact (load generator); server P99 is the "
            "bucket of TF Serving's request_latency histogram that holds it.", "",
            "| batching | rows | protocol | load | version | QPS | rows/s | of TF ceiling | P50 ms | P99 ms "
            "| server P99 | errors | RSS MiB | CPU s/1k req | QPS vs base | P99 vs base |", "|" + "---|" * 16]
    for r in rep["rows"]:
        eff = "n/a" if r["efficiency"]["mean"] is None else f"{r['efficiency']['mean']:.0%}"
        out.append(f"| {load_name(r)} | {r['version']} | {_fmt(r['achieved_qps'], 1)} | {_fmt(r['rows_per_s'], 0)} | "
                   f"{eff} | "
                   f"{_fmt(r['p50_ms'])} | {_fmt(r['p99_ms'])} | {_bucket(r['server_p99_bucket_ms'])} | "
                   f"{_fmt(r['error_ratio'], 4)} | {_fmt(r['rss_mib'], 0)} | {_fmt(r['cpu_s_per_1k'])} | "
                   f"{_vs(r, 'achieved_qps', base)} | {_vs(r, 'p99_ms', base)} |")
    out += ["", "## Where the time goes (mean ms per request)", "",
            "client = transport + server; server = front end + queue + TF runtime (the server's own counters read "
            "at each window's edges, inference requests only: the healthchecks' status GETs are left out). TF Serving "
            "prints each `_sum` with six significant digits, so a stage's mean is exact to ± the last column (both "
            "readings' rounding over the window's requests; it grows with the server's lifetime total). TF runtime "
            "vs base is the verdict on TensorFlow itself; \"detects >= N%\" is the smallest difference that cell's "
            "repeats can call (80% power at the headline's strictest Holm level).", "",
            "| batching | rows | protocol | load | version | " + " | ".join(LABELS[b] for b in BREAKDOWN)
            + " | TF share | TF runtime vs base | client vs base | ± ms |", "|" + "---|" * (len(BREAKDOWN) + 9)]
    for r in rep["rows"]:
        rt, cl = r["runtime_ms"]["mean"], r["client_ms"]["mean"]
        share = f"{rt / cl:.0%}" if rt is not None and cl else "n/a"
        prec = (r.get("precision_ms") or {}).get("mean")
        out.append(f"| {load_name(r)} | {r['version']} | " + " | ".join(_fmt(r[b], 3) for b in BREAKDOWN)
                   + f" | {share} | {_vs(r, 'runtime_ms', base)}{_mde(r)} | {_vs(r, 'client_ms', base)} | "
                   + ("n/a" if prec is None else f"{prec:.4f}") + " |")
    out += containers(rep)
    pip = " The servers ran in containers; the ceiling ran in each version's local venv on the host: the pip build "\
          "of its TensorFlow release, not the TensorFlow inside TF Serving's image." if cfg.get("runtime") == "docker" else ""
    out += ["", "## TensorFlow ceiling (in-process, the version's own runtime, no serving path)", "",
            "Mean ± 95% CI over fresh processes, one window each (two processes of one build differ more than "
            "two windows of one process)" + _pinned(rep) + "." + pip, "",
            "| rows | version | TensorFlow | cores | rows/s | CPU µs per call | vs base |", "|" + "---|" * 7]
    for c in rep["ceiling"] + rep.get("ceiling_pinned", []):
        d = c.get("vs_baseline")
        vs = "baseline" if d is None else vs_text(d)
        cpu = _fmt(c["cpu_us_per_call"], 1) if c.get("cpu_us_per_call") else "n/a"  # runs before the field
        cores = c.get("cores") or []
        where = "n/a" if not cores else f"one ({cores[0]})" if len(cores) == 1 else f"{len(cores)} (servers')"
        out.append(f"| {c['rows_per_request']} | {c['version']} | {c['tensorflow']} | {where} | "
                   f"{_fmt(c['ceiling_rows_per_s'], 0)} | {cpu} | {vs} |")
    out += op_table(rep)
    out += outputs_table(rep)
    out += ["", "## Max stable QPS (P99 <= SLA, errors < 1%)", ""]
    out += [f"- batching {k.split('/')[0]}, {k.split('/')[1]} rows, {k.split('/')[2]}, {k.split('/')[3]}: "
            + ("none found" if v is None else f"{v:.1f} req/s" + unstable_above(rep["search"].get(k, {})))
            for k, v in sorted(rep["max_stable_qps"].items())]
    out += coldstart.section(rep)
    out += [f"- {v}: the container was created in {c['container_create_s']:.1f} s before it started (the engine's "
            "copy of the image: not part of TF Serving's start)"
            for v, c in sorted(rep["cold_start"].items()) if c.get("container_create_s") is not None]
    out += memory_text.section(rep)
    out += reconciliation(rep)
    out += statistics(rep)
    env = rep["environment"]
    out += ["", "## Environment", "", f"CPU: {env['cpu']} ({env['cpus']} cores; {machine.describe(env)}); GPU: {env['gpu']} (driver "
            f"{env['driver']}); runtime {env['runtime']}; commit {env['git_commit'][:12]}; TensorFlow, interpreter and front end per version:", ""]
    out += [f"- {k}: TensorFlow {v}" + _python(rep, k) for k, v in env["tensorflow"].items()]
    out += ["", model_line(rep["config"])]
    return "\n".join(out) + "\n"


def model_line(cfg: dict) -> str:
    """Which model every version served, and which release exported it (a zoo model: the oldest compared)."""
    from models.zoo import exported_by

    model = cfg.get("model") or "example"
    if model == "example":
        return "Model: the example MLP (784-128-10), exported by each version's own TensorFlow."
    by = exported_by(model)
    return (f"Model: {model}" + (f", exported once by TensorFlow {by} and served unchanged by every version" if by
                                 else ", served unchanged by every version")
            + f"; API {cfg.get('api', 'auto')}, signature {cfg.get('signature', 'serving_default')}, "
            f"{cfg.get('requests', 1)} distinct requests per server, protocol and row count.")


def outputs_table(rep: dict) -> list:
    """Each version's answers to the same requests against the baseline's, per output."""
    rows = rep.get("outputs") or []
    if not rows:
        return []
    n = ((rep.get("_run") or {}).get("outputs") or {}).get(rep["baseline_version"], {}).get("requests", "?")
    out = ["", "## Outputs (the same requests, each version against the baseline)", "",
           f"The first {n} requests of the request set, sent to every server; per output the largest absolute and "
           "relative difference from the baseline's answer and the request that has it. \"within 1e-5\": |a - b| <= "
           "1e-6 + 1e-5 |b| everywhere.", "", "| version | output | verdict | max abs | max relative | worst request |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        fmt = (lambda x: "n/a" if x is None else f"{x:.3g}")
        worst = "n/a" if r.get("worst_request") is None else str(r["worst_request"] + 1)
        out.append(f"| {r['version']} | {r['output']} | {r['verdict']} | {fmt(r.get('max_abs'))} | "
                   f"{fmt(r.get('max_rel'))} | {worst} |")
    return out


def op_table(rep: dict) -> list:
    """Mean µs per call of every op type, per version, from TensorFlow's own step statistics."""
    rows = rep.get("optable") or []
    if not rows:
        return []
    n = max(r["us_per_call"]["n"] for r in rows)
    out = ["", "## Where TensorFlow's time goes, op by op (in-process, traced)", "",
           f"Mean ± 95% CI of µs per call over {n} fresh processes per version (RunOptions FULL_TRACE step "
           "statistics of the server's own Session callable, each node's run summed by op type; a kernel that "
           "computes an op under another name, oneDNN's _Mkl* or a grappler fusion, counts as that op and is named "
           "beside it); vs base is Welch's test in the op table's own Holm family. Tracing's own cost is the last "
           "row: a traced call against an untraced one in the same process.", "",
           "| " + " | ".join(OP_HEADER) + " |", "|" + "---|" * len(OP_HEADER)]
    return out + ["| " + " | ".join(map(str, cells)) + " |" for cells in op_rows(rows)]


OP_HEADER = ["rows", "op type", "version", "kernel", "µs per call", "vs base"]


def op_rows(rows: list) -> list:
    """The op table's cells, for the Markdown and the HTML page."""
    out = []
    for r in rows:
        if "untraced_us_per_call" in r:
            traced, plain = r["us_per_call"]["mean"], r["untraced_us_per_call"]["mean"]
            vs = f"untraced {_fmt(r['untraced_us_per_call'], 1)}: tracing adds {traced - plain:.1f} µs"
        else:
            d = r.get("vs_baseline")
            vs = "baseline" if d is None else (f"{d['diff']:+.1f} µs, " + vs_text(d) if d.get("diff") is not None
                                               else d["verdict"])
        kernels = ", ".join(k for k in r.get("kernels", []) if k != r["op"]) or "-"  # runs before grouping: none
        out.append([r["rows_per_request"], r["op"], r["version"], kernels, _fmt(r["us_per_call"], 1), vs])
    return out


def containers(rep: dict) -> list:
    """Memory and CPU per container (docker runtime: each cell's cgroup, read by the docker engine)."""
    got = [r for r in rep["rows"] if (r.get("container_mib") or {}).get("mean") is not None]
    if not got:
        return []
    out = ["", "## Memory and CPU per container (cgroup)", "",
           "Memory at the end of each window (page cache left out), the container's peak since it started (where "
           "the engine reports one: cgroup v1), and CPU cores busy over warmup + window.", "",
           "| batching | rows | protocol | load | version | memory MiB | peak MiB | CPU cores |", "|" + "---|" * 8]
    for r in got:
        out.append(f"| {load_name(r)} | {r['version']} | {_fmt(r['container_mib'], 0)} | "
                   f"{_fmt(r['container_peak_mib'], 0)} | {_fmt(r['container_cpu_cores'], 2)} |")
    return out


def reconciliation(rep: dict) -> list:
    checks = rep["crosscheck"]
    cs = [c["client_vs_server"] for c in checks]
    sp = [c["server_vs_prometheus"] for c in checks]
    out = ["", "## Nothing lost? (client vs the server's counter vs Prometheus, per window)", "",
           f"- client = server, exactly: {sum(c['exact'] and c['ok'] for c in cs)} of {len(cs)} windows"
           + (f"; {sum(not c['exact'] for c in cs)} could not be exact" if any(not c["exact"] for c in cs) else ""),
           f"- server = Prometheus, exactly (idle edges): {sum(c['exact'] and c['ok'] for c in sp)} of {len(sp)} "
           f"windows; within one scrape interval at each edge: {sum(not c['exact'] and c['ok'] for c in sp)}"]
    for c in checks:
        a, b = c["client_vs_server"], c["server_vs_prometheus"]
        if not a["ok"] or not b["ok"] or not c["valid"] or c.get("in_gap"):
            out.append(f"- MISMATCH or invalid: {c['cell']}: client {a['client']}, server {a['server']}"
                       f"{' (' + a['why'] + ')' if a['why'] else ''}; Prometheus {b['prometheus']} for the server's "
                       f"{b['expected']}{' (' + b['why'] + ')' if b['why'] else ''}; valid {c['valid']}"
                       + (", inside a Prometheus gap" if c.get("in_gap") else ""))
    return out


def _pinned(rep: dict) -> str:
    """Where the ceiling's processes ran (runs before pinning say nothing)."""
    cores = {tuple(c.get("cores") or ()) for c in ((rep.get("_run") or {}).get("ceiling") or {}).values()
             if "skipped" not in c}
    if len(cores) != 1 or not next(iter(cores)):
        return ""
    only = next(iter(cores))
    used = ", ".join(map(str, only))
    threads = any(knobs.threads(tuple((s.get("knobs") or {}).items()))
                  for s in ((rep.get("config") or {}).get("servers") or {}).values())
    if len(only) > 1 and threads:  # analysis.ceiling.ceiling_core: thread counts are compared
        return (f", each on the servers' cores {used}: thread counts are compared, "
                "and on one core they would measure only oversubscription (noisier than one pinned core)")
    if len(only) > 1:
        return (f", each on the servers' cores {used} with TensorFlow's thread pools sized by them, as a server "
                "runs it" + ("; the rows on one core measure the kernels alone (quieter, blind to how a release's "
                             "thread pools spread a call over the cores), a diagnostic outside the headline's Holm "
                             "family" if rep.get("ceiling_pinned") else ""))
    return (f", each pinned to core {used}: TensorFlow's threads spread over "
            "several cores hand work across them on every op, slower and far noisier")


def families(rep: dict) -> str:
    """Which Holm family each verdict belongs to, and how many tests each holds."""
    sizes = rep.get("families") or {"headline": rep["tests"]}  # runs before families: one
    if len(sizes) == 1:
        return f"All {rep['tests']} verdicts of this report are corrected together (Holm, family-wise 5%)."
    memory = f"; memory, {sizes['memory']} (each version's RSS growth against the baseline's)" if "memory" in sizes \
        else ""
    if "cold start" in sizes:
        memory += f"; cold start, {sizes['cold start']} (time to AVAILABLE, first request, peak RSS)"
    return (f"Verdicts are corrected (Holm, family-wise 5%) within {len(sizes)} families: the headline, "
            f"{sizes['headline']} tests (QPS, P99 and TF runtime per cell, the ceiling per row count); the diagnostics, "
            f"{sizes['diagnostic']} (the breakdown's client, transport, server, front end and queue; the ceiling on one "
            f"core); the op table, {sizes['op table']} (op types){memory}. The diagnostics and the op table explain a "
            "headline difference and never cost it its power.")


def statistics(rep: dict) -> list:
    out = ["", "## How the verdicts are made", "",
           "Means: Student's t interval (scipy, exact quantiles). Differences of means: Welch's t, degrees of "
           "freedom unrounded. P99: Mann-Whitney U on the per-window P99s (exact permutation p-value), shift by "
           "Hodges-Lehmann. " + families(rep) + " Intervals are per comparison (95%), so an interval that excludes "
           "zero can still read \"no significant difference (after Holm)\"."]
    for name, m in rep["mde"].items():
        label = LABELS.get(name, name)
        if m.get("min_repeats") and m["repeats"] < m["min_repeats"]:
            out.append(f"- {label}: with {m['repeats']} repeats no P99 difference can be significant among "
                       f"the {rep['tests']} headline comparisons; that needs at least {m['min_repeats']} repeats per version.")
        elif m.get("relative") is not None:
            unit = "fresh processes per version" if name.startswith("ceiling_rows_per_s") else "repeats"
            out.append(f"- {label}: differences under {m['relative']:.0%} cannot be told from noise with "
                       f"{m['repeats']} {unit} here (80% power at the strictest Holm level).")
    return out


def csv_text(rep: dict) -> str:
    names = [n for n, _, _ in COMPARED] + DESCRIBED
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["batching", "rows_per_request", "protocol", "mode", "level", "version", "repeats"]
               + [f"{n}_{p}" for n in names for p in ("mean", "ci_low", "ci_high")]
               + [f"{n}_vs_baseline_{p}" for n, _, _ in COMPARED for p in ("diff", "ci_low", "ci_high", "p", "verdict")])
    for r in rep["rows"]:
        w.writerow([r["batching"], r["rows_per_request"], r["protocol"], r["mode"], r["level"], r["version"],
                    r["repeats"]] + [r[n].get(p) for n in names for p in ("mean", "ci_low", "ci_high")]
                   + [(r.get(f"{n}_vs_baseline") or {}).get(p) for n, _, _ in COMPARED
                      for p in ("diff", "ci_low", "ci_high", "p", "verdict")])
    return buf.getvalue()

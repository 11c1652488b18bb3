"""The report's text forms: the Markdown tables (also shown in the HTML page) and the CSV."""
from __future__ import annotations

import csv
import io
import time

METRICS = [  # (name, label, higher is better)
    ("achieved_qps", "QPS", True), ("avg_ms", "avg ms", False), ("p50_ms", "P50 ms", False),
    ("p90_ms", "P90 ms", False), ("p99_ms", "P99 ms", False), ("server_p99_ms", "server P99 ms", False),
    ("error_ratio", "errors", False), ("rss_mib", "RSS MiB", False), ("gpu_mib", "GPU MiB", False),
    ("cpu_s_per_1k", "CPU s/1k req", False),
]



def _warnings(rep: dict) -> list:
    """What the reader must know before trusting the tables: a partial run, holes in the data."""
    out = []
    if rep["status"] != "done":
        out.append(f"> **Partial run**: {len(rep['crosscheck'])} of {rep['planned']} measurements finished (the "
                   f"compare was interrupted); `make compare ... RUN={rep['run_id']}` resumes it.")
    if rep["gaps"] is None:
        out.append("> Prometheus did not answer: server-side figures are n/a and gaps could not be checked.")
    for a, b in rep["gaps"] or []:
        since = time.strftime("%H:%M:%S", time.localtime(a))
        out.append(f"> **Gap in the Prometheus data**: {b - a:.0f} s from {since} (Prometheus down or not "
                   "scraping); windows overlapping it show server-side figures as n/a.")
    return out + [""] if out else []


def _fmt(ci: dict, digits: int = 2) -> str:
    if not ci or ci.get("mean") is None:
        return "n/a"
    if ci.get("ci_low") is None:
        return f"{ci['mean']:.{digits}f}"
    return f"{ci['mean']:.{digits}f} ± {(ci['ci_high'] - ci['ci_low']) / 2:.{digits}f}"


def _vs_baseline(row: dict, key: str, baseline: str) -> str:
    """A version's difference to the baseline with its interval and verdict, for the table."""
    d = row.get(key)
    if d is None:
        return "baseline" if row["version"] == baseline else ""
    if d.get("ci_low") is None:
        return d["verdict"]
    return f"{d['diff']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}] {d['verdict']}"


def markdown(rep: dict) -> str:
    out = [f"# TF Serving comparison, run {rep['run_id']}", "",
           f"Baseline version: **{rep['baseline_version']}**; mean ± 95% CI over {rep['config']['repeat']} repeats "
           f"(t-interval); profile {rep['config']['profile']['name']}; runtime {rep['config']['runtime']}.", "",
           *_warnings(rep),
           "| protocol | load | version | " + " | ".join(label for _, label, _ in METRICS)
           + " | QPS vs base | P99 vs base |",
           "|" + "---|" * (len(METRICS) + 5)]
    for r in rep["rows"]:
        load = f"{'c' if r['mode'] == 'closed' else 'rate '}{r['level']:g}"
        vs = [_vs_baseline(r, k, rep["baseline_version"]) for k in ("achieved_qps_vs_baseline", "p99_ms_vs_baseline")]
        out.append(f"| {r['protocol']} | {load} | {r['version']} | "
                   + " | ".join(_fmt(r[n], 4 if n == "error_ratio" else 2) for n, _, _ in METRICS)
                   + f" | {vs[0]} | {vs[1]} |")
    out += ["", "## Max stable QPS (P99 <= SLA, errors < 1%)", ""]
    out += [f"- {k}: {'none found' if v is None else f'{v:.1f} req/s'}"
            for k, v in sorted(rep["max_stable_qps"].items())]
    out += ["", "## Cold start", ""]
    out += [f"- {v}: AVAILABLE after {c['to_available_s']:.1f} s, first predict after {c['to_first_predict_s']:.1f} s "
            f"(first request {c['first_request_ms']:.1f} ms)" for v, c in sorted(rep["cold_start"].items())]
    bad = [c for c in rep["crosscheck"] if not c["consistent"] or not c["valid"] or c["in_gap"]]
    out += ["", "## Nothing lost? (loadgen count vs server request_count vs Prometheus)", "",
            f"{len(rep['crosscheck']) - len(bad)} of {len(rep['crosscheck'])} windows consistent within the "
            "scrape edge."]
    out += [f"- MISMATCH or invalid: {c['cell']}: client {c['client']}, server {c['server']}, "
            f"Prometheus {c['prometheus_loadgen']} (edge ±{c['edge']}), valid {c['valid']}"
            + (", inside a Prometheus gap" if c["in_gap"] else "") for c in bad]
    env = rep["environment"]
    out += ["", "## Environment", "", f"CPU: {env['cpu']} ({env['cpus']} cores); GPU: {env['gpu']} (driver "
            f"{env['driver']}); runtime {env['runtime']}; commit {env['git_commit'][:12]}; TensorFlow: "
            + ", ".join(f"{k}: {v}" for k, v in env["tensorflow"].items())]
    return "\n".join(out) + "\n"


def csv_text(rep: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["protocol", "mode", "level", "version", "repeats"] + [f"{n}_{p}" for n, _, _ in METRICS
                                                                        for p in ("mean", "ci_low", "ci_high")])
    for r in rep["rows"]:
        w.writerow([r["protocol"], r["mode"], r["level"], r["version"], r["repeats"]]
                   + [r[n].get(p) for n, _, _ in METRICS for p in ("mean", "ci_low", "ci_high")])
    return buf.getvalue()

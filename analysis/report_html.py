"""The report as one self-contained HTML page: the answer first (sentences), then what limits it,
then real tables (the same numbers as report.json) and charts that mean something for an
interleaved run, each titled with the measurement it shows. No script, no network."""
from __future__ import annotations

import html
import re

import numpy as np

from analysis import charts, coldstart, machine, memory_text
from analysis.report_text import LABELS, OP_HEADER, _bucket, _fmt, _vs, load_name, op_rows, reconciliation, statistics
from analysis.rows import BREAKDOWN
from analysis.verdict_text import headline, notes, vs_text
from loadgen.record import bin_values, decode_hdr

STYLE = ("body{font-family:system-ui,sans-serif;max-width:1360px;margin:16px auto;padding:0 16px;color:#222}"
         "h1{font-size:22px}h2{font-size:17px;margin-top:28px}.answer p{font-size:15px;line-height:1.45}"
         ".note{background:#fff6e0;border-left:4px solid #e0a000;padding:6px 10px;margin:6px 0}"
         "table{border-collapse:collapse;font-size:12px;margin:8px 0}th,td{border:1px solid #ccc;padding:3px 6px;"
         "text-align:right}th{background:#f2f2f2}td:nth-child(-n+5){text-align:left}"
         ".chart{margin:14px 0}.faster{color:#1a7f37}.slower{color:#b42318}")


def _inline(text: str) -> str:
    """The Markdown of a headline line as HTML: escaped, **bold** and `code` kept."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    out = re.sub(r"`(.+?)`", r"<code>\1</code>", out)
    return re.sub(r"\b(faster|slower)\b", r'<span class="\1">\1</span>', out)


def _table(header: list, rows: list) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_inline(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cdf_points(encoded: str) -> tuple:
    h = decode_hdr(encoded)
    counts = np.frombuffer(h.counts, dtype=np.int64, count=h.counts_len)
    nz = np.nonzero(counts)[0]
    if not len(nz):
        return [], []
    low, size = bin_values(h, nz)
    return ((low + size) / 1000).tolist(), (np.cumsum(counts[nz]) / h.total_count).tolist()


def _half(ci: dict) -> float:
    return (ci["ci_high"] - ci["ci_low"]) / 2 if ci.get("ci_low") is not None else 0.0


def chart_parts(rep: dict) -> list:
    run, rows = rep["_run"], rep["rows"]
    versions = rep["config"]["versions"]
    groups = list(dict.fromkeys(load_name(r).replace(" | ", " ") for r in rows))
    by = {(load_name(r).replace(" | ", " "), r["version"]): r for r in rows}
    parts = []
    for name, label in (("achieved_qps", "QPS"), ("runtime_ms", "TF runtime ms per request")):
        values = {k: (r[name]["mean"] or 0.0, _half(r[name])) for k, r in by.items() if r[name]["mean"] is not None}
        source = ("the load generator's completed requests per window" if name == "achieved_qps" else
                  "TF Serving's runtime_latency _sum/_count, read from each server at the window's edges")
        parts.append(charts.bars(groups, versions, values, f"{label}, mean and 95% interval over repeats ({source})",
                                 label))
    stages = ["runtime_ms", "queue_ms", "frontend_ms", "transport_ms"]
    stack_values = {k: {LABELS[s]: r[s]["mean"] for s in stages} for k, r in by.items()}
    parts.append(charts.stacked(groups, versions, [LABELS[s] for s in stages], stack_values,
                                "Where the time goes (the server's own counters; client = transport + server)"))
    if rep.get("optable"):
        parts.append(op_chart(rep["optable"], versions))
    curves = {}
    for r in rows:
        if r["mode"] == "closed" and r["achieved_qps"]["mean"] is not None and r["p99_ms"]["mean"] is not None:
            curves.setdefault(f"TF {r['version']} {r['protocol']} {r['rows_per_request']} row(s)", []).append(
                (r["achieved_qps"]["mean"], r["p99_ms"]["mean"], _half(r["p99_ms"])))
    parts.append(charts.qps_vs_p99(curves, "QPS against client-side P99, closed-loop levels (load generator, exact)"))
    closed = [c for c in run["cells"].values() if c["mode"] == "closed"]
    top = max((c["level"] for c in closed), default=None)
    cdfs = {f"TF {c['version']} {c['protocol']} {c['rows']} row(s)": _cdf_points(c["ok_hdr"]) for c in closed
            if c["level"] == top and c["repeat"] == 0 and c.get("ok_hdr")}
    parts.append(charts.cdf(cdfs, f"Latency CDF at concurrency {top:g}, first repeat (the load generator's exact "
                                  "HDR histogram)" if top is not None else "Latency CDF"))
    return parts


TOP_OPS = 7  # op types drawn by name; the rest stack as "other"


def op_chart(optable: list, versions: list) -> str:
    """The op table stacked per version: µs per call of each op type, the largest (on the baseline) first."""
    ops = [r for r in optable if "untraced_us_per_call" not in r]
    names = list(dict.fromkeys(r["op"] for r in ops))  # the table's order: largest on the baseline first
    shown = names[:TOP_OPS] + (["other"] if len(names) > TOP_OPS else [])
    values: dict = {}
    for r in ops:
        slot = values.setdefault((f"{r['rows_per_request']} rows", r["version"]), {})
        op = r["op"] if r["op"] in shown else "other"
        slot[op] = slot.get(op, 0.0) + (r["us_per_call"]["mean"] or 0.0)
    groups = list(dict.fromkeys(g for g, _ in values))
    return charts.stacked(groups, [v for v in versions if any((g, v) in values for g in groups)], shown, values,
                          "Where TensorFlow's time goes, op by op (traced in-process, mean of fresh processes)",
                          ylabel="µs per call")


def _section(lines: list) -> str:
    """A markdown section of the report (a heading, paragraphs, one table) as HTML."""
    heads = [ln for ln in lines if ln.startswith("## ")]
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines if ln.startswith("|") and "---" not in ln]
    text = "".join(f"<p>{_inline(ln.lstrip('- '))}</p>" for ln in lines if ln and not ln.startswith(("## ", "|")))
    return "".join(f"<h2>{html.escape(h[3:])}</h2>" for h in heads) + text + (_table(rows[0], rows[1:]) if rows else "")


def html_page(rep: dict) -> str:
    base = rep["baseline_version"]
    answer = "".join(f"<p>{_inline(line)}</p>" for line in headline(rep) + memory_text.first_lines(rep)
                     + [machine.line(rep["environment"])])
    caveats = "".join(f'<div class="note">{_inline(n.lstrip("> "))}</div>' for n in notes(rep) if n)
    rows = rep["rows"]
    main = _table(["batching", "rows", "protocol", "load", "version", "QPS", "rows/s", "of TF ceiling", "P50 ms",
                   "P95 ms", "P99 ms", "server P99", "errors", "RSS MiB", "QPS vs base", "P99 vs base"],
                  [[*load_name(r).split(" | "), r["version"], _fmt(r["achieved_qps"], 1), _fmt(r["rows_per_s"], 0),
                    "n/a" if r["efficiency"]["mean"] is None else f"{r['efficiency']['mean']:.0%}", _fmt(r["p50_ms"]),
                    _fmt(r["p95_ms"]), _fmt(r["p99_ms"]), _bucket(r["server_p99_bucket_ms"]),
                    _fmt(r["error_ratio"], 4), _fmt(r["rss_mib"], 0), _vs(r, "achieved_qps", base),
                    _vs(r, "p99_ms", base)] for r in rows])
    breakdown = _table(["batching", "rows", "protocol", "load", "version"] + [LABELS[b] + " ms" for b in BREAKDOWN]
                       + ["TF runtime vs base", "client vs base"],
                       [[*load_name(r).split(" | "), r["version"], *(_fmt(r[b], 3) for b in BREAKDOWN),
                         _vs(r, "runtime_ms", base), _vs(r, "client_ms", base)] for r in rows])
    ceiling = _table(["rows", "version", "TensorFlow", "cores", "rows/s in-process", "vs base"],
                     [[c["rows_per_request"], c["version"], c["tensorflow"], len(c.get("cores") or []) or "n/a",
                       _fmt(c["ceiling_rows_per_s"], 0),
                       "baseline" if "vs_baseline" not in c else vs_text(c["vs_baseline"])]
                      for c in rep["ceiling"] + rep.get("ceiling_pinned", [])])
    answers = [[r["version"], r["output"], r["verdict"], "n/a" if r.get("max_abs") is None else f"{r['max_abs']:.3g}",
                "n/a" if r.get("worst_request") is None else r["worst_request"] + 1] for r in rep.get("outputs") or []]
    answers = ("<h2>Outputs (the same requests, against the baseline)</h2>"
               + _table(["version", "output", "verdict", "max abs", "worst request"], answers)) if answers else ""
    ops = _table(OP_HEADER, op_rows(rep["optable"])) if rep.get("optable") else ""
    ops = f"<h2>Where TensorFlow's time goes, op by op (traced in-process)</h2>{ops}" if ops else ""
    svgs = "".join(f"<div class='chart'>{svg}</div>" for svg in chart_parts(rep))
    tail = "".join(f"<p>{_inline(line.lstrip('- '))}</p>" for line in reconciliation(rep) + statistics(rep)
                   if line and not line.startswith("#"))
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>TF Serving comparison {html.escape(rep['run_id'])}</title><style>{STYLE}</style></head><body>"
            f"<h1>TF Serving comparison, run {html.escape(rep['run_id'])}</h1>"
            f"<section class='answer'>{answer}</section>{caveats}"
            f"<h2>Throughput and latency</h2>{main}<h2>Where the time goes (mean ms per request)</h2>{breakdown}"
            f"<h2>TensorFlow ceiling (in-process, no serving path)</h2>{ceiling}{ops}{answers}"
            f"{_section(memory_text.section(rep))}{_section(coldstart.section(rep))}<h2>Charts</h2>{svgs}"
            f"<h2>Nothing lost, and how the verdicts are made</h2>{tail}</body></html>")

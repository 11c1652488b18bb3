"""The report's memory: one sentence in its first lines, and a table per server (analysis/growth.py's verdicts)."""
from __future__ import annotations

from analysis.growth import FLOOR_MIB_PER_10K


def _num(x, digits: int = 0) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def growth_text(g: dict | None) -> str:
    """"grows 25.1 MiB per 10k requests [24.0, 26.2] (3,400 MiB per hour)", "flat (+0.1 [-0.3, +0.5] ...)"."""
    if not g:
        return "not measured"
    s, lo, hi = g["per_10k"]
    figure = f"{s:+.2f} MiB per 10k requests [{lo:+.2f}, {hi:+.2f}], {g['per_hour'][0]:+,.0f} MiB per hour"
    if g["verdict"] == "grows":
        return f"grows {s:.2f} MiB per 10k requests [{lo:.2f}, {hi:.2f}] ({g['per_hour'][0]:,.0f} MiB per hour " \
               f"at {g['qps']:,.0f} req/s)"
    if g["verdict"] == "undecided":
        return f"undecided ({figure}: a longer soak is needed to tell)"
    return f"{g['verdict']} ({figure})"


def first_lines(rep: dict) -> list:
    """"**Memory:** ..." when a server grows, shrinks or cannot be told; with every server flat, the figures only."""
    mem = rep.get("memory") or {}
    rows = mem.get("rows") or []
    if not rows:
        return []
    parts = []
    for r in rows:
        figs = [f"{_num(r['after_load_mib'])} MiB after load" if r["after_load_mib"] is not None else "",
                f"peak {_num(r['peak_mib'])}" if r["peak_mib"] is not None else ""]
        g = r["growth"]
        growth = "" if not g else growth_text(g) if g["verdict"] != "flat" else "flat"
        d = r.get("vs_baseline")
        if d and d["verdict"] != "no significant difference":
            growth += f", {d['verdict']} than {rep['baseline_version']} ({d['diff']:+.2f} [{d['ci_low']:+.2f}, " \
                      f"{d['ci_high']:+.2f}] per 10k)"
        text = ", ".join(x for x in figs + [growth] if x)
        if text:
            parts.append(f"{r['version']} {text}")
    return ["**Memory (RSS):** " + "; ".join(parts) + "."] if parts else []


def section(rep: dict) -> list:
    mem = rep.get("memory") or {}
    if not mem.get("rows"):
        return []
    out = ["", "## Memory", "",
           "RSS as the exporter attributes it to each server's processes (per container in docker), from Prometheus. "
           "After load: the model loaded, nothing sent yet. Steady: the mean of the cells' windows. Peak: the highest "
           "sample over the run (cold start, ceiling and cells). Growth: the slope of RSS over the soak, a steady "
           f"load after the cells, with its 95% interval; \"grows\" when the interval lies above {FLOOR_MIB_PER_10K:g} "
           f"MiB per 10k requests, \"flat\" when within ±{FLOOR_MIB_PER_10K:g}; against the baseline, the difference "
           f"of slopes, Holm-corrected within the memory family ({mem.get('tests', 0)} tests).", "",
           "| version | after load MiB | steady MiB | peak MiB | soak | growth | vs base |", "|" + "---|" * 7]
    for r in mem["rows"]:
        so = r.get("soak")
        soak = "none" if not so else (f"{so['seconds']:.0f} s, {so['level']} {so['protocol']}, {so['qps']:,.0f} "
                                      f"req/s, {so['samples']} samples" + ("" if so["valid"] else " (invalid)"))
        d = r.get("vs_baseline")
        vs = "baseline" if r["version"] == rep["baseline_version"] else "n/a" if not d else \
            f"{d['diff']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}] per 10k: {d['verdict']}"
        out.append(f"| {r['version']} | {_num(r['after_load_mib'])} | {_num(r['steady_mib'])} | "
                   f"{_num(r['peak_mib'])} | {soak} | {growth_text(r['growth'])} | {vs} |")
    return out

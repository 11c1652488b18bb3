"""From raw results to the summary: statistics, validity, thresholds, JSON and a table.

Computed once, at the end (or for a periodic partial summary), never per request.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from loadgen.record import decode_hdr, encode_hdr, quantiles_ms
from fileio.atomic import write_atomic

CONNECTION_ERRORS = ("connection_refused", "connection_reset")


def merge_raw(raws: list) -> dict:
    """Merge the raw results of several workers exactly (HDR histograms add, counts sum)."""
    out = json.loads(json.dumps(raws[0]))
    for other in raws[1:]:
        out["partial"] = out["partial"] or other["partial"]
        out["interrupted"] = out.get("interrupted") or other.get("interrupted")
        for name, t in other["targets"].items():
            mine = out["targets"].setdefault(name, json.loads(json.dumps(t)))
            if mine is t:
                continue
            mine["reconnects"] += t["reconnects"]
            for ph, info in t["phases"].items():
                m = mine["phases"].get(ph)
                if m is None:
                    mine["phases"][ph] = info
                    continue
                for key in ("ok_hdr", "lag_hdr"):
                    h = decode_hdr(m[key])
                    h.add(decode_hdr(info[key]))
                    m[key] = encode_hdr(h)
                m["sent"] += info["sent"]
                m["ok_sum_s"] = m.get("ok_sum_s", 0.0) + info.get("ok_sum_s", 0.0)
                m["scheduled"] = m.get("scheduled", 0) + info.get("scheduled", 0)
                m["level"] = m["level"] + info["level"]  # workers split the load
                m["seconds"] = max(m["seconds"], info["seconds"])
                m["cpu_ratio"] = max(m["cpu_ratio"], info["cpu_ratio"])
                for code, n in info["errors"].items():
                    m["errors"][code] = m["errors"].get(code, 0) + n
                for code, text in info.get("error_details", {}).items():
                    m.setdefault("error_details", {}).setdefault(code, text)
    return out




def failed_requests(info: dict, ok: int, errors: int, budget: float) -> str:
    """"no successful request: 3341 errors, 400 x3341: Could not parse example input ..." -- what the server
    answered, in its own words (a result whose requests fail measures nothing)."""
    details = info.get("error_details", {})
    code, n = max(info["errors"].items(), key=lambda kv: kv[1])
    said = f": {details[code]}" if details.get(code) else ""
    head = "no successful request" if not ok else f"{errors / (ok + errors):.1%} of requests failed (above {budget:.0%})"
    return f"{head}: {errors} errors, most {code} x{n}{said}"


def phase_stats(info: dict, mode: str, s) -> dict:
    ok = decode_hdr(info["ok_hdr"])
    errors = sum(info["errors"].values())
    completed = ok.total_count + errors
    secs = info["seconds"]
    st = {"seconds": round(secs, 3), "sent": info["sent"], "completed": completed, "ok": ok.total_count,
          "errors": dict(sorted(info["errors"].items())), "error_ratio": errors / completed if completed else 0.0,
          "achieved_qps": ok.total_count / secs if secs else 0.0, "throughput_qps": completed / secs if secs else 0.0,
          "latency_ms": quantiles_ms(ok), "cpu_ratio": round(info["cpu_ratio"], 3)}
    if ok.total_count and "ok_sum_s" in info:  # the exact mean, not HDR's bin midpoints
        st["latency_ms"]["avg"] = info["ok_sum_s"] / ok.total_count * 1000
    # The client's own cost: CPU of the whole process (every thread) per completed request. In a
    # closed loop at low concurrency it sits on the critical path of every request.
    st["client_cpu_ms_per_request"] = info["cpu_ratio"] * secs * 1000 / completed if completed else None
    p50 = st["latency_ms"].get("p50")
    if st["client_cpu_ms_per_request"] and p50 and st["client_cpu_ms_per_request"] >= 0.1 * p50:
        st["client_cost_note"] = (f"client cost ~ {st['client_cpu_ms_per_request']:.2f} ms/request, "
                                  f"{st['client_cpu_ms_per_request'] / p50:.0%} of p50")
    reasons = []
    if mode == "closed":
        st["concurrency"] = info["level"]
    else:
        st["offered_rate"] = info["level"]
        st["sent_rate"] = info["sent"] / secs if secs else 0.0
        lag = quantiles_ms(decode_hdr(info["lag_hdr"]))
        st["send_lag_ms"] = {k: lag[k] for k in ("p50", "p99", "max")} if lag["count"] else {}
        # Compared with the schedule's own count: a Poisson window holds rate*seconds +- sqrt(n) arrivals.
        scheduled = info.get("scheduled") or info["level"] * secs
        st["scheduled"] = int(scheduled)
        if info["sent"] < 0.99 * scheduled:
            reasons.append(f"sent {info['sent']} of {int(scheduled)} scheduled requests: the achieved rate is "
                           "below the offered rate by more than 1%")
        if lag["count"] and lag["p99"] > s.thresholds.max_send_lag_p99_ms:
            reasons.append(f"send lag P99 {lag['p99']:.2f} ms above {s.thresholds.max_send_lag_p99_ms:g} ms")
    if completed and (not ok.total_count or errors / completed > s.load.error_budget):
        reasons.append(failed_requests(info, ok.total_count, errors, s.load.error_budget))
    if completed < s.load.min_requests:
        reasons.append(f"too few requests ({completed} < {s.load.min_requests})")
    if secs < s.load.min_duration:
        reasons.append(f"too short ({secs:.1f}s < {s.load.min_duration:g}s)")
    # The open loop's scheduler wakes every half millisecond (finer than the loop's timers can sleep),
    # so its CPU use is no saturation signal: send lag and sent/scheduled are. In the closed loop a
    # busy core means the client, not the server, set the pace.
    if mode == "closed" and info["cpu_ratio"] > 0.95:
        reasons.append(f"load generator CPU saturated ({info['cpu_ratio']:.0%} of a core): add --workers")
    conn = sum(n for c, n in info["errors"].items() if c in CONNECTION_ERRORS)
    if conn:
        reasons.append(f"server unreachable during the run ({conn} connection errors)")
    st["valid"], st["invalid_reasons"] = not reasons, reasons
    return st


def summarize(raw: dict, s) -> dict:
    """The run's summary: config, per target and measured phase the statistics, validity, thresholds."""
    from loadgen.thresholds import broken

    targets, violations = [], []
    for name, t in raw["targets"].items():
        phases = {ph: phase_stats(info, s.load.mode, s) for ph, info in t["phases"].items()}
        if raw.get("interrupted"):  # a window a signal cut short is not a measurement of its load
            for st in phases.values():
                st["valid"] = False
                st["invalid_reasons"].append(f"interrupted by {raw['interrupted']}")
        measured = {ph: st for ph, st in phases.items() if ph != "warmup"}
        violations += [text for _, _, text in broken(s.thresholds.parsed, {f"{name} {ph}": st
                                                                             for ph, st in measured.items()})]
        targets.append({"name": name, **{k: t[k] for k in ("version", "protocol", "address", "model", "reconnects")},
                        "phases": phases, "valid": bool(measured) and all(st["valid"] for st in measured.values())})
    config = dataclasses.asdict(s)
    return {"run_id": raw["run_id"], "scenario": s.name, "mode": s.load.mode, "partial": raw["partial"],
            "interrupted": raw.get("interrupted") or "", "started": raw.get("started"),
            "phase_marks": raw.get("phase_marks", []), "config": config,
            "targets": targets, "valid": bool(targets) and all(t["valid"] for t in targets),
            "thresholds_passed": not violations, "violations": violations, "aborted": raw.get("aborted", ""),
            "raw": raw}


def write_json_atomic(path: str, data: dict) -> None:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, json.dumps(data, indent=1, default=str))


def print_table(summary: dict, console=None, stream=None, spectrum: bool = False) -> None:
    """The summary as a table (and with spectrum, every percentile as wrk2 --latency prints them)."""
    from rich.console import Console
    from rich.table import Table

    from loadgen.record import spectrum_ms

    console = console or Console(width=max(160, Console().width), file=stream)
    table = Table(title=f"loadgen run {summary['run_id']} ({summary['mode']} loop)")
    for col in ("target", "phase", "level", "ok", "errors", "qps", "avg ms", "p50 ms", "p90 ms", "p95 ms", "p99 ms",
                "p99.9 ms", "max ms", "valid"):
        table.add_column(col, justify="right" if col not in ("target", "phase", "valid") else "left")
    for t in summary["targets"]:
        for ph, st in t["phases"].items():
            lat = st["latency_ms"]
            level = st.get("concurrency", st.get("offered_rate"))
            f = (lambda k: f"{lat[k]:.2f}" if k in lat else "-")
            table.add_row(t["name"], ph, f"{level:g}", str(st["ok"]), str(sum(st["errors"].values())),
                          f"{st['achieved_qps']:.1f}", f("avg"), f("p50"), f("p90"), f("p95"), f("p99"), f("p999"),
                          f("max"), "-" if ph == "warmup" else
                          ("yes" if st["valid"] else "NO: " + "; ".join(st["invalid_reasons"])))
    console.print(table)
    if spectrum:
        raw = summary.get("raw", {}).get("targets", {})
        for t in summary["targets"]:
            for ph in t["phases"]:
                if ph == "warmup":
                    continue
                rows = spectrum_ms(decode_hdr(raw[t["name"]]["phases"][ph]["ok_hdr"]))
                console.print(f"latency distribution, {t['name']} {ph}: " + "  ".join(
                    f"{p:g}%: {ms:.3f} ms" for p, ms in rows))
    for t in summary["targets"]:
        for ph, st in t["phases"].items():
            if ph != "warmup" and st.get("client_cost_note"):
                console.print(f"{t['name']} {ph}: {st['client_cost_note']} (the load generator's own CPU per "
                              "request; at low concurrency it is part of the latency measured)")
    for v in summary["violations"]:
        console.print(f"[red]threshold broken:[/red] {v}")

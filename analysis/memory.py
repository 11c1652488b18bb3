"""Memory over a compare's life, per server: RSS after load and idle, the peak over the run, and a soak phase.

RSS is the exporter's, as Prometheus keeps it (process_resident_memory_bytes summed over the server's processes;
in docker the exporter attributes the container's processes by their cgroup), so what the report states is what
the dashboard's memory panel shows during the run. The soak: a steady closed-loop load at the profile's highest
concurrency for `soak_s` per server, one server after the other, its RSS samples kept in the run (raw, as scraped)
so the growth verdict (analysis/growth.py) never depends on Prometheus still holding them.
"""
from __future__ import annotations

import math
import time

from analysis import promql, runstore
from stack.promconfig import SCRAPE_INTERVAL_S

RSS = 'sum(process_resident_memory_bytes{{job="exporter",version="{v}"}})'


def rss_now(name: str, url: str | None = None) -> float | None:
    try:
        return promql.scalar(RSS.format(v=name), time.time(), url)
    except (OSError, ValueError):
        return None


def rss_samples(name: str, start: float, end: float, url: str | None = None) -> list:
    """[[t, bytes]] of the server's RSS as scraped within [start, end], its processes summed per scrape."""
    span = max(1, math.ceil(end - start))
    try:
        res = promql.instant(f'process_resident_memory_bytes{{job="exporter",version="{name}"}}[{span}s]', end, url)
    except (OSError, ValueError):
        return []
    sums: dict = {}
    for r in res:  # one exporter scrape reads every process of the server: equal timestamps
        for t, val in r["values"]:
            if float(t) >= start:
                sums[round(float(t), 3)] = sums.get(round(float(t), 3), 0.0) + float(val)
    return [[t, sums[t]] for t in sorted(sums)]


def peak(name: str, start: float, end: float, url: str | None = None) -> float | None:
    span = max(1, math.ceil(end - start))
    try:
        return promql.scalar(f"max_over_time({RSS.format(v=name)}[{span}s:{SCRAPE_INTERVAL_S:g}s])", end, url)
    except (OSError, ValueError):
        return None


def after_load(run: dict, servers: list, url: str | None, log) -> None:
    """Each server's RSS with its model loaded and nothing sent yet (the compare's first up, servers idle)."""
    mem = run.setdefault("memory", {})
    for s in servers:
        if "after_load_bytes" not in mem.get(s.name, {}):
            got = rss_now(s.name, url)
            mem.setdefault(s.name, {})["after_load_bytes"] = got
            if got is not None:
                log(f"  memory {s.name}: {got / 2**20:,.0f} MiB RSS after load, idle")


def peaks(run: dict, servers: list, url: str | None) -> None:
    """Each server's highest RSS over the run so far (cold start, ceiling and cells included)."""
    mem = run.setdefault("memory", {})
    for s in servers:
        got = peak(s.name, run["created"], time.time(), url)
        if got is not None:
            mem.setdefault(s.name, {})["peak_bytes"] = got


def soak(run: dict, servers: list, soak_s: float, load_of, measure, url: str | None, log, busy) -> None:
    """The soak phase of every server that lacks one: `load_of(server)` is its (scenario, payload) (the compare's
    highest load level), `measure` the load generator's; busy(name, t0) notes the server's activity; saved after
    each server."""
    done = run.setdefault("soak", {})
    for server in servers:
        if server.name in done:
            continue
        s, payload = load_of(server)
        s.load.duration, s.metrics_port = soak_s, 0
        level = f"c{s.load.concurrency}" if s.load.mode == "closed" else f"{s.load.rate:g} req/s"
        log(f"  soak {server.name}: {soak_s:g} s at {level} ({s.targets[0].protocol}), RSS sampled every "
            f"{SCRAPE_INTERVAL_S:g} s")
        t0 = time.time()
        summary = measure(s, {s.targets[0].name: payload})
        busy(server.name, t0)
        t = summary["targets"][0]
        st = t["phases"]["steady"]
        marks = {m[0]: m for m in summary["phase_marks"]}
        start, end = marks["steady"][1], marks["steady"][2]
        time.sleep(SCRAPE_INTERVAL_S + 0.5)  # a scrape after the last request
        samples = rss_samples(server.name, start, end + SCRAPE_INTERVAL_S, url)
        done[server.name] = {"start": start, "end": end, "ok": st["ok"], "achieved_qps": st["achieved_qps"],
                             "protocol": s.targets[0].protocol, "level": level, "valid": t["valid"],
                             "invalid_reasons": st.get("invalid_reasons", []), "samples": samples}
        runstore.save(run)
        if len(samples) >= 2:
            log(f"    {st['ok']:,} requests at {st['achieved_qps']:,.0f} req/s; RSS {samples[0][1] / 2**20:,.1f} -> "
                f"{samples[-1][1] / 2**20:,.1f} MiB over {len(samples)} samples")
        else:
            log(f"    {st['ok']:,} requests; no RSS samples (Prometheus has no exporter series for {server.name})")


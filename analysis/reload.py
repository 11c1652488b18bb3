"""`make scenario NAME=reload`: model reloads under a steady load, cycle after cycle, per version.

Each cycle writes a new version directory into the served model base (the way a training pipeline publishes one)
while a constant-rate REST load runs; the server loads it and unloads the one before (TF Serving's default
"latest" policy). Per cycle: the time until the new version serves and the old is gone, the errors, the P99
against the phase before the first reload, and the server's RSS after the cycle (the exporter's, from Prometheus,
as the compare's memory). Then the growth per cycle: RSS over the cycle index, a least-squares slope with its 95%
interval, "grows" when it lies above FLOOR_MIB (TF Serving issues #1664 and #2142: memory not returned after
reloads, for some allocators).
"""
from __future__ import annotations

import shutil
import threading
import time

from analysis import growth, memory, runstore
from analysis.compare import scenario as cell_scenario, wait_scraped
from analysis.profiles import Profile
from loadgen.app import build_payloads, measure
from stack.promconfig import SCRAPE_INTERVAL_S
from stack.serving import wait_states
from core.errors import UsageError

FLOOR_MIB = 1.0  # per cycle: the example model's weights are 0.4 MiB, a ResNet-50's about 100
MIN_CYCLE_S = 2 * SCRAPE_INTERVAL_S + 1.0  # a switch (poll every second) and a scrape after it


def check(cycles: int, cycle_s: float) -> None:
    if cycles < 2 or cycle_s < MIN_CYCLE_S:
        raise UsageError(f"CYCLES must be >= 2 ({cycles} given) and each reload cycle takes at least {MIN_CYCLE_S:g} s "
                         f"(a switch, polled every second, and a scrape after it; CYCLE_S={cycle_s:g} given)")


def _drop(base, n: int) -> None:
    """Version n, a copy of version 1, appears at once: the poller never sees half a version."""
    shutil.copytree(base / "1", base / ".incoming")
    (base / ".incoming").rename(base / str(n))


def _cycles(server, base, cycles: int, cycle_s: float, start_in: float, prom: str, out: list) -> None:
    """The reloads, in a thread (the load runs in the main one, for its signal handlers)."""
    time.sleep(start_in)
    out.append({"cycle": 0, "rss_bytes": memory.rss_now(server.name, prom)})  # after the phase before any reload
    for i in range(1, cycles + 1):
        t0 = time.monotonic()
        _drop(base, i + 1)
        new, old = str(i + 1), str(i)
        switched = wait_states(server, lambda st: st.get(new) == "AVAILABLE" and st.get(old) in ("END", None), t0,
                               cycle_s - SCRAPE_INTERVAL_S - 0.5)
        time.sleep(max(0.0, SCRAPE_INTERVAL_S + 0.5 - (time.monotonic() - t0 - (switched or 0))))
        out.append({"cycle": i, "switch_s": switched, "rss_bytes": memory.rss_now(server.name, prom)})
        time.sleep(max(0.0, t0 + cycle_s - time.monotonic()))


def reload_cycles(serving, p: Profile, run_id: str, cycles: int = 5, rate: float = 100.0, cycle_s: float = 6.0,
                  log=print) -> dict:
    check(cycles, cycle_s)
    serving.up(True)  # Prometheus' targets are the running servers'
    prom = serving.monitoring(p.sla_p99_ms)
    rows = []
    for server in serving.servers:
        base = runstore.run_dir(run_id) / "models" / f"tf{server.name}"
        shutil.rmtree(base, ignore_errors=True)
        shutil.copytree(serving.model_dir(server), base / "1")
        serving.restart(server, batching=True, model_path=str(base))
        wait_scraped(prom, [server.name])
        s = cell_scenario(server, "rest", "constant", rate, p, run_id)
        s.metrics_port, s.load.steps, s.load.step_duration, s.load.warmup = 0, [rate] * (cycles + 1), cycle_s, 1.0
        payloads = build_payloads(s)
        got: list = []
        log(f"  {server.name}: {cycles} reloads, one every {cycle_s:g} s, under {rate:g} req/s (REST)")
        t = threading.Thread(target=_cycles, args=(server, base, cycles, cycle_s, 1.0 + cycle_s, prom, got))
        t.start()
        summary = measure(s, payloads)
        t.join(cycle_s * (cycles + 2))
        phases = summary["targets"][0]["phases"]
        before = phases["step1"]["latency_ms"].get("p99")
        per_cycle = []
        for c in got[1:]:
            ph = phases.get(f"step{c['cycle'] + 1}", {})
            per_cycle.append({**c, "errors": sum((ph.get("errors") or {}).values()),
                              "p99_ms": (ph.get("latency_ms") or {}).get("p99"),
                              "max_ms": (ph.get("latency_ms") or {}).get("max")})
        rss = [(c["cycle"], c["rss_bytes"] / 2**20) for c in got if c.get("rss_bytes") is not None]
        fit = growth.per_step([x for x, _ in rss], [y for _, y in rss], FLOOR_MIB) if len(rss) >= 4 else None
        row = {"version": server.name, "rate": rate, "cycle_s": cycle_s, "p99_before_ms": before,
               "rss_before_mib": rss[0][1] if rss and rss[0][0] == 0 else None, "cycles": per_cycle,
               "growth_per_cycle": fit, "errors": sum(sum(ph["errors"].values()) for ph in phases.values())}
        rows.append(row)
        log(f"  {server.name}: " + ", ".join(f"cycle {c['cycle']} {_mib(c['rss_bytes'])}" for c in per_cycle)
            + (f"; {fit['slope']:+.2f} MiB per cycle [{fit['ci_low']:+.2f}, {fit['ci_high']:+.2f}]: {fit['verdict']}"
               if fit else ""))
    for server in serving.servers:  # back to the model each served, after every measurement: a server
        serving.restart(server, batching=True)  # starting burns CPU for seconds after it is AVAILABLE
    return {"rows": rows, "cycles": cycles, "floor_mib": FLOOR_MIB}


def _mib(b) -> str:
    return "n/a" if b is None else f"{b / 2**20:,.1f} MiB"


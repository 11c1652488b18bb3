"""`make compare`: the benchmark protocol, repeated and interleaved, resumable.

For each version: bring-up and cold start; then, REPEAT times, every load level
for every version in turn (ABAB, so drift in the machine does not favour one
version); then the max-QPS search under the SLA. Each measurement is a loadgen
run (warmup excluded) whose window is recorded, so the report can ask Prometheus
about exactly that window. Statistics and PromQL are done by analysis.report.
"""
from __future__ import annotations

import copy
import json
import time
import urllib.request

from analysis import runstore
from analysis.profiles import Profile
from loadgen.app import build_payloads, check_writable, measure
from loadgen.cli import new_run_id
from loadgen.scenario import Load, Scenario, Target, check
from loadgen.search import search_one
from stack import local, monitoring, ports, procs


def cold_start(version, reg, model_path=None, log=print) -> dict:
    """Restart the version's server and time process start -> AVAILABLE -> first successful predict."""
    procs.stop(local.version_dir(version) / "modelserver.pid")
    t0 = time.perf_counter()
    local.up_version(version, reg, model_path=model_path, log=lambda *_: None)
    t_avail = time.perf_counter()
    body = json.dumps({"instances": [[0.5] * 784]}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{ports.rest(version)}/v1/models/{local.MODEL_NAME}:predict",
                                 data=body, headers={"Content-Type": "application/json"})
    t1 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
    t2 = time.perf_counter()
    out = {"to_available_s": t_avail - t0, "first_request_ms": (t2 - t1) * 1000, "to_first_predict_s": t2 - t0}
    log(f"  cold start {version.name}: AVAILABLE after {out['to_available_s']:.1f}s, first predict "
        f"{out['first_request_ms']:.1f} ms")
    return out


def wait_scraped(prom: str, names: list, timeout_s: float = 30) -> None:
    """Measure only once Prometheus scrapes every version (windows need samples on both edges)."""
    from stack.targets import query

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            up = {r["metric"].get("version") for r in query(prom, 'up{job="tfserving"} == 1')}
        except OSError:
            up = set()
        if set(names) <= up:
            time.sleep(4)  # two more scrapes: counters have a sample before the first window starts
            return
        time.sleep(0.5)
    raise RuntimeError(f"Prometheus at {prom} does not scrape all of {names} after {timeout_s:.0f}s")


def scenario(version, protocol: str, mode: str, level, p: Profile, run_id: str) -> Scenario:
    port = ports.rest(version) if protocol == "rest" else ports.grpc(version)
    load = Load(mode=mode, concurrency=int(level) if mode == "closed" else 1,
                rate=float(level) if mode != "closed" else 0.0, duration=p.window_s, warmup=p.warmup_s,
                min_requests=20)
    s = Scenario(targets=[Target(version.name, protocol, "127.0.0.1", port)], load=load, name="compare",
                 run_id=run_id, metrics_port=ports.port(ports.LOADGEN), linger=0)
    # On a small box the server's threads share the cores with the client, so the scheduler is sometimes
    # descheduled for 10+ ms; latency is measured from the intended send time anyway, so a lag bound of
    # half the SLA keeps such windows valid without hiding the lag (it is reported).
    s.thresholds.max_send_lag_p99_ms = p.sla_p99_ms / 2
    return check(s)


def cells(versions, protocols, p: Profile, repeat: int) -> list:
    """Every measurement, in execution order: repeat -> level -> version (interleaved)."""
    levels = [("closed", c) for c in p.concurrency] + [("poisson", r) for r in p.rates]
    return [{"repeat": r, "protocol": proto, "mode": mode, "level": level, "version": v.name}
            for r in range(repeat) for proto in protocols for mode, level in levels for v in versions]


def key(c: dict) -> str:
    return f"{c['repeat']}/{c['protocol']}/{c['mode']}/{c['level']}/{c['version']}"


def run_compare(reg, versions, protocols, p: Profile, repeat: int, run_id: str = "", runtime: str = "local",
                model_path=None, log=print) -> dict:
    run_id = run_id or new_run_id()
    check_writable(str(runstore.run_dir(run_id) / "compare.json"))  # a full disk fails now, not mid-run
    try:
        run = runstore.load(run_id)
        log(f"resuming run {run_id}: {len(run['cells'])} measurements already done")
    except FileNotFoundError:
        run = {"run_id": run_id, "status": "running", "created": time.time(),
               "config": {"versions": [v.name for v in versions], "protocols": protocols, "profile": p.__dict__,
                          "repeat": repeat, "runtime": runtime, "model": model_path or "example"},
               "environment": runstore.environment(versions, runtime), "cold_start": {}, "cells": {}, "search": {}}
    runstore.save(run)
    by_name = {v.name: v for v in versions}
    for v in versions:
        if v.name not in run["cold_start"]:
            run["cold_start"][v.name] = cold_start(v, reg, model_path, log)
            runstore.save(run)
        else:
            local.up_version(v, reg, model_path=model_path, log=lambda *_: None)
    monitoring.up_exporter(log=lambda *_: None)
    prom = monitoring.up_prometheus(reg, sla_p99_ms=p.sla_p99_ms, log=lambda *_: None)
    wait_scraped(prom, [v.name for v in versions])
    todo = [c for c in cells(versions, protocols, p, repeat) if key(c) not in run["cells"]]
    payloads = {}
    for i, c in enumerate(todo, 1):
        v = by_name[c["version"]]
        s = scenario(v, c["protocol"], c["mode"], c["level"], p, run_id)
        if s.targets[0].name not in payloads:
            payloads[s.targets[0].name] = build_payloads(s)[s.targets[0].name]
        summary = measure(s, {s.targets[0].name: payloads[s.targets[0].name]})
        t = summary["targets"][0]
        st = t["phases"]["steady"]
        marks = {m[0]: m for m in summary["phase_marks"]}
        hdr = summary["raw"]["targets"][t["name"]]["phases"]["steady"]["ok_hdr"]  # for the latency CDF
        run["cells"][key(c)] = {**c, "start": marks["steady"][1], "end": marks["steady"][2], "client": st,
                                "valid": t["valid"], "ok_hdr": hdr}
        runstore.save(run)
        log(f"  [{i}/{len(todo)}] rep {c['repeat'] + 1} {c['protocol']} {c['mode']} {c['level']:g} "
            f"{c['version']}: {st['achieved_qps']:.0f} req/s, p99 {st['latency_ms'].get('p99', 0):.2f} ms"
            + ("" if t["valid"] else "  (invalid: " + "; ".join(st["invalid_reasons"]) + ")"))
    for v in versions if p.search_probes > 0 else []:
        for proto in protocols:
            k = f"{proto}/{v.name}"
            if k in run["search"]:
                continue
            s = scenario(v, proto, "poisson", p.search_low, p, run_id)
            s.load.duration, s.metrics_port = p.search_window_s, 0
            s._sla_p99_ms, s._sla_errors = p.sla_p99_ms, 0.01
            log(f"  max stable QPS of {v.name}/{proto} (P99 <= {p.sla_p99_ms:g} ms, errors < 1%):")
            res = search_one(copy.deepcopy(s), {s.targets[0].name: payloads.get(s.targets[0].name)
                                                or build_payloads(s)[s.targets[0].name]},
                             p.search_low, p.search_high, 0.15, p.search_probes, log=lambda m: log("  " + m))
            run["search"][k] = res
            runstore.save(run)
    run["status"] = "done"
    run["finished"] = time.time()
    runstore.save(run)
    return run

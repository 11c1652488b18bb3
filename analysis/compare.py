"""`make compare`: the benchmark protocol, repeated and interleaved, resumable.

For each batching mode: the servers up in that mode; the first time, each one's cold start and
the in-process TensorFlow ceiling of each version; then every cell (analysis/plan.py) in turn,
each a load-generator run whose warmup is excluded and whose edges are exact: the server's own
counters are read directly when nothing is in flight, before the warmup, between warmup and
steady window, and after it. Then the max-QPS search under the SLA. Everything is saved after
every step (results/<run id>/compare.json), so an interrupted compare resumes where it stopped.
Statistics and PromQL are done by analysis.report.
"""
from __future__ import annotations

import copy
import dataclasses
import time

from analysis import ceiling, coldstart, memory, optable, outputs, plan, resume, runstore, schemas
from stack import counters
from analysis.plan import Settings
from loadgen import requestset, stopping
from loadgen.app import build_payloads, check_writable, measure
from loadgen.errors import ServerRefused
from loadgen.cli import new_run_id
from loadgen.scenario import Load, Payload, Scenario, Target, check
from loadgen.search import Sla, search_one
from core import ports
from stack import preflight
from stack.promconfig import SCRAPE_INTERVAL_S
from core.errors import BenchError, EXIT_UNREACHABLE, EXIT_USAGE, Unreachable

# A server idle this long before and after its cell has a Prometheus sample on each side taken
# with nothing in flight: the reconciliation can then be exact (analysis/reconcile.py).
IDLE_EDGE_S = SCRAPE_INTERVAL_S + 0.5


def wait_scraped(prom: str, names: list, timeout_s: float = 30) -> None:
    """Measure only once Prometheus scrapes every server (windows need samples on both edges)."""
    from stack.targets import query

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            up = {r["metric"].get("version") for r in query(prom, 'up{version!=""} == 1')}
        except OSError:
            up = set()
        if set(names) <= up:
            time.sleep(2 * SCRAPE_INTERVAL_S)  # counters have a sample before the first window starts
            return
        time.sleep(0.5)
    raise Unreachable(f"Prometheus at {prom} does not scrape all of {names} after {timeout_s:.0f}s")


def requests_of(serving, server, settings: Settings) -> Payload:
    """What a server's windows send: the settings' API and number of distinct requests, built from the model it
    serves (the parse spec of tf.Example inputs is read from its graph where this machine has it)."""
    where = serving.model_dir(server)
    return Payload(count=settings.requests, api=settings.api, model_dir=str(where) if where else "",
                   requests_file=settings.requests_file)


def first_request(serving, settings: Settings):
    """For a cold start: the first request of the server's own request set, over REST (path suffix, body)."""
    def probe(server) -> tuple:
        api = "auto" if settings.api == "multi" else settings.api  # MultiInference has no REST API
        s = scenario(server, "rest", "closed", 1, settings.profile, "cold-start", settings.rows[0],
                     requests=dataclasses.replace(requests_of(serving, server, settings), count=1, api=api),
                     signature=settings.signature)
        reqs = build_payloads(s)[s.targets[0].name]
        return reqs.rest_path, reqs.bodies[0]
    return probe


def scenario(server, protocol: str, mode: str, level, p, run_id: str, rows: int = 1,
             sla_p99_ms: float | None = None, requests: Payload | None = None, signature: str = "serving_default"
             ) -> Scenario:
    host, port = server.address(protocol)
    load = Load(mode=mode, concurrency=int(level) if mode == "closed" else 1,
                rate=float(level) if mode != "closed" else 0.0, duration=p.window_s, warmup=p.warmup_s,
                min_requests=20)
    payload = dataclasses.replace(requests or Payload(), batch_size=rows)
    s = Scenario(targets=[Target(server.name, protocol, host, port, model=server.model, signature=signature)],
                 load=load, payload=payload, name="compare", run_id=run_id,
                 metrics_port=ports.port(ports.LOADGEN), linger=0)
    # On a small box the server's threads share the cores with the client, so the scheduler is sometimes
    # descheduled for 10+ ms; latency is measured from the intended send time anyway, so a lag bound of
    # half the SLA keeps such windows valid without hiding the lag (it is reported).
    s.thresholds.max_send_lag_p99_ms = (sla_p99_ms or p.sla_p99_ms) / 2
    return check(s)


class Edges:
    """The loadgen's boundary hook: one direct reading of the server's counters per edge."""

    def __init__(self, url: str):
        self.url, self.readings, self.error = url, {}, ""

    def __call__(self, edge: str) -> None:
        try:
            self.readings[edge] = counters.read(self.url)
        except OSError as e:  # a server that died mid-run: the cell says so, the run goes on
            self.error = f"cannot read {self.url}: {getattr(e, 'reason', e)}"

    def server(self) -> dict | None:
        r = self.readings
        if self.error or not {"start", "warmup", "steady"} <= set(r):
            return None
        return {"warmup": counters.delta(r["start"], r["warmup"]), "steady": counters.delta(r["warmup"], r["steady"])}


def measure_cell(c: dict, server, settings: Settings, run_id: str, payload, log_prefix: str = "") -> dict:
    s = scenario(server, c["protocol"], c["mode"], c["level"], settings.profile, run_id, c["rows"],
                 settings.sla_p99_ms, signature=settings.signature)
    edges = Edges(server.metrics_url)
    summary = measure(s, {s.targets[0].name: payload}, boundary=edges)
    t = summary["targets"][0]
    st, warm = t["phases"]["steady"], t["phases"].get("warmup")
    marks = {m[0]: m for m in summary["phase_marks"]}
    server_counts = edges.server()
    out = {**c, "start": marks["steady"][1], "end": marks["steady"][2],
           "warmup_start": marks["warmup"][1] if "warmup" in marks else marks["steady"][1],
           "client": st, "client_warmup": {"sent": warm["sent"], "completed": warm["completed"]} if warm else None,
           "valid": t["valid"], "ok_hdr": summary["raw"]["targets"][t["name"]]["phases"]["steady"]["ok_hdr"],
           "server": server_counts, "server_error": edges.error}
    steady = server_counts["steady"] if server_counts else None
    out["breakdown"] = counters.breakdown(steady, st["latency_ms"].get("avg")) if steady else None
    out["server_p99_bucket"] = counters.quantile_bucket(steady["request_buckets"], 0.99) if steady else None
    return out


def refused(name: str, m: dict) -> None:
    """A server that answers with errors (no success, or more than the load's error budget) measures nothing:
    stop now, with what it said, instead of averaging its errors into minutes of verdicts."""
    why = [r for r in m["client"]["invalid_reasons"] if r.startswith("no successful request") or "failed (above" in r]
    if why:
        raise ServerRefused(f"{name} refused the requests of a window: {why[0]}")


def container_usage(before: dict, after: dict | None, seconds: float) -> dict | None:
    """A cell's container from its cgroup: memory at the end, the peak so far, CPU over warmup + window."""
    if not after:
        return None
    return {"container": after["container"], "image": after["image"], "memory_bytes": after["memory_bytes"],
            "memory_peak_bytes": after["memory_peak_bytes"],
            "cpu_cores": (after["cpu_s"] - before["cpu_s"]) / seconds if seconds > 0 else None}


def _describe(c: dict, m: dict) -> str:
    st, b = m["client"], m["breakdown"] or {}
    tf = f", TF {b['runtime_ms']:.2f} ms of {st['latency_ms'].get('avg', 0):.2f}" if b.get("runtime_ms") else ""
    return (f"batching {plan.batching_name(c['batching'])} {c['rows']} rows {c['protocol']} {c['mode']} "
            f"{c['level']:g} {c['version']}: {st['achieved_qps']:.0f} req/s, p99 {st['latency_ms'].get('p99', 0):.2f} ms"
            + tf + ("" if m["valid"] else "  (invalid: " + "; ".join(st["invalid_reasons"]) + ")")
            + (f"  ({m['server_error']})" if m["server_error"] else ""))


def new_run(run_id: str, settings: Settings, serving, runtime: str, model, placement) -> dict:
    return {"schema_version": schemas.SCHEMA_VERSION, "run_id": run_id, "status": "running", "created": time.time(),
            "config": {**settings.as_dict(), "runtime": runtime, "model": model or "example",
                       **({"model_for": dict(serving.model_for)} if serving.model_for else {}),
                       "prometheus": serving.prometheus_url,  # None: the stack's own
                       "servers": {s.name: {"tensorflow": s.tensorflow, "rest": f"{s.host}:{s.rest}",
                                            "grpc": f"{s.host}:{s.grpc}",
                                            **({"knobs": dict(s.knobs)} if s.knobs else {})}
                                   for s in serving.servers}},
            "placement": placement.as_dict(), "environment": runstore.environment(serving.servers, runtime),
            "cold_start": {}, "ceiling": {}, "cells": {}, "search": {}, "activity": {}}


def _busy(run: dict, names, t0: float) -> None:
    """Note that the compare kept these servers busy from t0 until now (outside any cell)."""
    for n in names:
        run.setdefault("activity", {}).setdefault(n, []).append([t0, time.time()])


def _measure(run: dict, settings: Settings, serving, placement, run_id: str, log) -> None:
    """Every cell, cold start, ceiling and search the run still lacks, batching mode by mode; saved after each."""
    from core.placement import pin_self

    by_name = {s.name: s for s in serving.servers}
    todo = [c for c in plan.cells(settings) if plan.key(c) not in run["cells"]]
    payloads, last_seen, prom = {}, {}, None
    for batching in settings.batching:
        first_mode = batching == settings.batching[0]
        mine = [c for c in todo if c["batching"] == batching]
        if not mine and not _mode_lacks(run, settings, by_name, batching, first_mode):
            continue
        if first_mode:  # each cold start (re)creates its server in this mode: up() then starts only the rest
            _cold_starts(run, settings, serving, batching, log)
        prom = _servers_up(run, settings, serving, by_name, batching, log)
        _once_per_run(run, settings, serving, log)
        pin_self(placement.client)  # the client on its own cores (all of them when not isolated)
        _cells(run, mine, settings, serving, by_name, run_id, payloads, last_seen, log)
        if settings.profile.soak_s and first_mode:
            memory.soak(run, serving.servers, settings.profile.soak_s, soak_load(serving, settings, run_id),
                        measure, prom, log, lambda name, t0: _busy(run, [name], t0))
        _search(run, settings, serving, by_name, batching, payloads, run_id, log)
    time.sleep(IDLE_EDGE_S)  # a Prometheus sample after the last cell, for the reconciliation
    if prom:
        memory.peaks(run, serving.servers, prom)
        runstore.save(run)


def _mode_lacks(run, settings: Settings, by_name: dict, batching: bool, first_mode: bool) -> bool:
    """Anything besides cells this batching mode still has to measure (a resumed run may lack only these)."""
    ceiling_done = run["ceiling"] or not settings.profile.ceiling_windows
    soak_todo = settings.profile.soak_s and first_mode and set(by_name) - set(run.get("soak") or {})
    return bool(not ceiling_done or _search_todo(run, settings, batching) or soak_todo)


def _cold_starts(run, settings: Settings, serving, batching: bool, log) -> None:
    probe = first_request(serving, settings)
    coldstart.measure(run, list(serving.servers), settings.cold_starts,
                      lambda s: serving.cold_start(s, batching, probe), log, lambda name, t0: _busy(run, [name], t0))


def _servers_up(run, settings: Settings, serving, by_name: dict, batching: bool, log) -> str:
    """Every server up in this mode, Prometheus scraping them, their memory after load (idle): its URL."""
    t0 = time.time()
    serving.up(batching)
    _busy(run, by_name, t0)
    prom = serving.monitoring(settings.sla_p99_ms)
    wait_scraped(prom, list(by_name))
    memory.after_load(run, serving.servers, prom, log)  # idle, nothing sent yet (the cold starts' one request)
    return prom


def _once_per_run(run, settings: Settings, serving, log) -> None:
    """What each version answers, its TF ceiling and its op table: once, before any load."""
    if "outputs" not in run and settings.profile.ceiling_windows:
        run["outputs"] = outputs.collect(serving, settings, lambda s: requests_of(serving, s, settings), log)
        runstore.save(run)
    if settings.profile.ceiling_windows:  # 0 only from the gate, which reads the levels (no profile allows it)
        _ceilings(run, settings, serving, log)
    if settings.profile.optrace_processes:  # after the ceiling, never inside it: tracing costs time
        optable.measure_all(serving, serving.servers, list(settings.rows), settings.profile.optrace_processes,
                            settings.profile.optrace_calls, run.setdefault("optrace", {}),
                            lambda: runstore.save(run), log, requests=request_files(run, settings, serving))


def _cells(run, mine: list, settings: Settings, serving, by_name: dict, run_id: str, payloads: dict,
           last_seen: dict, log) -> None:
    """The measurement windows of one batching mode, each saved as it ends; a refusing server stops the run."""
    for c in mine:
        stopping.check()  # a signal between cells (during a cold start, the ceiling, a sleep)
        server = by_name[c["version"]]
        pkey = (server.name, c["protocol"], c["rows"])
        if pkey not in payloads:
            s = scenario(server, c["protocol"], c["mode"], c["level"], settings.profile, run_id, c["rows"],
                         requests=requests_of(serving, server, settings), signature=settings.signature)
            payloads[pkey] = build_payloads(s)[s.targets[0].name]
            log(f"  requests of {server.name}/{c['protocol']}, {c['rows']} rows: {payloads[pkey].api}, "
                f"{payloads[pkey].source}")
        idle_since = last_seen.get(server.name)
        if idle_since is not None:  # the server idle on both edges of its Prometheus samples
            time.sleep(max(0.0, idle_since + IDLE_EDGE_S - time.time()))
        before = serving.resources(server)  # a container's cgroup; None for processes and external servers
        m = measure_cell(c, server, settings, run_id, payloads[pkey])
        if server.name not in run.setdefault("preflight", {}):  # after its first cell: every family exists
            run["preflight"][server.name] = lines = preflight.check(server, c["batching"])
            for line in lines:
                log(f"  preflight: {line}")
        if before is not None:
            m["container"] = container_usage(before, serving.resources(server), m["end"] - m["warmup_start"])
        last_seen[server.name] = time.time()
        run["cells"][plan.key(c)] = m
        runstore.save(run)
        log(f"  [{len(run['cells'])}/{len(plan.cells(settings))}] rep {c['repeat'] + 1} " + _describe(c, m))
        refused(server.name, m)


def soak_load(serving, settings: Settings, run_id: str):
    """A server's soak load: its first protocol and row count at the profile's highest level, its own requests."""
    p = settings.profile
    mode, level = ("closed", max(p.concurrency)) if p.concurrency else ("poisson", max(p.rates))

    def of(server) -> tuple:
        s = scenario(server, settings.protocols[0], mode, level, p, run_id, settings.rows[0], settings.sla_p99_ms,
                     requests=requests_of(serving, server, settings), signature=settings.signature)
        return s, build_payloads(s)[s.targets[0].name]
    return of


CEILING_REQUESTS = 16  # distinct requests per row count the in-process measurements cycle (a file each server)


def request_files(run: dict, settings: Settings, serving) -> dict:
    """{server name: path}: the servers' own requests as tensors, for the ceiling and the op trace to feed
    (results/<run>/requests/<server>.json), built from each server's metadata and model like its windows'."""
    out = {}
    for s in serving.servers:
        if serving.model_dir(s) is None or not s.grpc:
            continue  # an external server's model is not here: the ceiling is skipped or runs the example
        path = runstore.run_dir(run["run_id"]) / "requests" / f"{s.name}.json"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            host, port = s.address("grpc")
            t = Target(s.name, "grpc", host, port, model=s.model, signature=settings.signature)
            payload = requests_of(serving, s, settings)
            # JSON lines are REST bodies, which only the server's JSON rules turn into tensors: the in-process runs
            # then take generated requests of the same signature (a TFRecord's requests are decoded as they are)
            file = "" if settings.requests_file.endswith(".jsonl") else settings.requests_file
            made = {r: requestset.tensors(t, r, 1, min(settings.requests, CEILING_REQUESTS), payload.model_dir,
                                          settings.api, file) for r in settings.rows}
            requestset.write_tensors(path, made[settings.rows[0]][0], {r: m[1] for r, m in made.items()})
        out[s.name] = str(path)
    return out


def _ceilings(run: dict, settings: Settings, serving, log) -> None:
    """The headline ceiling on the servers' cores, then the pinned one-core diagnostic ("kernels alone"),
    except where thread counts are compared (on one core they measure oversubscription only)."""
    p, save = settings.profile, lambda: runstore.save(run)
    files = request_files(run, settings, serving)
    log("  ceiling on the servers' cores (TensorFlow's thread pools as a server's):")
    ceiling.measure_all(serving, serving.servers, list(settings.rows), p.ceiling_windows, p.ceiling_window_s,
                        run["ceiling"], save, log, requests=files)
    if p.ceiling_pinned_windows and not ceiling.threads_compared(serving.servers):
        log("  ceiling pinned to one core (kernels alone, a diagnostic):")
        ceiling.measure_all(serving, serving.servers, list(settings.rows), p.ceiling_pinned_windows,
                            p.ceiling_window_s, run.setdefault("ceiling_pinned", {}), save, log, pin=True,
                            requests=files)


def run_compare(settings: Settings, serving, placement, run_id: str = "", runtime: str = "local", model=None,
                log=print) -> dict:
    run_id = run_id or new_run_id()
    check_writable(str(runstore.run_dir(run_id) / "compare.json"))  # a full disk fails now, not mid-run
    fresh = new_run(run_id, settings, serving, runtime, model, placement)
    try:
        run = runstore.load(run_id)
    except FileNotFoundError:
        run = fresh
    else:  # the same settings, or one line before any server is touched
        resume.check(run, fresh["config"])
        run["status"] = "running"  # an interrupted or failed run goes on
        run.pop("interrupted", None), run.pop("failed", None)
        log(f"resuming run {run_id}: {len(run['cells'])} measurements already done")
    runstore.save(run)
    try:
        _measure(run, settings, serving, placement, run_id, log)
    except stopping.Interrupted:  # every finished cell is saved; the cut one never was
        run["status"], run["interrupted"] = "interrupted", {"signal": stopping.requested(), "at": time.time()}
        runstore.save(run)
        raise
    except Exception as e:  # a server that would not start, a disk, a bug: said once, the run kept resumable
        run["status"], run["failed"] = "failed", {"error": str(e) or type(e).__name__, "at": time.time()}
        runstore.save(run)
        if isinstance(e, BenchError) and e.exit_code == EXIT_USAGE:  # servers were started: a server or its
            e.exit_code = EXIT_UNREACHABLE  # result failed (3), never a usage error; a bug stays a bug (70)
        raise
    run["status"] = "done"
    run["finished"] = time.time()
    runstore.save(run)
    return run


def _search_keys(settings: Settings, batching: bool) -> list:
    if settings.profile.search_probes <= 0:
        return []
    return [(f"{plan.batching_name(batching)}/{rows}/{proto}/{name}", name, proto, rows)
            for name in settings.versions for proto in settings.protocols for rows in settings.rows]


def _search_todo(run, settings: Settings, batching: bool) -> list:
    return [k for k in _search_keys(settings, batching) if k[0] not in run["search"]]


def _search(run, settings: Settings, serving, by_name, batching: bool, payloads, run_id, log) -> None:
    p = settings.profile
    for k, name, proto, rows in _search_todo(run, settings, batching):
        server = by_name[name]
        s = scenario(server, proto, "poisson", p.search_low, p, run_id, rows, settings.sla_p99_ms,
                     requests=requests_of(serving, server, settings), signature=settings.signature)
        s.load.duration, s.metrics_port = p.search_window_s, 0
        log(f"  max stable QPS of {name}/{proto}, {rows} rows, batching {plan.batching_name(batching)} "
            f"(P99 <= {settings.sla_p99_ms:g} ms, errors < 1%):")
        payload = payloads.get((name, proto, rows)) or build_payloads(s)[s.targets[0].name]
        t0 = time.time()
        run["search"][k] = search_one(copy.deepcopy(s), {s.targets[0].name: payload}, p.search_low,
                                      p.search_high, 0.15, p.search_probes, Sla(settings.sla_p99_ms, 0.01),
                                      log=lambda m: log("  " + m))
        _busy(run, [name], t0)
        runstore.save(run)

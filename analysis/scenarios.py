"""The seeds' scenarios, each a small protocol of its own, on the servers of a Serving (local
processes or docker containers; stack/serving.py), which they restart through it only:

    batching    batching on vs off, same version, closed-loop levels side by side
    protocols   REST vs gRPC, same version, side by side
    sweep       every (max_batch_size, batch_timeout_micros, num_batch_threads) combination, each
                with a restarted server and a generated batching config; the QPS-vs-P99 Pareto
                front and the best configuration under the SLA
    hot-update  a new model version dropped into the base path during constant-rate load: the
                latency blip, the errors (must be 0) and the time until the new version serves

Each writes results/<id>/scenario.json (everything) and scenario.md (the table) atomically.
"""
from __future__ import annotations

import itertools
import shutil
import threading
import time

from analysis import runstore
from stack import counters
from analysis.compare import Edges, scenario as cell_scenario
from analysis.profiles import Profile
from loadgen.app import build_payloads, measure
from fileio.atomic import write_atomic
from stack.serving import wait_states

BATCHING = ("max_batch_size {{ value: {b} }}\nbatch_timeout_micros {{ value: {t} }}\n"
            "num_batch_threads {{ value: {k} }}\nmax_enqueued_batches {{ value: 1000 }}\n")


def _quiet(*_):
    pass


def measure_cell(server, protocol: str, concurrency: int, p: Profile, run_id: str, repeat: int,
                 batching: bool = True) -> dict:
    """Closed loop at `concurrency`, `repeat` windows: mean QPS and P99, total errors, validity, and
    the mean batch the server ran in the steady windows (its own counters; None without batching)."""
    s = cell_scenario(server, protocol, "closed", concurrency, p, run_id)
    s.metrics_port = 0
    payloads = build_payloads(s)
    steady, total = [], {}
    for _ in range(repeat):
        edges = Edges(server.metrics_url)
        steady.append(measure(s, payloads, boundary=edges)["targets"][0]["phases"]["steady"])
        d = (edges.server() or {}).get("steady")
        for k in ("batch_rows_sum", "batches", "graph_runs", "requests_ok") if d else ():
            total[k] = total.get(k, 0.0) + d[k]
        if d:
            total["batch_histogram"] = d["batch_histogram"]
    return {"qps": sum(x["achieved_qps"] for x in steady) / repeat,
            "p99_ms": sum(x["latency_ms"].get("p99", 0) for x in steady) / repeat,
            "errors": sum(sum(x["errors"].values()) for x in steady), "valid": all(x["valid"] for x in steady),
            "mean_batch": counters.mean_batch(total, s.payload.batch_size) if batching and total else None,
            "mean_batch_source": counters.mean_batch_source(total) if batching and total else "batching off"}


def batching_on_off(serving, p: Profile, repeat: int, run_id: str, log=print) -> dict:
    rows = []
    for server in serving.servers:
        got = {}
        for on in (False, True):
            serving.restart(server, batching=on)
            got[on] = {c: measure_cell(server, "rest", c, p, run_id, repeat, on) for c in p.concurrency}
        for c in p.concurrency:
            off, on = got[False][c], got[True][c]
            rows.append({"version": server.name, "concurrency": c, "off": off, "on": on,
                         "qps_ratio": on["qps"] / off["qps"] if off["qps"] else None})
            log(f"  {server.name} c{c}: batching off {off['qps']:.0f} req/s p99 {off['p99_ms']:.1f} ms | "
                f"on {on['qps']:.0f} req/s p99 {on['p99_ms']:.1f} ms")
        serving.restart(server, batching=True)  # leave the stack as `make up` makes it
    return {"rows": rows}


def protocols(serving, p: Profile, repeat: int, run_id: str, log=print) -> dict:
    rows = []
    serving.up(batching=True)
    for server in serving.servers:
        for c in p.concurrency:
            r, g = (measure_cell(server, proto, c, p, run_id, repeat) for proto in ("rest", "grpc"))
            rows.append({"version": server.name, "concurrency": c, "rest": r, "grpc": g,
                         "qps_ratio": g["qps"] / r["qps"] if r["qps"] else None})
            log(f"  {server.name} c{c}: REST {r['qps']:.0f} req/s p99 {r['p99_ms']:.1f} ms | "
                f"gRPC {g['qps']:.0f} req/s p99 {g['p99_ms']:.1f} ms")
    return {"rows": rows}


def pareto(points: list) -> list:
    """The points no other point beats on both QPS (higher) and P99 (lower)."""
    return [a for a in points if not any(b["qps"] >= a["qps"] and b["p99_ms"] <= a["p99_ms"] and
                                         (b["qps"], b["p99_ms"]) != (a["qps"], a["p99_ms"]) for b in points)]


def sweep(serving, p: Profile, repeat: int, run_id: str, max_batch, timeout_us, threads, concurrency: int,
          log=print) -> dict:
    """One batching file per combination under the run's directory; the server restarted on each."""
    server = serving.servers[0]
    configs = runstore.run_dir(run_id) / "batching"
    configs.mkdir(parents=True, exist_ok=True)
    points = []
    combos = list(itertools.product(max_batch, timeout_us, threads))
    for i, (b, t, k) in enumerate(combos, 1):
        f = configs / f"b{b}-t{t}-k{k}.config"
        write_atomic(f, BATCHING.format(b=b, t=t, k=k))
        f.chmod(0o644)  # a container's server runs as another user
        serving.restart(server, batching=True, batching_file=f)
        m = measure_cell(server, "rest", concurrency, p, run_id, repeat)
        points.append({"max_batch_size": b, "batch_timeout_micros": t, "num_batch_threads": k, **m})
        log(f"  [{i}/{len(combos)}] max_batch {b} timeout {t} us threads {k}: {m['qps']:.0f} req/s, "
            f"p99 {m['p99_ms']:.1f} ms, mean batch {m['mean_batch'] or 0:.1f}" + ("" if m["valid"] else " (invalid)"))
    serving.restart(server, batching=True)
    ok = [x for x in points if x["valid"] and x["errors"] == 0 and x["p99_ms"] <= p.sla_p99_ms]
    return {"version": server.name, "concurrency": concurrency, "points": points, "pareto": pareto(points),
            "best": max(ok, key=lambda x: x["qps"]) if ok else None, "sla_p99_ms": p.sla_p99_ms}


def hot_update(serving, p: Profile, run_id: str, rate: float = 100.0, phase_s: float = 6.0, log=print) -> dict:
    """Three constant-rate phases; a new version directory is written into the served (mounted)
    base path at the start of the second."""
    rows = []
    for server in serving.servers:
        _, model_dir = serving.ceiling_command(server)  # the example export's newest version directory
        base = runstore.run_dir(run_id) / "models" / f"tf{server.name}"
        shutil.rmtree(base, ignore_errors=True)
        shutil.copytree(model_dir, base / "1")
        serving.restart(server, batching=True, model_path=str(base))
        s = cell_scenario(server, "rest", "constant", rate, p, run_id)
        s.metrics_port, s.load.steps, s.load.step_duration, s.load.warmup = 0, [rate] * 3, phase_s, 1.0
        payloads = build_payloads(s)
        result = {}

        def drop_new_version() -> None:  # a thread: the load runs in the main one (signal handlers)
            time.sleep(1.0 + phase_s)  # warmup + the first phase
            dropped = time.monotonic()
            shutil.copytree(base / "1", base / ".incoming")
            (base / ".incoming").rename(base / "2")  # atomic: the poller never sees half a version
            result["switched"] = wait_states(
                server, lambda st: st.get("2") == "AVAILABLE" and st.get("1") in ("END", None), dropped, 2 * phase_s)
        dropper = threading.Thread(target=drop_new_version)
        dropper.start()
        summary = measure(s, payloads)
        dropper.join(3 * phase_s)
        switched = result.get("switched")
        phases = summary["targets"][0]["phases"]
        before, during, after = (phases[f"step{i}"] for i in (1, 2, 3))
        row = {"version": server.name, "rate": rate, "switch_s": switched,
               "errors": sum(sum(ph["errors"].values()) for ph in phases.values()),
               "p99_ms": {"before": before["latency_ms"].get("p99"), "during": during["latency_ms"].get("p99"),
                          "after": after["latency_ms"].get("p99")},
               "max_ms_during": during["latency_ms"].get("max")}
        rows.append(row)
        log(f"  {server.name}: switched in {switched if switched is None else round(switched, 2)} s, "
            f"{row['errors']} errors, p99 before/during/after {row['p99_ms']['before']:.1f}/"
            f"{row['p99_ms']['during']:.1f}/{row['p99_ms']['after']:.1f} ms")
        serving.restart(server, batching=True)  # back to the example model
    return {"rows": rows}

"""`make scenario NAME=neighbour`: model A under a steady load while a second model B in the same server is loaded,
reloaded (a new version) and unloaded, per version: A's P99, its largest latency and its errors in each phase
against the phase before, and how long each of B's steps took.

TF Serving issue #1866: loading a new version of an idle model B raised model A's P99 from 20 ms to over 100 ms,
because the restore ran on the threads requests need; `--num_load_threads` (PR #1796) gives loads a pool of their
own. KNOBS="load_threads=0,1" compares the two on each version. B joins and leaves through TF Serving's own
ModelService.HandleReloadConfigRequest (gRPC), as a config-managing deployment does it. B's restore is what costs:
by default the zoo's ResNet-50 (`NEIGHBOUR=image`), any zoo name or model base path otherwise.
"""
from __future__ import annotations

import multiprocessing
import queue
import shutil
import time

from analysis import neighbour_steps, runstore
from analysis.compare import scenario as cell_scenario
from analysis.profiles import Profile
from loadgen.app import build_payloads, measure
from core.errors import UsageError

PHASES = ("before", "load", "reload", "unload")
NAME_B = "neighbour"
WARMUP_S = 4.0


def neighbour(serving, p: Profile, run_id: str, model_b, rate: float = 100.0, phase_s: float = 8.0,
              log=print) -> dict:
    """model_b: B's newest version directory."""
    rows = []
    for server in serving.servers:
        root = runstore.run_dir(run_id) / "models" / f"tf{server.name}"
        if serving.server_path(server, root) is None:
            raise UsageError(f"NAME=neighbour needs a second model the server can read; {server.name} cannot read "
                             "this machine's files (a container mounts one model base): use RUNTIME=local")
        shutil.rmtree(root, ignore_errors=True)
        bases = {server.model: root / "a", NAME_B: root / "b"}
        shutil.copytree(serving.model_dir(server), bases[server.model] / "1")
        shutil.copytree(model_b, bases[NAME_B] / "1")
        serving.restart(server, batching=True, model_path=str(bases[server.model]))
        s = cell_scenario(server, "rest", "constant", rate, p, run_id)
        # a fresh server's first seconds (graph building, the other variant's restart settling) are no baseline
        s.metrics_port, s.load.steps, s.load.step_duration, s.load.warmup = 0, [rate] * 4, phase_s, WARMUP_S
        payloads = build_payloads(s)
        log(f"  {server.name}: A ({server.model}) at {rate:g} req/s (REST); B loaded, reloaded and unloaded, one "
            f"step every {phase_s:g} s")
        # B's steps in a process of their own: in a thread of this one (the load generator's) their gRPC imports and
        # calls took the GIL from the client, and A's latency measured the client instead of the server
        ctx = multiprocessing.get_context("spawn")
        go, results = ctx.Queue(), ctx.Queue()
        steps = ctx.Process(target=neighbour_steps.run, args=(
            server, {k: (str(v), serving.server_path(server, v)) for k, v in bases.items()}, NAME_B, phase_s,
            go, results), daemon=True)
        steps.start()
        results.get(timeout=120)  # its imports done before the load starts
        go.put(time.time() + WARMUP_S + phase_s)
        summary = measure(s, payloads)
        steps.join(4 * phase_s)
        try:
            took = results.get(timeout=10)
        except queue.Empty:  # the process died before it could say (its traceback is on stderr)
            took = {"error": f"B's steps ended with exit code {steps.exitcode} and no result"}
        phases = summary["targets"][0]["phases"]
        row = {"version": server.name, "rate": rate, "phase_s": phase_s, "phases": {}, "error": took.get("error", "")}
        for i, name in enumerate(PHASES, 1):
            ph = phases[f"step{i}"]
            row["phases"][name] = {"p99_ms": ph["latency_ms"].get("p99"), "max_ms": ph["latency_ms"].get("max"),
                                   "errors": sum(ph["errors"].values()), "ok": ph["ok"], "b_s": took.get(name)}
        before = row["phases"]["before"]["p99_ms"]
        for name in PHASES[1:]:
            ph = row["phases"][name]
            ph["p99_ratio"] = ph["p99_ms"] / before if before and ph["p99_ms"] is not None else None
        rows.append(row)
        log(f"  {server.name}: A's P99 " + ", ".join(f"{n} {row['phases'][n]['p99_ms']:.1f} ms" for n in PHASES)
            + f"; errors {sum(ph['errors'] for ph in row['phases'].values())}"
            + (f"; B's steps failed: {row['error']}" if row["error"] else ""))
    for server in serving.servers:  # back to the one model each served, after every measurement: a server
        serving.restart(server, batching=True)  # starting burns CPU for seconds after it is AVAILABLE
    return {"rows": rows, "model_b": str(model_b)}


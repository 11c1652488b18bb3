"""One load run end to end: payloads, /metrics, the run (in-process or in workers), summary."""
from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import tempfile
import threading

from loadgen import payload as payload_mod
from loadgen.exposition import LoadgenCollector, serve_metrics, stop_metrics
from loadgen.record import Recorder
from loadgen.runner import LiveState, Runner
from loadgen.summary import merge_raw, print_table, summarize, write_json_atomic


class RunError(RuntimeError):
    """Something the user must fix before a run can start (exit 2)."""


def check_writable(path: str) -> None:
    """Fail before the run, not after it: the results directory must take a file. Directories made
    for the probe are removed again, so a run that fails before writing leaves nothing behind."""
    d = os.path.dirname(os.path.abspath(path))
    made, parent = [], d
    while not os.path.isdir(parent):
        made.append(parent)
        parent = os.path.dirname(parent)
    try:
        os.makedirs(d, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".probe-") as f:
            f.write(b"x" * 65536)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise RunError(f"cannot write results to {d}: {e.strerror}") from None
    finally:
        for m in made:  # deepest first
            try:
                os.rmdir(m)
            except OSError:
                pass


def build_payloads(s) -> dict:
    out = {}
    for t in s.targets:
        try:
            out[t.name] = payload_mod.build(t, s.payload.batch_size, s.payload.seed, s.payload.file)
        except payload_mod.TargetError as e:
            raise RunError(str(e)) from None
    return out


def install_loop(s) -> None:
    """uvloop where available; gRPC's asyncio integration wants the default loop."""
    if any(t.protocol == "grpc" for t in s.targets):
        return
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass


async def run_in_process(s, payloads: dict, progress=None, partial=None, metrics: bool = True,
                         boundary=None) -> tuple:
    rec = Recorder()
    live = LiveState(s.run_id, s.name, s.load.mode)
    runner = Runner(s, payloads, rec, live, progress=progress, partial=partial, boundary=boundary)
    handle = None
    if metrics and s.metrics_port:
        try:
            handle = serve_metrics(LoadgenCollector(rec, live, lambda: runner.drivers.values()), s.metrics_port,
                                   s.metrics_addr)
        except OSError as e:
            raise RunError(f"cannot serve /metrics on {s.metrics_addr}:{s.metrics_port}: {e.strerror}") from None
    # Everything allocated so far (imports, payloads, histograms) lives for the whole run: freeze it,
    # so the collector's full passes do not walk it in the middle of a measurement.
    gc.collect()
    gc.freeze()
    task = asyncio.ensure_future(runner.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    try:
        raw = await task
    except asyncio.CancelledError:  # stopped by a signal: keep what was measured
        rec.flush()
        raw = runner.raw_results(None, partial=True)
    return raw, live, handle


def measure(s, payloads: dict, boundary=None) -> dict:
    """Run s in-process (or in its workers) and return the summary, quietly. boundary: see Runner."""
    if s.workers > 1:
        if boundary:
            raise ValueError("phase boundaries are exact in one process only; use workers=1")
        from loadgen.workers import run_workers
        return summarize(merge_raw(run_workers(s, payloads)), s)
    install_loop(s)

    async def go():
        raw, _, handle = await run_in_process(s, payloads, boundary=boundary)
        stop_metrics(handle)
        return raw
    return summarize(asyncio.run(go()), s)


def execute(s, quiet: bool = False) -> int:
    """Run scenario s; returns the exit code (0 ok, 1 a threshold broken)."""
    from stack.placement import isolate_from_env, pin_self, plan

    quiet = quiet or not sys.stderr.isatty()
    check_writable(s.out)
    payloads = build_payloads(s)
    place = plan(None, isolate_from_env())
    if place.isolated:  # off the model servers' cores (`make up` put them on the others)
        pin_self(place.client)

    def progress(line: str) -> None:
        sys.stderr.write("\r" + line[:200].ljust(120))
        sys.stderr.flush()

    def partial(raw: dict) -> None:
        write_json_atomic(s.out, summarize(raw, s))

    if s.workers > 1:
        from loadgen.workers import run_workers
        raw = merge_raw(run_workers(s, payloads))
        live = handle = None
    else:
        install_loop(s)
        raw, live, handle = asyncio.run(run_in_process(s, payloads, progress=None if quiet else progress,
                                                       partial=partial))
    if not quiet:
        sys.stderr.write("\n")
    summary = summarize(raw, s)
    if live is not None:  # /metrics says "done" before the summary file does
        live.valid = {t["name"]: int(t["valid"]) for t in summary["targets"]}
        live.phase = "done"
    write_json_atomic(s.out, summary)
    print_table(summary)
    print(f"summary: {s.out}")
    if handle and s.linger > 0:
        print(f"serving /metrics on {s.metrics_addr}:{s.metrics_port} for {s.linger:g}s more (final scrape)",
              flush=True)
        linger(s.linger)
    stop_metrics(handle)
    return 0 if summary["thresholds_passed"] else 1


def linger(seconds: float) -> None:
    """Wait, but let SIGTERM/SIGINT end the wait (the event loop's handlers are gone by now)."""
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait(seconds)


"""One run in this process: the recorder, the drivers' runner and /metrics, cancelled by the one stop path. The
parent runs it directly; each worker process (loadgen/workers.py) runs it for its share."""
from __future__ import annotations

import asyncio
import gc

from loadgen import stopping
from loadgen.errors import RunError
from loadgen.exposition import LoadgenCollector, serve_metrics
from loadgen.record import Recorder
from loadgen.runner import LiveState, Runner


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
                         boundary=None, history=None) -> tuple:
    rec = Recorder()
    live = LiveState(s.run_id, s.name, s.load.mode)
    runner = Runner(s, payloads, rec, live, progress=progress, partial=partial, boundary=boundary, history=history)
    handle = None
    if metrics and s.metrics_port:
        try:
            handle = serve_metrics(LoadgenCollector(rec, live, lambda: runner.drivers.values(), tuple(s.shard)),
                                   s.metrics_port, s.metrics_addr, s.run_id)
        except OSError as e:
            raise RunError(f"cannot serve /metrics on {s.metrics_addr}:{s.metrics_port}: {e.strerror}") from None
    # Everything allocated so far (imports, payloads, histograms) lives for the whole run: freeze it,
    # so the collector's full passes do not walk it in the middle of a measurement.
    gc.collect()
    gc.freeze()
    task = asyncio.ensure_future(runner.run())
    loop = asyncio.get_running_loop()
    stopping.on_stop(task, lambda: loop.call_soon_threadsafe(task.cancel))  # the one cancellation path
    try:
        raw = await task
    except asyncio.CancelledError:  # stopped by a signal or an :abort threshold: keep what was measured
        rec.flush()
        raw = runner.raw_results(None, partial=True)
    finally:
        stopping.forget(task)
    if stopping.requested():
        raw["interrupted"] = stopping.requested()  # never a valid window (summarize)
    return raw, live, handle

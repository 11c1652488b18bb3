"""--workers N: N processes, one event loop each, their results merged exactly.

Each worker drives 1/N of the load (rate / N, or concurrency / N) and serves
its own /metrics on port + i, so Prometheus sums the histograms by `le`; the
parent merges the workers' HDR histograms for the summary.
"""
from __future__ import annotations

import asyncio
import copy
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor

from loadgen import stopping
from loadgen.exposition import stop_metrics
from loadgen.inprocess import install_loop, run_in_process


def _share(total: float, n: int, i: int, integer: bool):
    if not integer:
        return total / n
    return int(total) // n + (1 if i < int(total) % n else 0)


def worker_scenario(s, n: int, i: int):
    w = copy.deepcopy(s)
    closed = s.load.mode == "closed"
    w.load.concurrency = max(1, _share(s.load.concurrency, n, i, True))
    w.load.rate = _share(s.load.rate, n, i, False)
    w.load.steps = [max(1, _share(x, n, i, True)) if closed else _share(x, n, i, False) for x in s.load.steps]
    w.load.min_requests = 0  # validity is judged on the merged result
    w.load.seed = s.load.seed + 1000 * i
    w.workers = 1
    if s.metrics_port:
        w.metrics_port = s.metrics_port + i
    return w


def _work(s, payloads):
    stopping.install()  # the parent forwards its first signal as SIGTERM: stop, keep the partial window
    install_loop(s)
    raw, _, handle = asyncio.run(run_in_process(s, payloads))
    stop_metrics(handle)
    return raw


def run_workers(s, payloads: dict) -> list:
    n = s.workers
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
        futures = [pool.submit(_work, worker_scenario(s, n, i), payloads) for i in range(n)]

        def forward():  # pool._processes: the executor's own {pid: process}; no public accessor
            for pid in list(getattr(pool, "_processes", None) or {}):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        stopping.on_stop(pool, forward)
        try:
            return [f.result() for f in futures]
        finally:
            stopping.forget(pool)

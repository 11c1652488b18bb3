"""Running signatures: directly, or through server-side batching. Both front ends use the same
runner: gRPC calls `run_blocking` in its own handler thread, REST awaits `run` on its event loop.

Batching follows TF Serving's shared batch scheduler: tasks of concurrent requests join an open
batch per (servable, signature) until it holds max_batch_size rows, or batch_timeout_micros have
passed since its first task and a batch thread is free; while every thread is busy a due batch
keeps filling. At most max_enqueued_batches batches wait per queue; past that a task is refused
UNAVAILABLE, as TF Serving refuses it. The scheduler is a lock and a condition variable; the
num_batch_threads batch threads take the next batch and run its one TF call.

runtime_latency is recorded as TF Serving records it, per request around the session's Run:
without batching that is the TF call itself; with batching it is the batching session's Run, so
a request's runtime is its wait in the queue plus its batch's TF call. `:tensorflow:core:
graph_runs` counts TF executions, one per batch.
"""
from __future__ import annotations

import asyncio
import collections
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from modelserver.status import ServingError, invalid, unavailable


def timed_run(servable, sig, inputs: dict, outputs: tuple = (), timeout_ms: int = 0) -> tuple:
    """(outputs, seconds of the TF call)."""
    t0 = time.perf_counter()
    out = servable.run(sig, inputs, outputs, timeout_ms)
    return out, time.perf_counter() - t0


class DirectRunner:
    """No batching: each request is one TF call, in the caller's thread (gRPC), or for REST in
    the event loop itself when the signature's calls are short, else on a pool thread.

    A short TF call (the example model at 1 row: ~40 us) costs less than the hop to a pool
    thread and back (benchmarks/modelserver.py, row "REST c32 1 row": 1.4x the requests/s
    inline); a long one would stall every other connection of the loop while it runs. The
    choice follows each signature's recent mean call time (an exponential average)."""

    INLINE_MAX_S = 0.0002  # calls shorter than this on average run on the event loop

    def __init__(self, threads: int, metrics):
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tf-run")
        self.metrics = metrics
        self.mean_s = {}  # (id(servable), signature name) -> recent mean seconds of a call

    def run_blocking(self, servable, sig, inputs: dict, rows: int, api: str, outputs: tuple = (),
                     timeout_ms: int = 0) -> dict:
        out, seconds = timed_run(servable, sig, inputs, outputs, timeout_ms)
        self.metrics.runtime(servable.model_name, api, seconds)
        key = (id(servable), sig.name)
        self.mean_s[key] = 0.9 * self.mean_s.get(key, seconds) + 0.1 * seconds
        return out

    async def run(self, servable, sig, inputs: dict, rows: int, api: str, outputs: tuple = (),
                  timeout_ms: int = 0) -> dict:
        if self.mean_s.get((id(servable), sig.name), 1.0) < self.INLINE_MAX_S:
            return self.run_blocking(servable, sig, inputs, rows, api, outputs, timeout_ms)
        return await asyncio.get_running_loop().run_in_executor(
            self.pool, self.run_blocking, servable, sig, inputs, rows, api, outputs, timeout_ms)

    def close(self) -> None:
        self.pool.shutdown(wait=False)


class _Task:
    __slots__ = ("inputs", "rows", "future", "enqueued", "api")

    def __init__(self, inputs, rows, api):
        self.inputs, self.rows, self.api = inputs, rows, api
        self.future, self.enqueued = Future(), time.perf_counter()


class _Batch:
    __slots__ = ("queue", "tasks", "rows", "due_at")

    def __init__(self, queue, timeout_s: float):
        self.queue, self.tasks, self.rows = queue, [], 0
        self.due_at = time.perf_counter() + timeout_s


class _Queue:
    __slots__ = ("servable", "sig", "open", "waiting")

    def __init__(self, servable, sig):
        self.servable, self.sig, self.open, self.waiting = servable, sig, None, 0


class BatchingRunner:
    def __init__(self, options, metrics, fallback: DirectRunner):
        self.opt, self.metrics, self.fallback = options, metrics, fallback
        self.timeout_s = options.batch_timeout_micros / 1e6
        self.cond = threading.Condition()
        self.ready = collections.deque()   # closed batches waiting for a thread, FIFO
        self.queues = {}                   # (id(servable), signature name) -> _Queue
        self.stopping = False
        self.threads = [threading.Thread(target=self._worker, name=f"batch-{i}", daemon=True)
                        for i in range(options.num_batch_threads)]
        for t in self.threads:
            t.start()

    def submit(self, servable, sig, inputs: dict, rows: int, api: str) -> Future:
        if rows > self.opt.max_batch_size:
            raise invalid(f"Task size {rows} is larger than maximum input batch size {self.opt.max_batch_size}")
        task = _Task(inputs, rows, api)
        with self.cond:
            key = (id(servable), sig.name)
            q = self.queues.get(key)
            if q is None or q.servable is not servable:
                q = self.queues[key] = _Queue(servable, sig)
            b = q.open
            if b is None or b.rows + rows > self.opt.max_batch_size:
                if b is not None:
                    self._close(q)
                if q.waiting >= self.opt.max_enqueued_batches:
                    raise unavailable("The batch scheduling queue to which this task was submitted is full")
                b = q.open = _Batch(q, self.timeout_s)
                q.waiting += 1
            b.tasks.append(task)
            b.rows += rows
            if b.rows >= self.opt.max_batch_size:
                self._close(q)
            self.cond.notify()
        return task.future

    def run_blocking(self, servable, sig, inputs: dict, rows: int, api: str, outputs: tuple = (),
                     timeout_ms: int = 0) -> dict:
        if not sig.batchable or rows < 1 or outputs:
            return self.fallback.run_blocking(servable, sig, inputs, rows, api, outputs, timeout_ms)
        return self.submit(servable, sig, inputs, rows, api).result()

    async def run(self, servable, sig, inputs: dict, rows: int, api: str, outputs: tuple = (),
                  timeout_ms: int = 0) -> dict:
        """timeout_ms bounds an unbatched run; a batch's one run serves many requests and has none."""
        if not sig.batchable or rows < 1 or outputs:
            return await self.fallback.run(servable, sig, inputs, rows, api, outputs, timeout_ms)
        return await asyncio.wrap_future(self.submit(servable, sig, inputs, rows, api))

    def _close(self, q) -> None:
        """Under the lock: the open batch of q is complete."""
        b, q.open = q.open, None
        self.ready.append(b)

    def _next(self):
        """Under the lock: the batch a free thread runs now, or (None, seconds to wait)."""
        if self.ready:
            return self.ready.popleft(), 0
        now = time.perf_counter()
        opened = [q.open for q in self.queues.values() if q.open is not None]
        if not opened:
            return None, None
        first = min(opened, key=lambda b: b.due_at)
        if first.due_at <= now:
            first.queue.open = None
            return first, 0
        return None, first.due_at - now

    def _worker(self) -> None:
        while True:
            with self.cond:
                while True:
                    if self.stopping:
                        return
                    b, wait = self._next()
                    if b is not None:
                        break
                    self.cond.wait(wait)
                b.queue.waiting -= 1
            self._execute(b)

    def _execute(self, b) -> None:
        q = b.queue
        started = time.perf_counter()
        queued = [started - t.enqueued for t in b.tasks]
        try:
            if len(b.tasks) == 1:
                merged = b.tasks[0].inputs
            else:
                merged = {k: np.concatenate([t.inputs[k] for t in b.tasks]) for k in q.sig.inputs}
            padded = self._padded_size(b.rows)
            if padded > b.rows:
                merged = {k: np.concatenate([v, np.repeat(v[:1], padded - b.rows, axis=0)])
                          for k, v in merged.items()}
            out, seconds = timed_run(q.servable, q.sig, merged)
        except Exception as e:  # noqa: BLE001 - every task of the batch gets the batch's error
            err = e if isinstance(e, ServingError) else ServingError("INTERNAL", str(e))
            for t in b.tasks:
                t.future.set_exception(err)
            return
        self.metrics.batch(self.opt.thread_pool_name, b.rows, queued, q.servable.model_name,
                           [(t.api, wait + seconds) for t, wait in zip(b.tasks, queued)], seconds)
        offset = 0
        for t in b.tasks:
            t.future.set_result({k: v[offset:offset + t.rows] for k, v in out.items()})
            offset += t.rows

    def _padded_size(self, size: int) -> int:
        for allowed in self.opt.allowed_batch_sizes:
            if allowed >= size:
                return allowed
        return size

    def close(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

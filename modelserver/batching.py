"""Running signatures: directly on a thread pool, or through server-side batching.

Batching follows TF Serving's shared batch scheduler: tasks of concurrent
requests join an open batch per (servable, signature) until it holds
max_batch_size rows, or batch_timeout_micros have passed since its first task
and a batch thread is free; while every thread is busy a due batch keeps filling.
At most max_enqueued_batches batches wait per queue; past that a task is refused
UNAVAILABLE, as TF Serving refuses it. All bookkeeping runs on the event loop
thread; only the TF call runs on the num_batch_threads worker threads.

runtime_latency is recorded as TF Serving records it, per request around the session's Run:
without batching that is the TF call itself (timed in the thread that makes it, so the hop to
and from the event loop counts as front end); with batching it is the batching session's Run,
so a request's runtime is its wait in the queue plus its batch's TF call. `:tensorflow:core:
graph_runs` counts TF executions, one per batch.
"""
from __future__ import annotations

import asyncio
import collections
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from modelserver.status import ServingError, invalid, unavailable


def timed_run(servable, sig, inputs: dict) -> tuple:
    """(outputs, seconds of the TF call), measured in the thread that makes the call."""
    t0 = time.perf_counter()
    out = servable.run(sig, inputs)
    return out, time.perf_counter() - t0


class DirectRunner:
    """No batching: each request is one TF call on a worker thread."""

    def __init__(self, threads: int, metrics):
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tf-run")
        self.metrics = metrics

    async def run(self, servable, sig, inputs: dict, rows: int, api: str) -> dict:
        out, seconds = await asyncio.get_running_loop().run_in_executor(self.pool, timed_run, servable, sig, inputs)
        self.metrics.runtime(servable.model_name, api, seconds)
        self.metrics.graph_run(seconds)
        return out

    def close(self) -> None:
        self.pool.shutdown(wait=False)


class _Batch:
    __slots__ = ("queue", "tasks", "rows", "created", "due")

    def __init__(self, queue):
        self.queue, self.tasks, self.rows, self.created, self.due = queue, [], 0, time.perf_counter(), False


class _Queue:
    __slots__ = ("servable", "sig", "api", "open", "waiting")

    def __init__(self, servable, sig, api):
        self.servable, self.sig, self.api, self.open, self.waiting = servable, sig, api, None, 0


class BatchingRunner:
    def __init__(self, options, metrics, fallback: DirectRunner):
        self.opt, self.metrics, self.fallback = options, metrics, fallback
        self.pool = ThreadPoolExecutor(max_workers=options.num_batch_threads, thread_name_prefix="batch")
        self.idle = options.num_batch_threads
        self.ready = collections.deque()   # closed batches waiting for a thread, FIFO
        self.queues = {}                   # (id(servable), signature name) -> _Queue
        self.timeout_s = options.batch_timeout_micros / 1e6

    async def run(self, servable, sig, inputs: dict, rows: int, api: str) -> dict:
        if not sig.batchable or rows < 1:
            return await self.fallback.run(servable, sig, inputs, rows, api)
        if rows > self.opt.max_batch_size:
            raise invalid(f"Task size {rows} is larger than maximum input batch size {self.opt.max_batch_size}")
        key = (id(servable), sig.name)
        q = self.queues.get(key)
        if q is None or q.servable is not servable:
            q = self.queues[key] = _Queue(servable, sig, api)
        b = q.open
        if b is None or b.rows + rows > self.opt.max_batch_size:
            if b is not None:
                self._close(q)
            if q.waiting >= self.opt.max_enqueued_batches:
                raise unavailable("The batch scheduling queue to which this task was submitted is full")
            b = q.open = _Batch(q)
            q.waiting += 1
            if self.timeout_s > 0:
                asyncio.get_running_loop().call_later(self.timeout_s, self._on_timeout, b)
            else:
                b.due = True
        fut = asyncio.get_running_loop().create_future()
        b.tasks.append((inputs, rows, fut, time.perf_counter(), api))
        b.rows += rows
        if b.rows >= self.opt.max_batch_size:
            self._close(q)
        elif b.due:
            self._dispatch()
        return await fut

    def _close(self, q) -> None:
        b, q.open = q.open, None
        self.ready.append(b)
        self._dispatch()

    def _on_timeout(self, b) -> None:
        b.due = True
        if b.queue.open is b and self.idle:
            self._close(b.queue)

    def _dispatch(self) -> None:
        while self.idle:
            if self.ready:
                b = self.ready.popleft()
            else:
                due = [q for q in self.queues.values() if q.open is not None and q.open.due]
                if not due:
                    return
                q = min(due, key=lambda q: q.open.created)
                b, q.open = q.open, None
            self.idle -= 1
            b.queue.waiting -= 1
            started = time.perf_counter()
            queued = [started - t[3] for t in b.tasks]
            self.metrics.batch(self.opt.thread_pool_name, b.rows, queued)
            loop = asyncio.get_running_loop()
            fut = loop.run_in_executor(self.pool, self._execute, b)
            fut.add_done_callback(lambda f, b=b, q=queued: self._finished(b, f, q))

    def _execute(self, b):
        q = b.queue
        if len(b.tasks) == 1:
            merged = b.tasks[0][0]
        else:
            merged = {k: np.concatenate([t[0][k] for t in b.tasks]) for k in q.sig.inputs}
        size = b.rows
        padded = self._padded_size(size)
        if padded > size:
            merged = {k: np.concatenate([v, np.repeat(v[:1], padded - size, axis=0)]) for k, v in merged.items()}
        return timed_run(q.servable, q.sig, merged)

    def _padded_size(self, size: int) -> int:
        for allowed in self.opt.allowed_batch_sizes:
            if allowed >= size:
                return allowed
        return size

    def _finished(self, b, fut, queued: list) -> None:
        self.idle += 1
        q = b.queue
        exc = fut.exception()
        if exc is None:
            (out, seconds), offset = fut.result(), 0
            self.metrics.graph_run(seconds)
            for (inputs, rows, task_fut, _, api), wait in zip(b.tasks, queued):
                self.metrics.runtime(q.servable.model_name, api, wait + seconds)
                if not task_fut.done():
                    task_fut.set_result({k: v[offset:offset + rows] for k, v in out.items()})
                offset += rows
        else:
            err = exc if isinstance(exc, ServingError) else ServingError("INTERNAL", str(exc))
            for t in b.tasks:
                if not t[2].done():
                    t[2].set_exception(err)
        self._dispatch()

    def close(self) -> None:
        self.pool.shutdown(wait=False)

"""How load is applied to one target: closed loop or open loop, REST or gRPC.

Closed loop keeps N requests in flight and measures each from its send.
Open loop sends at the pre-computed intended times and measures from the
intended time (coordinated-omission-correct, as wrk2 does): a stalled server
shows up in every request scheduled during the stall, not just the one it
held. The send lag (actual minus intended dispatch time) is recorded on its own.
"""
from __future__ import annotations

import asyncio
import collections
import time

from loadgen import http_client
from loadgen.record import Recorder
from loadgen.requestset import RequestSet, one


class Phase:
    """The series one phase of one target records into."""

    def __init__(self, rec: Recorder, target, phase: str):
        base = (target.version, target.protocol, phase)
        self.ok = rec.get(base + ("ok",))
        self.err = rec.get(base + ("error",))
        self.lag = rec.get(base + ("lag",))
        self.labels, self.rec = base, rec
        self.sent = 0
        self.sent_in_window = 0

    def error(self, code: str, seconds: float, detail: str = "") -> None:
        self.err.record(seconds)
        self.rec.error(self.labels, code, detail)


def request_set(reqs) -> RequestSet:
    return one(reqs) if isinstance(reqs, bytes) else reqs  # one body: a set of one


class Requests:
    """A request set's bodies in their seeded cycle: next() is a list lookup (constant work per request)."""

    def __init__(self, reqs: RequestSet, prepare=bytes, seed: int = 1):
        self.items = [prepare(b) for b in reqs.bodies]
        self.order, self.i = reqs.order(seed), -1

    def next(self):
        self.i = (self.i + 1) % len(self.order)
        return self.items[self.order[self.i]]


class RestDriver:
    def __init__(self, target, reqs, rec: Recorder, timeout: float, max_connections: int,
                 check_body: bool = True, seed: int = 1):
        self.t, self.rec, self.timeout = target, rec, timeout
        reqs = request_set(reqs)
        path = self._path() + reqs.rest_path
        self.requests = Requests(reqs, lambda b: http_client.build_request(target.host, target.port, path, b), seed)
        self.max_connections, self.check_body = max_connections, check_body
        self.idle = collections.deque()
        self.nconns = 0
        self.in_flight = 0
        self.reconnects = 0
        self.busy = {}  # connection -> (start time, phase, on_finish)

    def _path(self) -> str:
        t = self.t
        return f"/v1/models/{t.model}" + (f"/versions/{t.model_version}" if t.model_version else "")

    async def _connect(self):
        self.nconns += 1
        try:
            return await asyncio.wait_for(http_client.connect(self.t.host, self.t.port, self.check_body), self.timeout)
        except BaseException:
            self.nconns -= 1
            raise

    def _take_idle(self):
        """A live idle connection, or None. The server may have closed one while it sat idle
        (its keep-alive timeout): writing to it would fail, so it is dropped and counted."""
        while self.idle:
            conn = self.idle.pop()
            if not conn.closed and not conn.transport.is_closing():
                return conn
            self.nconns -= 1
            self.reconnects += 1
        return None

    def _send(self, conn, start: float, phase: Phase, on_finish) -> None:
        self.in_flight += 1
        phase.sent += 1
        self.busy[conn] = (start, phase, on_finish)
        conn.send(self.requests.next(), lambda status, err: self._done(conn, status, err))

    def _done(self, conn, status: int, err: str) -> None:
        start, phase, on_finish = self.busy.pop(conn)
        self.in_flight -= 1
        elapsed = time.perf_counter() - start
        if not err:
            phase.ok.record(elapsed)
        else:
            phase.error(str(status) if err == "http" else err, elapsed,
                        conn.error_detail.decode(errors="replace") if err == "http" else "")
        if conn.closed:
            self.nconns -= 1
            self.reconnects += 1
            conn = None
        on_finish(conn)

    def sweep(self, now: float) -> None:
        """Abort requests older than the timeout (checked every 100 ms: no timer per request)."""
        for conn, (start, phase, on_finish) in list(self.busy.items()):
            if now - start > self.timeout and conn in self.busy:
                del self.busy[conn]
                self.in_flight -= 1
                self.nconns -= 1
                conn.abort()
                phase.error("timeout", now - start)
                on_finish(None)

    # ---- closed loop ---------------------------------------------------------------
    async def closed(self, phase: Phase, concurrency: int, deadline: float, max_requests: int) -> None:
        done = asyncio.get_running_loop().create_future()
        state = {"active": concurrency, "budget": max_requests or -1}

        def next_request(conn):
            if time.perf_counter() >= deadline or state["budget"] == 0:
                if conn is not None:
                    self.idle.append(conn)
                state["active"] -= 1
                if state["active"] == 0 and not done.done():
                    done.set_result(None)
            elif conn is None:
                asyncio.ensure_future(reconnect())
            else:
                state["budget"] -= 1
                self._send(conn, time.perf_counter(), phase, next_request)

        async def reconnect():
            while time.perf_counter() < deadline:
                try:
                    conn = await self._connect()
                except Exception as e:  # refused/reset/timeout: count it, back off, try again
                    phase.error(http_client.classify_os_error(e), 0.0)
                    await asyncio.sleep(0.1)
                    continue
                return next_request(conn)
            next_request(None)

        for _ in range(concurrency):
            next_request(self._take_idle())
        await done

    # ---- open loop -----------------------------------------------------------------
    def open_dispatch(self, phase: Phase, intended: float, pending: collections.deque) -> None:
        conn = self._take_idle()
        if conn is not None:
            self._send(conn, intended, phase, lambda c: self._open_next(c, pending))
            return
        pending.append((intended, phase))
        if self.nconns < self.max_connections:
            asyncio.ensure_future(self._open_connect(pending))

    def _open_next(self, conn, pending) -> None:
        if conn is None:
            if pending and self.nconns < self.max_connections:
                asyncio.ensure_future(self._open_connect(pending))
            return
        if pending:
            intended, phase = pending.popleft()
            self._send(conn, intended, phase, lambda c: self._open_next(c, pending))
        else:
            self.idle.append(conn)

    async def _open_connect(self, pending) -> None:
        try:
            conn = await self._connect()
        except Exception as e:
            if pending:  # the request that asked for this connection fails with the connect error
                intended, phase = pending.popleft()
                phase.error(http_client.classify_os_error(e), time.perf_counter() - intended)
            return
        self._open_next(conn, pending)

    def close(self) -> None:
        for conn in self.idle:
            conn.abort()
        self.idle.clear()



class GrpcDriver:
    """gRPC Predict with raw bytes (no per-request proto work on the client).

    The open loop dispatches from the event loop (grpc.aio); the closed loop runs each user in
    a thread making blocking calls, which costs less client CPU and latency per request than
    grpc.aio's round trips through its poller thread (benchmarks/loadgen.py, "client cost" rows:
    about 15% more requests/s at concurrency 1). The threads hand their results to the event
    loop through a deque, which it records from, so every series is still written by one thread."""

    def __init__(self, target, reqs, rec: Recorder, timeout: float, channels: int = 4, seed: int = 1):
        import grpc

        self.grpc = grpc
        self.t, self.rec, self.timeout = target, rec, timeout
        reqs = request_set(reqs)
        self.requests, self.method = Requests(reqs, seed=seed), reqs.grpc_path
        self.n_channels = channels
        self.channels = [grpc.aio.insecure_channel(f"{target.host}:{target.port}",
                                                   options=[("grpc.use_local_subchannel_pool", 1)])
                         for _ in range(channels)]
        self.calls = [ch.unary_unary(self.method) for ch in self.channels]
        self.sync_channels = []
        self.in_flight = 0
        self.reconnects = 0
        self._i = 0

    def _code(self, e) -> str:
        code = e.code()
        if code == self.grpc.StatusCode.DEADLINE_EXCEEDED:
            return "timeout"
        if code == self.grpc.StatusCode.UNAVAILABLE and "onnect" in (e.details() or ""):
            return "connection_refused"
        return code.name

    async def one(self, phase: Phase, start: float) -> None:
        self._i += 1
        call = self.calls[self._i % len(self.calls)]
        self.in_flight += 1
        phase.sent += 1
        try:
            await call(self.requests.next(), timeout=self.timeout)
            phase.ok.record(time.perf_counter() - start)
        except self.grpc.aio.AioRpcError as e:
            phase.error(self._code(e), time.perf_counter() - start, e.details() or "")
        finally:
            self.in_flight -= 1

    async def closed(self, phase: Phase, concurrency: int, deadline: float, max_requests: int) -> None:
        import threading
        from concurrent.futures import ThreadPoolExecutor

        if not self.sync_channels:
            self.sync_channels = [self.grpc.insecure_channel(f"{self.t.host}:{self.t.port}",
                                                             options=[("grpc.use_local_subchannel_pool", 1)])
                                  for _ in range(self.n_channels)]
        calls = [ch.unary_unary(self.method) for ch in self.sync_channels]
        results, lock, budget = collections.deque(), threading.Lock(), [max_requests or -1]
        stop = threading.Event()  # set when the phase is cancelled (a signal): users end after their call

        def user(i: int) -> None:
            call, perf = calls[i % len(calls)], time.perf_counter
            while perf() < deadline and not stop.is_set():
                with lock:
                    if budget[0] == 0:
                        return
                    budget[0] -= 1
                    self.in_flight += 1
                    phase.sent += 1
                    body = self.requests.next()
                t0 = perf()
                try:
                    call(body, timeout=self.timeout)
                    results.append(("", perf() - t0, ""))
                except self.grpc.RpcError as e:
                    results.append((self._code(e), perf() - t0, e.details() or ""))
                with lock:
                    self.in_flight -= 1

        def drain() -> None:
            while results:
                code, seconds, detail = results.popleft()
                if code:
                    phase.error(code, seconds, detail)
                else:
                    phase.ok.record(seconds)

        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="grpc-user") as pool:
            users = [loop.run_in_executor(pool, user, i) for i in range(concurrency)]
            try:
                while not all(u.done() for u in users):
                    await asyncio.sleep(0.01)
                    drain()
            finally:  # cancelled: without this the pool's exit waited for the users' deadline (55 s)
                stop.set()
            await asyncio.gather(*users)
        drain()

    def open_dispatch(self, phase: Phase, intended: float, pending) -> None:
        asyncio.ensure_future(self.one(phase, intended))

    def sweep(self, now: float) -> None:
        pass  # gRPC deadlines are per call

    def close(self) -> None:
        for ch in self.channels:
            asyncio.ensure_future(ch.close())
        for ch in self.sync_channels:
            ch.close()

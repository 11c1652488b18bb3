"""Connection limits for the REST listener: a cap on open connections and a deadline for a
request's headers (slow loris).

aiohttp bounds a request body (client_max_size, and rest.py's read timeout) but not how
many connections stay open nor how long a client may take to send its headers, so a
handful of clients trickling one header byte a second would hold the server forever.
The guard wraps aiohttp's protocol factory: a connection beyond the cap is answered 503
and closed; a connection whose request headers are not complete within the read timeout
(from its first byte, or from its opening for one that sends nothing) is closed.
"""
from __future__ import annotations

import asyncio
import logging
import time

from aiohttp import web

log = logging.getLogger("modelserver")

_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
         b"Content-Length: 45\r\n\r\n{\"error\": \"too many connections, retry later\"}")


class _Guarded(asyncio.Protocol):
    """Delegates to aiohttp's RequestHandler; tells the guard when bytes arrive and when it closes."""

    def __init__(self, guard: "ConnectionGuard", inner):
        self.guard, self.inner, self.transport, self.admitted = guard, inner, None, False

    def connection_made(self, transport):
        self.transport = transport
        self.admitted = self.guard.admit(transport)
        if not self.admitted:  # over the cap: answer 503 and close; aiohttp never sees it
            transport.write(_BUSY)
            transport.close()
            return
        self.inner.connection_made(transport)

    def data_received(self, data):
        if self.admitted:
            self.guard.arm(self.transport)
            self.inner.data_received(data)

    def eof_received(self):
        return self.inner.eof_received() if self.admitted else False

    def connection_lost(self, exc):
        if self.guard.release(self.transport):
            self.inner.connection_lost(exc)

    def pause_writing(self):
        self.inner.pause_writing()

    def resume_writing(self):
        self.inner.resume_writing()


class ConnectionGuard:
    """Protocol factory for loop.create_server, plus the handler wrapper that marks headers done."""

    def __init__(self, factory, max_connections: int, header_timeout_s: float):
        self.factory, self.max_connections, self.timeout = factory, max_connections, header_timeout_s
        self.open: set = set()
        self.deadlines: dict = {}  # transport -> monotonic deadline while its headers arrive
        self.busy: set = set()  # transports with a request in a handler
        self.refused = self.timed_out = 0
        self._refused_logged = float("-inf")
        self._sweeper: asyncio.Task | None = None

    def __call__(self) -> _Guarded:
        return _Guarded(self, self.factory())

    def admit(self, transport) -> bool:
        if self.max_connections and len(self.open) >= self.max_connections:
            self.refused += 1
            now = time.monotonic()
            if now - self._refused_logged > 10:  # one line per 10 s, with the count so far
                self._refused_logged = now
                log.warning("REST connection cap %d reached: answered 503 (%d refused so far)", self.max_connections,
                            self.refused)
            return False
        self.open.add(transport)
        self.deadlines[transport] = time.monotonic() + self.timeout  # silent clients too
        return True

    def arm(self, transport) -> None:
        if transport not in self.busy and transport not in self.deadlines:
            self.deadlines[transport] = time.monotonic() + self.timeout

    def release(self, transport) -> bool:
        self.deadlines.pop(transport, None)
        self.busy.discard(transport)
        if transport in self.open:
            self.open.discard(transport)
            return True
        return False

    def wrap(self, handler):
        """The request handler, marking its connection's headers complete and the connection busy."""
        async def guarded(request: web.BaseRequest) -> web.StreamResponse:
            t = request.transport
            self.deadlines.pop(t, None)  # headers are in; the body has rest.py's read timeout
            self.busy.add(t)
            try:
                return await handler(request)
            finally:
                self.busy.discard(t)
        return guarded

    def start(self) -> None:
        if self.timeout > 0:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    def stop(self) -> None:
        if self._sweeper:
            self._sweeper.cancel()

    async def _sweep(self) -> None:
        period = min(1.0, self.timeout / 4)
        while True:
            await asyncio.sleep(period)
            now = time.monotonic()
            late = [t for t, d in self.deadlines.items() if d < now]
            for t in late:
                self.deadlines.pop(t, None)
                t.close()
            if late:
                self.timed_out += len(late)
                log.warning("closed %d connection(s) that sent no complete request in %.1fs",
                            len(late), self.timeout)

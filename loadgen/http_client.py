"""A minimal HTTP/1.1 keep-alive client on asyncio Protocols, callback style.

Written by hand because it is the hot path and measurably faster: aiohttp's
client managed ~8k req/s on this machine where this does several times that
(benchmarks/loadgen.py prints the table). It does exactly what a load generator
needs: send pre-serialized request bytes, read a status line, headers and a
Content-Length or chunked body, and reconnect transparently (counting it) when
the server closes a keep-alive connection (nginx does after keepalive_requests).
"""
from __future__ import annotations

import asyncio
import errno
import socket

OK_MARKERS = (b'"predictions"', b'"outputs"', b'"results"')  # predict (row, columnar), classify/regress


def classify_os_error(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED:
        return "connection_refused"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout"
    return "connection_reset"


class HttpConnection(asyncio.Protocol):
    """One connection; one request in flight at a time; done(code, error_class) on completion.

    error_class is "" for a valid 2xx answer, "http" for another status, or one of
    connection_reset / invalid_response.
    """

    __slots__ = ("transport", "buf", "done", "closed", "want", "status", "keep_alive", "chunked", "check_body",
                 "body_start", "error_detail")

    def __init__(self, check_body: bool = True):
        self.transport = None
        self.buf = bytearray()
        self.done = None
        self.closed = False
        self.want = -1
        self.check_body = check_body
        self.error_detail = b""  # the start of the last non-2xx answer's body: what the server said
    def connection_made(self, transport):
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, payload: bytes, done) -> None:
        self.done = done
        self.want = -1
        self.transport.write(payload)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        if self.want < 0:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            if not self._parse_head(bytes(buf[:end]), end + 4):
                return
        if self.chunked:
            if buf.endswith(b"0\r\n\r\n"):
                self._complete(len(buf))
            return
        if len(buf) >= self.want:
            self._complete(self.want)

    def _parse_head(self, head: bytes, body_start: int) -> bool:
        lines = head.split(b"\r\n")
        try:
            self.status = int(lines[0].split(b" ", 2)[1])
        except (IndexError, ValueError):
            self._fail("invalid_response")
            return False
        length, self.chunked, self.keep_alive = 0, False, True
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                self.chunked = True
            elif name == b"connection" and value.strip().lower() == b"close":
                self.keep_alive = False
        self.want, self.body_start = body_start + length, body_start
        return True

    def _complete(self, end: int) -> None:
        status, buf, start = self.status, self.buf, self.body_start
        if status >= 300:
            err = "http"
            self.error_detail = bytes(buf[start:min(end, start + 300)])  # errors only: the hot path copies nothing
        elif self.check_body and all(buf.find(m, start, start + 256) < 0 for m in OK_MARKERS):
            err = "invalid_response"
        else:
            err = ""
        del buf[:end]  # no copy of the response: only its first bytes are looked at, in place
        self.want = -1
        done, self.done = self.done, None
        if not self.keep_alive:
            self.closed = True
            self.transport.close()
        if done is not None:
            done(status, err)

    def _fail(self, err: str) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()
        done, self.done = self.done, None
        if done is not None:
            done(0, err)

    def eof_received(self):
        # The server closes a keep-alive connection (its idle timeout): unusable from now on, even
        # before connection_lost arrives (a later write would raise on a closed transport).
        self.closed = True
        return False

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self.done is not None:
            self._fail("connection_reset")

    def abort(self) -> None:
        """Give up on the request in flight (timeout): the connection is not reusable."""
        self.done = None
        self.closed = True
        if self.transport is not None:
            self.transport.abort()


async def connect(host: str, port: int, check_body: bool = True) -> HttpConnection:
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(lambda: HttpConnection(check_body), host, port)
    return proto


def build_request(host: str, port: int, path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body

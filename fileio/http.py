"""Reads from other servers, bounded in bytes and in wall time.

A metrics page, a model's metadata, an answer to a request or a Prometheus query comes from a server this
tool may not control (TARGETS=, PROMETHEUS=). Read with urllib, a 1 GB metrics page held 5.4 GB of RSS, a
page announcing `Content-Length: 1 GiB` ran for minutes, and a page sent at one byte per second hung `doctor`
for ever: urllib's timeout bounds each socket read, not the answer. `get` bounds the whole exchange: a timer
shuts the socket down at the deadline, wherever the read is (headers, body, chunked), and the body is refused
past max_bytes, before it is read when its length is announced.

Its errors are OSErrors (as urllib's are), so a caller's "does not answer" path takes them; each names the URL.
"""
from __future__ import annotations

import http.client
import socket
import threading
import urllib.parse

MAX_BYTES = 32 * 2**20  # a metrics page of hundreds of models is a few MB; metadata and answers pass their own


class ReadError(OSError):
    """An answer that could not be read whole: too large, too slow, or broken."""


class TooLarge(ReadError):
    pass


class TooSlow(ReadError):
    pass


class HTTPStatusError(ReadError):
    """A 4xx/5xx answer; `said` is the start of its body, whitespace folded."""

    def __init__(self, url: str, code: int, said: str):
        super().__init__(f"{url} answered HTTP {code}: {said}")
        self.url, self.code, self.said = url, code, said


def get(url: str, *, data: bytes | None = None, headers: dict | None = None, timeout_s: float = 10.0,
        max_bytes: int = MAX_BYTES) -> bytes:
    """The body of url's answer (POST when data is given), at most max_bytes, within about timeout_s."""
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ReadError(f"{url}: not an http(s) URL")
    conn_class = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
    conn = conn_class(u.hostname, u.port, timeout=timeout_s)  # connect and each read; the timer bounds the rest
    fired = threading.Event()

    def cut() -> None:
        fired.set()
        if conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)  # the blocked read in the other thread returns
            except OSError:
                pass

    timer = threading.Timer(timeout_s, cut)
    timer.daemon = True
    timer.start()
    try:
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        conn.request("GET" if data is None else "POST", path, body=data, headers=headers or {})
        r = conn.getresponse()
        length = (r.getheader("Content-Length") or "").strip()
        if length.isdigit() and int(length) > max_bytes:
            raise TooLarge(f"{url} announced {int(length):,} bytes, more than the {max_bytes:,} read here")
        body = r.read(max_bytes + 1)
        if fired.is_set():
            raise TooSlow(f"{url} did not answer whole within {timeout_s:g} s")
        if len(body) > max_bytes:
            raise TooLarge(f"{url} answered more than the {max_bytes:,} bytes read here")
        if r.status >= 400:
            raise HTTPStatusError(url, r.status, " ".join(body[:300].decode(errors="replace").split()))
        return body
    except ReadError:
        raise
    except (OSError, http.client.HTTPException) as e:
        if fired.is_set():
            raise TooSlow(f"{url} did not answer whole within {timeout_s:g} s") from None
        if isinstance(e, OSError):
            raise
        raise ReadError(f"{url}: a broken answer ({type(e).__name__}: {e})") from None
    finally:
        timer.cancel()
        conn.close()

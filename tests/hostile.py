"""HTTP servers on loopback that answer badly, as a server this tool does not control may: a page announcing
1 GiB, a page that never ends, an answer sent a byte at a time (status line included), garbage, bytes that are
not UTF-8. Each answers every path the same way; every answer ends when the test stops the server."""
from __future__ import annotations

import socket
import socketserver
import threading

OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
CHUNK = b"x" * 65536


def _answer(mode: str, conn: socket.socket, stop: threading.Event) -> None:
    if mode == "announced-1GiB":
        conn.sendall(OK + b"Content-Length: 1073741824\r\n\r\n" + CHUNK)
        stop.wait(60)
    elif mode == "endless":
        conn.sendall(OK + b"Connection: close\r\n\r\n")
        while not stop.is_set():
            conn.sendall(CHUNK)
    elif mode == "trickle":
        for b in (OK + b"Content-Length: 100000\r\n\r\n" + b"# " * 50000):
            if stop.wait(0.2):
                return
            conn.sendall(bytes([b]))
    elif mode == "garbage":
        conn.sendall(OK + b"Content-Length: 3\r\n\r\n{{{")
    elif mode == "not-utf8":
        conn.sendall(OK + b"Content-Length: 6\r\n\r\n\xff\xfe\x00ab\xff")
    else:
        raise ValueError(mode)


class HostileServer:
    def __init__(self, mode: str):
        stop = self.stop_event = threading.Event()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                self.request.recv(65536)  # the request; what it asks does not matter
                try:
                    _answer(mode, self.request, stop)
                except OSError:  # the client gave up, as it should
                    pass

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str = "/monitoring/prometheus/metrics") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.stop_event.set()
        self.server.shutdown()
        self.server.server_close()

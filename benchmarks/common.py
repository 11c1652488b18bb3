"""Shared pieces of the benchmark scripts: a fixed-answer nginx, process pinning, tables."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREDICT = '{"predictions": [[0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]]}'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pin(core: int) -> list:
    """taskset prefix: each side of a loopback benchmark on its own core, when there are two."""
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(core)]
    return []


class Nginx:
    """nginx answering a fixed predict JSON on every path, 1 worker, keep-alive limit raised."""

    def __init__(self, core: int = 0):
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="bench-nginx-"))
        (self.dir / "nginx.conf").write_text(f"""
worker_processes 1;
daemon off;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 100000000;
  client_body_temp_path {self.dir};
  server {{
    listen 127.0.0.1:{self.port};
    location / {{ default_type application/json; return 200 '{PREDICT}'; }}
  }}
}}
""")
        self.core = core
        self.proc = None

    def __enter__(self):
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen(pin(self.core) + [nginx, "-c", str(self.dir / "nginx.conf"), "-p", str(self.dir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nginx did not start")

    def __exit__(self, *exc):
        self.proc.terminate()
        self.proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


def table(title: str, header: list, rows: list) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(w) if i else str(x).ljust(w) for i, (x, w) in enumerate(zip(r, widths)))
    out = [title, line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]
    return "\n".join(out)

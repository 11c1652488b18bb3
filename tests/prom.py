"""A real Prometheus (Debian's `prometheus` binary) for tests, on a free loopback port."""
from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml
from servers import free_port


class Prometheus:
    def __init__(self, tmp: Path, targets: dict, interval: str = "1s", rule_files: list = (),
                 metrics_paths: dict | None = None):
        """targets: job name -> list of host:port (or (host:port, labels) pairs); metrics_paths: job name ->
        its path when not /metrics."""
        binary = shutil.which("prometheus")
        if not binary:
            raise RuntimeError("the prometheus binary is missing: run `make setup` (Debian package prometheus)")
        self.port = free_port()
        jobs = []
        for job, addrs in targets.items():
            static = [{"targets": [a], "labels": {}} if isinstance(a, str) else {"targets": [a[0]], "labels": a[1]}
                      for a in addrs]
            jobs.append({"job_name": job, "scrape_interval": interval, "static_configs": static,
                         "metrics_path": (metrics_paths or {}).get(job, "/metrics")})
        cfg = {"global": {"scrape_interval": interval, "evaluation_interval": interval},
               "rule_files": [str(r) for r in rule_files], "scrape_configs": jobs}
        self.config = tmp / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(cfg))
        self.data = tmp / "tsdb"
        self.log = tmp / "prometheus.log"
        self.cmd = [binary, f"--config.file={self.config}", f"--storage.tsdb.path={self.data}",
                    f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle"]
        self.proc = None

    def start(self) -> "Prometheus":
        with open(self.log, "ab") as f:
            self.proc = subprocess.Popen(self.cmd, stdout=f, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1) as r:
                    if r.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"prometheus did not become ready: {self.log.read_text()[-1500:]}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(15)

    def query(self, expr: str, at: float | None = None) -> list:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_for(self, expr: str, timeout: float = 30, pred=lambda r: bool(r)) -> list:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.query(expr)
            if pred(r):
                return r
            time.sleep(0.5)
        raise AssertionError(f"{expr} never satisfied within {timeout}s; last: {r}")

"""histogram_quantile() over loadgen's buckets, evaluated by a real Prometheus, agrees with the
exact HDR P99 of the summary within 5% (the bucket layout promises 4.4% at worst)."""
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from fake_serving import Behaviour, FakeServing
from prom import Prometheus
from servers import free_port

from tests.test_loadgen.helpers import ROOT

pytestmark = pytest.mark.integration


def lognormal():
    rng = np.random.default_rng(5)
    return lambda: float(rng.lognormal(np.log(0.004), 0.6))


def bimodal():
    rng = np.random.default_rng(6)
    return lambda: 0.002 if rng.random() < 0.9 else float(rng.uniform(0.030, 0.050))


@pytest.mark.parametrize("mix", [lognormal, bimodal], ids=["lognormal", "bimodal"])
def test_prometheus_p99_matches_hdr_p99(tmp_path, mix):
    port = free_port()
    prom = Prometheus(tmp_path, {"loadgen": [f"127.0.0.1:{port}"]}).start()
    out = tmp_path / "loadgen.json"
    try:
        with FakeServing(Behaviour(delay=mix())) as srv:
            proc = subprocess.Popen(
                [sys.executable, "-m", "loadgen", "run", "--target", f"2.9=rest://127.0.0.1:{srv.port}",
                 "--concurrency", "16", "--duration", "6s", "--warmup", "1s", "--metrics-port", str(port),
                 "--linger", "20s", "--quiet", "--out", str(out), "--run-id", "promtest"],
                cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 60
            while not out.exists() or json.loads(out.read_text())["partial"]:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.2)
        st = json.loads(out.read_text())["targets"][0]["phases"]["steady"]
        sel = 'phase="steady",outcome="ok"'
        # Wait until Prometheus has scraped the final counts, then compare.
        prom.wait_for(f'sum(loadgen_requests_total{{{sel}}})',
                      pred=lambda r: bool(r) and float(r[0]["value"][1]) == st["ok"])
        [res] = prom.query(f"histogram_quantile(0.99, sum by (le) (loadgen_request_duration_seconds_bucket{{{sel}}}))")
        prom_p99_ms = float(res["value"][1]) * 1000
        hdr_p99_ms = st["latency_ms"]["p99"]
        assert abs(prom_p99_ms / hdr_p99_ms - 1) < 0.05, (prom_p99_ms, hdr_p99_ms)
        prom.wait_for('loadgen_run_info{run_id="promtest",phase="done"}')
        marks = prom.query('loadgen_phase_end_timestamp_seconds{run_id="promtest",phase="steady"}')
        assert marks and float(marks[0]["value"][1]) > time.time() - 120
    finally:
        try:
            if "proc" in locals() and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        finally:
            prom.stop()


def test_the_clients_last_counts_reach_prometheus_without_linger(tmp_path):
    """A run that Prometheus scrapes stays up until a scrape after its last request: the last sample of the client's
    counter equals its summary (it used to stop serving /metrics first, and PromQL undercounted by a few scrapes)."""
    port = free_port()
    prom = Prometheus(tmp_path, {"loadgen": [f"127.0.0.1:{port}"]}, interval="2s").start()
    out = tmp_path / "loadgen.json"
    try:
        prom.wait_for("up")  # Prometheus has its targets (its discovery sends them after up to 5 s) and scrapes
        with FakeServing(Behaviour(delay=lambda: 0.002)) as srv:
            t0 = time.monotonic()
            proc = subprocess.run(
                [sys.executable, "-m", "loadgen", "run", "--target", f"2.9=rest://127.0.0.1:{srv.port}",
                 "--rate", "100", "--duration", "5s", "--warmup", "0", "--metrics-port", str(port), "--quiet",
                 "--out", str(out), "--run-id", "finalscrape"],
                cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=120)
            took = time.monotonic() - t0
        assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
        st = json.loads(out.read_text())["targets"][0]["phases"]["steady"]
        sel = 'phase="steady",outcome="ok"'
        time.sleep(1)  # the scrape the run waited for is in the TSDB once its append is committed
        [last] = prom.query(f"max_over_time(sum(loadgen_requests_total{{{sel}}})[1m:1s])")
        assert float(last["value"][1]) == st["ok"] > 400, (last, st["ok"])
        assert took < 5 + 12 + 15, took  # bounded: the wait for a final scrape is at most 10 s
    finally:
        prom.stop()

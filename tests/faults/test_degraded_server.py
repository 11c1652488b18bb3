"""A model server that stalls or answers 5xx in bursts: the client-side metrics show it, the
real Prometheus (with the project's rules and alerts) fires the SLA and error alerts, and
the max-QPS search reports no maximum instead of a false one. Servers are TF-Serving-shaped
fakes on loopback (tests/fake_serving.py): exact control of when they misbehave."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_serving import Behaviour, FakeServing
from prom import Prometheus
from servers import free_port

ROOT = Path(__file__).resolve().parents[2]
RULES = [ROOT / "prometheus/rules/tfserving.rules.yml", ROOT / "prometheus/alerts/tfserving.alerts.yml",
         ROOT / "prometheus/rules/sla.rules.yml"]  # SLA: P99 <= 50 ms

pytestmark = pytest.mark.integration


def loadgen(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "loadgen", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_stall_and_5xx_bursts_show_client_side_and_fire_the_alerts(tmp_path):
    slow = Behaviour(delay=lambda: 0.08)                                       # every answer 80 ms late
    bursty = Behaviour(delay=lambda: 0.002, error_burst=(2.0, 40.0))            # 503s from 2 s on
    metrics = free_port()
    with FakeServing(slow) as s1, FakeServing(bursty) as s2:
        prom = Prometheus(tmp_path, {"loadgen": [f"127.0.0.1:{metrics}"]}, rule_files=RULES).start()
        try:
            load = subprocess.Popen([sys.executable, "-m", "loadgen", "run", "--target",
                                     f"2.9=rest://127.0.0.1:{s1.port}", "--target", f"2.21=rest://127.0.0.1:{s2.port}",
                                     "--rate", "40", "--duration", "45s", "--warmup", "0.5s", "--timeout", "5s",
                                     "--quiet", "--metrics-port", str(metrics), "--out", str(tmp_path / "l.json")],
                                    cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                firing = 'ALERTS{alertstate="firing"}'
                fired = prom.wait_for(firing, timeout=60, pred=lambda r: {
                    (a["metric"]["alertname"], a["metric"].get("version")) for a in r} >= {
                    ("LatencyP99OverSLA", "2.9"), ("ErrorRatioHigh", "2.21")})
                names = {(a["metric"]["alertname"], a["metric"].get("version")) for a in fired}
                assert ("ErrorRatioHigh", "2.9") not in names  # a stall is not an error...
                assert ("LatencyP99OverSLA", "2.21") not in names  # ...and fast 503s are not slow
                errors = prom.query('sum by (version, code) (loadgen_requests_total{outcome="error"})')
                assert {(e["metric"]["version"], e["metric"]["code"]) for e in errors} == {("2.21", "503")}
            finally:
                load.kill()
                load.wait(10)
        finally:
            prom.stop()
    partial = json.loads((tmp_path / "l.json").read_text())  # the periodic partial summary
    by_version = {t["version"]: t["phases"]["steady"] for t in partial["targets"]}
    assert by_version["2.9"]["latency_ms"]["p99"] > 75 and by_version["2.9"]["errors"] == {}
    [(code, n)] = by_version["2.21"]["errors"].items()
    assert "503" in code and n > 100


@pytest.mark.parametrize("behaviour", [Behaviour(delay=lambda: 0.08),
                                       Behaviour(delay=lambda: 0.002, error_burst=(1.0, 60.0))],
                         ids=["stalling", "5xx-burst"])
def test_max_qps_search_reports_no_false_maximum(tmp_path, behaviour):
    with FakeServing(behaviour) as srv:
        proc = loadgen("search", "--target", f"2.9=rest://127.0.0.1:{srv.port}", "--low", "20", "--high", "400",
                       "--duration", "3s", "--warmup", "0.5s", "--max-probes", "4", "--metrics-port", "0",
                       "--out", str(tmp_path / "loadgen.json"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "no stable rate" in proc.stdout and "max stable QPS" not in proc.stdout
    res = json.loads((tmp_path / "search.json").read_text())["results"]
    [(name, r)] = res.items()
    assert r["max_stable_qps"] is None and not any(p["stable"] for p in r["probes"])

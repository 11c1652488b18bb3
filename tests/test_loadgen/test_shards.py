"""A load split over shards (as an Indexed Job's pods would run it), here three processes against a real
model server and a real Prometheus: their merged summary holds exactly their counts, its P99 is the P99
of one histogram of every latency, Prometheus' sum of the shards equals the total, and together they
sent exactly the one seeded schedule of the whole rate."""
import json
import subprocess
import sys
import time

import numpy as np
import pytest
from prom import Prometheus
from servers import TEST_VERSIONS, free_port, start_modelserver

from loadgen.record import decode_hdr, quantiles_ms
from loadgen.schedule import arrivals
from tests.test_loadgen.helpers import ROOT, run_loadgen

pytestmark = pytest.mark.integration
RATE, SECONDS, SEED = 150.0, 6.0, 7


def test_three_shards_merge_exactly_and_prometheus_sums_them(tmp_path):
    srv = start_modelserver(TEST_VERSIONS[-1], tmp_path)
    ports = [free_port() for _ in range(3)]
    prom = Prometheus(tmp_path, {"loadgen": [f"127.0.0.1:{p}" for p in ports]}, interval="1s").start()
    try:
        procs = [subprocess.Popen([sys.executable, "-m", "loadgen", "run", "--target",
                                   f"{srv.version}=grpc://127.0.0.1:{srv.grpc}", "--rate", str(RATE), "--duration",
                                   f"{SECONDS}s", "--warmup", "1s", "--seed", str(SEED), "--shard", f"{i}/3",
                                   # the merge is tested, not punctuality: three shards beside the server on
                                   # 2 cores lag past the default 5 ms (CI saw 6.03 ms)
                                   "--max-send-lag", "50ms",
                                   "--run-id", "sharded", "--metrics-port", str(ports[i]), "--linger", "3s",
                                   "--quiet", "--summary-log", "--out", str(tmp_path / f"shard-{i}.json")],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(3)]
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, out + err
            (tmp_path / f"shard-{i}.log").write_text(out + err)  # what `kubectl logs` keeps of a finished pod
        time.sleep(1.5)
        # the shards have exited (their series are stale now): the last value each one had
        got = prom.query('sum by (version) (max_over_time(loadgen_requests_total{phase="steady"}[2m]))')
        shards = prom.query('count by (shard) (max_over_time(loadgen_requests_total{phase="steady"}[2m]))')
    finally:
        prom.stop()
        srv.stop()
    files = [str(tmp_path / f"shard-{i}.json") for i in range(3)]
    merged_proc = run_loadgen(["merge", *files, "--out", str(tmp_path / "merged.json")])
    assert merged_proc.returncode == 0, merged_proc.stdout + merged_proc.stderr
    merged = json.loads((tmp_path / "merged.json").read_text())
    parts = [json.loads(open(f).read()) for f in files]
    steady = [p["targets"][0]["phases"]["steady"] for p in parts]
    m = merged["targets"][0]["phases"]["steady"]
    assert m["completed"] == sum(s["completed"] for s in steady) and m["sent"] == sum(s["sent"] for s in steady)
    one = decode_hdr("")
    for p in parts:
        one.add(decode_hdr(p["raw"]["targets"][p["targets"][0]["name"]]["phases"]["steady"]["ok_hdr"]))
    assert m["latency_ms"]["p99"] == quantiles_ms(one)["p99"] and m["latency_ms"]["count"] == one.total_count
    whole = len(arrivals("poisson", RATE, SECONDS, SEED + 1))  # the steady phase's schedule (phase index 1)
    assert m["scheduled"] == whole == m["sent"]  # the three slices are the one schedule, nothing twice
    assert m["offered_rate"] == pytest.approx(RATE) and abs(m["sent"] / SECONDS - RATE) < 4 * np.sqrt(RATE / SECONDS)
    assert {r["metric"]["shard"] for r in shards} == {"0", "1", "2"}
    assert float(got[0]["value"][1]) == m["completed"]
    from_logs = run_loadgen(["merge", *[str(tmp_path / f"shard-{i}.log") for i in range(3)], "--out",
                             str(tmp_path / "merged-from-logs.json")])
    assert from_logs.returncode == 0, from_logs.stderr
    assert json.loads((tmp_path / "merged-from-logs.json").read_text())["targets"] == merged["targets"]
    bad = run_loadgen(["merge", *files[:2]])
    assert bad.returncode == 2 and "2 of 3 shards" in bad.stderr

"""The load generator against servers whose behaviour the test controls exactly."""
import asyncio
import json
import socket
import time

import pytest
from fake_serving import Behaviour, FakeServing
from tests.test_loadgen.helpers import loadgen_summary, run_loadgen, steady

from loadgen.drivers import Phase, RestDriver
from loadgen.record import Recorder
from loadgen.scenario import Target

pytestmark = pytest.mark.integration


def test_stall_shows_in_open_loop_and_hides_in_closed_loop(tmp_path):
    """A 1 s stall: the open loop (latency from the intended send time) shows it in P99 and
    max; the closed loop only delays the few requests in flight, as wrk2 documents."""
    results = {}
    for mode, load in (("open", ["--rate", "200", "--mode", "constant"]), ("closed", ["--concurrency", "2"])):
        with FakeServing(Behaviour(stall_after_s=1.5, stall_for_s=1.0)) as srv:
            proc, summary = loadgen_summary(tmp_path / mode, [
                "run", "--target", f"2.9=rest://127.0.0.1:{srv.port}", *load, "--duration", "5s", "--warmup", "0",
                "--metrics-port", "0"])
        assert proc.returncode == 0, proc.stderr
        results[mode] = steady(summary)
    open_lat, closed_lat = results["open"]["latency_ms"], results["closed"]["latency_ms"]
    assert open_lat["max"] >= 900 and closed_lat["max"] >= 900      # both saw the stall...
    assert open_lat["p99"] >= 500                                     # ...the open loop in every request it delayed
    assert closed_lat["p99"] < 100                                    # ...the closed loop in only a handful
    assert open_lat["p90"] > closed_lat["p90"]


@pytest.mark.parametrize("behaviour,code,said", [
    (Behaviour(status=503, body=b'{"error": "overloaded"}'), "503", ': {"error": "overloaded"}'),
    (Behaviour(status=404, body=b'{"error": "no such model"}'), "404", ': {"error": "no such model"}'),
    (Behaviour(body=b"<html>not json</html>"), "invalid_response", ""),
    (Behaviour(hang=True), "timeout", ""),
    (Behaviour(reset=True), "connection_reset", ""),  # the server unreachable
], ids=["http-503", "http-404", "invalid-response", "timeout", "connection-reset"])
def test_errors_are_classified_and_counted_never_crash(tmp_path, behaviour, code, said):
    with FakeServing(behaviour) as srv:
        proc, summary = loadgen_summary(tmp_path, [
            "run", "--target", f"2.9=rest://127.0.0.1:{srv.port}", "--concurrency", "2", "--duration", "1.5s",
            "--warmup", "0", "--timeout", "0.3s", "--metrics-port", "0", "--min-requests", "1"])
    # a result with no successful request measures nothing: invalid (exit 3), naming what the server answered
    assert proc.returncode == 3, proc.stderr
    st = steady(summary)
    assert st["ok"] == 0 and not st["valid"]
    assert set(st["errors"]) == {code} and st["errors"][code] >= 2
    assert st["error_ratio"] == 1.0
    reason = next(r for r in st["invalid_reasons"] if r.startswith("no successful request"))
    assert f"most {code} x{st['errors'][code]}" in reason and said in reason, reason


def test_errors_above_the_budget_make_a_window_invalid_below_it_valid(tmp_path):
    """5xx answers from 1 s into a 3 s window: about two thirds fail. Invalid under the default 1% budget, valid
    with a budget above the share that failed (an error-injection run, say)."""
    runs = {}
    for budget in ("0.01", "0.95"):
        with FakeServing(Behaviour(error_burst=(1.0, 60.0))) as srv:
            runs[budget] = loadgen_summary(tmp_path, [
                "run", "--target", f"2.9=rest://127.0.0.1:{srv.port}", "--concurrency", "2", "--duration", "3s",
                "--warmup", "0", "--metrics-port", "0", "--min-requests", "1", "--error-budget", budget])
    (strict, strict_sum), (lax, lax_sum) = runs["0.01"], runs["0.95"]
    st = steady(strict_sum)
    assert 0.2 < st["error_ratio"] < 0.95 and st["ok"] > 0, st
    assert strict.returncode == 3 and any(f"of requests failed (above 1%): {sum(st['errors'].values())} errors"
                                          in r for r in st["invalid_reasons"]), st["invalid_reasons"]
    assert lax.returncode == 0 and steady(lax_sum)["valid"], steady(lax_sum)["invalid_reasons"]


def test_connection_refused_is_classified():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused

        async def go():
            rec = Recorder()
            t = Target("2.9", "rest", "127.0.0.1", port)
            d = RestDriver(t, b"{}", rec, timeout=1.0, max_connections=4)
            p = Phase(rec, t, "steady")
            await d.closed(p, 2, time.perf_counter() + 0.35, 0)
            return rec
        rec = asyncio.run(go())
    assert rec.errors.get(("2.9", "rest", "steady", "connection_refused"), 0) >= 2


def test_thresholds_decide_the_exit_code(tmp_path):
    with FakeServing(Behaviour(delay=lambda: 0.02)) as srv:
        target = ["--target", f"2.9=rest://127.0.0.1:{srv.port}", "--concurrency", "4", "--duration", "1s",
                  "--warmup", "0", "--metrics-port", "0"]
        broken, summary = loadgen_summary(tmp_path / "a", ["run", *target, "--max-p99", "5ms"])
        kept, _ = loadgen_summary(tmp_path / "b", ["run", *target, "--max-p99", "2s", "--max-error-ratio", "0.01"])
    assert broken.returncode == 1 and "threshold broken" in broken.stdout
    assert summary["thresholds_passed"] is False and "p99<=5ms: got" in summary["violations"][0]
    assert kept.returncode == 0


@pytest.mark.parametrize("protocol", ["rest", "grpc"])
def test_unreachable_target_is_one_line_exit_3(tmp_path, protocol):
    """The README's table: a server that does not answer makes the result invalid (3), it is no
    usage error (2); nothing is written."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        proc = run_loadgen(["run", "--target", f"{protocol}://127.0.0.1:{port}", "--duration", "1s",
                            "--out", str(tmp_path / "x.json")])
    assert proc.returncode == 3, proc.stderr
    if protocol == "grpc":
        assert "UNAVAILABLE" in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "cannot reach" in proc.stderr
    assert not (tmp_path / "x.json").exists()


def test_summary_json_has_config_stats_and_validity(tmp_path):
    with FakeServing(Behaviour(delay=lambda: 0.002)) as srv:
        proc, summary = loadgen_summary(tmp_path, [
            "run", "--target", f"2.9=rest://127.0.0.1:{srv.port}", "--rate", "100", "--duration", "3s",
            "--warmup", "0.5s", "--metrics-port", "0"])
        served = srv.requests
    assert proc.returncode == 0, proc.stderr
    st = steady(summary)
    assert summary["config"]["load"]["rate"] == 100 and summary["mode"] == "poisson"
    assert set(summary["targets"][0]["phases"]) == {"warmup", "steady"}
    assert st["valid"], st["invalid_reasons"]
    assert st["ok"] == st["completed"] == st["sent"] > 200
    assert st["achieved_qps"] == pytest.approx(st["ok"] / st["seconds"], rel=1e-3)
    assert 2 <= st["latency_ms"]["p50"] < 50
    assert set(st["latency_ms"]) >= {"avg", "p50", "p90", "p99", "p999", "max"}
    assert st["send_lag_ms"]["p99"] < 5
    total = sum(p["completed"] for p in summary["targets"][0]["phases"].values())
    assert total == served  # every request the server saw was counted once
    json.dumps(summary)


def test_connections_the_server_closes_while_idle_are_replaced_not_crashed_on(tmp_path):
    """The soak found it: a keep-alive connection closed by the server's idle timeout, then reused."""
    with FakeServing(Behaviour(delay=lambda: 0.001, keepalive_s=0.2)) as srv:
        proc, summary = loadgen_summary(tmp_path, [
            "run", "--target", f"2.9=rest://127.0.0.1:{srv.port}", "--rate", "8", "--duration", "6s",
            "--warmup", "0", "--metrics-port", "0", "--min-requests", "10"])
        served = srv.requests
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    st = steady(summary)
    assert st["errors"] == {} and st["ok"] == served >= 30
    assert summary["partial"] is False


def test_cli_habits_exit_codes_thresholds_json_csv_and_spectrum(tmp_path):
    """k6/wrk2 habits: k6-style thresholds (one :abort ends the run early), exit 0/1/3, the summary
    on stdout with --summary-json -, a per-second --csv, the --latency spectrum, 1m-style durations."""
    import csv
    import json as _json
    import time

    with FakeServing(Behaviour(delay=lambda: 0.01)) as srv:
        base = ["run", "--target", f"2.9=rest://127.0.0.1:{srv.port}", "--concurrency", "2", "--warmup", "0s",
                "--metrics-port", "0", "--quiet"]
        ok = run_loadgen([*base, "--duration", "0m2s", "--threshold", "p95<2s", "--threshold", "rate>10",
                          "--summary-json", "-", "--csv", str(tmp_path / "h.csv"), "--latency",
                          "--out", str(tmp_path / "ok.json")])
        t0 = time.monotonic()
        aborted = run_loadgen([*base, "--duration", "30s", "--threshold", "p99<1ms:abort",
                               "--out", str(tmp_path / "ab.json")])
        took = time.monotonic() - t0
        invalid = run_loadgen([*base, "--duration", "1s", "--min-requests", "100000", "--out", str(tmp_path / "i.json")])
    assert ok.returncode == 0, ok.stderr
    summary = _json.loads(ok.stdout)  # stdout is the summary alone; the table went to stderr
    assert summary["thresholds_passed"] and summary["targets"][0]["phases"]["steady"]["latency_ms"]["p95"] > 0
    assert "latency distribution" in ok.stderr and "99.999%" in ok.stderr
    rows = list(csv.DictReader(open(tmp_path / "h.csv")))
    assert len(rows) >= 1 and float(rows[-1]["completed"]) > 0 and not (tmp_path / "h.csv.partial").exists()
    assert aborted.returncode == 1 and "aborted" in aborted.stdout and took < 15
    assert _json.loads((tmp_path / "ab.json").read_text())["aborted"].endswith("p99<1ms:abort broken")
    assert invalid.returncode == 3 and "too few requests" in invalid.stdout
    bad = run_loadgen([*base, "--threshold", "p95 < fast"])
    assert bad.returncode == 2 and "threshold 'p95 < fast'" in bad.stderr


def test_summary_json_to_a_path_writes_the_summary_there(tmp_path):
    """--summary-json PATH writes the summary (without histograms) there; it used to write nothing unless '-'."""
    with FakeServing() as srv:
        proc = run_loadgen(["run", "--target", f"2.9=rest://127.0.0.1:{srv.port}", "--concurrency", "2", "--duration",
                            "1s", "--warmup", "0", "--metrics-port", "0", "--min-requests", "1", "--quiet",
                            "--out", str(tmp_path / "full.json"), "--summary-json", str(tmp_path / "s.json")])
    assert proc.returncode == 0, proc.stderr
    got = json.loads((tmp_path / "s.json").read_text())
    assert "raw" not in got and got["targets"][0]["phases"]["steady"]["ok"] > 10 and got["valid"] is True

"""Bad input to `make up/compare/report/baseline` (python -m stack / analysis): one line on stderr,
exit 2, no traceback, nothing started and nothing half-written."""
import contextlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from core.registry import load_registry

ROOT = Path(__file__).resolve().parents[2]
GOOD = (ROOT / "stack" / "versions.yaml").read_text()

REGISTRIES = [
    ("not yaml", "versions: [unclosed\n", "not valid YAML"),
    ("no versions", "server: {pip: []}\n", "non-empty 'versions'"),
    ("missing field", 'versions:\n  "2.9": {tensorflow: 2.9.3}\n', "lacks"),
    ("port twice", GOOD.replace("rest: 8591", "rest: 8561"), "port 8561 used by both"),
    ("port out of range", GOOD.replace("rest: 8591", "rest: 80"), "ports.rest must be an integer in 1024..65535"),
    ("pip not a list", GOOD.replace("server:\n  pip:", "server:\n  pip: 3\n  x:"), "server.pip"),
    ("unquoted version", GOOD.replace('"2.12":', "2.10:"), "version 2.1 is not quoted"),
    ("alias bomb", "x: &x [a, a, a, a, a, a, a, a]\ny: &y [*x, *x, *x, *x, *x, *x, *x, *x]\n" + GOOD,
     "aliases (*name) are not allowed"),
]

COMMANDS = [
    ("unknown version", ["stack", "up", "--versions", "3.7", "--runtime", "local"], "unknown version '3.7'"),
    ("version twice", ["stack", "up", "--versions", "2.9 2.9", "--runtime", "local"], "listed twice"),
    ("compare unknown version", ["analysis", "compare", "--versions", "2.9 9.9"], "unknown version '9.9'"),
    ("unknown profile", ["analysis", "compare", "--versions", "2.9", "--profile", "huge"], "unknown PROFILE"),
    ("zero repeats", ["analysis", "compare", "--versions", "2.9", "--repeat", "0"], "REPEAT must be an integer >= 1"),
    ("nan repeats", ["analysis", "compare", "--versions", "2.9", "--repeat", "nan"], "REPEAT must be an integer"),
    ("nan tolerance", ["analysis", "regress", "--baseline", "b", "--version", "2.9", "--tolerance", "nan"],
     "--tolerance: expected a number >= 0"),
    ("infinite sweep concurrency", ["analysis", "scenario", "sweep", "--concurrency", "1e9"],
     "CONCURRENCY must be an integer"),
    ("nan hot-update rate", ["analysis", "scenario", "hot-update", "--rate", "nan"], "RATE must be a number > 0"),
    ("endless watch", ["stack", "watch", "--duration", "inf"], "--duration: expected a number > 0"),
    ("nan k8s rate", ["stack", "k8s", "--rate", "nan"], "RATE must be a number > 0"),
    ("nan sla", ["stack", "up", "--versions", "2.9", "--runtime", "local"], "SLA_P99_MS: expected a number > 0"),
    ("bad protocol", ["analysis", "compare", "--versions", "2.9", "--protocol", "http"], "PROTOCOL"),
    ("bad rows", ["analysis", "compare", "--versions", "2.9", "--rows", "1 x"], "ROWS must be whole numbers"),
    ("zero rows", ["analysis", "compare", "--versions", "2.9", "--rows", "0"], "ROWS must be whole numbers >= 1"),
    ("rows over max batch", ["analysis", "compare", "--versions", "2.9", "--rows", "64"],
     "larger than max_batch_size 32"),
    ("bad batching", ["analysis", "compare", "--versions", "2.9", "--batching", "maybe"], "BATCHING must be one of"),
    ("bad sla", ["analysis", "compare", "--versions", "2.9", "--sla-ms", "-3"], "SLA_MS must be"),
    ("unknown knob", ["analysis", "compare", "--versions", "2.9", "--knobs", "xla=1"], "KNOBS: unknown knob 'xla'"),
    ("bad knob value", ["analysis", "compare", "--versions", "2.9", "--knobs", "onednn=yes"], "onednn takes 0 or 1"),
    ("empty knob value", ["analysis", "compare", "--versions", "2.9", "--knobs", "onednn=0,,1"],
     "KNOBS: 'onednn=0,,1' needs values, one between each two commas"),
    ("empty bisect ends", ["analysis", "bisect", "--from", " ", "--to", " "], "no version given"),
    ("bad api", ["analysis", "compare", "--versions", "2.9", "--api", "explain"], "API must be auto, predict"),
    ("bad request count", ["analysis", "compare", "--versions", "2.9", "--request-count", "0"],
     "REQUEST_COUNT must be an integer >= 1"),
    ("unknown zoo model", ["analysis", "compare", "--versions", "2.9", "--model", "nosuchmodel"],
     "MODEL 'nosuchmodel' is neither a zoo model (growing, image, recommender, text) nor a path"),
    ("reload one cycle", ["analysis", "scenario", "reload", "--versions", "2.9", "--cycles", "1"], "CYCLES must be"),
    ("reload short cycles", ["analysis", "scenario", "reload", "--versions", "2.9", "--cycle-s", "2"],
     "each reload cycle takes at least 5 s"),
    ("unknown allocator", ["analysis", "compare", "--versions", "2.9", "--knobs", "malloc=mimalloc"],
     "KNOBS: malloc takes glibc or jemalloc or tcmalloc, got 'mimalloc'"),
    ("calibrate bad model b", ["analysis", "calibrate", "--version", "2.21", "--model-b", "/nope"],
     "model path /nope is not a directory"),
    ("knobs on targets", ["analysis", "compare", "--knobs", "onednn=0,1", "--targets", "2.9=rest://127.0.0.1:1",
                          "--prometheus", "http://127.0.0.1:1"], "KNOBS applies to servers this stack starts"),
    ("missing profile file", ["analysis", "compare", "--versions", "2.9", "--profile", "/nope/p.yaml"],
     "cannot read /nope/p.yaml"),
    ("targets without prometheus", ["analysis", "compare", "--targets", "a=rest://127.0.0.1:9"], "needs PROMETHEUS"),
    ("targets bad address", ["analysis", "compare", "--targets", "a=http://h:1", "--prometheus", "http://h:9090"],
     "is not rest://HOST:PORT"),
    ("targets no name", ["analysis", "compare", "--targets", "rest://h:1", "--prometheus", "http://h:9090"],
     "expected NAME=grpc://HOST:PORT"),
    ("targets name twice", ["analysis", "compare", "--targets", "a=rest://h:1 a=rest://h:2", "--prometheus",
                            "http://h:9090"], "each server once"),
    ("targets bad prometheus", ["analysis", "compare", "--targets", "a=rest://h:1", "--prometheus", "h:9090"],
     "PROMETHEUS must be an http(s) URL"),
    ("targets metrics unreachable", ["analysis", "compare", "--targets", "a=rest://127.0.0.1:9", "--prometheus",
                                     "http://127.0.0.1:9"], "cannot read the metrics of a at http://127.0.0.1:9/"),
    ("targets two rest addresses", ["analysis", "compare", "--targets", "a=rest://h:1,rest://h:2", "--prometheus",
                                    "http://h:9090"], "two rest addresses; give one of each"),
    ("targets port zero", ["analysis", "compare", "--targets", "a=grpc://h:0", "--prometheus", "http://h:9090"],
     "port 0 is outside 1..65535"),
    ("targets port too large", ["analysis", "compare", "--targets", "a=rest://h:99999", "--prometheus",
                                "http://h:9090"], "port 99999 is outside 1..65535"),
    ("targets grpc only over rest", ["analysis", "compare", "--targets", "a=grpc://127.0.0.1:9", "--prometheus",
                                     "http://127.0.0.1:9", "--protocol", "rest"], "a has no rest:// address"),
    ("calibrate unknown version", ["analysis", "calibrate", "--version", "1.0"], "unknown version '1.0'"),
    ("unknown run", ["analysis", "report", "--run", "nope"], "no run 'nope'"),
    ("bad baseline name", ["analysis", "baseline", "--run", "x", "--name", "../etc"], "baseline name"),
    ("unknown baseline", ["analysis", "regress", "--baseline", "nope", "--version", "2.9"], "no baseline 'nope'"),
    ("bad port offset", ["stack", "status"], "TFSB_PORT_OFFSET must be an integer"),
    ("port offset overflow", ["stack", "up", "--versions", "2.9", "--runtime", "local"], "outside 1024..65535"),
    ("port offset overflow in status", ["stack", "status"], "outside 1024..65535"),
    ("privileged ports", ["stack", "up", "--versions", "2.9", "--runtime", "local"], "outside 1024..65535"),
    ("run id escaping results", ["analysis", "report", "--run", "../etc"], "run id '../etc'"),
    ("baseline name with a shell character", ["analysis", "baseline", "--run", "x", "--name", "a b;c"],
     "baseline name 'a b;c'"),
]
OFFSETS = {"bad port offset": "lots", "port offset overflow": "70000", "port offset overflow in status": "70000",
           "privileged ports": "-8000"}
ENVS = {"nan sla": {"SLA_P99_MS": "nan"}}
EXITS = {"targets metrics unreachable": 3}  # the README's table: 3 where a server does not answer, else 2


def run(args, tmp_path, **env):
    e = dict(os.environ, PYTHONPATH=str(ROOT), TFSB_STATE=str(tmp_path / "state"),
             TFSB_RESULTS=str(tmp_path / "results"), TFSB_BASELINES=str(tmp_path / "baselines"), **env)
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, env=e, capture_output=True, text=True, timeout=120)


def one_line_error(proc, needle, code=2):
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], proc.stderr


@pytest.mark.parametrize("case,text,needle", REGISTRIES, ids=[r[0] for r in REGISTRIES])
def test_malformed_versions_yaml(tmp_path, case, text, needle):
    assert text != GOOD
    f = tmp_path / "versions.yaml"
    f.write_text(text)
    one_line_error(run(["stack", "up", "--versions", "2.9", "--runtime", "local"], tmp_path,
                       TFSB_VERSIONS_FILE=str(f)), needle)
    assert not (tmp_path / "state").exists()


@pytest.mark.parametrize("case,args,needle", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_bad_commands(tmp_path, case, args, needle):
    env = {"TFSB_PORT_OFFSET": OFFSETS[case]} if case in OFFSETS else ENVS.get(case, {})
    one_line_error(run(args, tmp_path, **env), needle, EXITS.get(case, 2))
    assert not (tmp_path / "state").exists() and not (tmp_path / "results").exists()


TF_PAGE = (b"# TYPE :tensorflow:serving:request_count counter\n"
           b':tensorflow:serving:request_count{model_name="m",status="OK"} 1\n')
PAGES = {"/monitoring/prometheus/metrics": (200, TF_PAGE),
         "/plain": (200, b"hello world\n"),  # not the exposition format at all
         "/node": (200, b"# TYPE node_load1 gauge\nnode_load1 0.5\n"),  # metrics, but no TF Serving's
         "/empty-prom/api/v1/query": (200, b'{"status": "success", "data": {"resultType": "vector", "result": []}}'),
         "/html-prom/api/v1/query": (200, b"<html>login</html>")}


@pytest.fixture(scope="module")
def pages():
    """A loopback server with a TF Serving metrics page, pages that are not, and Prometheus look-alikes."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            code, body = PAGES.get(self.path.split("?")[0], (404, b"not found"))
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


ENDPOINTS = [  # (case, TARGETS' extra part, PROMETHEUS path, the needle)
    ("metrics page is plain text", ",metrics=http://{hp}/plain", "/empty-prom", "not with TF Serving's metrics page"),
    ("metrics page of another exporter", ",metrics=http://{hp}/node", "/empty-prom",
     "not with TF Serving's metrics page"),
    ("prometheus with no answer to vector(1)", "", "/empty-prom", "does not answer Prometheus' HTTP API"),
    ("prometheus an html page", "", "/html-prom", "does not answer Prometheus' HTTP API"),
    ("prometheus a 404", "", "/nothing", "does not answer Prometheus' HTTP API"),
]


@pytest.mark.parametrize("case,extra,prom,needle", ENDPOINTS, ids=[e[0] for e in ENDPOINTS])
def test_endpoints_that_answer_the_wrong_thing_are_refused_before_a_run(tmp_path, pages, case, extra, prom, needle):
    targets = f"a=rest://{pages}" + extra.format(hp=pages)
    one_line_error(run(["analysis", "compare", "--targets", targets, "--prometheus", f"http://{pages}{prom}",
                        "--protocol", "rest"], tmp_path), needle)
    assert not (tmp_path / "results").exists()


def test_a_prometheus_that_does_not_answer_is_exit_3_before_a_run(tmp_path, pages):
    one_line_error(run(["analysis", "compare", "--targets", f"a=rest://{pages}", "--prometheus", "http://127.0.0.1:9",
                        "--protocol", "rest"], tmp_path), "PROMETHEUS: cannot reach http://127.0.0.1:9", 3)
    assert not (tmp_path / "results").exists()


def test_prometheus_binary_missing_is_said_before_anything_starts(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    proc = run(["stack", "up", "--versions", "2.9", "--runtime", "local"], tmp_path, PATH=str(empty))
    one_line_error(proc, "the prometheus binary is missing")
    assert not (tmp_path / "state").exists()


@contextlib.contextmanager
def rest_port_taken(version: str, offset: int):
    """Another process's listener on the REST port that `version` gets under TFSB_PORT_OFFSET=offset."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", load_registry().get(version).ports.rest + offset))
        taken.listen()
        yield


def test_port_taken_by_another_process_is_one_line(tmp_path):
    v = load_registry().get("2.9")
    with rest_port_taken("2.9", 14000):
        proc = run(["stack", "up", "--versions", "2.9", "--runtime", "local"], tmp_path, TFSB_PORT_OFFSET="14000")
    one_line_error(proc, f"port {v.ports.rest + 14000} (REST of TF Serving 2.9) is taken by another process")


PROFILES = [
    ("every bad field named", "concurrency: [4, x]\nwindow_s: -1\nrepeat: 1.5\ncolour: red\n",
     ["concurrency must be a list", "window_s must be a number > 0", "repeat must be a whole number",
      "unknown field 'colour'"]),
    ("nothing to measure", "concurrency: []\n", ["concurrency and rates are both empty"]),
    ("search bounds", "search_low: 500\nsearch_high: 100\n", ["search_low (500) must be below search_high (100)"]),
    ("alias bomb", "a: &a [1, 1]\nb: &b [*a, *a]\nconcurrency: *b\n", ["aliases (*name) are not allowed"]),
    ("not a mapping", "- 1\n- 2\n", ["a profile is a mapping"]),
]


@pytest.mark.parametrize("case,text,needles", PROFILES, ids=[p[0] for p in PROFILES])
def test_bad_profile_files_name_every_bad_field(tmp_path, case, text, needles):
    f = tmp_path / "my.yaml"
    f.write_text(text)
    proc = run(["analysis", "compare", "--versions", "2.9", "--profile", str(f)], tmp_path)
    one_line_error(proc, needles[0])
    for n in needles[1:]:
        assert n in proc.stderr, proc.stderr
    assert not (tmp_path / "state").exists() and not (tmp_path / "results").exists()


def test_a_profile_file_overrides_quick_field_by_field(tmp_path):
    from analysis.profiles import PROFILES as BUILT_IN, get

    f = tmp_path / "mine.yaml"
    f.write_text("concurrency: [8, 1]\nwindow_s: 2.5\nrepeat: 5\n")
    p = get(str(f))
    assert p.name == "mine" and p.concurrency == (1, 8) and p.window_s == 2.5 and p.repeat == 5
    assert p.warmup_s == BUILT_IN["quick"].warmup_s and p.rates == ()


def _stored_run(tmp_path, run_id="r1"):
    """A compare.json as `make compare VERSIONS="2.9 2.21" PROFILE=quick` writes it (no cells yet)."""
    import json

    from analysis import plan
    from analysis.compare import new_run
    from analysis.profiles import get
    from core import placement
    from stack.local_serving import LocalServing

    reg = load_registry()
    settings = plan.Settings(("2.9", "2.21"), (1,), (True,), ("rest",), get("quick"), 2, 50.0)
    run = new_run(run_id, settings, LocalServing(reg, reg.select("2.9 2.21")), "local", None,
                  placement.plan(None, False))
    path = tmp_path / "results" / run_id / "compare.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(run))
    return path


RESUMES = [  # one setting changed from the stored run's, and the field the refusal must name
    ("other model", ["--model", "{other_model}"], 'model = "example"'),  # a real base path, made by the test
    ("other rows", ["--rows", "1 32"], "rows = [1]"),
    ("other repeat", ["--repeat", "3"], "repeat = 2"),
    ("other protocol", ["--protocol", "grpc"], 'protocols = ["rest"]'),
    ("other batching", ["--batching", "off"], "batching = [true]"),
    ("other sla", ["--sla-ms", "80"], "sla_p99_ms = 50.0"),
    ("other versions", ["--versions", "2.9 2.12"], 'versions = ["2.9", "2.21"]'),
]


@pytest.mark.parametrize("case,flags,needle", RESUMES, ids=[r[0] for r in RESUMES])
def test_a_resume_with_other_settings_is_refused_naming_the_field(tmp_path, case, flags, needle):
    stored = _stored_run(tmp_path)
    before = stored.read_text()
    base = {"--versions": "2.9 2.21", "--profile": "quick", "--repeat": "2", "--rows": "1", "--batching": "on",
            "--protocol": "rest", "--sla-ms": "50", "--runtime": "local"}
    other_model = tmp_path / "other"
    (other_model / "1").mkdir(parents=True)
    (other_model / "1" / "saved_model.pb").write_bytes(b"")  # the path check passes; the resume check refuses
    base.update(dict(zip(flags[::2], [f.format(other_model=other_model) for f in flags[1::2]])))
    proc = run(["analysis", "compare", "--run", "r1", *[x for kv in base.items() for x in kv]], tmp_path)
    one_line_error(proc, "run r1 was measured with " + needle)
    assert "resume with the run's" in proc.stderr
    assert stored.read_text() == before and not (tmp_path / "state").exists()  # nothing written, nothing started


def test_a_resume_with_the_same_settings_passes_the_check(tmp_path):
    """The check compares what JSON stored with what a new run would store: equal settings pass
    (tuples and lists, floats and ints as compare.json holds them), so the refusals above are not
    a check that refuses everything."""
    import json

    from analysis import resume

    stored = json.loads(_stored_run(tmp_path).read_text())
    fresh = json.loads(_stored_run(tmp_path / "again").read_text())
    resume.check(stored, fresh["config"])
    fresh["config"]["profile"]["window_s"] += 1
    with pytest.raises(resume.ResumeMismatch, match="profile.window_s"):
        resume.check(stored, fresh["config"])


CELL_BUT_CLIENT = {"version": "2.9", "protocol": "rest", "rows": 1, "batching": True, "mode": "closed", "level": 4,
                   "repeat": 0, "start": 1.0, "end": 2.0, "warmup_start": 0.5, "valid": True}
SCHEMA_CASES = [  # (case, how the stored compare.json is spoiled (None: in place), the one line's needle)
    ("missing environment", lambda r: r.pop("environment") and None, "environment is missing"),
    ("cell without client", lambda r: r["cells"].update(c1=CELL_BUT_CLIENT), "cells.c1.client is missing"),
    ("a list for compare.json", lambda r: r.clear() or [], "(the top level): [] is not of type 'object'"),
    ("a string for ceiling", lambda r: r.update(ceiling="fast"), "ceiling: 'fast' is not of type 'object'"),
    ("rows mistyped", lambda r: r["config"].update(rows="1 32"), "config.rows: '1 32' is not of type 'array'"),
    ("unknown status", lambda r: r.update(status="paused"), "status: 'paused' is not one of"),
]


@pytest.mark.parametrize("case,spoil,needle", SCHEMA_CASES, ids=[c[0] for c in SCHEMA_CASES])
def test_a_spoiled_compare_json_is_one_line_naming_the_field(tmp_path, case, spoil, needle):
    import json

    path = _stored_run(tmp_path)
    run_doc = json.loads(path.read_text())
    replaced = spoil(run_doc)
    path.write_text(json.dumps(run_doc if replaced is None else replaced))
    for cmd in (["analysis", "report", "--run", "r1"], ["analysis", "baseline", "--run", "r1", "--name", "b"]):
        one_line_error(run(cmd, tmp_path), needle)
    assert not (tmp_path / "baselines").exists()


def test_fields_of_a_newer_version_are_ignored_with_a_note(tmp_path, monkeypatch, capsys):
    """A run (or a baseline) written by a newer version with a profile field this one lacks: read,
    with a note, and the profile builds (it once raised TypeError in `make report` and `make regress`)."""
    import json

    from analysis import baseline, runstore
    from analysis.report import planned_keys

    path = _stored_run(tmp_path)
    doc = json.loads(path.read_text())
    doc["schema_version"], doc["config"]["profile"]["jitter_ms"], doc["gpu_trace"] = 2, 3, {}
    path.write_text(json.dumps(doc))
    monkeypatch.setenv("TFSB_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("TFSB_BASELINES", str(tmp_path / "baselines"))
    got = runstore.load("r1")
    err = capsys.readouterr().err
    assert "ignoring unknown field(s) config.profile.jitter_ms, gpu_trace (written by schema version 2" in err
    assert len(planned_keys(got["config"])) == 2 * 2 * 2  # versions x repeats x quick's two levels
    base = {"schema_version": 2, "name": "b", "run_id": "r1", "status": "done", "config": doc["config"],
            "environment": doc["environment"], "baseline_version": "2.9", "rows": []}
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "b.json").write_text(json.dumps(base))
    assert baseline.load("b")["config"]["profile"]["jitter_ms"] == 3
    assert "config.profile.jitter_ms" in capsys.readouterr().err
    base["rows"] = [{"version": "2.9"}]
    (tmp_path / "baselines" / "b.json").write_text(json.dumps(base))
    with pytest.raises(ValueError, match=r"rows\.0\.batching is missing"):
        baseline.load("b")


def test_a_baseline_is_only_made_from_a_complete_run(tmp_path):
    import json

    path = _stored_run(tmp_path)
    doc = json.loads(path.read_text())
    doc["status"] = "interrupted"
    path.write_text(json.dumps(doc))
    one_line_error(run(["analysis", "baseline", "--run", "r1", "--name", "b"], tmp_path),
                   "run r1 is interrupted (8 of 8 measurements missing): a baseline is made from a complete run")
    assert not (tmp_path / "baselines").exists()


def test_a_compare_whose_server_cannot_start_is_saved_as_failed_and_reported(tmp_path):
    """Once it said `running` forever; now the run says why it stopped and how to resume it. Servers were being
    started: exit 3 (a server did not answer), never 2, which the README keeps for usage errors."""
    with rest_port_taken("2.9", 14100):
        proc = run(["analysis", "compare", "--versions", "2.9", "--profile", "quick", "--repeat", "1",
                    "--runtime", "local", "--run", "f1"], tmp_path, TFSB_PORT_OFFSET="14100")
    one_line_error(proc, "is taken by another process", code=3)
    assert "run f1 is saved as failed; `make compare ... RUN=f1` resumes it" in proc.stderr
    doc = json.loads((tmp_path / "results" / "f1" / "compare.json").read_text())
    assert doc["status"] == "failed" and "is taken by another process" in doc["failed"]["error"]
    assert doc["cells"] == {}
    # nothing measured: the report is no result (it once printed an empty "Partial run" and exited 0)
    one_line_error(run(["analysis", "report", "--run", "f1"], tmp_path),
                   "run f1 holds no valid measurement (status failed: port", code=3)
    run(["stack", "down"], tmp_path, TFSB_PORT_OFFSET="14100")


def test_doctor_exits_3_for_a_server_that_does_not_answer_and_1_for_a_page_that_differs(tmp_path, pages):
    """The README's exit codes for `make doctor`: 3 where nothing could be checked, 1 where a metric the
    rules, panels or compare read is missing (this page has request_count only), one line each."""
    down = run(["stack", "doctor", "--targets", "a=rest://127.0.0.1:9"], tmp_path)
    assert down.returncode == 3 and "a: its metrics page http://127.0.0.1:9/" in down.stdout, down.stdout + down.stderr
    differs = run(["stack", "doctor", "--targets", f"a=rest://{pages}"], tmp_path)
    assert differs.returncode == 1, differs.stdout + differs.stderr
    assert "request_latency" in differs.stdout and "Traceback" not in differs.stderr

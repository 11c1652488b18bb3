"""python -m analysis compare|report|query|baseline|regress  (the Makefile's compare/report/... targets)."""
from __future__ import annotations

import dataclasses
import os
import re
import sys
import time

from analysis import baseline, runstore
from core.errors import BenchError, Failed, UsageError, run_main
from fileio.atomic import WriteError
from fileio.http import ReadError
from loadgen import stopping
from loadgen.argtypes import OneLineParser, number
from loadgen.cli import new_run_id
from loadgen.scenario import MAX_CONCURRENCY
from loadgen.schedule import MAX_RATE

REPEATS = number(1, 1000, integer=True, name="REPEAT")  # repeats per cell
from analysis.profiles import get as get_profile
from core import settings


def settings_from(a, versions: list):
    """The compare's dimensions from flags (each also read from the Makefile's variables)."""
    from analysis import plan

    profile = get_profile(a.profile)
    repeat = a.repeat if a.repeat is not None else profile.repeat
    if repeat < 1:
        raise UsageError(f"REPEAT must be >= 1, got {repeat}")
    sla = plan.parse_sla(a.sla_ms) or profile.sla_p99_ms
    if a.api not in ("auto", "predict", "classify", "regress", "multi"):
        raise UsageError(f"API must be auto, predict, classify, regress or multi, got {a.api!r}")
    s = plan.Settings(tuple(v.name for v in versions), plan.parse_rows(a.rows),
                      plan.parse_choice(a.batching, "BATCHING", plan.BATCHING),
                      plan.parse_choice(a.protocol, "PROTOCOL", plan.PROTOCOLS), profile, repeat, sla,
                      a.api, a.signature, a.request_count, a.requests, a.cold_starts)
    return s


def _check_rows_fit_batches(settings) -> None:
    """With batching on, a request larger than max_batch_size is refused by TF Serving: say so now."""
    from modelserver.configs import load_batching
    from core.paths import CONFIGS

    if True in settings.batching:
        limit = load_batching(str(CONFIGS / "batching.config")).max_batch_size
        if max(settings.rows) > limit:
            raise UsageError(f"ROWS {max(settings.rows)} is larger than max_batch_size {limit} of "
                             "monitoring_configs/batching.config; use BATCHING=off or fewer rows")


def _external(a, reg):
    """Servers and a Prometheus started elsewhere (TARGETS, PROMETHEUS): the external runtime's Serving."""
    from stack.runtimes import serving_for

    if not a.prometheus:
        raise UsageError("TARGETS needs PROMETHEUS=http://host:9090: the Prometheus that scrapes those servers "
                         "with a `version` label equal to each TARGETS name")
    if not re.fullmatch(r"https?://[\w.\-]+(:\d{1,5})?(/\S*)?", a.prometheus):
        raise UsageError(f"PROMETHEUS must be an http(s) URL, got {a.prometheus!r}")
    return serving_for("external", reg, [], a.model or None, targets=a.targets, prometheus=a.prometheus,
                       model_name=a.model_name)


def _compare(a, reg, versions, log=print, model_for: dict | None = None) -> int:
    from analysis import plan
    from models import zoo

    a.model = zoo.resolve(a.model, reg, versions, log=log)  # a zoo name: built once, by the oldest release
    from analysis.compare import run_compare
    from analysis.report import write
    from core import placement
    from stack.runtime import pick_runtime
    from stack.runtimes import serving_for

    if getattr(a, "targets", ""):
        serving, runtime = _external(a, reg), "external"
        settings = dataclasses.replace(settings_from(a, serving.servers), batching=(None,))
        serving.check(settings.protocols)
        place = dataclasses.replace(placement.plan(None, False), reason="servers started elsewhere (TARGETS)")
    else:
        settings = settings_from(a, versions)
        _check_rows_fit_batches(settings)
        if a.model:  # before a results directory exists: a wrong path is a usage error, not a failed run
            from models.prepare import check_base_path
            check_base_path(a.model)
        runtime = pick_runtime(a.runtime)
        place = placement.plan(None, placement.isolate_from_env())
        serving = serving_for(runtime, reg, versions, a.model or None, cpus=place.servers if place.isolated else None,
                              log=log, model_for=model_for)
    t0 = time.time()
    log(f"compare {' '.join(settings.versions)}: profile {settings.profile.name}, {settings.repeat} repeats, rows "
        f"{'/'.join(map(str, settings.rows))}, batching {'/'.join(map(plan.batching_name, settings.batching))}, "
        f"{'/'.join(settings.protocols)}, SLA P99 {settings.sla_p99_ms:g} ms, runtime {runtime}; "
        + ("client on cores " + placement.Placement.cpuset(place.client) + ", servers on "
           + placement.Placement.cpuset(place.servers) if place.isolated else f"not isolated: {place.reason}"))
    run_id = a.run or new_run_id()
    try:
        run = run_compare(settings, serving, place, run_id, runtime, a.model or None, log=log)
    except stopping.Interrupted as e:
        print(f"{e}: run {run_id} is saved as interrupted with every finished measurement; the servers stay "
              f"up. `make report RUN={run_id}` reports them, `make compare ... RUN={run_id}` resumes.",
              file=sys.stderr)
        raise
    except (BenchError, ReadError, WriteError) as e:  # one line, with the run (a bug shows its traceback)
        failed = BenchError(f"{e} (run {run_id} is saved as failed; `make compare ... RUN={run_id}` resumes it)"
                            if _saved_as_failed(run_id) else str(e))  # a bad RUN=, a read-only results dir
        failed.exit_code = getattr(e, "exit_code", 2)
        raise failed from None
    log(f"measured in {time.time() - t0:.0f}s; run id {run['run_id']}")
    rep = write(run["run_id"])
    print(open(rep["files"]["md"]).read())
    return 0


def _saved_as_failed(run_id: str) -> bool:
    try:
        return runstore.load(run_id)["status"] == "failed"
    except (OSError, ValueError):
        return False


def cmd_compare(a) -> int:
    from core.registry import load_registry

    from stack import knobs

    reg = load_registry()
    if a.knobs and a.targets:
        raise UsageError("KNOBS applies to servers this stack starts, not to TARGETS started elsewhere")
    reg, versions = knobs.expand(reg, reg.select(a.versions), a.knobs)  # each knob combination: a server
    return _compare(a, reg, versions)


def cmd_calibrate(a) -> int:
    """An A/A run: the version against a second server of itself, through the whole protocol."""
    from core.registry import load_registry

    reg = load_registry()
    name = reg.get(a.version).name
    reg = reg.with_alias(name)
    model_for = {}
    if a.model_b:  # the positive control: B serves another model, a difference the verdicts must find
        from models import zoo
        from models.prepare import check_base_path
        path = zoo.resolve(a.model_b, reg, [reg.get(name)]) or a.model_b  # a zoo name (growing: memory's control)
        model_for[name + "-b"] = str(check_base_path(path).resolve())
    return _compare(a, reg, [reg.get(name), reg.get(name + "-b")], model_for=model_for)


def _ints(text: str, what: str) -> list:
    try:
        out = [int(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise UsageError(f"{what} must be whole numbers, got {text!r}") from None
    if not out or min(out) < 0:
        raise UsageError(f"{what} must be non-negative whole numbers, got {text!r}")
    return out


def cmd_scenario(a) -> int:
    from analysis.scenario_report import run
    from loadgen.app import check_writable
    from core.registry import load_registry
    from stack.runtime import pick_runtime
    from stack import knobs
    from stack.runtimes import serving_for

    reg = load_registry()
    reg, versions = knobs.expand(reg, reg.select(a.versions), a.knobs)  # KNOBS="malloc=glibc,jemalloc": a server each
    profile = get_profile(a.profile)
    if a.repeat < 1:
        raise UsageError(f"REPEAT must be >= 1, got {a.repeat}")
    opts = {"max_batch": _ints(a.max_batch, "MAX_BATCH"), "timeout_us": _ints(a.timeout_us, "TIMEOUT_US"),
            "threads": _ints(a.threads, "THREADS"), "concurrency": a.concurrency, "rate": a.rate,
            "cycles": a.cycles, "cycle_s": a.cycle_s, "phase_s": a.phase_s}
    if min(opts["max_batch"]) < 1 or min(opts["threads"]) < 1 or a.concurrency < 1 or a.rate <= 0:
        raise UsageError("MAX_BATCH, THREADS, CONCURRENCY and RATE must be positive")
    if a.name == "reload":
        from analysis import reload
        reload.check(a.cycles, a.cycle_s)
    if a.name == "neighbour":  # B: a zoo name (built once) or a model base; its newest version is what loads
        from models import zoo
        from models.prepare import check_base_path
        from stack.serving import newest_version_dir
        opts["neighbour"] = newest_version_dir(check_base_path(zoo.resolve(a.neighbour, reg, versions) or a.neighbour))
    check_writable(str(runstore.results_dir() / "probe"))
    runtime = pick_runtime(a.runtime)
    print(f"scenario {a.name}: {' '.join(v.name for v in versions)}, profile {profile.name}, {a.repeat} repeat(s), "
          f"runtime {runtime}")
    serving = serving_for(runtime, reg, versions, log=print)
    res = run(a.name, serving, profile, a.repeat, opts, runtime)
    print(open(res["files"]["md"]).read())
    print(f"written: {res['files']['md']} and scenario.json")
    return 0


def cmd_bisect(a) -> int:
    from analysis.bisect import run_bisect, write
    from analysis.plan import parse_rows
    from core.registry import load_registry

    reg = load_registry()
    profile = get_profile(a.profile)
    profile = dataclasses.replace(profile, ceiling_windows=a.processes)
    lo, hi = reg.select([a.from_version, a.to_version])  # one interpreter for both ends, and every release between
    rows = parse_rows(a.rows)
    if len(rows) != 1:
        raise UsageError(f"ROWS must be one row count for a bisect, got {a.rows!r}")
    if tuple(map(int, lo.tensorflow.split("."))) >= tuple(map(int, hi.tensorflow.split("."))):
        raise UsageError(f"FROM must be an older release than TO, got FROM={a.from_version} TO={a.to_version}")
    if a.model:
        from models.prepare import check_base_path
        check_base_path(a.model)
    if a.pin not in ("0", "1"):
        raise UsageError(f"PIN must be 1 (each ceiling process on one core) or 0 (on all cores), got {a.pin!r}")
    if a.every not in ("0", "1"):
        raise UsageError(f"EVERY must be 1 (measure every release, interleaved) or 0 (binary search), got {a.every!r}")
    out = run_bisect(reg, lo, hi, rows[0], profile, a.model or None, pin=a.pin == "1", every=a.every == "1")
    print(write(out))
    print(f"written: {runstore.results_dir() / out['id'] / 'bisect.md'} and bisect.json")
    return 0


class NothingMeasured(Failed):
    exit_code = 3  # the README's "the result is invalid"


def cmd_report(a) -> int:
    from analysis.report import write

    run = runstore.load(a.run)
    if not any(c.get("valid") for c in run["cells"].values()):  # an empty report read as a result, exit 0
        why = run.get("failed", {}).get("error") or run.get("interrupted", {}).get("signal") or ""
        raise NothingMeasured(f"run {a.run} holds no valid measurement (status {run['status']}"
                              + (f": {why}" if why else "") + "); nothing to report")
    rep = write(a.run)
    print(open(rep["files"]["md"]).read())
    return 0


def cmd_query(a) -> int:
    from analysis import promql

    run = runstore.load(a.run)
    starts = [c["start"] for c in run["cells"].values()]
    ends = [c["end"] for c in run["cells"].values()]
    if not starts:
        raise UsageError(f"run {a.run} has no measurement yet")
    start, end = min(starts), max(ends)
    expr = a.promql.replace("$window", f"{max(1, int(end - start))}s")
    for r in promql.instant(expr, end, run["config"].get("prometheus")):
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(r["metric"].items()))
        print(f"{{{labels}}} {r['value'][1]}")
    return 0


def cmd_baseline(a) -> int:
    print(f"baseline written: {baseline.archive(a.run, a.name, a.force)}")
    return 0


def cmd_regress(a) -> int:
    from analysis.compare import run_compare
    from analysis.plan import Settings
    from analysis.profiles import Profile
    from analysis.report import build
    from analysis.schemas import known_profile_fields
    from core import placement
    from core.registry import load_registry
    from stack.runtime import pick_runtime
    from stack.runtimes import serving_for

    base = baseline.load(a.baseline)
    reg = load_registry()
    version = reg.get(a.version)
    cfg = base["config"]
    # levels only: no search, no ceiling, no op table, no soak (the gate reads the levels; without the ceiling's
    # processes the gate test took 97 s instead of 136 s)
    profile = Profile(**{**known_profile_fields(cfg["profile"]), "search_probes": 0, "ceiling_windows": 0,
                         "optrace_processes": 0, "soak_s": 0})
    settings = Settings((version.name,), tuple(cfg["rows"]), tuple(cfg["batching"]), tuple(cfg["protocols"]),
                        profile, cfg["repeat"], cfg["sla_p99_ms"])
    # before anything starts: the server must take the baseline's rows, and the baseline must hold levels
    _check_rows_fit_batches(settings)
    if not any(r["version"] == base["baseline_version"] for r in base["rows"]):
        raise UsageError(f"baseline {a.baseline!r} holds no measured level of its version "
                         f"{base['baseline_version']}: nothing to gate against")
    place = placement.plan(None, placement.isolate_from_env())
    runtime = pick_runtime(a.runtime)
    serving = serving_for(runtime, reg, [version], a.model or None, cpus=place.servers if place.isolated else None,
                          log=lambda *_: None)
    run = run_compare(settings, serving, place, "", runtime, a.model or None, log=lambda *_: None)
    current = build(run["run_id"], log=lambda *_: None)
    rows = baseline.gate(base, current, version.name, a.tolerance)
    if not rows:
        raise UsageError(f"baseline {a.baseline!r} and this run share no load level")
    print(f"regression gate: {version.name} (run {run['run_id']}) against baseline {a.baseline!r}, "
          f"tolerance {a.tolerance:.0%}")
    print(f"{'level':<22} {'metric':<7} {'baseline':>10} {'current':>10} {'limit':>10}  verdict")
    for level, metric, b, c, limit, bad in rows:
        print(f"{level:<22} {metric:<7} {b:>10.2f} {c:>10.2f} {limit:>10.2f}  {'REGRESSED' if bad else 'ok'}")
    failed = [r for r in rows if r[5]]
    print("FAIL: regressed beyond the baseline's interval and tolerance" if failed else "PASS")
    return 1 if failed else 0


def build_parser() -> OneLineParser:
    """Every command's flags, each defaulting to the Makefile's variable of the same name (the entry point's
    settings: nothing below it reads them)."""
    p = OneLineParser(prog="python -m analysis")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="the whole protocol, repeated, with a report")
    c.add_argument("--versions", default=os.environ.get("VERSIONS", settings.DEFAULT_VERSIONS), help="baseline first")
    c.add_argument("--knobs", default=os.environ.get("KNOBS", ""),
                   help='TF settings as compare dimensions, e.g. "onednn=0,1" or "intra_op=1,2 inter_op=1" '
                        "(stack/knobs.py): every combination of every version is one server")
    c.add_argument("--targets", default=os.environ.get("TARGETS", ""),
                   help='servers started elsewhere, baseline first: "2.9=grpc://h:8500,rest://h:8501 2.21=..." '
                        "(then --versions is ignored and nothing is started)")
    c.add_argument("--prometheus", default=os.environ.get("PROMETHEUS", ""),
                   help="with --targets: the Prometheus scraping them, each with version=<its TARGETS name>")
    c.add_argument("--model-name", default=os.environ.get("MODEL_NAME", "my_model"),
                   help="with --targets: the model they serve (default: %(default)s)")
    cal = sub.add_parser("calibrate", help="A/A: a version against a second server of itself; every verdict "
                                           "must read 'no significant difference'")
    cal.add_argument("--version", default=os.environ.get("VERSION", "2.21"))
    cal.add_argument("--model-b", default=os.environ.get("MODEL_B", ""),
                     help="B serves this model base instead (a positive control: a known difference the verdicts "
                          "must call, e.g. the example model with --extra-layers)")
    for sp in (c, cal):
        sp.add_argument("--profile", default=os.environ.get("PROFILE", "quick"),
                        help="quick, standard, or a YAML profile's path (default: %(default)s)")
        sp.add_argument("--rows", default=os.environ.get("ROWS", "1"), help='rows per request, e.g. "1 32"')
        sp.add_argument("--batching", default=os.environ.get("BATCHING", "on"), help="on, off or both")
        sp.add_argument("--protocol", default=os.environ.get("PROTOCOL", "rest"), help="rest, grpc or both")
        sp.add_argument("--sla-ms", default=os.environ.get("SLA_MS", ""), help="P99 SLA (default: the profile's)")
        sp.add_argument("--repeat", type=REPEATS, default=os.environ.get("REPEAT") or None,
                        help="repeats per cell (default: the profile's)")
        sp.add_argument("--runtime", default=os.environ.get("RUNTIME", "auto"), choices=["auto", "local", "docker"])
        sp.add_argument("--run", default=os.environ.get("RUN", ""), help="resume this run id")
        sp.add_argument("--model", default=os.environ.get("MODEL", ""))
        sp.add_argument("--api", default=os.environ.get("API", "auto"),
                        help="predict, classify, regress or multi (default: auto, the signature's method_name)")
        sp.add_argument("--signature", default=os.environ.get("SIGNATURE", "serving_default"))
        sp.add_argument("--request-count", type=number(1, 100_000, integer=True, name="REQUEST_COUNT"),
                        default=os.environ.get("REQUEST_COUNT", "64"), help="distinct requests, cycled (default: 64)")
        sp.add_argument("--requests", default=os.environ.get("REQUESTS", ""),
                        help="requests from a file: warmup, a TFRecord of PredictionLog or tf.Example, JSON lines")
        sp.add_argument("--cold-starts", type=number(1, 100, integer=True, name="COLD_STARTS"),
                        default=os.environ.get("COLD_STARTS") or "1",
                        help="fresh servers per version, each timed to AVAILABLE and its first request (default: 1)")
    bi = sub.add_parser("bisect", help="the TensorFlow release between two versions where the ceiling changed")
    bi.add_argument("--from", dest="from_version", default=os.environ.get("FROM", "2.9"))
    bi.add_argument("--to", dest="to_version", default=os.environ.get("TO", "2.21"))
    bi.add_argument("--rows", default=os.environ.get("ROWS", "32"), help="one row count per call (default: 32)")
    bi.add_argument("--profile", default=os.environ.get("PROFILE", "quick"),
                    help="its ceiling_* and optrace_* fields set the processes per release (default: %(default)s)")
    bi.add_argument("--model", default=os.environ.get("MODEL", ""))
    bi.add_argument("--pin", default=os.environ.get("PIN", "0"),
                    help="0: every ceiling process on all cores, threads as a server's (the compare's headline "
                         "ceiling); 1: each on one core (kernels alone, least noise)")
    bi.add_argument("--every", default=os.environ.get("EVERY", "0"),
                    help="1: measure every release between, interleaved, instead of a binary search")
    bi.add_argument("--processes", type=number(2, 1000, integer=True, name="PROCESSES"),
                    default=os.environ.get("PROCESSES") or "12",
                    help="fresh ceiling processes per release (default: %(default)s; 8 of 0.5 s gave +-8%% at 32 rows)")
    r = sub.add_parser("report", help="tables and charts of a finished run")
    r.add_argument("--run", required=True)
    q = sub.add_parser("query", help="evaluate PromQL at the end of a run ($window = the run's span)")
    q.add_argument("--run", required=True)
    q.add_argument("promql")
    b = sub.add_parser("baseline", help="archive a run's results as a named baseline")
    b.add_argument("--run", required=True)
    b.add_argument("--name", required=True)
    b.add_argument("--force", action="store_true")
    g = sub.add_parser("regress", help="run the baseline's profile against a version; exit 1 on regression")
    g.add_argument("--baseline", required=True)
    g.add_argument("--version", required=True)
    g.add_argument("--tolerance", type=number(0, 10), default=0.10)
    g.add_argument("--model", default=os.environ.get("MODEL", ""))
    g.add_argument("--runtime", default=os.environ.get("RUNTIME", "auto"), choices=["auto", "local", "docker"])
    sc = sub.add_parser("scenario", help="batching on/off, REST vs gRPC, the batching sweep, a hot model update, "
                                         "reload cycles, a neighbour model's load")
    sc.add_argument("name", choices=["batching", "protocols", "sweep", "hot-update", "reload", "neighbour"])
    sc.add_argument("--versions", default=os.environ.get("VERSIONS") or os.environ.get("VERSION") or "2.9")
    sc.add_argument("--profile", default=os.environ.get("PROFILE", "quick"))
    sc.add_argument("--repeat", type=REPEATS, default=os.environ.get("REPEAT") or "2")
    sc.add_argument("--max-batch", default=os.environ.get("MAX_BATCH", "8 32 128"))
    sc.add_argument("--timeout-us", default=os.environ.get("TIMEOUT_US", "0 2000 10000"))
    sc.add_argument("--threads", default=os.environ.get("THREADS", "2 4 8"))
    sc.add_argument("--concurrency", type=number(1, MAX_CONCURRENCY, integer=True, name="CONCURRENCY"),
                    default=os.environ.get("CONCURRENCY") or "32",
                    help="sweep: closed-loop level of every measurement")
    sc.add_argument("--rate", type=number(0, MAX_RATE, lo_open=True, name="RATE"), default=os.environ.get("RATE") or "100",
                    help="hot-update, reload: req/s")
    sc.add_argument("--cycles", type=number(1, 1000, integer=True, name="CYCLES"), default=os.environ.get("CYCLES") or "5",
                    help="reload: model versions written, one per cycle")
    sc.add_argument("--cycle-s", type=number(0, 3600, lo_open=True, name="CYCLE_S"),
                    default=os.environ.get("CYCLE_S") or "6", help="reload: seconds per cycle (at least 5)")
    sc.add_argument("--neighbour", default=os.environ.get("NEIGHBOUR") or "image",
                    help="neighbour: model B, a zoo name or a model base path (default: %(default)s)")
    sc.add_argument("--phase-s", type=number(1, 3600, name="PHASE_S"), default=os.environ.get("PHASE_S") or "8",
                    help="neighbour: seconds per phase (before, B loads, B reloads, B unloads)")
    sc.add_argument("--runtime", default=os.environ.get("RUNTIME", "auto"), choices=["auto", "local", "docker"])
    sc.add_argument("--knobs", default=os.environ.get("KNOBS", ""),
                    help='each combination a server of its own, as in compare (e.g. "malloc=glibc,jemalloc")')
    return p


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    stopping.install()
    commands = {"compare": cmd_compare, "calibrate": cmd_calibrate, "report": cmd_report, "bisect": cmd_bisect,
                "query": cmd_query, "baseline": cmd_baseline, "regress": cmd_regress, "scenario": cmd_scenario}
    measures = a.cmd in ("compare", "calibrate", "bisect", "regress", "scenario") and not getattr(a, "targets", "")

    def dispatch() -> int:
        try:
            if not measures:
                return commands[a.cmd](a)
            from core.paths import state_root
            from stack import procs

            what = " ".join(["analysis", a.cmd, *(sys.argv[2:] if argv is None else argv[1:])])[:160]
            with procs.measurement_lock(state_root(), f"`{what}`"):
                return commands[a.cmd](a)
        except stopping.Interrupted as e:
            if a.cmd != "compare":  # compare said what it saved
                print(str(e), file=sys.stderr)
            return e.exit_code
    return run_main(dispatch, boundary=(ReadError, WriteError))


if __name__ == "__main__":
    sys.exit(main())

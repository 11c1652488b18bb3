"""python -m analysis compare|report|query|baseline|regress  (the Makefile's compare/report/... targets)."""
from __future__ import annotations

import argparse
import os
import sys
import time

from analysis import baseline, runstore
from analysis.profiles import get as get_profile


def _protocols(p: str) -> list:
    if p not in ("rest", "grpc", "both"):
        raise ValueError(f"PROTOCOL must be rest, grpc or both, got {p!r}")
    return ["rest", "grpc"] if p == "both" else [p]


def cmd_compare(a) -> int:
    from analysis.compare import run_compare
    from analysis.report import write
    from stack.registry import load_registry
    from stack.runtime import pick_runtime

    reg = load_registry()
    versions = reg.select(a.versions)
    profile, protocols = get_profile(a.profile), _protocols(a.protocol)
    if a.repeat < 1:
        raise ValueError(f"REPEAT must be >= 1, got {a.repeat}")
    runtime = pick_runtime(a.runtime)
    t0 = time.time()
    print(f"compare {' '.join(v.name for v in versions)}: profile {profile.name}, {a.repeat} repeats, "
          f"{'/'.join(protocols)}, runtime {runtime}")
    run = run_compare(reg, versions, protocols, profile, a.repeat, a.run, runtime, a.model or None)
    print(f"measured in {time.time() - t0:.0f}s; run id {run['run_id']}")
    rep = write(run["run_id"])
    print(open(rep["files"]["md"]).read())
    return 0


def _ints(text: str, what: str) -> list:
    try:
        out = [int(x) for x in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(f"{what} must be whole numbers, got {text!r}") from None
    if not out or min(out) < 0:
        raise ValueError(f"{what} must be non-negative whole numbers, got {text!r}")
    return out


def cmd_scenario(a) -> int:
    from analysis.scenario_report import run
    from loadgen.app import check_writable
    from stack.registry import load_registry

    reg = load_registry()
    versions = reg.select(a.versions)
    profile = get_profile(a.profile)
    if a.repeat < 1:
        raise ValueError(f"REPEAT must be >= 1, got {a.repeat}")
    opts = {"max_batch": _ints(a.max_batch, "MAX_BATCH"), "timeout_us": _ints(a.timeout_us, "TIMEOUT_US"),
            "threads": _ints(a.threads, "THREADS"), "concurrency": a.concurrency, "rate": a.rate}
    if min(opts["max_batch"]) < 1 or min(opts["threads"]) < 1 or a.concurrency < 1 or a.rate <= 0:
        raise ValueError("MAX_BATCH, THREADS, CONCURRENCY and RATE must be positive")
    check_writable(str(runstore.results_dir() / "probe"))
    print(f"scenario {a.name}: {' '.join(v.name for v in versions)}, profile {profile.name}, {a.repeat} repeat(s)")
    res = run(a.name, reg, versions, profile, a.repeat, opts)
    print(open(res["files"]["md"]).read())
    print(f"written: {res['files']['md']} and scenario.json")
    return 0


def cmd_report(a) -> int:
    from analysis.report import write

    rep = write(a.run)
    print(open(rep["files"]["md"]).read())
    return 0


def cmd_query(a) -> int:
    from analysis import promql

    run = runstore.load(a.run)
    starts = [c["start"] for c in run["cells"].values()]
    ends = [c["end"] for c in run["cells"].values()]
    if not starts:
        raise ValueError(f"run {a.run} has no measurement yet")
    start, end = min(starts), max(ends)
    expr = a.promql.replace("$window", f"{max(1, int(end - start))}s")
    for r in promql.instant(expr, end):
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(r["metric"].items()))
        print(f"{{{labels}}} {r['value'][1]}")
    return 0


def cmd_baseline(a) -> int:
    print(f"baseline written: {baseline.archive(a.run, a.name, a.force)}")
    return 0


def cmd_regress(a) -> int:
    from analysis.compare import run_compare
    from analysis.profiles import Profile
    from analysis.report import build
    from stack.registry import load_registry

    base = baseline.load(a.baseline)
    reg = load_registry()
    version = reg.get(a.version)
    cfg = base["config"]
    profile = Profile(**{**cfg["profile"], "search_probes": 0})  # the gate compares levels; no QPS search
    run = run_compare(reg, [version], cfg["protocols"], profile, cfg["repeat"], "", cfg["runtime"],
                      a.model or None, log=lambda *_: None)
    current = build(run["run_id"], log=lambda *_: None)
    rows = baseline.gate(base, current, version.name, a.tolerance)
    if not rows:
        raise ValueError(f"baseline {a.baseline!r} and this run share no load level")
    print(f"regression gate: {version.name} (run {run['run_id']}) against baseline {a.baseline!r}, "
          f"tolerance {a.tolerance:.0%}")
    print(f"{'level':<22} {'metric':<7} {'baseline':>10} {'current':>10} {'limit':>10}  verdict")
    for level, metric, b, c, limit, bad in rows:
        print(f"{level:<22} {metric:<7} {b:>10.2f} {c:>10.2f} {limit:>10.2f}  {'REGRESSED' if bad else 'ok'}")
    failed = [r for r in rows if r[5]]
    print("FAIL: regressed beyond the baseline's interval and tolerance" if failed else "PASS")
    return 1 if failed else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m analysis")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="the whole protocol, repeated, with a report")
    c.add_argument("--versions", default=os.environ.get("VERSIONS", "2.9 2.21"))
    c.add_argument("--profile", default=os.environ.get("PROFILE", "quick"))
    c.add_argument("--protocol", default=os.environ.get("PROTOCOL", "rest"))
    c.add_argument("--repeat", type=int, default=int(os.environ.get("REPEAT", "3")))
    c.add_argument("--runtime", default=os.environ.get("RUNTIME", "auto"), choices=["auto", "local", "docker"])
    c.add_argument("--run", default=os.environ.get("RUN", ""), help="resume this run id")
    c.add_argument("--model", default=os.environ.get("MODEL", ""))
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
    g.add_argument("--tolerance", type=float, default=0.10)
    g.add_argument("--model", default=os.environ.get("MODEL", ""))
    sc = sub.add_parser("scenario", help="batching on/off, REST vs gRPC, the batching sweep, a hot model update")
    sc.add_argument("name", choices=["batching", "protocols", "sweep", "hot-update"])
    sc.add_argument("--versions", default=os.environ.get("VERSIONS") or os.environ.get("VERSION") or "2.9")
    sc.add_argument("--profile", default=os.environ.get("PROFILE", "quick"))
    sc.add_argument("--repeat", type=int, default=int(os.environ.get("REPEAT", "2")))
    sc.add_argument("--max-batch", default=os.environ.get("MAX_BATCH", "8 32 128"))
    sc.add_argument("--timeout-us", default=os.environ.get("TIMEOUT_US", "0 2000 10000"))
    sc.add_argument("--threads", default=os.environ.get("THREADS", "2 4 8"))
    sc.add_argument("--concurrency", type=int, default=int(os.environ.get("CONCURRENCY", "32")),
                    help="sweep: closed-loop level of every measurement")
    sc.add_argument("--rate", type=float, default=float(os.environ.get("RATE", "100")), help="hot-update: req/s")
    a = p.parse_args(argv)
    try:
        return {"compare": cmd_compare, "report": cmd_report, "query": cmd_query, "baseline": cmd_baseline,
                "regress": cmd_regress, "scenario": cmd_scenario}[a.cmd](a)
    except (ValueError, FileNotFoundError, FileExistsError, RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

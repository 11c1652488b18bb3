"""Command-line flags -> Scenario (flags override a scenario file's values)."""
from __future__ import annotations

import argparse
import datetime
import os
import secrets

from loadgen.argtypes import number
from loadgen.scenario import Load, Scenario, ScenarioError, Target, check, load_file, parse_duration, parse_target

DEFAULT_METRICS_PORT = 9464


def new_run_id() -> str:
    return datetime.datetime.now().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


def add_load_flags(p: argparse.ArgumentParser) -> None:
    """Every flag with its help and default (a scenario file's value, when given, wins over the default;
    a flag wins over both)."""
    from loadgen.scenario import Payload, Thresholds

    ld, pl, th = Load(), Payload(), Thresholds()
    a = p.add_argument
    a("--scenario", help="YAML scenario file (flags override its values)")
    a("--target", action="append", default=[], help="[VERSION=]rest|grpc://HOST:PORT[/MODEL], repeatable")
    a("--versions", help='versions from stack/versions.yaml, e.g. "2.9 2.21" (their local ports)')
    a("--protocol", choices=["rest", "grpc", "both"], help="with --versions (default: rest)")
    a("--host", default="127.0.0.1", help="with --versions (default: %(default)s)")
    a("--model", help="model name (default: my_model)")
    a("--format", choices=["row", "columnar"], help="REST request format (default: row)")
    a("--mode", choices=["closed", "constant", "poisson"], help="default: closed, or poisson when --rate is given")
    a("--concurrency", type=int, help=f"closed loop: requests in flight (default: {ld.concurrency})")
    a("--rate", type=float, help="open loop: requests per second (at most 1,000,000 per process)")
    a("--steps", help='a ramp: "50 200 500 1000" (rates, or concurrencies in closed loop)')
    a("--step-duration", help=f"each step of a ramp (default: {ld.step_duration:g}s)")
    a("--duration", help=f"the measured window: 30s, 2m, 1m30s (default: {ld.duration:g}s)")
    a("--warmup", help=f"excluded from the results (default: {ld.warmup:g}s)")
    a("--max-requests", type=int, help="stop after this many requests (default: time only)")
    a("--min-requests", type=int, help=f"fewer makes the result invalid (default: {ld.min_requests})")
    a("--min-duration", help=f"a shorter window makes the result invalid (default: {ld.min_duration:g}s)")
    a("--timeout", help=f"per request (default: {ld.timeout:g}s)")
    a("--error-budget", type=float, help="a window with a larger share of failed requests, or none successful, is "
                                         f"invalid (exit 3; default: {ld.error_budget:g})")
    a("--max-connections", type=int, help=f"REST connections per target (default: {ld.max_connections})")
    a("--batch-size", type=int, help=f"rows per request (default: {pl.batch_size})")
    a("--payload-file", help="a .npy or .json payload instead of random rows (one request, sent again and again)")
    a("--api", choices=["auto", "predict", "classify", "regress", "multi"],
      help="the TF Serving API (default: auto, the signature's method_name; multi: gRPC MultiInference)")
    a("--signature", help="the signature to drive (default: serving_default)")
    a("--request-count", type=int, help=f"distinct requests, cycled in a seeded order (default: {pl.count})")
    a("--requests", metavar="FILE", help="requests from a file: 'warmup' (the model's own warmup records), a TFRecord "
                                         "of PredictionLog or of tf.Example (gzip or not), or JSON lines of REST bodies")
    a("--model-path", help="the served SavedModel (base or version directory): tf.Example inputs are built from "
                           "the feature spec of its graph, string features from its vocabulary assets")
    a("--seed", type=int, help=f"of the random payload and the Poisson schedule (default: {ld.seed})")
    a("--threshold", action="append", default=[], metavar="EXPR",
      help="k6-style pass/fail, repeatable: METRIC OP VALUE[:abort] with METRIC p50 p90 p95 p99 p999 avg max "
           "error_ratio rate, e.g. 'p95<20ms', 'error_ratio<0.01:abort', 'rate>=450'")
    a("--max-p99", help="shorthand for --threshold 'p99<=VALUE', e.g. 50ms")
    a("--max-error-ratio", type=number(0, 1), help="shorthand for --threshold 'error_ratio<=VALUE'")
    a("--max-send-lag", help=f"open loop: send lag P99 bound of a valid result (default: {th.max_send_lag_p99_ms:g}ms)")
    a("--metrics-port", type=int, help=f"/metrics port (default: {DEFAULT_METRICS_PORT} + TFSB_PORT_OFFSET; 0: none)")
    a("--metrics-addr", default=os.environ.get("BIND", "127.0.0.1"), help="/metrics address (default: %(default)s)")
    a("--linger", help="keep /metrics up this long after the run, for a last scrape (default: 0s)")
    a("--workers", type=int, help="processes, one event loop each; histograms merge exactly (default: 1)")
    a("--shard", help="I/N: send share I of N (a disjoint slice of the seeded open-loop schedule, or 1/N of the "
                      "concurrency); I defaults to $JOB_COMPLETION_INDEX (a Kubernetes Indexed Job). Merge the "
                      "shards' summaries with `python -m loadgen merge`")
    a("--run-id", help="names the results directory (default: the date and time)")
    a("--out", help="summary JSON path (default: $TFSB_RESULTS or results/, then <run-id>/loadgen.json)")
    a("--summary-json", metavar="PATH", default="", help="'-': the summary JSON on stdout (the table on stderr)")
    a("--summary-log", action="store_true", help="also the whole summary (with its histograms) as one stdout line "
                                                 "'loadgen-summary: {...}', for runs whose files vanish with their "
                                                 "container (a Kubernetes Job): merge reads it from saved logs")
    a("--csv", metavar="PATH", default="", help="per-second history: rate, errors, latency percentiles so far")
    a("--latency", action="store_true", help="print the full latency percentile spectrum (as wrk2 --latency)")
    a("--quiet", action="store_true", help="no live progress display (also off when stderr is not a terminal)")


def parse_shard(text: str) -> tuple:
    """"2/3" -> (2, 3); "3" or "/3" -> ($JOB_COMPLETION_INDEX, 3)."""
    import re

    m = re.fullmatch(r"\s*(\d*)\s*/?\s*(\d+)\s*", text)
    if not m or (not m.group(1) and "/" not in text and not text.strip().isdigit()):
        raise ScenarioError(f"--shard: expected I/N, e.g. 0/3, got {text!r}")
    index, count = m.group(1), int(m.group(2))
    if not index:
        index = os.environ.get("JOB_COMPLETION_INDEX", "")
        if not index.isdigit():
            raise ScenarioError("--shard N needs I/N, or JOB_COMPLETION_INDEX set (a Kubernetes Indexed Job)")
    if count < 1 or not 0 <= int(index) < count:
        raise ScenarioError(f"--shard: index must be in 0..{count - 1}, got {text!r}")
    return int(index), count


def apply_shard(s, shard: tuple) -> None:
    """This process's share of the load: 1/N of an open-loop rate (its slice of the one seeded schedule,
    so the seed stays) or of the closed-loop concurrency (the first shards take the remainder)."""
    from loadgen.workers import _share

    i, n = shard
    s.shard = (i, n)
    if n == 1:
        return
    closed = s.load.mode == "closed"
    s.load.concurrency = max(1, _share(s.load.concurrency, n, i, True))
    s.load.rate = s.load.rate / n
    s.load.steps = [max(1, _share(x, n, i, True)) if closed else x / n for x in s.load.steps]
    s.load.min_requests = max(1, s.load.min_requests // n)


def _ms(value, field) -> float:
    return parse_duration(value, field) * 1000


def scenario_from_args(args) -> Scenario:
    s = load_file(args.scenario) if args.scenario else Scenario(targets=[], load=Load())
    targets = [parse_target(t) for t in args.target]
    if args.versions:
        from core import ports
        from core.registry import RegistryError, load_registry

        try:
            versions = load_registry().select(args.versions)
        except RegistryError as e:
            raise ScenarioError(str(e)) from None
        protocols = ["rest", "grpc"] if args.protocol == "both" else [args.protocol or "rest"]
        targets += [Target(v.name, p, args.host, ports.rest(v) if p == "rest" else ports.grpc(v))
                    for v in versions for p in protocols]
    if targets:
        s.targets = targets
    for t in s.targets:
        if args.model:
            t.model = args.model
        if args.format:
            t.format = args.format
    ld = s.load
    for flag, field in (("concurrency", "concurrency"), ("rate", "rate"), ("max_requests", "max_requests"),
                        ("min_requests", "min_requests"), ("max_connections", "max_connections"), ("seed", "seed"),
                        ("duration", "duration"), ("warmup", "warmup"), ("timeout", "timeout"),
                        ("step_duration", "step_duration"), ("min_duration", "min_duration"),
                        ("error_budget", "error_budget")):
        value = getattr(args, flag)
        if value is not None:
            setattr(ld, field, value)
    if args.steps:
        try:
            ld.steps = [float(x) for x in args.steps.replace(",", " ").split()]
        except ValueError:
            raise ScenarioError(f"--steps: expected numbers like \"50 200 500\", got {args.steps!r}") from None
    if args.mode:
        ld.mode = args.mode
    elif (args.rate is not None) and ld.mode == "closed":
        ld.mode = "poisson"
    if ld.mode == "closed" and ld.steps:
        ld.steps = [int(x) if float(x).is_integer() else x for x in ld.steps]
    for flag, field in (("batch_size", "batch_size"), ("payload_file", "file"), ("api", "api"),
                        ("request_count", "count"), ("requests", "requests_file"), ("model_path", "model_dir")):
        value = getattr(args, flag)
        if value not in (None, ""):
            setattr(s.payload, field, value)
    if args.signature:
        for t in s.targets:
            t.signature = args.signature
    if args.max_p99:
        s.thresholds.max_p99_ms = _ms(args.max_p99, "--max-p99")
    if args.max_error_ratio is not None:
        s.thresholds.max_error_ratio = args.max_error_ratio
    if args.max_send_lag:
        s.thresholds.max_send_lag_p99_ms = _ms(args.max_send_lag, "--max-send-lag")
    s.thresholds.criteria = list(s.thresholds.criteria) + list(args.threshold)
    if args.metrics_port is not None:
        s.metrics_port = args.metrics_port
    elif s.metrics_port == DEFAULT_METRICS_PORT:  # the stack's own port, shifted like every other one
        from core import ports

        try:
            s.metrics_port = ports.port(ports.LOADGEN, "the load generator's /metrics")
        except ValueError as e:
            raise ScenarioError(str(e)) from None
    s.metrics_addr = args.metrics_addr
    if args.linger:
        s.linger = args.linger
    if args.workers is not None:
        s.workers = args.workers
    from core.paths import check_name, run_dir

    try:
        s.run_id = check_name(args.run_id or s.run_id or new_run_id(), "run id")
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    if args.shard:
        apply_shard(s, parse_shard(args.shard))
    s.out = args.out or s.out or str(run_dir(s.run_id) / "loadgen.json")
    if not args.scenario:
        s.name = "cli"
    return check(s)

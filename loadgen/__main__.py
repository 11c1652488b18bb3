"""python -m loadgen run|search ...  (see `python -m loadgen run --help`)."""
from __future__ import annotations

import argparse
import sys

from loadgen import stopping
from loadgen.app import execute
from loadgen.argtypes import OneLineParser, number
from loadgen.cli import add_load_flags, scenario_from_args
from loadgen.schedule import MAX_RATE
from core.errors import run_main
from fileio.atomic import WriteError
from fileio.http import ReadError


class _Parser(OneLineParser):
    error_prefix = "loadgen: error: "


EPILOG = """exit codes: 0 the result is valid and every threshold held; 1 a threshold was broken (or an
:abort threshold ended the run); 2 a usage error (nothing was sent); 3 the result is invalid (the
generator saturated, send lag, too few requests, the server unreachable: the summary says why);
130/143 stopped by SIGINT/SIGTERM (the summary keeps the cut window, marked invalid; a second signal
exits at once).

client cost: the generator's own CPU per request (REST ~0.03-0.05 ms, gRPC ~0.13-0.2 ms on a 2-core
machine, benchmarks/loadgen.py) is on the critical path at low concurrency; every summary states its
run's cost when it is 10% of p50 or more."""


def _merge(args) -> int:
    import json

    from loadgen.app import exit_code
    from loadgen.merge import merge
    from loadgen.summary import print_table, write_json_atomic

    merged = merge(args.summaries)
    if args.out == "-":
        print(json.dumps({k: v for k, v in merged.items() if k != "raw"}, indent=1, default=str))
    else:
        write_json_atomic(args.out, merged)
        print_table(merged)
        print(f"merged {merged['merged_from']} shard summaries: {args.out}")
    return exit_code(merged)


def main(argv=None) -> int:
    p = _Parser(prog="python -m loadgen", description="load generator for TF Serving")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run a scenario: closed loop, open loop, or a step ramp", epilog=EPILOG,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    add_load_flags(run)
    merge = sub.add_parser("merge", help="merge the summaries of a run's shards into one, exactly")
    merge.add_argument("summaries", nargs="+", help="the shards' summary JSON files, or their saved logs "
                                                     "(run with --summary-log)")
    merge.add_argument("--out", default="-", help="where the merged summary goes (default: stdout)")
    search = sub.add_parser("search", help="find the maximum stable QPS under an SLA (bisection over rates)")
    add_load_flags(search)
    search.add_argument("--sla-p99", default="50ms", help="P99 bound of a stable rate (default 50ms)")
    search.add_argument("--sla-error-ratio", type=number(0, 1), default=0.01, help="error ratio bound (default 0.01)")
    search.add_argument("--low", type=number(0, MAX_RATE, lo_open=True), default=10.0, help="a rate known to pass")
    search.add_argument("--high", type=number(0, MAX_RATE, lo_open=True), default=5000.0, help="a rate above the maximum")
    search.add_argument("--precision", type=number(0, 1, lo_open=True), default=0.05, help="stop when high/low - 1 is below this")
    search.add_argument("--max-probes", type=number(1, 100, integer=True), default=10)
    args = p.parse_args(argv)
    stopping.install()

    def dispatch() -> int:
        try:
            if args.cmd == "merge":
                return _merge(args)
            s = scenario_from_args(args)
            if args.cmd == "run":
                return execute(s, quiet=args.quiet, summary_json=args.summary_json, csv_path=args.csv,
                               spectrum=args.latency, summary_log=args.summary_log)
            from loadgen.search import search_max_qps
            return search_max_qps(s, args)
        except stopping.Interrupted as e:
            print(f"loadgen: {e}", file=sys.stderr)
            return e.exit_code
    return run_main(dispatch, prefix="loadgen: error", boundary=(ReadError, WriteError))


if __name__ == "__main__":
    sys.exit(main())

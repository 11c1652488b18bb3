"""One load run end to end: payloads, /metrics, the run (in-process or in workers), summary."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
import threading
import time

from fileio.atomic import WriteError
from loadgen import payload as payload_mod
from loadgen import requestset
from loadgen.examples import SpecError
from loadgen import stopping
from loadgen.exposition import stop_metrics, wait_final_scrape
from loadgen.errors import RunError, ServerUnreachable
from loadgen.inprocess import install_loop, run_in_process
from loadgen.summary import merge_raw, print_table, summarize, write_json_atomic
from loadgen.workers import run_workers
from core.errors import UsageError


def check_writable(path: str) -> None:
    """Fail before the run, not after it: the results directory must take a file. Directories made
    for the probe are removed again, so a run that fails before writing leaves nothing behind."""
    d = os.path.dirname(os.path.abspath(path))
    made, parent = [], d
    while not os.path.isdir(parent):
        made.append(parent)
        parent = os.path.dirname(parent)
    try:
        os.makedirs(d, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=d, prefix=".probe-") as f:
            f.write(b"x" * 65536)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        raise RunError(f"cannot write results to {d}: {e.strerror}") from None
    finally:
        for m in made:  # deepest first
            try:
                os.rmdir(m)
            except OSError:
                pass


def build_payloads(s) -> dict:
    """{target name: RequestSet}: each target's distinct requests, pre-serialized."""
    out, p = {}, s.payload
    for t in s.targets:
        try:
            out[t.name] = requestset.build(t, p.batch_size, p.seed, p.count, model_version_dir(p.model_dir), p.api,
                                           p.file, p.requests_file)
        except payload_mod.Unreachable as e:
            raise ServerUnreachable(str(e)) from None
        except (payload_mod.TargetError, SpecError) as e:
            raise RunError(str(e)) from None
    return out


def model_version_dir(path: str) -> str:
    """A model base (<base>/<n>/saved_model.pb) or a version directory -> the newest version directory."""
    if not path or os.path.exists(os.path.join(path, "saved_model.pb")):
        return path
    try:
        versions = [d for d in os.listdir(path) if d.isdigit() and os.path.exists(os.path.join(path, d, "saved_model.pb"))]
    except OSError as e:
        raise RunError(f"cannot read model path {path}: {e.strerror}") from None
    if not versions:
        raise RunError(f"{path} holds no SavedModel (<n>/saved_model.pb)")
    return os.path.join(path, max(versions, key=int))


def measure(s, payloads: dict, boundary=None) -> dict:
    """Run s in-process (or in its workers) and return the summary, quietly. boundary: see Runner."""
    if s.workers > 1:
        if boundary:
            raise UsageError("phase boundaries are exact in one process only; use workers=1")
        summary = summarize(merge_raw(run_workers(s, payloads)), s)
    else:
        install_loop(s)

        async def go():
            raw, _, handle = await run_in_process(s, payloads, boundary=boundary)
            stop_metrics(handle)
            return raw
        summary = summarize(asyncio.run(go()), s)
    stopping.check("the window in flight was not kept")  # a compare or scenario stops here, keeping no cut cell
    return summary


EXIT_OK, EXIT_THRESHOLD, EXIT_USAGE, EXIT_INVALID = 0, 1, 2, 3
EXIT_UNWRITTEN = EXIT_USAGE  # the summary could not be written (a full disk): one line naming the path


def exit_code(summary: dict) -> int:
    """0: valid and every threshold held; 1: a threshold broken (or an :abort one ended the run);
    3: the result itself is invalid (saturated generator, send lag, too few requests, server
    unreachable), whatever the thresholds say; 2 is for usage errors, before any request;
    128 + the signal's number (130, 143) when a signal stopped the run."""
    if summary.get("interrupted"):
        return 128 + signal.Signals[summary["interrupted"]].value
    if not summary["valid"]:
        return EXIT_INVALID
    return EXIT_OK if summary["thresholds_passed"] and not summary["aborted"] else EXIT_THRESHOLD


def execute(s, quiet: bool = False, summary_json: str = "", csv_path: str = "", spectrum: bool = False,
            summary_log: bool = False) -> int:
    """Run scenario s; returns the exit code (exit_code). summary_json "-": the summary on stdout
    (the table then goes to stderr), another path: the summary (without its histograms) written there too;
    csv_path: per-second history; summary_log: the whole summary as one `loadgen-summary:` line on stdout
    (loadgen.merge.SUMMARY_LINE)."""
    from loadgen.progress import CsvHistory, LiveDisplay
    from core.placement import isolate_from_env, pin_self, plan

    quiet = quiet or not sys.stderr.isatty()
    check_writable(s.out)
    if summary_json not in ("", "-"):
        check_writable(summary_json)  # before the run, like the results file
    payloads = build_payloads(s)
    place = plan(None, isolate_from_env())
    if place.isolated:  # off the model servers' cores (`make up` put them on the others)
        pin_self(place.client)

    unwritten = []  # the first failed periodic write, said once; the run goes on in memory

    def partial(raw: dict) -> None:
        try:
            write_json_atomic(s.out, summarize(raw, s))
        except WriteError as e:
            if not unwritten:
                print(f"loadgen: warning: {e}; the run goes on, its summary is kept in memory", file=sys.stderr)
            unwritten.append(e)

    display = None if quiet or s.workers > 1 else LiveDisplay()
    history = CsvHistory(csv_path) if csv_path else None
    try:
        if s.workers > 1:
            raw = merge_raw(run_workers(s, payloads))
            live = handle = None
        else:
            install_loop(s)
            raw, live, handle = asyncio.run(run_in_process(s, payloads, progress=display, partial=partial,
                                                           history=history))
    finally:
        if display:
            display.close()
        if history:
            history.close()
    summary = summarize(raw, s)
    if live is not None:  # /metrics says "done" before the summary file does
        live.valid = {t["name"]: int(t["valid"]) for t in summary["targets"]}
        live.phase = "done"
    ended = time.monotonic()  # a scrape after this holds the final counts and "done"
    try:
        write_json_atomic(s.out, summary)
        lost = None
    except WriteError as e:  # a full disk: the table still shows what was measured
        lost = e
    out = sys.stderr if summary_json == "-" else sys.stdout
    print_table(summary, stream=out, spectrum=spectrum)
    if lost:
        stop_metrics(handle)
        print(f"loadgen: error: {lost}: the summary above is all that is left of this run", file=sys.stderr)
        return EXIT_UNWRITTEN
    print(f"summary: {s.out}" + (f"; per-second history: {csv_path}" if csv_path else ""), file=out)
    if summary["aborted"]:
        print(f"aborted: {summary['aborted']}", file=out)
    if summary["interrupted"]:
        print(f"interrupted by {summary['interrupted']}: the summary holds what was measured until then, "
              "marked invalid", file=out)
    if summary_json == "-":
        sys.stdout.write(json.dumps({k: v for k, v in summary.items() if k != "raw"}, indent=1, default=str) + "\n")
        sys.stdout.flush()
    elif summary_json:
        write_json_atomic(summary_json, {k: v for k, v in summary.items() if k != "raw"})
    if summary_log:
        from loadgen.merge import SUMMARY_LINE

        sys.stdout.write(SUMMARY_LINE + json.dumps(summary, separators=(",", ":"), default=str) + "\n")
        sys.stdout.flush()
    if handle:
        final_scrape(handle, ended, s.linger)
    stop_metrics(handle)
    return exit_code(summary)


def final_scrape(handle, ended: float, seconds: float) -> None:
    """The client's last counts must reach whoever scrapes /metrics: wait for a scrape after the last request
    (where it was scraped at all), then --linger more if asked; SIGTERM/SIGINT end either wait."""
    done = threading.Event()
    stopping.on_stop(done, done.set)
    try:
        wait_final_scrape(handle, ended, done.wait)
        if seconds > 0 and not done.is_set():
            done.wait(seconds)
    finally:
        stopping.forget(done)


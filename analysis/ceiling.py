"""The TensorFlow ceiling of each version: its own runtime, in-process, before any load.

Runs `python -m modelserver.ceiling` in the version's venv (the same Servable.run the server
makes, nothing of the serving path around it), on the servers' cores (or pinned to one of them:
the "kernels alone" diagnostic, see ceiling_core), while the servers are idle. The result per version and row count is a list of rows/s, one per process
(one window each), so the report can give it an interval and compare versions on it like any
other metric.
"""
from __future__ import annotations

import json
import os
import subprocess

from models.prepare import ROOT
from stack import knobs
from core.errors import Failed


class CeilingError(Failed):
    """The in-process measurement failed; the message carries its last line of output."""


def measure_one(python: str, model_dir, rows: list, windows: int, window_s: float, cpus: list | None = None,
                timeout_s: float = 600, knob_settings: tuple = (), requests: str = "") -> dict:
    """{"tensorflow": "2.9.3", "python": "3.9.20", "pid": 123, "rows_per_s": {"1": [...], "32": [...]}} from one
    subprocess; requests: the servers' request file (modelserver/requestfile.py), else a random tensor."""
    return run_process(python, "ceiling", ["--model-dir", str(model_dir), "--rows", *map(str, rows), "--windows",
                                           str(windows), "--window-s", f"{window_s:g}",
                                           *(["--requests", str(requests)] if requests else [])],
                       cpus, knob_settings, timeout_s, "the in-process ceiling")


def run_process(python: str, module: str, args: list, cpus: list | None, knob_settings: tuple, timeout_s: float,
                what: str) -> dict:
    """`python -m modelserver.<module> args` in a version's venv, pinned to cpus, with a knob variant's
    environment and thread flags (the settings of its server); its last line of JSON."""
    from core.placement import pin_child

    cmd = [python, "-m", f"modelserver.{module}", *args,
           *[f"--{k.replace('_', '-')}={n}" for k, n in knobs.threads(knob_settings).items()]]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3",
                                   **knobs.env(knob_settings)),
                          preexec_fn=pin_child(cpus) if cpus else None)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CeilingError(f"{what} in {python} failed: {tail}")
    return json.loads(lines[-1])


def measure_all(serving, servers: list, rows: list, windows: int, window_s: float, done: dict, save,
                log=print, pin: bool = False, requests: dict | None = None) -> dict:
    """The ceiling of every server: `windows` fresh processes per version, one window each, the
    versions' order flipped from one round to the next (ABBA...). The process is what repeats:
    two processes of one build differ by several percent (memory layout, thread placement), more
    than the windows of one process do, so windows of one process would give an interval far too
    narrow (an A/A calibrate of 2.21 found itself 7% faster, p = 0.008, on 3 windows of one process
    each). Resumable: save() after each process; a run resumes at the first round not done."""
    todo = []
    for s in servers:
        if s.name in done and "skipped" in done[s.name]:
            continue
        python, model_dir = serving.ceiling_command(s)
        if python is None:
            done[s.name] = {"skipped": model_dir or "no local runtime of this version"}
            log(f"  ceiling {s.name}: not measured ({done[s.name]['skipped']})")
            save()
        else:
            todo.append((s.name, python, model_dir, s.knobs))
    core = ceiling_core(serving, servers, pin)
    for i in range(windows):
        round_log = []
        for name, python, model_dir, settings in todo if i % 2 == 0 else todo[::-1]:
            if processes(done.get(name)) > i:
                continue
            one = measure_one(python, model_dir, rows, 1, window_s, core, knob_settings=settings,
                              requests=(requests or {}).get(name, ""))
            pid = one.pop("pid", None)
            got = done.setdefault(name, {**one, "rows_per_s": {}, "cpu_us_per_call": {}})
            for key in ("rows_per_s", "cpu_us_per_call"):  # setdefault: a resumed run may predate the CPU field
                for r, v in one.get(key, {}).items():
                    got.setdefault(key, {}).setdefault(r, []).extend(v)
            got.setdefault("pids", []).append(pid)
            got["cores"] = core
            save()
            round_log.append(f"{name} " + ", ".join(f"{r} rows {v[0]:,.0f}" for r, v in one["rows_per_s"].items()))
        if round_log:
            log(f"  ceiling process {i + 1}/{windows} (rows/s in-process): " + "; ".join(round_log))
    for name, *_ in todo:
        got = done[name]
        log(f"  ceiling {name} (TF {got['tensorflow']}, in-process, mean of {processes(got)} processes): " + ", ".join(
            f"{r} rows {sum(v) / len(v):,.0f} rows/s" for r, v in got["rows_per_s"].items()))
    return done


def ceiling_core(serving, servers: list = (), pin: bool = False) -> list | None:
    """Where the ceiling's processes run. By default on the servers' cores (all of them: an isolated
    placement's server cores, else this machine's), TF's thread pools sized by them as a server's are:
    that is what a user upgrading gets. Pinned to one core instead (the last of those), the "kernels alone"
    diagnostic: far quieter (TF 2.21's 1-row ceiling 18% spread between processes unpinned, 2.4% pinned,
    benchmarks/ceiling_noise.py), but blind to how a release's thread pools spread one call over the cores:
    2.21 was 29% slower than 2.9 at 32 rows on these 2 cores while pinned the two were equal (issue 38).
    A thread-count knob among the servers (KNOBS="intra_op=1,4") always gets the servers' cores: on one core
    such a compare measures only oversubscription (intra_op=4 pinned was 51% slower than intra_op=1 at 32
    rows, while its server on two cores did 10% more QPS)."""
    cores = serving.cpus or (sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None)
    if not cores:
        return None
    if pin and not threads_compared(servers):
        return list(cores)[-1:]
    return sorted(cores)


def threads_compared(servers: list) -> bool:
    """A thread-count knob among the servers: a pinned ceiling would measure oversubscription only."""
    return any(knobs.threads(s.knobs) for s in servers)


def processes(got: dict | None) -> int:
    """How many processes of a version's ceiling are done (each added one value per row count)."""
    return min((len(v) for v in (got or {}).get("rows_per_s", {}).values()), default=0)

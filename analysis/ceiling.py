"""The TensorFlow ceiling of each version: its own runtime, in-process, before any load.

Runs `python -m modelserver.ceiling` in the version's venv (the same Servable.run the server
makes, nothing of the serving path around it), pinned where the servers run, while the
servers are idle. The result per version and row count is a list of rows/s, one per window,
so the report can give it an interval and compare versions on it like any other metric.
"""
from __future__ import annotations

import json
import os
import subprocess

from models.prepare import ROOT


class CeilingError(RuntimeError):
    """The in-process measurement failed; the message carries its last line of output."""


def measure_one(python: str, model_dir, rows: list, windows: int, window_s: float, cpus: list | None = None,
                timeout_s: float = 600) -> dict:
    """{"tensorflow": "2.9.3", "python": "3.9.20", "rows_per_s": {"1": [...], "32": [...]}} from one subprocess."""
    from stack.placement import pin_child

    cmd = [python, "-m", "modelserver.ceiling", "--model-dir", str(model_dir), "--rows", *map(str, rows),
           "--windows", str(windows), "--window-s", f"{window_s:g}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3"),
                          preexec_fn=pin_child(cpus) if cpus else None)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CeilingError(f"the in-process ceiling in {python} failed: {tail}")
    return json.loads(lines[-1])


def measure_all(serving, servers: list, rows: list, windows: int, window_s: float, done: dict, save,
                log=print) -> dict:
    """The ceiling of every server not in `done` yet (resumable: save() after each)."""
    for s in servers:
        if s.name in done:
            continue
        python, model_dir = serving.ceiling_command(s)
        if python is None:
            done[s.name] = {"skipped": model_dir or "no local runtime of this version"}
            log(f"  ceiling {s.name}: not measured ({done[s.name]['skipped']})")
        else:
            got = measure_one(python, model_dir, rows, windows, window_s, getattr(serving, "cpus", None))
            done[s.name] = got
            log(f"  ceiling {s.name} (TF {got['tensorflow']}, in-process): " + ", ".join(
                f"{r} rows {sum(v) / len(v):,.0f} rows/s" for r, v in got["rows_per_s"].items()))
        save()
    return done

"""A compare run on disk: results/<run id>/compare.json, rewritten atomically after every cell,
so an interrupted compare keeps every finished result and resumes where it stopped."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

from analysis import machine, schemas

from loadgen.summary import write_json_atomic
from stack import knobs
from core.paths import ROOT, results_dir, run_dir  # noqa: F401 - the one place names become paths
from core.errors import Missing
from core import settings


def load(run_id: str) -> dict:
    """The run's compare.json, checked against its schema (one line naming a wrong field)."""
    path = run_dir(run_id) / "compare.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise Missing(f"no run {run_id!r} under {results_dir()} (see `ls {results_dir()}`)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise schemas.SchemaError(f"{path}: not valid JSON ({e})") from None
    return schemas.check(doc, schemas.COMPARE, str(path), note=lambda line: print(line, file=sys.stderr))


def save(run: dict) -> None:
    write_json_atomic(str(run_dir(run["run_id"]) / "compare.json"), run)


def environment(versions: list, runtime: str) -> dict:
    cpu = ""
    try:
        cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    except OSError:
        pass
    gpu = driver = ""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            gpu, driver = [x.strip() for x in out.stdout.strip().splitlines()[0].split(",", 1)]
    except (OSError, subprocess.TimeoutExpired):
        pass
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    flags = machine.cpu_flags()
    inherited = settings.inherited_tf_settings() if runtime == "local" else {}
    onednn = {v.name: machine.onednn(v.tensorflow, flags, {**inherited, **knobs.env(v.knobs)}) for v in versions}
    return {"cpu": cpu, "cpus": os.cpu_count(), "cpu_flags": flags, "onednn": onednn,
            "gpu": gpu or "none", "driver": driver or "none",
            "python": platform.python_version(), "platform": platform.platform(), "runtime": runtime,
            "git_commit": commit, "tensorflow": {v.name: v.tensorflow for v in versions}}

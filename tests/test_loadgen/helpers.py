import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_loadgen(args: list, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "loadgen", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def loadgen_summary(tmp_path, args: list, timeout: float = 120) -> tuple:
    out = tmp_path / "loadgen.json"
    proc = run_loadgen([*args, "--out", str(out), "--quiet"], timeout)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def steady(summary: dict, name: str = None) -> dict:
    t = summary["targets"][0] if name is None else next(t for t in summary["targets"] if t["name"] == name)
    return t["phases"]["steady"]

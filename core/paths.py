"""Where results go, and the one pattern every name that becomes a path must match.

Run ids, baseline names and scenario names end up as directory or file names under results/ or
baselines/; a name like `../..` or `a b;c` would write elsewhere or break a shell line, so each
is checked here, in one place, before anything is created.
"""
from __future__ import annotations

import re
from pathlib import Path
from core.errors import UsageError

from core.settings import ROOT, results_root as results_dir, state_root  # noqa: F401 - the names paths are known by
CONFIGS = ROOT / "monitoring_configs"  # TF Serving's model, monitoring and batching configs, every runtime's
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_name(value, what: str) -> str:
    value = str(value)
    if not NAME.fullmatch(value) or ".." in value:
        raise UsageError(f"{what} {value!r}: use up to 100 letters, digits, '.', '-' and '_', starting with a "
                         "letter or digit")
    return value


def run_dir(run_id: str) -> Path:
    return results_dir() / check_name(run_id, "run id")

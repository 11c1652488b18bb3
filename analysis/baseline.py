"""Baselines and the regression gate.

`make baseline RUN=<id> NAME=tf2.9-cpu` archives a run's report (baselines/<name>.json,
atomically, never overwritten without FORCE=1). `make regress BASELINE=<name> VERSION=<v>`
runs the baseline's profile against version v and fails (exit 1, with a table) when P99 or
QPS is worse than the baseline beyond the confidence interval and a tolerance.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from analysis import runstore, schemas
from loadgen.summary import write_json_atomic
from core.paths import check_name
from core.errors import Exists, Missing, UsageError
from core import settings


def baselines_dir() -> Path:
    # TFSB_BASELINES lets tests (and CI jobs) keep their archive out of the checkout.
    return settings.baselines_root()


def archive(run_id: str, name: str, force: bool = False) -> Path:
    from analysis.report import build, planned_keys

    path = baselines_dir() / f"{check_name(name, 'baseline name')}.json"
    if path.exists() and not force:
        raise Exists(f"baseline {name!r} exists ({path}); FORCE=1 replaces it")
    run = runstore.load(run_id)
    if run["status"] != "done":  # a gate against half a run would pass or fail on what was never measured
        planned = planned_keys(run["config"])
        missing = [k for k in planned if k not in run["cells"]]
        raise UsageError(f"run {run_id} is {run['status']} ({len(missing)} of {len(planned)} measurements missing): "
                         f"a baseline is made from a complete run; `make compare ... RUN={run_id}` finishes it")
    rep = build(run_id, log=lambda *_: None)
    write_json_atomic(str(path), {"schema_version": schemas.SCHEMA_VERSION, "name": name,
                                  **{k: v for k, v in rep.items() if k != "_run"}})
    return path


def load(name: str) -> dict:
    path = baselines_dir() / f"{check_name(name, 'baseline name')}.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        known = ", ".join(p.stem for p in sorted(baselines_dir().glob("*.json"))) or "none"
        raise Missing(f"no baseline {name!r} (known: {known})") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise schemas.SchemaError(f"{path}: not valid JSON ({e})") from None
    return schemas.check(doc, schemas.BASELINE, str(path), note=lambda line: print(line, file=sys.stderr))


def gate(base: dict, current: dict, version: str, tolerance: float = 0.10) -> list:
    """[(level, metric, baseline, current, limit, regressed)] for every level both runs have."""
    def where(r):
        return r["batching"], r["rows_per_request"], r["protocol"], r["mode"], r["level"]

    bver = base["baseline_version"]
    brows = {where(r): r for r in base["rows"] if r["version"] == bver}
    out = []
    for r in current["rows"]:
        if r["version"] != version or where(r) not in brows:
            continue
        b = brows[where(r)]
        level = f"{r['protocol']} {r['rows_per_request']}r {r['mode']} {r['level']:g}"
        # P99: worse when the current mean exceeds the baseline's upper CI bound by more than the tolerance.
        bp, cp = b["p99_ms"], r["p99_ms"]
        limit = (bp["ci_high"] if bp["ci_high"] is not None else bp["mean"]) * (1 + tolerance)
        out.append((level, "P99 ms", bp["mean"], cp["mean"], limit, cp["mean"] > limit))
        bq, cq = b["achieved_qps"], r["achieved_qps"]
        limit = (bq["ci_low"] if bq["ci_low"] is not None else bq["mean"]) * (1 - tolerance)
        out.append((level, "QPS", bq["mean"], cq["mean"], limit, cq["mean"] < limit))
    return out

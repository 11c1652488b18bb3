"""A resumed compare measures what the stored run measured, or refuses before anything starts.

Without this a resume with another MODEL= merged its cells with the stored run's into one mean,
and one with other ROWS added cells the run's config does not list. Every setting that decides
what a cell measures is compared with compare.json's `config`; the first that differs is named in
one line with both values, so the user can give the run's settings again or start a new run.
"""
from __future__ import annotations

import json
from core.errors import UsageError

# What decides what a cell measures; prometheus and the servers' addresses may move between
# sessions (another port offset) without changing the measurement.
FIELDS = ("versions", "rows", "batching", "protocols", "repeat", "sla_p99_ms", "runtime", "model", "model_for", "api",
          "signature", "requests", "requests_file")
FLAG = {"versions": "VERSIONS", "rows": "ROWS", "batching": "BATCHING", "protocols": "PROTOCOL",
        "repeat": "REPEAT", "sla_p99_ms": "SLA_MS", "runtime": "RUNTIME", "model": "MODEL", "model_for": "MODEL_B", "api": "API", "signature": "SIGNATURE", "requests": "REQUEST_COUNT", "requests_file": "REQUESTS",
        "profile": "PROFILE"}


class ResumeMismatch(UsageError):
    pass


def _plain(value):
    return json.loads(json.dumps(value))  # tuples -> lists, as compare.json holds them


def _refuse(run_id: str, field: str, stored, asked) -> None:
    flag = FLAG.get(field.split(".")[0], field)
    raise ResumeMismatch(f"run {run_id} was measured with {field} = {json.dumps(stored)}, this resume asks "
                         f"{json.dumps(asked)}: resume with the run's {flag}, or leave RUN= empty for a new run")


def check(run: dict, fresh: dict) -> None:
    """Refuse to resume `run` (compare.json) with `fresh`, the config a new run would store."""
    run_id, stored = run.get("run_id", "?"), run.get("config")
    if not isinstance(stored, dict):
        raise ResumeMismatch(f"run {run_id}: compare.json has no config mapping; it cannot be resumed")
    fresh = _plain(fresh)
    for field in FIELDS:
        if stored.get(field) != fresh.get(field):
            _refuse(run_id, field, stored.get(field), fresh.get(field))
    old_profile, new_profile = stored.get("profile") or {}, fresh.get("profile") or {}
    for key in sorted(set(old_profile) | set(new_profile)):
        if old_profile.get(key) != new_profile.get(key):
            _refuse(run_id, f"profile.{key}", old_profile.get(key), new_profile.get(key))
    old_tf = {n: s.get("tensorflow") for n, s in (stored.get("servers") or {}).items() if isinstance(s, dict)}
    new_tf = {n: s["tensorflow"] for n, s in fresh["servers"].items()}
    if old_tf != new_tf:
        _refuse(run_id, "servers' tensorflow", old_tf, new_tf)

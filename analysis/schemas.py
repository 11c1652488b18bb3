"""What compare.json, report.json and baselines hold, as versioned JSON Schemas (jsonschema).

Every file the analysis reads is checked here first, so a run written by an older or newer
version, or edited by hand, is one line naming the field instead of a TypeError deep in the
report. Fields the schema does not know are ignored with a note (a newer version may add them);
where a reader builds an object from a mapping (the profile), they are dropped before it does.
Bump SCHEMA_VERSION when a field's meaning changes; readers accept any version up to it.
"""
from __future__ import annotations

import jsonschema
from core.errors import UsageError

SCHEMA_VERSION = 1

_NUM, _INT, _STR, _OBJ = {"type": "number"}, {"type": "integer"}, {"type": "string"}, {"type": "object"}
_NUM_OR_NULL = {"type": ["number", "null"]}

PROFILE = {"type": "object", "required": ["name", "concurrency", "rates", "window_s", "warmup_s", "search_low",
                                          "search_high", "search_window_s", "search_probes"],
           "properties": {"name": _STR, "concurrency": {"type": "array", "items": _INT},
                          "rates": {"type": "array", "items": _NUM}, "window_s": _NUM, "warmup_s": _NUM,
                          "search_low": _NUM, "search_high": _NUM, "search_window_s": _NUM,
                          "search_probes": _INT, "sla_p99_ms": _NUM, "repeat": _INT, "ceiling_windows": _INT,
                          "ceiling_window_s": _NUM, "ceiling_pinned_windows": _INT, "optrace_processes": _INT,
                          "optrace_calls": _INT, "soak_s": _NUM}}

CONFIG = {"type": "object", "required": ["versions", "rows", "batching", "protocols", "profile", "repeat",
                                         "sla_p99_ms"],
          "properties": {"versions": {"type": "array", "items": _STR, "minItems": 1},
                         "rows": {"type": "array", "items": _INT, "minItems": 1},
                         "batching": {"type": "array", "items": {"type": ["boolean", "null"]}, "minItems": 1},
                         "protocols": {"type": "array", "items": {"enum": ["rest", "grpc"]}, "minItems": 1},
                         "profile": PROFILE, "repeat": _INT, "sla_p99_ms": _NUM, "runtime": _STR,
                         "model": _STR, "model_for": _OBJ, "api": _STR, "signature": _STR, "requests": _INT,
                         "requests_file": _STR, "cold_starts": _INT, "prometheus": {"type": ["string", "null"]},
                         "servers": _OBJ}}

CELL = {"type": "object",
        "required": ["version", "protocol", "rows", "batching", "mode", "level", "repeat", "start", "end",
                     "warmup_start", "client", "valid"],
        "properties": {"version": _STR, "protocol": _STR, "rows": _INT, "batching": {"type": ["boolean", "null"]},
                       "mode": _STR, "level": _NUM, "repeat": _INT, "start": _NUM, "end": _NUM,
                       "warmup_start": _NUM, "valid": {"type": "boolean"},
                       "client": {"type": "object", "required": ["seconds", "latency_ms"],
                                  "properties": {"seconds": _NUM, "latency_ms": _OBJ, "sent": _INT, "ok": _INT,
                                                 "completed": _INT, "errors": _OBJ, "error_ratio": _NUM,
                                                 "achieved_qps": _NUM, "throughput_qps": _NUM,
                                                 "concurrency": {}, "cpu_ratio": _NUM_OR_NULL,
                                                 "client_cpu_ms_per_request": _NUM_OR_NULL,
                                                 "invalid_reasons": {"type": "array"}, "valid": {"type": "boolean"}}},
                       "client_warmup": {"type": ["object", "null"]}, "ok_hdr": {}, "server_error": _STR,
                       "server_p99_bucket": {}, "container": {"type": ["object", "null"]},
                       "server": {"type": ["object", "null"]}, "breakdown": {"type": ["object", "null"]}}}

SOAK = {"type": "object", "required": ["start", "end", "ok", "achieved_qps", "samples"],
        "properties": {"start": _NUM, "end": _NUM, "ok": _INT, "achieved_qps": _NUM, "protocol": _STR, "level": _STR,
                       "valid": {"type": "boolean"}, "invalid_reasons": {"type": "array"},
                       "samples": {"type": "array", "items": {"type": "array", "items": _NUM, "minItems": 2,
                                                              "maxItems": 2}}}}

COMPARE = {"type": "object",
           "required": ["run_id", "status", "created", "config", "environment", "cold_start", "ceiling", "cells",
                        "search"],
           "properties": {"schema_version": _INT, "run_id": _STR,
                          "status": {"enum": ["running", "interrupted", "failed", "done"]}, "created": _NUM,
                          "finished": _NUM, "config": CONFIG, "placement": {"type": ["object", "null"]},
                          "environment": {"type": "object", "required": ["runtime"]},
                          "cold_start": {"type": "object", "additionalProperties": _OBJ},
                          "ceiling": {"type": "object", "additionalProperties": _OBJ},
                          "ceiling_pinned": {"type": "object", "additionalProperties": _OBJ}, "optrace": _OBJ,
                          "outputs": _OBJ, "cells": {"type": "object", "additionalProperties": CELL},
                          "search": {"type": "object", "additionalProperties": _OBJ},
                          "activity": _OBJ, "preflight": _OBJ, "interrupted": _OBJ, "failed": _OBJ,
                          "memory": {"type": "object", "additionalProperties": _OBJ},
                          "cold_starts": {"type": "object", "additionalProperties": {"type": "array", "items": _OBJ}},
                          "soak": {"type": "object", "additionalProperties": SOAK}}}

_MEAN_CI = {"type": "object", "required": ["mean", "ci_low", "ci_high"],
            "properties": {"mean": _NUM, "ci_low": _NUM_OR_NULL, "ci_high": _NUM_OR_NULL}}
ROW = {"type": "object", "required": ["version", "batching", "rows_per_request", "protocol", "mode", "level",
                                      "p99_ms", "achieved_qps"],
       "properties": {"version": _STR, "batching": {}, "rows_per_request": _INT, "protocol": _STR, "mode": _STR,
                      "level": _NUM, "p99_ms": _MEAN_CI, "achieved_qps": _MEAN_CI}}
# A baseline is a report (analysis.report.build without the run) with its name; only of a whole run.
BASELINE = {"type": "object", "required": ["name", "run_id", "status", "config", "environment", "baseline_version",
                                           "rows"],
            "properties": {"schema_version": _INT, "name": _STR, "run_id": _STR, "status": {"const": "done"},
                           "config": CONFIG, "environment": _OBJ, "baseline_version": _STR,
                           "rows": {"type": "array", "items": ROW}}}
REPORT = {**BASELINE, "required": [r for r in BASELINE["required"] if r != "name"],
          "properties": {**BASELINE["properties"], "status": {"enum": ["running", "interrupted", "failed", "done"]}}}


class SchemaError(UsageError):
    """One line: which file, which field, what is wrong."""


def _where(path) -> str:
    return ".".join(str(p) for p in path) or "(the top level)"


def _unknown(doc, schema: dict, path=()) -> list:
    """Paths of the mapping keys the schema does not name (only where it names its properties)."""
    out = []
    if isinstance(doc, dict) and schema.get("type") == "object":
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        for key, value in doc.items():
            if props is not None and key in props:
                out += _unknown(value, props[key], (*path, key))
            elif isinstance(extra, dict):
                out += _unknown(value, extra, (*path, key))
            elif props is not None and extra is None:
                out.append(_where((*path, key)))
    return out


def check(doc, schema: dict, what: str, note=print) -> dict:
    """doc if it fits schema; raise SchemaError naming the first wrong field; note unknown ones."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(doc))
    if error is not None:
        field = _where(error.absolute_path)
        if error.validator == "required":
            missing = error.message.split("'")[1] if "'" in error.message else error.message
            field = _where((*error.absolute_path, missing))
            raise SchemaError(f"{what}: {field} is missing")
        raise SchemaError(f"{what}: {field}: {error.message}")
    version = doc.get("schema_version", 1) if isinstance(doc, dict) else 1
    unknown = _unknown(doc, schema)
    if unknown:
        newer = f" (written by schema version {version}, this reads {SCHEMA_VERSION})" if version > SCHEMA_VERSION \
            else ""
        note(f"note: {what}: ignoring unknown field(s) {', '.join(unknown[:5])}"
             + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "") + newer)
    return doc


def known_profile_fields(profile: dict) -> dict:
    """The profile's fields this version's Profile takes (a newer run may hold more)."""
    return {k: v for k, v in profile.items() if k in PROFILE["properties"]}

"""A request set from a file (REQUESTS=, --requests): what users already hold.

    warmup              the model's own assets.extra/tf_serving_warmup_requests
    *.tfrecord[.gz]     TF Serving's warmup format (TFRecord of PredictionLog: predict, classify, regress,
                        multi-inference logs) or a TFRecord of tf.Example (gzip or not), told apart by the records
    *.jsonl             JSON lines of REST bodies, sent as they are (REST only)

Examples are checked against the graph's parse spec before the first request is sent (a feature of another type,
or a required one missing, is refused in one line) and grouped `rows` to a request for the target's API.
TFRecord is read without TensorFlow: each record is a little-endian uint64 length, its masked CRC-32C, the data,
and the data's masked CRC-32C; the CRCs are not checked (a truncated file still ends in one clear line).
"""
from __future__ import annotations

import gzip
import os
import struct

import orjson

from loadgen import tfproto
from loadgen.examples import SpecError, check

MAX_FILE_BYTES = 1 << 30
MAX_RECORDS = 100_000
WARMUP = os.path.join("assets.extra", "tf_serving_warmup_requests")


def _open(path: str):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def tfrecords(path: str) -> list:
    """The records of a TFRecord file (gzip or not), at most MAX_RECORDS."""
    if os.path.getsize(path) > MAX_FILE_BYTES:
        raise SpecError(f"REQUESTS {path} is larger than {MAX_FILE_BYTES >> 30} GiB")
    out, total = [], 0
    with _open(path) as f:
        while len(out) < MAX_RECORDS:
            head = f.read(12)
            if not head:
                break
            if len(head) < 12:
                raise SpecError(f"REQUESTS {path}: truncated after {len(out)} records (not a TFRecord file?)")
            (n,) = struct.unpack("<Q", head[:8])
            total += n
            if total > MAX_FILE_BYTES:
                raise SpecError(f"REQUESTS {path}: records larger than {MAX_FILE_BYTES >> 30} GiB (not a TFRecord file?)")
            data = f.read(n)
            if len(data) < n or len(f.read(4)) < 4:
                raise SpecError(f"REQUESTS {path}: truncated in record {len(out) + 1} (not a TFRecord file?)")
            out.append(data)
    if not out:
        raise SpecError(f"REQUESTS {path} holds no records")
    return out


def json_lines(path: str) -> list:
    """REST bodies, one JSON object a line (checked: each must parse)."""
    out = []
    with open(path, "rb") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                body = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise SpecError(f"REQUESTS {path} line {i}: not JSON ({e})") from None
            if not isinstance(body, dict) or not {"instances", "inputs", "examples"} & set(body):
                raise SpecError(f"REQUESTS {path} line {i}: a REST body holds instances, inputs or examples")
            out.append(orjson.dumps(body))
            if len(out) >= MAX_RECORDS:
                break
    if not out:
        raise SpecError(f"REQUESTS {path} holds no request")
    return out


LOGS = {"predict_log": "predict", "classify_log": "classify", "regress_log": "regress",
        "multi_inference_log": "multi"}


def warmup_logs(records: list) -> list | None:
    """[(api, request message)] where the records are PredictionLogs, None where they are something else."""
    out = []
    for r in records:
        try:
            log = tfproto.PredictionLog.FromString(r)
        except Exception:  # protobuf's DecodeError: not a PredictionLog
            return None
        kind = next((k for k in LOGS if log.HasField(k)), None)
        if kind is None:
            return None
        out.append((LOGS[kind], getattr(log, kind).request))
    return out


def examples_of(records: list, spec: dict, path: str) -> list:
    out = []
    for i, r in enumerate(records, 1):
        try:
            ex = tfproto.Example.FromString(r)
        except Exception:
            raise SpecError(f"REQUESTS {path}: record {i} is neither a PredictionLog nor a tf.Example") from None
        if not ex.features.feature:
            raise SpecError(f"REQUESTS {path}: record {i} is neither a PredictionLog nor a tf.Example with features")
        check(ex, spec, f"REQUESTS {path}, example {i}")
        out.append(ex)
    return out


def resolve(path: str, model_dir: str) -> str:
    if path == "warmup":
        if not model_dir:
            raise SpecError("REQUESTS=warmup reads the model's own warmup file: give the model's path (MODEL=)")
        path = os.path.join(model_dir, WARMUP)
    if not os.path.isfile(path):
        raise SpecError(f"REQUESTS {path}: no such file")
    return path

"""The requests an in-process measurement feeds (the ceiling, the op trace): the servers' own request set, as
loadgen/requestset.py's write_tensors wrote it, so TensorFlow runs in-process exactly what the servers got.

    {"signature": "serving_default",
     "rows": {"32": [{"x": {"dtype": "float32", "shape": [32, 784], "data": "<base64 of little-endian bytes>"}}, ...],
              "1": [...]}}     strings (serialized tf.Example, text): {"dtype": "string", "shape": [n], "b64": [...]}
"""
from __future__ import annotations

import base64
import json

import numpy as np

MAX_BYTES = 512 * 2**20


def read(path: str) -> tuple:
    """(the signature they are for, {rows: [{input: ndarray}, ...]}); ValueError (one line) for a file that is not
    one."""
    with open(path, "rb") as f:
        raw = f.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        raise ValueError(f"{path}: larger than {MAX_BYTES >> 20} MiB")
    try:
        doc = json.loads(raw)
        return doc["signature"], {int(r): [{k: _array(v) for k, v in req.items()} for req in reqs]
                                  for r, reqs in doc["rows"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: not a request file ({type(e).__name__}: {e})") from None


def _array(v: dict) -> np.ndarray:
    if v["dtype"] == "string":
        return np.array([base64.b64decode(b) for b in v["b64"]], dtype=object).reshape(v["shape"])
    dtype = np.dtype(v["dtype"]).newbyteorder("<")
    return np.frombuffer(base64.b64decode(v["data"]), dtype=dtype).reshape(v["shape"]).astype(dtype.newbyteorder("="))

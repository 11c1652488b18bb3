"""One loaded model version: its signatures, its metadata, and running it.

The SignatureDefs come from saved_model.pb itself, so metadata answers exactly
what TF Serving would; the callables come from tf.saved_model.load. The loaded
object is kept on the servable: in TF 2.6 the signatures' variables are freed
when it is garbage-collected (FailedPrecondition at the next call).
"""
from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from modelserver import tensors
from modelserver.status import ServingError, from_tf_exception, invalid

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
WARMUP_MAX_RECORDS = 1000  # TF Serving's limit


@dataclasses.dataclass
class TensorSpec:
    dtype: int
    shape: list | None  # None: unknown rank

    @property
    def np_dtype(self):
        return tensors.NP_DTYPES.get(self.dtype)


@dataclasses.dataclass
class Signature:
    name: str
    method_name: str
    inputs: dict
    outputs: dict
    fn: object
    unsupported: str = ""  # why this signature cannot be served, or ""

    @property
    def batchable(self) -> bool:
        """Every input and output has a leading batch dimension of unknown size."""
        specs = list(self.inputs.values()) + list(self.outputs.values())
        return all(s.shape is not None and len(s.shape) >= 1 and s.shape[0] == -1 for s in specs)


def _spec(info) -> TensorSpec:
    shape = None if info.tensor_shape.unknown_rank else [d.size for d in info.tensor_shape.dim]
    return TensorSpec(dtype=info.dtype, shape=shape)


def read_signature_defs(path: str):
    """The SignatureDef map of the serving meta graph, read from saved_model.pb."""
    from google.protobuf import text_format
    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    pb = os.path.join(path, "saved_model.pb")
    if os.path.isfile(pb):
        with open(pb, "rb") as f:
            sm.ParseFromString(f.read())
    else:
        with open(os.path.join(path, "saved_model.pbtxt")) as f:
            text_format.Parse(f.read(), sm)
    for mg in sm.meta_graphs:
        if "serve" in mg.meta_info_def.tags:
            return mg.signature_def
    raise ServingError("NOT_FOUND", f"{path}: no meta graph tagged 'serve'")


class Servable:
    def __init__(self, model_name: str, version: int, path: str):
        import tensorflow as tf

        self.model_name, self.version, self.path = model_name, version, path
        self.signature_defs = read_signature_defs(path)
        self._loaded = tf.saved_model.load(path, tags=["serve"])  # keep the reference (TF 2.6)
        self.signatures = {}
        for name, sd in self.signature_defs.items():
            if name not in self._loaded.signatures:
                continue  # e.g. __saved_model_init_op
            sig = Signature(name, sd.method_name, {k: _spec(v) for k, v in sd.inputs.items()},
                            {k: _spec(v) for k, v in sd.outputs.items()}, self._loaded.signatures[name])
            bad = [f"{k} ({tensors.dtype_name(s.dtype)})" for k, s in {**sig.inputs, **sig.outputs}.items()
                   if s.np_dtype is None]
            if bad:
                sig.unsupported = f"signature {name!r} uses unsupported dtypes: {', '.join(bad)}"
            self.signatures[name] = sig
        self._tf = tf

    def signature(self, name: str) -> Signature:
        name = name or "serving_default"
        sig = self.signatures.get(name)
        if sig is None:
            raise invalid(f"Serving signature name: \"{name}\" not found in signature def")
        if sig.unsupported:
            raise invalid(sig.unsupported)
        return sig

    def validate(self, sig: Signature, inputs: dict) -> int:
        """Check names, dtypes and shapes; return the batch size (dim 0), or -1."""
        missing = set(sig.inputs) - set(inputs)
        extra = set(inputs) - set(sig.inputs)
        if missing or extra:
            raise invalid(f"signature {sig.name!r} expects inputs {sorted(sig.inputs)}, got {sorted(inputs)}")
        rows = set()
        for k, arr in inputs.items():
            spec = sig.inputs[k]
            if arr.dtype != spec.np_dtype:
                raise invalid(f"input {k!r} has dtype {arr.dtype}, expected {tensors.dtype_name(spec.dtype)}")
            tensors.check_shape(k, arr, spec.shape)
            rows.add(arr.shape[0] if arr.ndim else -1)
        if len(rows) > 1:
            raise invalid(f"inputs disagree on the batch size: {sorted(rows)}")
        return rows.pop() if rows else -1

    def run(self, sig: Signature, inputs: dict) -> dict:
        """Call the signature (blocking; run it off the event loop)."""
        tf = self._tf
        try:
            out = sig.fn(**{k: tf.constant(v) for k, v in inputs.items()})
            return {k: v.numpy() for k, v in out.items()}
        except Exception as e:  # TF raises its own error classes; map them to codes
            raise from_tf_exception(e) from None

    def warmup(self) -> int:
        """Replay the warmup records (PredictionLog TFRecords) once each; return how many."""
        path = os.path.join(self.path, WARMUP_FILE)
        if not os.path.isfile(path):
            return 0
        from tensorflow_serving.apis import prediction_log_pb2

        count = 0
        for record in self._tf.data.TFRecordDataset(path).take(WARMUP_MAX_RECORDS):
            log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
            if log.WhichOneof("log_type") != "predict_log":
                raise invalid(f"{path}: only predict_log warmup records are supported")
            req = log.predict_log.request
            sig = self.signature(req.model_spec.signature_name)
            inputs = {k: tensors.proto_to_array(k, v) for k, v in req.inputs.items()}
            self.validate(sig, inputs)
            self.run(sig, inputs)
            count += 1
        return count


def load_servable(model_name: str, version: int, path: str, warmup: bool) -> tuple:
    """Load and warm up; return (servable, load_seconds, warmup_seconds)."""
    t0 = time.perf_counter()
    servable = Servable(model_name, version, path)
    t1 = time.perf_counter()
    if warmup:
        servable.warmup()
    return servable, t1 - t0, time.perf_counter() - t1


def example_inputs(sig: Signature, rows: int, seed: int = 0) -> dict:
    """Random inputs matching a signature (-1 dims filled with `rows`), for tests and benchmarks."""
    rng = np.random.RandomState(seed)
    out = {}
    for k, s in sig.inputs.items():
        shape = [rows if d < 0 else d for d in (s.shape or [rows])]
        out[k] = rng.rand(*shape).astype(s.np_dtype)
    return out

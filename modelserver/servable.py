"""One loaded model version: its signatures, its metadata, and running it.

As TF Serving does, every SavedModel (TF1 or TF2) is loaded into a Session from its serving
MetaGraphDef (the loader runs its init/main ops and restores its variables and assets), and a
request is a Session run that feeds the signature's input tensors by name and fetches its
outputs. Nothing checks a request against the SignatureDef's static shapes: the graph decides,
and its error is the answer. The run goes through a callable made once per (signature,
outputs), which costs far less Python per call than a TF2 concrete function
(benchmarks/modelserver.py, row "in-process").
"""
from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from modelserver import tensors
from modelserver.status import from_tf_exception, invalid

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
WARMUP_MAX_RECORDS = 1000  # TF Serving's limit


@dataclasses.dataclass
class TensorSpec:
    dtype: int
    shape: list | None  # None: unknown rank

    @property
    def np_dtype(self):
        return tensors.NP_DTYPES.get(self.dtype)


MAX_CALLABLES = 64  # Session callables kept per servable (one per set of outputs fetched)


@dataclasses.dataclass
class Signature:
    name: str
    method_name: str
    inputs: dict          # alias -> TensorSpec
    outputs: dict
    feeds: dict           # alias -> tensor name in the graph ("x:0")
    fetches: dict
    unsupported: str = ""  # why this signature cannot be served, or ""

    @property
    def batchable(self) -> bool:
        """Every input and output has a leading batch dimension of unknown size."""
        specs = list(self.inputs.values()) + list(self.outputs.values())
        return all(s.shape is not None and len(s.shape) >= 1 and s.shape[0] == -1 for s in specs)


def _spec(info) -> TensorSpec:
    shape = None if info.tensor_shape.unknown_rank else [d.size for d in info.tensor_shape.dim]
    return TensorSpec(dtype=info.dtype, shape=shape)


class Servable:
    def __init__(self, model_name: str, version: int, path: str, session_config=None, graph_built=None):
        import threading

        import tensorflow as tf

        self.model_name, self.version, self.path = model_name, version, path
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.session = tf.compat.v1.Session(graph=self.graph, config=session_config)
            meta = tf.compat.v1.saved_model.load(self.session, ["serve"], path)
        self.signature_defs = meta.signature_def
        self._callables, self._lock = {}, threading.Lock()
        self._graph_built = graph_built  # metrics: :tensorflow:core:graph_build_calls / _time_usecs
        self.signatures = {}
        for name, sd in self.signature_defs.items():
            if name.startswith("__") or not sd.outputs:
                continue  # e.g. __saved_model_init_op: not a serving signature
            sig = Signature(name, sd.method_name, {k: _spec(v) for k, v in sd.inputs.items()},
                            {k: _spec(v) for k, v in sd.outputs.items()},
                            {k: v.name for k, v in sd.inputs.items()}, {k: v.name for k, v in sd.outputs.items()})
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
        """Check names, dtypes, ranks and fixed dims against the signature before TensorFlow sees the
        request; return the batch size (the common dim 0 of every input, for the batcher), or -1 when
        there is none. TF Serving leaves shapes to the graph, where a kernel's CHECK can abort the whole
        server (TF 2.9's Conv2D on a rank-2 input: tensor_format.h:427); one malformed request must
        never take down a server under measurement (docs/parity.md)."""
        missing = set(sig.inputs) - set(inputs)
        extra = set(inputs) - set(sig.inputs)
        if missing or extra:
            raise invalid(f"input size does not match signature: {len(inputs)}!={len(sig.inputs)} "
                          f"len({{{','.join(sorted(inputs))}}}) != len({{{','.join(sorted(sig.inputs))}}}). "
                          f"Sent extra: {{{','.join(sorted(extra))}}}. Missing but required: "
                          f"{{{','.join(sorted(missing))}}}.")
        rows = set()
        for k, arr in inputs.items():
            spec = sig.inputs[k]
            if arr.dtype != spec.np_dtype:
                raise invalid(f"Expects arg[{list(sig.inputs).index(k)}] ({k}) to be "
                              f"{tensors.dtype_name(spec.dtype)[3:].lower()} but {arr.dtype} is provided")
            tensors.check_shape(k, arr, spec.shape)
            rows.add(arr.shape[0] if arr.ndim else -1)
        return rows.pop() if len(rows) == 1 else -1

    def _callable(self, sig: Signature, outputs: tuple, timeout_ms: int = 0):
        """The callable fetching `outputs` (sorted, distinct: one per set, as TF's own executor cache keys
        them); at most MAX_CALLABLES per servable, the oldest dropped (and counted) beyond, so requests
        naming ever new output sets cannot grow the server's memory without bound."""
        key = (sig.name, outputs, timeout_ms)
        fn = self._callables.get(key)
        if fn is None:
            with self._lock:  # make_callable changes the session's state: once per key
                fn = self._callables.get(key)
                if fn is None:
                    evicted = 0
                    while len(self._callables) >= MAX_CALLABLES:  # dicts keep insertion order: oldest first
                        del self._callables[next(iter(self._callables))]
                        evicted += 1
                    t0 = time.perf_counter()
                    fn = self._callables[key] = self._make_callable([sig.feeds[k] for k in sig.inputs],
                                                                    [sig.fetches[k] for k in outputs], timeout_ms)
                    if self._graph_built:
                        self._graph_built(time.perf_counter() - t0, evicted)
        return fn

    def _make_callable(self, feeds: list, fetches: list, timeout_ms: int = 0):
        """C++ Session::MakeCallable, as a C++ server would run the graph: feeds by tensor name,
        no Python-side checks (the public make_callable routes feeds through Session.run, which
        checks static shapes that TF Serving does not and costs several times the Python)."""
        from tensorflow.core.protobuf import config_pb2

        opts = config_pb2.CallableOptions(feed=feeds, fetch=fetches)
        if timeout_ms:  # TensorFlow itself ends a run that takes longer: DEADLINE_EXCEEDED
            opts.run_options.timeout_in_ms = timeout_ms
        return self.session._make_callable_from_options(opts)  # noqa: SLF001 - TF 1.8 .. 2.21

    def run(self, sig: Signature, inputs: dict, outputs: tuple = (), timeout_ms: int = 0) -> dict:
        """One Session run of the signature (blocking). outputs: the aliases to fetch (TF
        Serving's output_filter), all of them by default; timeout_ms: the run's deadline (0: none)."""
        outputs = tuple(outputs) or tuple(sig.outputs)
        fetched = tuple(sorted(set(outputs)))
        try:
            values = self._callable(sig, fetched, timeout_ms)(*[inputs[k] for k in sig.inputs])
        except Exception as e:  # TF raises its own error classes; map them to codes
            raise from_tf_exception(e) from None
        by_alias = dict(zip(fetched, values))
        return {k: by_alias[k] for k in outputs}  # in the order asked for (REST's row format keeps it)

    def close(self) -> None:
        self.session.close()

    def warmup(self) -> int:
        """Replay the warmup records (PredictionLog TFRecords) once each; return how many."""
        path = os.path.join(self.path, WARMUP_FILE)
        if not os.path.isfile(path):
            return 0
        from tensorflow_serving.apis import prediction_log_pb2

        from modelserver import inference

        count = 0
        for record in self._tf.data.TFRecordDataset(path).take(WARMUP_MAX_RECORDS):
            log = prediction_log_pb2.PredictionLog.FromString(record.numpy())
            kind = log.WhichOneof("log_type")
            if kind == "predict_log":
                req = log.predict_log.request
                sig = self.signature(req.model_spec.signature_name)
                inputs = {k: tensors.proto_to_array(k, v) for k, v in req.inputs.items()}
                self.validate(sig, inputs)
            elif kind in ("classify_log", "regress_log"):
                req = getattr(log, kind).request
                sig = self.signature(req.model_spec.signature_name)
                method = inference.CLASSIFY if kind == "classify_log" else inference.REGRESS
                inputs = {inference.check_signature(sig, method): inference.serialized_examples(req.input)}
            else:
                raise invalid(f"{path}: warmup records of type {kind} are not supported (predict, classify, "
                              "regress are)")
            self.run(sig, inputs)
            count += 1
        return count


def load_servable(model_name: str, version: int, path: str, warmup: bool, session_config=None,
                  graph_built=None) -> tuple:
    """Load and warm up; return (servable, load_seconds, warmup_seconds)."""
    t0 = time.perf_counter()
    servable = Servable(model_name, version, path, session_config, graph_built)
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

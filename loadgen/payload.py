"""Request payloads, built once from the model's own metadata and pre-serialized.

The signature (input names, dtypes, shapes) comes from GET .../metadata or
GetModelMetadata; -1 dimensions are filled with the batch size; values are
random with a seed, or read from a .npy / .json file. The hot path then only
sends these bytes.
"""
from __future__ import annotations

import json
import os

import numpy as np
import orjson

from fileio import http
from loadgen import tfproto
from loadgen.scenario import ScenarioError, Target
from core.errors import BenchError, Unreachable as _Unreachable

DTYPES = {"DT_FLOAT": np.float32, "DT_DOUBLE": np.float64, "DT_HALF": np.float16, "DT_INT8": np.int8,
          "DT_INT16": np.int16, "DT_INT32": np.int32, "DT_INT64": np.int64, "DT_UINT8": np.uint8,
          "DT_UINT16": np.uint16, "DT_UINT32": np.uint32, "DT_UINT64": np.uint64, "DT_BOOL": np.bool_,
          "DT_STRING": object}


class TargetError(BenchError, RuntimeError):
    """A target that cannot be driven: unreachable, unknown model, missing signature."""


class Unreachable(_Unreachable, TargetError):
    """No server answered at the target's address (the README's exit 3, not a usage error)."""


MAX_METADATA_BYTES = 64 * 2**20  # a model's metadata beyond this is no metadata (a server answering garbage)


def _model_path(t: Target) -> str:
    return f"/v1/models/{t.model}" + (f"/versions/{t.model_version}" if t.model_version else "")


def fetch_signatures(t: Target, timeout: float = 10.0) -> dict:
    """{signature name: {"method": "tensorflow/serving/predict", "inputs": {input name: (dtype name, [dims])}}}
    of the target's model, from its metadata (REST GET .../metadata or gRPC GetModelMetadata)."""
    if t.protocol == "rest":
        url = f"http://{t.host}:{t.port}{_model_path(t)}/metadata"
        try:
            meta = json.loads(http.get(url, timeout_s=timeout, max_bytes=MAX_METADATA_BYTES))
        except http.HTTPStatusError as e:
            raise TargetError(f"{t.name}: {url} answered {e.code}: {e.said}") from None
        except (OSError, ValueError) as e:
            raise Unreachable(f"{t.name}: cannot reach {url}: {e}") from None
        sigs = meta.get("metadata", {}).get("signature_def", {}).get("signature_def", {})
        return {name: {"method": sig.get("method_name", ""),
                       "inputs": {k: (v.get("dtype", "DT_INVALID"),
                                      [int(d.get("size", -1)) for d in v.get("tensor_shape", {}).get("dim", [])])
                                  for k, v in sig.get("inputs", {}).items()},
                       "outputs": sorted(sig.get("outputs", {}))}
                for name, sig in sigs.items()}
    return _fetch_signatures_grpc(t, timeout)


def fetch_signature(t: Target, timeout: float = 10.0) -> dict:
    """{input name: (dtype name, [dims])} of the target's signature."""
    return signature_of(t, fetch_signatures(t, timeout))["inputs"]


def signature_of(t: Target, sigs: dict) -> dict:
    if t.signature not in sigs:
        raise TargetError(f"{t.name}: model {t.model!r} has no signature {t.signature!r} "
                          f"(it has: {', '.join(sorted(s for s in sigs if not s.startswith('__')))})")
    return sigs[t.signature]


def _fetch_signatures_grpc(t: Target, timeout: float) -> dict:
    import grpc

    req = tfproto.GetModelMetadataRequest()
    req.model_spec.name = t.model
    if t.model_version:
        req.model_spec.version.value = t.model_version
    req.metadata_field.append("signature_def")
    with grpc.insecure_channel(f"{t.host}:{t.port}", options=[("grpc.max_receive_message_length",
                                                                MAX_METADATA_BYTES)]) as ch:
        call = ch.unary_unary("/tensorflow.serving.PredictionService/GetModelMetadata",
                              request_serializer=lambda m: m.SerializeToString(),
                              response_deserializer=tfproto.GetModelMetadataResponse.FromString)
        try:
            resp = call(req, timeout=timeout)
        except grpc.RpcError as e:
            if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise Unreachable(f"{t.name}: cannot reach grpc://{t.host}:{t.port} (GetModelMetadata: "
                                  f"{e.code().name}: {e.details()})") from None
            raise TargetError(f"{t.name}: GetModelMetadata at {t.host}:{t.port}: {e.code().name}: {e.details()}") from None
    sdm = tfproto.SignatureDefMap.FromString(resp.metadata["signature_def"].value)
    return {name: {"method": sig.method_name,
                   "inputs": {k: (tfproto.DT_NAME.get(v.dtype, "DT_INVALID"), [d.size for d in v.tensor_shape.dim])
                              for k, v in sig.inputs.items()},
                   "outputs": sorted(sig.outputs)}
            for name, sig in sdm.signature_def.items()}


def make_inputs(signature: dict, batch_size: int, seed: int, file: str = "") -> dict:
    """{input name: ndarray} with -1 dims filled by batch_size; from `file` when given."""
    if file:
        return _inputs_from_file(file, signature)
    rng = np.random.default_rng(seed)
    out = {}
    for name, (dtype, dims) in signature.items():
        if dtype not in DTYPES:
            raise TargetError(f"input {name!r} has dtype {dtype}, which the load generator cannot generate")
        shape = [batch_size if d < 0 else d for d in dims]
        np_dtype = DTYPES[dtype]
        if np_dtype is object:
            out[name] = np.array([b"example"] * int(np.prod(shape)), dtype=object).reshape(shape)
        elif np.issubdtype(np_dtype, np.bool_):
            out[name] = rng.random(shape) < 0.5
        elif np.issubdtype(np_dtype, np.integer):
            out[name] = rng.integers(0, 100, size=shape).astype(np_dtype)
        else:
            out[name] = rng.random(shape).astype(np_dtype)
    return out


MAX_PAYLOAD_FILE_BYTES = 256 * 2**20  # one request's payload; a request set's files have their own bounds


def _inputs_from_file(path: str, signature: dict) -> dict:
    """{input name: ndarray} from a .npy (single-input signatures) or a .json file (a REST body, a list of rows, or
    {input: values}), each checked against the signature's names, dtypes, ranks and fixed dims before anything is
    sent: a file that does not fit is one line naming the file and the input (ScenarioError, exit 2)."""
    try:
        if os.path.getsize(path) > MAX_PAYLOAD_FILE_BYTES:
            raise ScenarioError(f"payload file {path} is larger than {MAX_PAYLOAD_FILE_BYTES >> 20} MiB")
        if path.endswith(".npy"):
            if len(signature) != 1:
                raise ScenarioError(f"{path}: a .npy file feeds a single-input signature only "
                                    f"(this one takes {', '.join(sorted(signature))})")
            raw = {next(iter(signature)): np.load(path, allow_pickle=False)}
        else:
            with open(path, "rb") as f:
                raw = orjson.loads(f.read())
    except ScenarioError:
        raise
    except (OSError, ValueError, EOFError) as e:  # EOFError: an empty .npy
        raise ScenarioError(f"cannot read payload file {path}: {e or type(e).__name__}") from None
    if isinstance(raw, dict) and ("instances" in raw or "inputs" in raw):
        raw = raw.get("instances", raw.get("inputs"))
        if isinstance(raw, list) and raw and all(isinstance(r, dict) for r in raw):  # row format, named inputs
            raw = {k: [r.get(k) for r in raw] for k in raw[0]}
    if not isinstance(raw, dict):
        raw = {next(iter(signature)): raw}
    missing = sorted(set(signature) - set(raw))
    if missing:
        raise ScenarioError(f"{path}: input {missing[0]!r} of the signature is missing")
    return {name: _checked_array(path, name, value, signature) for name, value in raw.items()}


def _checked_array(path: str, name: str, value, signature: dict) -> np.ndarray:
    if name not in signature:
        raise ScenarioError(f"{path}: input {name!r} is not in the signature (it takes {', '.join(sorted(signature))})")
    dtype, dims = signature[name]
    want = DTYPES.get(dtype)
    if want is None:
        raise ScenarioError(f"{path}: input {name!r} is {dtype}, which the load generator cannot send")
    try:
        arr = value if isinstance(value, np.ndarray) else np.array(value)
    except ValueError:  # numpy >= 1.24 on rows of different lengths
        raise ScenarioError(f"{path}: input {name!r} is ragged (rows of different lengths)") from None
    if arr.dtype == object and want is not object:
        raise ScenarioError(f"{path}: input {name!r} is ragged or mixes types; the signature takes {dtype}")
    if want is object:
        if arr.dtype.kind not in "USO":
            raise ScenarioError(f"{path}: input {name!r} holds {arr.dtype} values, the signature takes {dtype}")
        arr = np.vectorize(lambda v: v if isinstance(v, bytes) else str(v).encode(), otypes=[object])(arr)
    else:
        kinds = "b" if want is np.bool_ else "biu" if np.issubdtype(want, np.integer) else "biuf"
        if arr.dtype.kind not in kinds:
            raise ScenarioError(f"{path}: input {name!r} holds {arr.dtype} values, the signature takes {dtype}")
        arr = arr.astype(want)
    if dims and (arr.ndim != len(dims) or any(d >= 0 and d != a for d, a in zip(dims, arr.shape))):
        raise ScenarioError(f"{path}: input {name!r} has shape {list(arr.shape)}, the signature expects "
                            f"{dims} (-1: any size)")
    return arr


def _json_value(arr: np.ndarray):
    if arr.dtype == object:
        return [v.decode() if isinstance(v, bytes) else v for v in arr.ravel()] if arr.ndim == 1 \
            else [_json_value(a) for a in arr]
    return arr.tolist()


def rest_body(inputs: dict, fmt: str, signature_name: str) -> bytes:
    body = {"signature_name": signature_name} if signature_name != "serving_default" else {}
    if fmt == "columnar":
        names = list(inputs)
        body["inputs"] = _json_value(inputs[names[0]]) if len(names) == 1 else {k: _json_value(v) for k, v in inputs.items()}
    elif len(inputs) == 1:
        body["instances"] = _json_value(next(iter(inputs.values())))
    else:
        rows = len(next(iter(inputs.values())))
        body["instances"] = [{k: _json_value(v[i]) if v.ndim > 1 else v[i].item() for k, v in inputs.items()}
                             for i in range(rows)]
    return orjson.dumps(body)


def grpc_body(inputs: dict, t: Target) -> bytes:
    req = tfproto.PredictRequest()
    req.model_spec.name = t.model
    req.model_spec.signature_name = t.signature
    if t.model_version:
        req.model_spec.version.value = t.model_version
    for k, v in inputs.items():
        req.inputs[k].CopyFrom(tfproto.tensor_proto(v))
    return req.SerializeToString()


def build(t: Target, batch_size: int, seed: int, file: str = "") -> bytes:
    """The pre-serialized request body for target t (REST JSON or PredictRequest bytes).

    A .json file that already is a REST predict body ({"instances": ...} or
    {"inputs": ...}) is sent verbatim to REST targets, without asking for metadata.
    """
    if file.endswith(".json") and t.protocol == "rest":
        try:
            with open(file, "rb") as f:
                raw = f.read()
            parsed = orjson.loads(raw)
        except (OSError, ValueError) as e:
            raise ScenarioError(f"cannot read payload file {file}: {e}") from None
        if isinstance(parsed, dict) and ("instances" in parsed or "inputs" in parsed):
            return raw
    inputs = make_inputs(fetch_signature(t), batch_size, seed, file)
    return rest_body(inputs, t.format, t.signature) if t.protocol == "rest" else grpc_body(inputs, t)

"""Tensors in and out: TF Serving's JSON formats and TensorProto, to and from numpy.

Dense numeric tensors take numpy's fast paths (np.asarray on the parsed JSON
lists, np.frombuffer on tensor_content); that is the hot path of every request.
"""
from __future__ import annotations

import base64
import math

import numpy as np
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

from modelserver.status import invalid

# A decoded tensor larger than this is refused before anything is allocated (--max_tensor_bytes).
# TF Serving has no such bound: a few bytes of TensorProto can ask it for gigabytes.
MAX_TENSOR_BYTES = 128 << 20

# DataType enum -> numpy dtype, for the dtypes this server accepts.
NP_DTYPES = {
    types_pb2.DT_FLOAT: np.dtype(np.float32), types_pb2.DT_DOUBLE: np.dtype(np.float64),
    types_pb2.DT_HALF: np.dtype(np.float16), types_pb2.DT_INT8: np.dtype(np.int8),
    types_pb2.DT_INT16: np.dtype(np.int16), types_pb2.DT_INT32: np.dtype(np.int32),
    types_pb2.DT_INT64: np.dtype(np.int64), types_pb2.DT_UINT8: np.dtype(np.uint8),
    types_pb2.DT_UINT16: np.dtype(np.uint16), types_pb2.DT_UINT32: np.dtype(np.uint32),
    types_pb2.DT_UINT64: np.dtype(np.uint64), types_pb2.DT_BOOL: np.dtype(np.bool_),
    types_pb2.DT_STRING: np.dtype(object),
}
_DT_OF_NP = {v: k for k, v in NP_DTYPES.items()}


def dtype_name(dt: int) -> str:
    return types_pb2.DataType.Name(dt)


def check_supported(dt: int, what: str) -> np.dtype:
    if dt not in NP_DTYPES:
        raise invalid(f"{what} has unsupported dtype {dtype_name(dt)}")
    return NP_DTYPES[dt]


def check_shape(name: str, arr: np.ndarray, shape: list[int] | None) -> None:
    """shape: the signature's dims (-1 unknown) or None for unknown rank."""
    if shape is None:
        return
    if arr.ndim != len(shape) or any(d >= 0 and d != a for d, a in zip(shape, arr.shape)):
        def dims(ds) -> str:
            return "[" + ",".join(str(d) for d in ds) + "]"
        raise invalid(f"input {name!r} has shape {dims(arr.shape)}, the signature expects {dims(shape)} (-1: any size)")


# ---- JSON ------------------------------------------------------------------

def _json_strings(value) -> np.ndarray:
    def conv(v):
        if isinstance(v, list):
            return [conv(x) for x in v]
        if isinstance(v, dict) and set(v) == {"b64"} and isinstance(v["b64"], str):
            try:
                return base64.b64decode(v["b64"], validate=True)
            except ValueError:
                raise invalid("invalid base64 in a {\"b64\": ...} value") from None
        if isinstance(v, str):
            return v.encode()
        raise invalid(f"expected a string or {{\"b64\": ...}}, got {type(v).__name__}")
    converted = conv(value)
    arr = np.empty(np.shape(converted) if isinstance(converted, list) else (), dtype=object)
    try:
        arr[...] = converted
    except ValueError:
        raise invalid("string tensor is ragged (rows of different lengths)") from None
    return arr


def json_to_array(name: str, value, np_dtype: np.dtype) -> np.ndarray:
    if np_dtype == object:
        return _json_strings(value)
    try:
        raw = np.asarray(value)
    except (ValueError, TypeError):
        raise invalid(f"input {name!r} is ragged: all rows must have the same length") from None
    kind = raw.dtype.kind
    if kind == "O" or kind == "U":
        what = "ragged or mixed-type" if kind == "O" else "strings"
        raise invalid(f"input {name!r} has {what} values, expected {np_dtype.name}")
    if np_dtype.kind == "b" and kind != "b":
        raise invalid(f"input {name!r} expects booleans (true/false)")
    if np_dtype.kind in "iu" and kind not in "iub":
        raise invalid(f"input {name!r} expects integers, got non-integral numbers")
    try:
        with np.errstate(over="raise"):  # 1e300 as float32 is an error, not a silent inf
            arr = raw.astype(np_dtype, copy=False)
    except (ValueError, OverflowError, FloatingPointError):
        raise invalid(f"input {name!r} does not fit {np_dtype.name}") from None
    if arr.nbytes > MAX_TENSOR_BYTES:
        raise _too_large(name, arr.nbytes, MAX_TENSOR_BYTES)
    return arr


def array_to_json(arr: np.ndarray):
    """A value orjson can write (it serializes numeric numpy arrays natively, fast)."""
    if arr.dtype == object:
        def conv(v):
            if isinstance(v, bytes):
                try:
                    return v.decode()
                except UnicodeDecodeError:
                    return {"b64": base64.b64encode(v).decode()}
            return v
        return [conv(v) for v in arr.ravel()] if arr.ndim == 1 else [array_to_json(a) for a in arr]
    if arr.dtype == np.float16:
        arr = arr.astype(np.float32)
    return np.ascontiguousarray(arr)


# ---- TensorProto -----------------------------------------------------------

_VAL_FIELDS = {
    types_pb2.DT_FLOAT: "float_val", types_pb2.DT_DOUBLE: "double_val", types_pb2.DT_INT32: "int_val",
    types_pb2.DT_INT16: "int_val", types_pb2.DT_INT8: "int_val", types_pb2.DT_UINT8: "int_val",
    types_pb2.DT_UINT16: "int_val", types_pb2.DT_INT64: "int64_val", types_pb2.DT_BOOL: "bool_val",
    types_pb2.DT_STRING: "string_val", types_pb2.DT_HALF: "half_val", types_pb2.DT_UINT32: "uint32_val",
    types_pb2.DT_UINT64: "uint64_val",
}


def _too_large(name: str, nbytes: int, limit: int):
    return invalid(f"input {name!r} would take {nbytes} bytes decoded, above the server's limit of {limit} "
                   "bytes (--max_tensor_bytes)")


def proto_to_array(name: str, proto: tensor_pb2.TensorProto, max_bytes: int | None = None) -> np.ndarray:
    """A TensorProto as TensorFlow's Tensor::FromProto reads it: tensor_content must hold exactly
    the shape's bytes; a typed value field fills the shape from its values: none at all is all
    zeros (empty strings), fewer than the shape needs are padded with the last one, more are
    cut at the shape's size."""
    limit = MAX_TENSOR_BYTES if max_bytes is None else max_bytes
    np_dtype = check_supported(proto.dtype, f"input {name!r}")
    if proto.tensor_shape.unknown_rank:
        raise invalid(f"input {name!r} has unknown rank")
    shape = [d.size for d in proto.tensor_shape.dim]
    if any(d < 0 for d in shape):
        raise invalid(f"input {name!r} has a negative dimension in {shape}")
    count = math.prod(shape)  # Python ints: no int64 overflow on absurd shapes
    if proto.tensor_content:
        if np_dtype == object:
            raise invalid(f"input {name!r}: string tensors cannot use tensor_content")
        if len(proto.tensor_content) != count * np_dtype.itemsize:
            raise invalid(f"input {name!r}: tensor_content has {len(proto.tensor_content)} bytes, "
                          f"shape {shape} needs {count * np_dtype.itemsize}")
        return np.frombuffer(proto.tensor_content, dtype=np_dtype).reshape(shape)
    values = getattr(proto, _VAL_FIELDS[proto.dtype])
    n = len(values)
    if np_dtype == object:  # each element is a bytes object: the last one is what padding repeats
        last = len(values[-1]) if n else 0
        nbytes = count * (8 + last) if n < count else sum(len(v) for v in values[:count]) + 8 * count
    else:
        nbytes = count * np_dtype.itemsize
    if nbytes > limit:
        raise _too_large(name, nbytes, limit)
    if count == 0:
        return np.zeros(shape, dtype=np_dtype)
    if proto.dtype == types_pb2.DT_HALF:
        flat = np.array(values[:count], dtype=np.uint16).view(np.float16)
    elif np_dtype == object:
        flat = np.empty(min(n, count), dtype=object)
        flat[:] = list(values[:count])
    else:
        try:
            flat = np.array(values[:count], dtype=np_dtype)
        except (OverflowError, ValueError):
            raise invalid(f"input {name!r} has values that do not fit {np_dtype.name}") from None
    if n == 0:
        return np.full(shape, b"", dtype=object) if np_dtype == object else np.zeros(shape, dtype=np_dtype)
    if n < count:
        flat = np.concatenate([flat, np.full(count - n, flat[-1], dtype=np_dtype)])
    return flat.reshape(shape)


def array_to_proto(arr: np.ndarray) -> tensor_pb2.TensorProto:
    """An output as TF Serving's Predict answers it: Tensor::AsProtoField, every value in the dtype's
    typed field (float_val, int64_val, ...; half as its bits in half_val), never tensor_content (TF
    Serving's kAsProtoField, kept for compatibility with clients that read the typed fields)."""
    dt = _DT_OF_NP.get(arr.dtype)
    if dt is None:
        raise invalid(f"output dtype {arr.dtype} cannot be returned")
    proto = tensor_pb2.TensorProto(
        dtype=dt, tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in arr.shape]))
    field = getattr(proto, _VAL_FIELDS[dt])
    if dt == types_pb2.DT_STRING:
        field.extend(bytes(v) for v in arr.ravel())
    elif dt == types_pb2.DT_HALF:
        field.extend(arr.ravel().view(np.uint16).tolist())
    else:
        field.extend(arr.ravel().tolist())
    return proto

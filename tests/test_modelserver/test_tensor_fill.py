"""TensorProto -> ndarray as TensorFlow's Tensor::FromProto does it, for every dtype the server
accepts: tensor_content exact, a value field zero-filled when empty, padded with its last value
when short, cut when long; and every decoded size bounded before anything is allocated."""
import tracemalloc

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import tensor_pb2, types_pb2

from modelserver import tensors
from modelserver.status import ServingError

DTYPES = sorted(tensors.NP_DTYPES, key=types_pb2.DataType.Name)


def proto(dt: int, shape: list, values: list) -> tensor_pb2.TensorProto:
    p = tensor_pb2.TensorProto(dtype=dt)
    for d in shape:
        p.tensor_shape.dim.add(size=d)
    field = getattr(p, tensors._VAL_FIELDS[dt])
    if dt == types_pb2.DT_HALF:
        values = np.asarray(values, np.float16).view(np.uint16).tolist()
    elif dt == types_pb2.DT_STRING:
        values = [str(v).encode() for v in values]
    elif dt == types_pb2.DT_BOOL:
        values = [bool(v) for v in values]
    field.extend(values)
    return p


@pytest.mark.parametrize("dt", DTYPES, ids=types_pb2.DataType.Name)
@pytest.mark.parametrize("given_values", [[], [3], [1, 2], [1, 2, 3, 4, 5, 6]], ids=["none", "one", "short", "exact"])
def test_fill_rules_match_tensorflows_own_conversion(dt, given_values):
    p = proto(dt, [2, 3], given_values)
    got = tensors.proto_to_array("x", p)
    want = tf.make_ndarray(p)  # TensorFlow's reference: zeros when empty, edge-padded when short
    if want.dtype == object:  # TF's C++ default string is empty bytes (make_ndarray writes '')
        want = np.vectorize(lambda v: v if isinstance(v, bytes) else str(v).encode(), otypes=[object])(want)
    assert got.shape == (2, 3) and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dt", DTYPES, ids=types_pb2.DataType.Name)
def test_more_values_than_the_shape_holds_are_cut(dt):
    got = tensors.proto_to_array("x", proto(dt, [2], [1, 0, 1, 1]))
    want = tf.make_ndarray(proto(dt, [2], [1, 0]))
    np.testing.assert_array_equal(got, want)


def test_tensor_content_must_be_exact():
    p = tf.make_tensor_proto(np.ones((2, 3), np.float32))
    assert tensors.proto_to_array("x", p).shape == (2, 3)
    p.tensor_content = p.tensor_content[:-4]
    with pytest.raises(ServingError, match="tensor_content has 20 bytes"):
        tensors.proto_to_array("x", p)


def test_a_tiny_request_cannot_ask_for_gigabytes():
    # 40 bytes on the wire: DT_FLOAT [250000, 784] from one float_val (the hardening issue's case)
    p = proto(types_pb2.DT_FLOAT, [250000, 784], [1.0])
    assert p.ByteSize() < 64
    tracemalloc.start()
    with pytest.raises(ServingError, match="784000000 bytes decoded, above the server's limit"):
        tensors.proto_to_array("x", p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 20  # refused before allocating
    with pytest.raises(ServingError, match="above the server's limit"):
        tensors.proto_to_array("x", proto(types_pb2.DT_FLOAT, [2 ** 62, 2 ** 62], [1.0]))  # no int64 wrap


@settings(max_examples=300, deadline=None)
@given(dt=st.sampled_from(DTYPES), shape=st.lists(st.integers(0, 10 ** 6), max_size=4),
       n=st.integers(0, 8), limit=st.sampled_from([1 << 10, 1 << 16]))
def test_any_shape_and_value_count_stays_within_the_limit(dt, shape, n, limit):
    p = proto(dt, shape, list(range(1, n + 1)))
    tracemalloc.start()
    try:
        arr = tensors.proto_to_array("x", p, max_bytes=limit)
    except ServingError as e:
        assert e.code == "INVALID_ARGUMENT"
        arr = None
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * limit + (64 << 10), (shape, n, peak)
    if arr is not None:
        assert list(arr.shape) == shape


@pytest.mark.parametrize("dt", DTYPES, ids=types_pb2.DataType.Name)
def test_outputs_use_the_dtypes_typed_field_like_as_proto_field(dt):
    """array_to_proto answers as TF Serving's Predict (Tensor::AsProtoField): every value in the
    dtype's typed field, tensor_content empty, and TensorFlow reads back the same array."""
    arr = tensors.proto_to_array("x", proto(dt, [2, 3], [1, 0, 2, 3, 1, 4]))
    out = tensors.array_to_proto(arr)
    assert out.tensor_content == b"" and out.dtype == dt
    assert len(getattr(out, tensors._VAL_FIELDS[dt])) == 6
    back = tf.make_ndarray(out)
    if back.dtype == object:
        back = back.astype(object)
    np.testing.assert_array_equal(back, arr)

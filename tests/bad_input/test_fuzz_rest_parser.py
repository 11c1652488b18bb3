"""Fuzzing the REST predict parser (hypothesis, bounded): whatever JSON arrives, the parser either
returns arrays of the signature's dtype and shape or raises TF Serving's INVALID_ARGUMENT, never
anything else; and arbitrary bytes posted to a live server never get a 5xx."""
import json

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensorflow.core.framework import types_pb2

from modelserver.rest import decode_request
from modelserver.servable import Signature, TensorSpec
from modelserver.status import ServingError

SIGNATURES = {
    "dense": Signature("serving_default", "", {"x": TensorSpec(types_pb2.DT_FLOAT, [-1, 3])}, {}, {}, {}),
    "ids": Signature("serving_default", "", {"ids": TensorSpec(types_pb2.DT_INT64, [-1])}, {}, {}, {}),
    "two": Signature("serving_default", "", {"a": TensorSpec(types_pb2.DT_STRING, [-1]),
                                              "b": TensorSpec(types_pb2.DT_BOOL, [-1, 2])}, {}, {}, {}),
}

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
                    st.fixed_dictionaries({"b64": st.text(max_size=8)}))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.sampled_from(["x", "a", "b", "ids", "z"]),
                                                                       inner, max_size=3)), max_leaves=20)
bodies = st.one_of(
    values,
    st.fixed_dictionaries({"instances": values}, optional={"signature_name": values}),
    st.fixed_dictionaries({"inputs": values}, optional={"signature_name": values}),
)


def _encode(body) -> bytes:
    return json.dumps(body).encode()  # not orjson: integers beyond 64 bits must reach the server too


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies, sig=st.sampled_from(sorted(SIGNATURES)))
def test_parser_returns_valid_arrays_or_invalid_argument(body, sig):
    signature = SIGNATURES[sig]
    try:
        _, _, decode = decode_request(body)
        arrays = decode(signature)
    except ServingError as e:
        assert e.code == "INVALID_ARGUMENT" and e.message
        return
    assert set(arrays) <= set(signature.inputs)
    for name, arr in arrays.items():
        assert arr.dtype == signature.inputs[name].np_dtype, (name, arr.dtype)


@pytest.mark.integration
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(raw=st.one_of(st.binary(max_size=300), bodies.map(_encode),
                     st.builds(lambda a, b: a + b, bodies.map(_encode), st.binary(max_size=8))))
def test_live_server_never_answers_5xx_to_arbitrary_bodies(server, raw):
    r = requests.post(server.url("/v1/models/my_model:predict"), data=raw, timeout=10,
                      headers={"Content-Type": "application/json"})
    assert r.status_code in (200, 400), (r.status_code, r.text[:200])
    assert "error" in r.json() or "predictions" in r.json() or "outputs" in r.json()

"""Classify, Regress and MultiInference as TF Serving runs them, for both front ends.

A request carries tf.Examples (an `Input`: a list, or a list with a context merged into each);
they are serialized and fed as the one DT_STRING input of a signature whose method_name says what
it does; its outputs become a ClassificationResult ("classes" [n, k] labels, "scores" [n, k]) or
a RegressionResult ("outputs" [n] or [n, 1]). A context is merged into an example by concatenating
their serialized bytes, which protobuf parses as a merge: what TF Serving does too.
"""
from __future__ import annotations

import base64

import numpy as np

from modelserver.status import invalid

CLASSIFY, REGRESS, PREDICT = "tensorflow/serving/classify", "tensorflow/serving/regress", "tensorflow/serving/predict"
METHOD = {"classify": CLASSIFY, "regress": REGRESS}


def serialized_examples(inp) -> np.ndarray:
    """The Input proto's examples as a [n] DT_STRING tensor (context merged into each)."""
    kind = inp.WhichOneof("kind")
    if kind == "example_list":
        examples, context = inp.example_list.examples, b""
    elif kind == "example_list_with_context":
        examples = inp.example_list_with_context.examples
        context = inp.example_list_with_context.context.SerializeToString()
    else:
        raise invalid("Input is empty")
    if not examples:
        raise invalid("Input is empty")
    out = np.empty(len(examples), dtype=object)
    out[:] = [context + e.SerializeToString() for e in examples]
    return out


# --enable_signature_method_name_check; off by default as in TF Serving, so Classify and Regress run on a TF2
# model's signatures, which tf.saved_model.save always marks tensorflow/serving/predict.
CHECK_METHOD_NAME = False


def check_signature(sig, method: str) -> str:
    """The graph input examples are fed to, after TF Serving's PreProcessClassification/Regression checks:
    the method name only when the flag asks, then one input named "inputs" and the outputs the method reads
    (its messages, without the SignatureDef dump)."""
    what = "classification" if method == CLASSIFY else "regression"
    if CHECK_METHOD_NAME and sig.method_name != method:
        raise invalid(f"Expected {what} signature method_name to be {method}. Was: {sig.method_name}")
    if len(sig.inputs) != 1:
        raise invalid("Expected one input Tensor.")
    n_out = len(sig.outputs)
    if method == CLASSIFY and n_out not in (1, 2):
        raise invalid(f"Expected one or two output Tensors, found {n_out}")
    if method == REGRESS and n_out != 1:
        raise invalid("Expected one output Tensor.")
    if "inputs" not in sig.inputs:
        raise invalid(f"No {what} inputs found in SignatureDef {sig.name!r} (its input must be named inputs)")
    if method == REGRESS and "outputs" not in sig.outputs:
        raise invalid(f"No regression outputs found in SignatureDef {sig.name!r} (its output must be named outputs)")
    if method == CLASSIFY and not {"classes", "scores"} & set(sig.outputs):
        raise invalid('Expected classification signature outputs to contain at least one of "classes" or "scores". '
                      f"Signature was: {sig.name!r}")
    return "inputs"


def classification_result(outputs: dict, n: int, result) -> None:
    """Fill a ClassificationResult from the "classes" and/or "scores" outputs of n examples."""
    classes, scores = outputs.get("classes"), outputs.get("scores")
    if classes is None and scores is None:
        raise invalid("Classification signature must have an output named classes or scores")
    k = None
    for name, arr in (("classes", classes), ("scores", scores)):
        if arr is None:
            continue
        arr = arr.reshape(n, -1) if arr.ndim == 1 and arr.shape[0] == n else arr
        if arr.ndim != 2 or arr.shape[0] != n or (k is not None and arr.shape[1] != k):
            raise invalid(f"Expected {name} tensor of shape [{n}, num_classes], got {list(arr.shape)}")
        k = arr.shape[1]
        if name == "classes":
            classes = arr
        else:
            scores = arr
    for i in range(n):
        c = result.classifications.add()
        for j in range(k):
            cls = c.classes.add()
            if classes is not None:
                label = classes[i, j]
                cls.label = label.decode(errors="replace") if isinstance(label, bytes) else str(label)
            if scores is not None:
                cls.score = float(scores[i, j])


def regression_result(outputs: dict, n: int, result) -> None:
    values = outputs.get("outputs")
    if values is None:
        raise invalid("Regression signature must have an output named outputs")
    if values.size != n or not (values.ndim == 1 or (values.ndim == 2 and values.shape[1] == 1)):
        raise invalid(f"Expected output Tensor shape to be [{n}] or [{n}, 1], got {list(values.shape)}")
    for v in values.reshape(n):
        result.regressions.add(value=float(v))


# ---- REST: JSON examples and results ----------------------------------------------------------

def _feature(name: str, value):
    from tensorflow.core.example import feature_pb2

    values = value if isinstance(value, list) else [value]
    f = feature_pb2.Feature()
    kinds = {type(v) for v in values}
    if kinds <= {int} and values:
        f.int64_list.value.extend(values)
    elif kinds <= {int, float} and values:
        f.float_list.value.extend(float(v) for v in values)
    elif all(isinstance(v, str) or (isinstance(v, dict) and set(v) == {"b64"}) for v in values) and values:
        try:
            f.bytes_list.value.extend(v.encode() if isinstance(v, str) else base64.b64decode(v["b64"], validate=True)
                                      for v in values)
        except (ValueError, TypeError):
            raise invalid(f"feature {name!r}: invalid base64 in a {{\"b64\": ...}} value") from None
    else:
        raise invalid(f"feature {name!r}: expected a number, a string, {{\"b64\": ...}} or a list of one kind of "
                      f"them, got {value!r}"[:200])
    return f


def _example(obj, where: str):
    from tensorflow.core.example import example_pb2

    if not isinstance(obj, dict):
        raise invalid(f"{where} must be an object of feature name to value(s)")
    ex = example_pb2.Example()
    for k, v in obj.items():
        ex.features.feature[k].CopyFrom(_feature(k, v))
    return ex


def input_from_json(body: dict):
    """(signature name, Input proto) of a :classify / :regress body, as TF Serving reads it."""
    from tensorflow_serving.apis import input_pb2

    if not isinstance(body, dict):
        raise invalid("JSON body must be an object with \"examples\"")
    sig_name = body.get("signature_name", "")
    if not isinstance(sig_name, str):
        raise invalid("\"signature_name\" must be a string")
    examples = body.get("examples")
    if not isinstance(examples, list) or not examples:
        raise invalid("\"examples\" must be a non-empty list of objects")
    inp = input_pb2.Input()
    if "context" in body:
        ctx = _example(body["context"], "\"context\"")
        clash = set(ctx.features.feature) & {k for e in examples if isinstance(e, dict) for k in e}
        if clash:
            raise invalid(f"features {sorted(clash)} appear in both \"context\" and \"examples\"")
        inp.example_list_with_context.context.CopyFrom(ctx)
        target = inp.example_list_with_context.examples
    else:
        target = inp.example_list.examples
    for i, e in enumerate(examples):
        target.add().CopyFrom(_example(e, f"examples[{i}]"))
    return sig_name, inp


def classification_json(result) -> dict:
    return {"results": [[[c.label, c.score] for c in cl.classes] for cl in result.classifications]}


def regression_json(result) -> dict:
    return {"results": [r.value for r in result.regressions]}

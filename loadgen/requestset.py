"""A request set: N distinct requests to one target, as its model's own clients send them, pre-serialized.

Real traffic is not one body sent again and again: a run cycles through `count` different requests (64 by
default) in a seeded order, each already in its wire format, so the hot path only picks the next bytes. The
API follows the signature's method_name (predict, classify, regress), or is named (multi: gRPC
MultiInference over the model's classify and regress signatures). Where the signature takes serialized
tf.Example, the Examples are built from the feature spec of the model's own graph (loadgen/examples.py):
REST predict sends them as {"b64": ...}, REST classify/regress as JSON feature maps, gRPC as Examples.

    reqs = build(target, rows=32, seed=1, count=64, model_dir="models/build/tf2.9/my_model/1")
    reqs.bodies[reqs.order(seed=1)[0]]
"""
from __future__ import annotations

import base64
import dataclasses

import numpy as np
import orjson

from fileio.atomic import write_atomic
from loadgen import examples as ex_mod
from loadgen import images, recordfile
from loadgen import payload as payload_mod
from loadgen import tfproto
from loadgen.scenario import ScenarioError, Target

APIS = ("auto", "predict", "classify", "regress", "multi")
METHODS = {"tensorflow/serving/predict": "predict", "tensorflow/serving/classify": "classify",
           "tensorflow/serving/regress": "regress"}
GRPC_PATH = {"predict": "/tensorflow.serving.PredictionService/Predict",
             "classify": "/tensorflow.serving.PredictionService/Classify",
             "regress": "/tensorflow.serving.PredictionService/Regress",
             "multi": "/tensorflow.serving.PredictionService/MultiInference"}
MAX_SET_BYTES = 256 * 2**20  # every body of a set is held in memory for the whole run
MAX_COUNT = 100_000


@dataclasses.dataclass(frozen=True)
class RequestSet:
    bodies: tuple           # pre-serialized: REST JSON bodies or gRPC request messages
    api: str = "predict"    # predict, classify, regress, multi
    source: str = "one body"
    signature: str = "serving_default"

    def __post_init__(self):
        if not self.bodies:
            raise ScenarioError("a request set needs at least one request")

    @property
    def rest_path(self) -> str:
        if self.api == "multi":
            raise ScenarioError("MultiInference has no REST API in TF Serving; use PROTOCOL=grpc (or API=classify)")
        return f":{self.api}"

    @property
    def grpc_path(self) -> str:
        return GRPC_PATH[self.api]

    def order(self, seed: int) -> list:
        """The indices of the bodies in the order a run sends them, cycled: a seeded permutation."""
        return [int(i) for i in np.random.default_rng(seed).permutation(len(self.bodies))]


def one(body: bytes) -> RequestSet:
    return RequestSet((body,))


def pick_api(t: Target, sigs: dict, api: str) -> tuple:
    """(api, signature name): the signature's own method by default; a named API takes the target's signature
    when its method fits, else the model's first signature of that method."""
    if api not in APIS:
        raise ScenarioError(f"API must be one of {', '.join(APIS)}, got {api!r}")
    sig = payload_mod.signature_of(t, sigs)
    own = METHODS.get(sig["method"], "predict")
    if api in ("auto", own):
        return own, t.signature
    if api == "multi":
        return "multi", t.signature
    if api == "predict":
        return "predict", t.signature  # TF Serving runs Predict on any signature
    fits = [n for n, s in sorted(sigs.items()) if METHODS.get(s["method"]) == api]
    if not fits:
        raise ScenarioError(f"{t.name}: model {t.model!r} has no {api} signature (its signatures: " + ", ".join(
            f"{n} {METHODS.get(s['method'], s['method'])}" for n, s in sorted(sigs.items()) if not n.startswith("__"))
            + ")")
    return api, fits[0]


def _example_input(sig: dict, spec: dict) -> str | None:
    """The input that takes serialized Examples: the one string input of a signature whose graph parses them."""
    strings = [k for k, (dtype, _) in sig["inputs"].items() if dtype == "DT_STRING"]
    return strings[0] if spec and len(strings) == 1 else None


def build(t: Target, rows: int, seed: int, count: int = 64, model_dir: str = "", api: str = "auto",
          file: str = "", requests_file: str = "") -> RequestSet:
    """`count` distinct requests of `rows` rows each for target t (a payload file: one request, as before; a
    requests file: the requests it holds, loadgen/recordfile.py)."""
    if not 1 <= count <= MAX_COUNT:
        raise ScenarioError(f"requests must be 1..{MAX_COUNT}, got {count}")
    if file:
        return one(payload_mod.build(t, rows, seed, file))
    if requests_file.endswith(".jsonl"):
        return rest_bodies(t, api, recordfile.resolve(requests_file, model_dir), count)
    sigs = payload_mod.fetch_signatures(t)
    api, sig_name = pick_api(t, sigs, api)
    sig = sigs[sig_name]
    spec = ex_mod.read_spec(model_dir) if model_dir else {}
    vocab = ex_mod.vocabularies(model_dir, spec) if spec else {}
    example_input = _example_input(sig, spec)
    image_input = None if example_input or not model_dir or not ex_mod.decodes_images(model_dir) else \
        next((k for k, (d, _) in sig["inputs"].items() if d == "DT_STRING"), None)
    if requests_file:
        return from_file(dataclasses.replace(t, signature=sig_name), api, sig, sigs, spec, example_input, rows, count,
                         recordfile.resolve(requests_file, model_dir))
    if api != "predict" and not spec:
        raise ScenarioError(f"{t.name}: {api} sends tf.Examples, and no feature spec is known: give the model's path "
                            "(MODEL=, --model-path) so it is read from the graph")
    if api == "predict" and example_input is None and image_input is None \
            and any(d == "DT_STRING" for d, _ in sig["inputs"].values()) and not model_dir:
        raise ScenarioError(f"{t.name}: signature {sig_name!r} takes strings, which may be serialized tf.Examples: "
                            "give the model's path (MODEL=, --model-path) so their feature spec is read from the graph")
    target = dataclasses.replace(t, signature=sig_name)
    bodies, total = [], 0
    for i in range(count):
        body = _body(target, api, sig, spec, vocab, example_input, rows, seed + i, sigs, image_input)
        total += len(body)
        if total > MAX_SET_BYTES:
            raise ScenarioError(f"{count} requests of {rows} rows take over {MAX_SET_BYTES >> 20} MiB; send fewer "
                                "(REQUESTS_COUNT=, --request-count) or fewer rows")
        bodies.append(body)
    what = "tf.Examples from the graph's parse spec" if spec and (example_input or api != "predict") else \
        "JPEG images for the graph's image decoder" if image_input else "tensors from the signature"
    return RequestSet(tuple(bodies), api, f"{count} distinct requests, {what}", sig_name)


def tensors(t: Target, rows: int, seed: int, count: int, model_dir: str, api: str = "auto",
            requests_file: str = "") -> tuple:
    """(signature name, [{input: ndarray}, ...]): the requests build() makes for a gRPC target t, decoded into the
    input tensors of the signature they run (serialized Examples as an object array of bytes): what the in-process
    ceiling and op trace feed, so they run what the servers get."""
    if t.protocol != "grpc":
        raise ScenarioError("tensors() decodes gRPC requests: give the server's gRPC address")
    reqs = build(t, rows, seed, count, model_dir, api, requests_file=requests_file)
    if reqs.api == "predict":
        return reqs.signature, [{k: tfproto.tensor_array(v) for k, v in tfproto.PredictRequest.FromString(b).inputs.items()}
                                for b in reqs.bodies]
    kind = {"classify": tfproto.ClassificationRequest, "regress": tfproto.RegressionRequest,
            "multi": tfproto.MultiInferenceRequest}[reqs.api]
    name = next(iter(payload_mod.signature_of(dataclasses.replace(t, signature=reqs.signature),
                                              payload_mod.fetch_signatures(t))["inputs"]))
    return reqs.signature, [{name: np.array([e.SerializeToString() for e in kind.FromString(b).input.example_list.examples],
                                            dtype=object)} for b in reqs.bodies]


def write_tensors(path, signature: str, by_rows: dict) -> None:
    """{rows: [{input: ndarray}, ...]} of a signature as JSON for modelserver/requestfile.py (which reads it in a
    version's venv): numbers as base64 of their little-endian bytes, strings as a list of base64."""
    def one(a: np.ndarray) -> dict:
        if a.dtype == object:
            return {"dtype": "string", "shape": list(a.shape), "b64": [base64.b64encode(b).decode() for b in a.ravel()]}
        le = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))
        return {"dtype": a.dtype.name, "shape": list(a.shape), "data": base64.b64encode(le.tobytes()).decode()}
    write_atomic(path, orjson.dumps({"signature": signature, "rows": {
        str(r): [{k: one(v) for k, v in req.items()} for req in reqs] for r, reqs in by_rows.items()}}))


def _body(t: Target, api: str, sig: dict, spec: dict, vocab: dict, example_input: str | None, rows: int, seed: int,
          sigs: dict, image_input: str | None = None) -> bytes:
    if api != "predict":
        return _inference_body(t, api, ex_mod.examples(spec, rows, seed, vocab), sigs)
    inputs = payload_mod.make_inputs(sig["inputs"], rows, seed)
    if example_input:
        serialized = [e.SerializeToString() for e in ex_mod.examples(spec, rows, seed, vocab)]
        inputs[example_input] = np.array(serialized, dtype=object)
    if image_input:
        inputs[image_input] = images.jpegs(rows, seed)
    return _predict_body(t, inputs, example_input or image_input)


def from_file(t: Target, api: str, sig: dict, sigs: dict, spec: dict, example_input: str | None, rows: int,
              count: int, path: str) -> RequestSet:
    """The requests a file holds: REST bodies (JSON lines), TF Serving's warmup logs, or tf.Examples grouped
    `rows` to a request, at most `count` of them."""
    records = recordfile.tfrecords(path)
    logs = recordfile.warmup_logs(records)
    if logs is not None:
        return _from_logs(t, api, logs, count, path)
    if not spec:
        raise ScenarioError(f"REQUESTS {path} holds tf.Examples: give the model's path (MODEL=, --model-path) so "
                            "they are checked against the graph's parse spec")
    if api == "predict" and not example_input:
        raise ScenarioError(f"REQUESTS {path} holds tf.Examples, and signature {t.signature!r} takes no serialized "
                            "Examples: name one that does (SIGNATURE=, API=classify)")
    exs = recordfile.examples_of(records, spec, path)
    n = min(count, max(1, len(exs) // rows))
    bodies = []
    for i in range(n):
        group = [exs[(i * rows + j) % len(exs)] for j in range(rows)]
        if api != "predict":
            bodies.append(_inference_body(t, api, group, sigs))
            continue
        inputs = payload_mod.make_inputs(sig["inputs"], rows, i)
        inputs[example_input] = np.array([e.SerializeToString() for e in group], dtype=object)
        bodies.append(_predict_body(t, inputs, example_input))
    return RequestSet(tuple(bodies), api, f"{n} requests of {rows} tf.Examples from {path} ({len(exs)} Examples)",
                      t.signature)


def rest_bodies(t: Target, api: str, path: str, count: int) -> RequestSet:
    """JSON lines of REST bodies, sent as they are: predict bodies (instances, inputs) need no metadata; bodies
    of Examples go to the API named, else to the signature's own method."""
    if t.protocol != "rest":
        raise ScenarioError(f"REQUESTS {path}: JSON lines are REST bodies; use PROTOCOL=rest, or a TFRecord")
    bodies = recordfile.json_lines(path)[:count]
    if api == "auto":
        api = "predict" if b'"examples"' not in bodies[0] else pick_api(t, payload_mod.fetch_signatures(t), api)[0]
    return RequestSet(tuple(bodies), api, f"{len(bodies)} REST bodies from {path}", t.signature)


def _from_logs(t: Target, api: str, logs: list, count: int, path: str) -> RequestSet:
    """Warmup logs of the API asked for (auto: of the first log's), re-addressed to the target's model."""
    want = logs[0][0] if api in ("auto", logs[0][0]) else api
    mine = [req for kind, req in logs if kind == want][:count]
    if not mine:
        raise ScenarioError(f"REQUESTS {path} holds no {want} logs (it holds: "
                            f"{', '.join(sorted({k for k, _ in logs}))})")
    bodies = []
    for req in mine:
        specs = [task.model_spec for task in req.tasks] if want == "multi" else [req.model_spec]
        for ms in specs:
            ms.name = t.model
        if t.protocol == "grpc":
            bodies.append(req.SerializeToString())
        elif want == "multi":
            raise ScenarioError("MultiInference has no REST API in TF Serving; use PROTOCOL=grpc")
        elif want == "predict":
            target = dataclasses.replace(t, signature=req.model_spec.signature_name or t.signature)
            inputs = {k: tfproto.tensor_array(v) for k, v in req.inputs.items()}
            bodies.append(_predict_body(target, inputs, next((k for k, v in inputs.items() if v.dtype == object), None)))
        else:
            body = {"examples": [ex_mod.as_json(e) for e in req.input.example_list.examples]}
            if req.model_spec.signature_name not in ("", "serving_default"):
                body["signature_name"] = req.model_spec.signature_name
            bodies.append(orjson.dumps(body))
    return RequestSet(tuple(bodies), want, f"{len(bodies)} {want} requests from the warmup records {path}",
                      t.signature)


def _predict_body(t: Target, inputs: dict, binary_input: str | None) -> bytes:
    """A predict request of these tensors; a string input of serialized bytes goes over REST as {"b64": ...}."""
    if t.protocol == "grpc":
        return payload_mod.grpc_body(inputs, t)
    if binary_input is None:
        return payload_mod.rest_body(inputs, t.format, t.signature)
    if len(inputs) > 1:
        raise ScenarioError(f"{t.name}: a signature with serialized Examples beside other inputs is not "
                            "supported over REST; use PROTOCOL=grpc")
    body = {"instances": [{"b64": base64.b64encode(b).decode()} for b in inputs[binary_input].ravel()]}
    if t.signature != "serving_default":
        body["signature_name"] = t.signature
    return orjson.dumps(body)


def _inference_body(t: Target, api: str, exs: list, sigs: dict) -> bytes:
    if t.protocol == "rest":  # TF Serving's REST classify/regress: Examples as JSON feature maps
        body = {"examples": [ex_mod.as_json(e) for e in exs]}
        if t.signature != "serving_default":
            body["signature_name"] = t.signature
        return orjson.dumps(body)
    if api == "multi":
        req = tfproto.MultiInferenceRequest()
        for name, s in sorted(sigs.items()):
            if METHODS.get(s["method"]) in ("classify", "regress"):
                task = req.tasks.add(method_name=s["method"])
                task.model_spec.name, task.model_spec.signature_name = t.model, name
        if not req.tasks:
            raise ScenarioError(f"{t.name}: MultiInference needs classify or regress signatures; the model has none")
    else:
        req = tfproto.ClassificationRequest() if api == "classify" else tfproto.RegressionRequest()
        req.model_spec.name, req.model_spec.signature_name = t.model, t.signature
        if t.model_version:
            req.model_spec.version.value = t.model_version
    req.input.example_list.examples.extend(exs)
    return req.SerializeToString()

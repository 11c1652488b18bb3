"""tf.Example requests for signatures that parse them: the feature spec read from the SavedModel's own graph.

TF Serving's metadata says only that such a signature takes a string tensor; which features it parses, with which
types and shapes, is in the graph: the ParseExample / ParseExampleV2 / ParseSingleExample nodes (in the graph
itself, or in its function library for a tf.function export), their key constants and their type and shape attrs.
That is read here from saved_model.pb without TensorFlow (loadgen/tfproto.py declares the few fields), so the
load generator can build Examples the model really parses. String features take their values from the model's
vocabulary assets where one names the feature (or the model has a single one), else seeded tokens.

    spec = read_spec("models/build/zoo/recommender/1")   # {"user": Feature("string", "dense", (1,)), ...}
    rows = examples(spec, 8, seed=3, vocab=vocabularies("models/build/zoo/recommender/1", spec))
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from loadgen import tfproto
from core.errors import UsageError

FLOAT, INT64, STRING = 1, 9, 7  # DataType values a parse op takes
KINDS = {FLOAT: "float", INT64: "int64", STRING: "string"}
MAX_PB_BYTES = 512 * 2**20  # saved_model.pb larger than this is refused: it is read whole
MAX_VOCAB_LINES = 100_000


class SpecError(UsageError):
    """The model's parse spec cannot be read or does not fit a request file; one line."""


@dataclasses.dataclass(frozen=True)
class Feature:
    dtype: str          # float, int64, string
    kind: str           # dense (a fixed shape), sparse or ragged (a varying count of values)
    shape: tuple = ()   # dense: the shape of one Example's value; () is a scalar
    required: bool = False  # dense without a default: an Example without it does not parse


def _consts(nodes) -> dict:
    return {n.name: n for n in nodes if n.op == "Const"}


def _strings(consts: dict, ref: str) -> list:
    """The strings of the Const a node input names ("keys", "keys:0", "keys:output:0" in a function)."""
    node = consts.get(ref.lstrip("^").split(":", 1)[0])
    if node is None:
        raise SpecError(f"a parse op's keys come from {ref!r}, not a constant: its feature spec cannot be read")
    return [v.decode() for v in node.attr["value"].tensor.string_val]


def _shape(proto) -> tuple:
    return tuple(int(d.size) for d in proto.dim)


def _required(consts: dict, ref: str) -> bool:
    """A dense feature is required where its default is an empty constant (TF's FixedLenFeature without one)."""
    node = consts.get(ref.lstrip("^").split(":", 1)[0])
    return node is not None and any(d.size == 0 for d in node.attr["value"].tensor.tensor_shape.dim)


def _features(sparse: list, sparse_types: list, dense: list, dense_types: list, dense_shapes: list,
              ragged: list = (), ragged_types: list = (), required: list = ()) -> dict:
    out = {k: Feature(KINDS.get(t, "float"), "sparse") for k, t in zip(sparse, sparse_types)}
    out.update({k: Feature(KINDS.get(t, "float"), "ragged") for k, t in zip(ragged, ragged_types)})
    required = list(required) or [False] * len(dense)
    out.update({k: Feature(KINDS.get(t, "float"), "dense", _shape(s), r)
                for k, t, s, r in zip(dense, dense_types, dense_shapes, required)})
    return out


def _parse_node(node, consts: dict) -> dict:
    a = node.attr
    if node.op == "ParseExampleV2":  # inputs: serialized, names, sparse_keys, dense_keys, ragged_keys, defaults
        dense = _strings(consts, node.input[3])
        return _features(_strings(consts, node.input[2]), list(a["sparse_types"].list.type),
                         dense, list(a["Tdense"].list.type), list(a["dense_shapes"].list.shape),
                         _strings(consts, node.input[4]), list(a["ragged_value_types"].list.type),
                         [_required(consts, ref) for ref in node.input[5:5 + len(dense)]])
    if node.op == "ParseExample":  # inputs: serialized, names, sparse_keys x Nsparse, dense_keys x Ndense, defaults
        ns, nd = a["Nsparse"].i, a["Ndense"].i
        keys = [_strings(consts, ref)[0] for ref in node.input[2:2 + ns + nd]]
        return _features(keys[:ns], list(a["sparse_types"].list.type), keys[ns:], list(a["Tdense"].list.type),
                         list(a["dense_shapes"].list.shape),
                         required=[_required(consts, ref) for ref in node.input[2 + ns + nd:2 + ns + 2 * nd]])
    # ParseSingleExample: the keys are attrs; inputs: serialized, dense defaults
    dense = [k.decode() for k in a["dense_keys"].list.s]
    return _features([k.decode() for k in a["sparse_keys"].list.s], list(a["sparse_types"].list.type),
                     dense, list(a["Tdense"].list.type), list(a["dense_shapes"].list.shape),
                     required=[_required(consts, ref) for ref in node.input[1:1 + len(dense)]])


PARSE_OPS = ("ParseExample", "ParseExampleV2", "ParseSingleExample")


IMAGE_OPS = ("DecodeImage", "DecodeJpeg", "DecodePng", "DecodeBmp", "DecodeGif", "DecodeAndCropJpeg")


def read_spec(model_dir) -> dict:
    """{feature key: Feature} of every Example parse op in the SavedModel at model_dir (a version directory);
    {} when the graph parses no Examples."""
    spec = {}
    for nodes in _scopes(model_dir):
        consts = _consts(nodes)
        for node in nodes:
            if node.op in PARSE_OPS:
                spec.update(_parse_node(node, consts))
    return spec


def decodes_images(model_dir) -> bool:
    """Whether the graph decodes image bytes (JPEG, PNG, ...): its string inputs then take encoded images."""
    return any(node.op in IMAGE_OPS for nodes in _scopes(model_dir) for node in nodes)


def _scopes(model_dir) -> list:
    """The node lists of the SavedModel's graphs and of their function libraries."""
    pb = Path(model_dir) / "saved_model.pb"
    try:
        if pb.stat().st_size > MAX_PB_BYTES:
            raise SpecError(f"{pb} is larger than {MAX_PB_BYTES >> 20} MiB; give the requests as a file (REQUESTS=)")
        saved = tfproto.SavedModel.FromString(pb.read_bytes())
    except OSError as e:
        raise SpecError(f"cannot read {pb}: {e.strerror or e}") from None
    except Exception as e:  # protobuf's DecodeError: not a SavedModel
        raise SpecError(f"{pb} is not a SavedModel ({type(e).__name__})") from None
    return [nodes for meta in saved.meta_graphs
            for nodes in [list(meta.graph_def.node)] + [list(f.node_def) for f in meta.graph_def.library.function]]


def vocabularies(model_dir, spec: dict) -> dict:
    """{feature key: [tokens]} for string features, from the model's assets/ (a file named after the feature,
    or the only asset there is): the values its lookups know, so requests are not all out-of-vocabulary."""
    assets = sorted(p for p in (Path(model_dir) / "assets").glob("*") if p.is_file())
    out = {}
    for key, f in spec.items():
        if f.dtype != "string":
            continue
        named = [p for p in assets if key.lower() in p.stem.lower()]
        source = named[0] if named else assets[0] if len(assets) == 1 else None
        if source is not None:
            with open(source, "rb") as fh:
                tokens = [ln.strip().split(b"\t")[0] for _, ln in zip(range(MAX_VOCAB_LINES), fh) if ln.strip()]
            if tokens:
                out[key] = tokens
    return out


def _values(f: Feature, rng, vocab: list | None) -> list:
    n = int(np.prod(f.shape)) if f.kind == "dense" else int(rng.integers(1, 6))
    if f.dtype == "string":
        return [vocab[i] for i in rng.integers(0, len(vocab), n)] if vocab else \
            [f"tok{i}".encode() for i in rng.integers(0, 1000, n)]
    if f.dtype == "int64":
        return [int(i) for i in rng.integers(0, 10, n)]  # small: ids that index an embedding stay in range
    return [float(x) for x in rng.random(n).astype(np.float32)]


def examples(spec: dict, n: int, seed: int, vocab: dict | None = None) -> list:
    """n Examples (tfproto.Example) with every feature of spec, seeded values."""
    rng, vocab, out = np.random.default_rng(seed), vocab or {}, []
    for _ in range(n):
        ex = tfproto.Example()
        for key, f in sorted(spec.items()):
            values = _values(f, rng, vocab.get(key))
            getattr(ex.features.feature[key], FIELDS[f.dtype]).value.extend(values)
        out.append(ex)
    return out


FIELDS = {"string": "bytes_list", "int64": "int64_list", "float": "float_list"}


def check(ex, spec: dict, where: str) -> None:
    """Refuse an Example the graph would not parse: a feature of another type, or a required one missing (real
    TFX data drifting from its model), in one line naming the feature and both types."""
    have = ex.features.feature
    for key, f in sorted(spec.items()):
        if key not in have:
            if f.required:
                raise SpecError(f"{where}: feature {key!r} is missing; the graph parses it as a required {f.dtype} "
                                "(FixedLenFeature without a default)")
            continue
        got = [name for name in FIELDS.values() if have[key].HasField(name)]
        if got and got[0] != FIELDS[f.dtype]:
            raise SpecError(f"{where}: feature {key!r} is a {got[0]}, the graph parses it as {f.dtype} "
                            f"({FIELDS[f.dtype]})")


def as_json(ex) -> dict:
    """An Example as TF Serving's REST classify/regress body writes one: {feature: value or [values]}, bytes
    as {"b64": ...} where they are not UTF-8."""
    import base64

    out = {}
    for key, feat in ex.features.feature.items():
        if feat.HasField("bytes_list"):
            vals = []
            for v in feat.bytes_list.value:
                try:
                    vals.append(v.decode())
                except UnicodeDecodeError:
                    vals.append({"b64": base64.b64encode(v).decode()})
        elif feat.HasField("int64_list"):
            vals = [int(v) for v in feat.int64_list.value]
        else:
            vals = [float(v) for v in feat.float_list.value]
        out[key] = vals[0] if len(vals) == 1 else vals
    return out

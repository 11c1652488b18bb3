"""The few TF Serving messages the load generator sends and reads, without TensorFlow.

tensorflow-serving-api's *_pb2 modules import TensorFlow's own protos, and importing those runs
`tensorflow/__init__` (seconds, most of a gigabyte). The client needs five messages, so they are
declared here with the field names, numbers and types of TensorFlow's and TF Serving's .proto
files (tensor.proto, tensor_shape.proto, meta_graph.proto, model.proto, predict.proto,
get_model_metadata.proto), in a private descriptor pool under their real full names; the wire
format is therefore the same, which tests/test_loadgen/test_tfproto.py checks against the real
classes both ways.

    req = PredictRequest(); req.inputs["x"].CopyFrom(tensor_proto(np.zeros((1, 784), np.float32)))
"""
from __future__ import annotations

import numpy as np
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, wrappers_pb2
from core.errors import UsageError

_F = descriptor_pb2.FieldDescriptorProto
I32, I64, U32, U64, F32, F64, BOOL, STR, BYTES, MSG = (_F.TYPE_INT32, _F.TYPE_INT64, _F.TYPE_UINT32, _F.TYPE_UINT64,
                                                      _F.TYPE_FLOAT, _F.TYPE_DOUBLE, _F.TYPE_BOOL, _F.TYPE_STRING,
                                                      _F.TYPE_BYTES, _F.TYPE_MESSAGE)
REPEATED = "repeated"

# DataType (types.proto) values the load generator builds payloads for.
DT = {"DT_FLOAT": 1, "DT_DOUBLE": 2, "DT_INT32": 3, "DT_UINT8": 4, "DT_INT16": 5, "DT_INT8": 6, "DT_STRING": 7,
      "DT_COMPLEX64": 8, "DT_INT64": 9, "DT_BOOL": 10, "DT_QINT8": 11, "DT_QUINT8": 12, "DT_QINT32": 13,
      "DT_BFLOAT16": 14, "DT_QINT16": 15, "DT_QUINT16": 16, "DT_UINT16": 17, "DT_COMPLEX128": 18, "DT_HALF": 19,
      "DT_RESOURCE": 20, "DT_VARIANT": 21, "DT_UINT32": 22, "DT_UINT64": 23}
DT_NAME = {v: k for k, v in DT.items()}
NP_DT = {np.dtype(np.float32): 1, np.dtype(np.float64): 2, np.dtype(np.int32): 3, np.dtype(np.uint8): 4,
         np.dtype(np.int16): 5, np.dtype(np.int8): 6, np.dtype(np.int64): 9, np.dtype(np.bool_): 10,
         np.dtype(np.uint16): 17, np.dtype(np.float16): 19, np.dtype(np.uint32): 22, np.dtype(np.uint64): 23}

# message -> [(field, number, type, type name or None, repeated)]; a (key, value) tuple type is a map
_MESSAGES = {
    "tensorflow.TensorShapeProto": [("dim", 2, MSG, ".tensorflow.TensorShapeProto.Dim", True),
                                    ("unknown_rank", 3, BOOL, None, False)],
    "tensorflow.TensorShapeProto.Dim": [("size", 1, I64, None, False), ("name", 2, STR, None, False)],
    "tensorflow.TensorProto": [
        ("dtype", 1, I32, None, False), ("tensor_shape", 2, MSG, ".tensorflow.TensorShapeProto", False),
        ("version_number", 3, I32, None, False), ("tensor_content", 4, BYTES, None, False),
        ("float_val", 5, F32, None, True), ("double_val", 6, F64, None, True), ("int_val", 7, I32, None, True),
        ("string_val", 8, BYTES, None, True), ("int64_val", 10, I64, None, True), ("bool_val", 11, BOOL, None, True),
        ("half_val", 13, I32, None, True), ("uint32_val", 16, U32, None, True), ("uint64_val", 17, U64, None, True)],
    "tensorflow.TensorInfo": [("name", 1, STR, None, False), ("dtype", 2, I32, None, False),
                              ("tensor_shape", 3, MSG, ".tensorflow.TensorShapeProto", False)],
    "tensorflow.SignatureDef": [("inputs", 1, (STR, ".tensorflow.TensorInfo"), None, True),
                                ("outputs", 2, (STR, ".tensorflow.TensorInfo"), None, True),
                                ("method_name", 3, STR, None, False)],
    "tensorflow.serving.ModelSpec": [("name", 1, STR, None, False),
                                     ("version", 2, MSG, ".google.protobuf.Int64Value", False),
                                     ("signature_name", 3, STR, None, False), ("version_label", 4, STR, None, False)],
    "tensorflow.serving.PredictRequest": [("model_spec", 1, MSG, ".tensorflow.serving.ModelSpec", False),
                                          ("inputs", 2, (STR, ".tensorflow.TensorProto"), None, True),
                                          ("output_filter", 3, STR, None, True)],
    "tensorflow.serving.PredictResponse": [("outputs", 1, (STR, ".tensorflow.TensorProto"), None, True),
                                           ("model_spec", 2, MSG, ".tensorflow.serving.ModelSpec", False)],
    "tensorflow.serving.SignatureDefMap": [("signature_def", 1, (STR, ".tensorflow.SignatureDef"), None, True)],
    # example.proto, feature.proto: what TFX/Estimator signatures parse
    "tensorflow.BytesList": [("value", 1, BYTES, None, True)],
    "tensorflow.FloatList": [("value", 1, F32, None, True)],
    "tensorflow.Int64List": [("value", 1, I64, None, True)],
    "tensorflow.Feature": [("bytes_list", 1, MSG, ".tensorflow.BytesList", False),
                           ("float_list", 2, MSG, ".tensorflow.FloatList", False),
                           ("int64_list", 3, MSG, ".tensorflow.Int64List", False)],
    "tensorflow.Features": [("feature", 1, (STR, ".tensorflow.Feature"), None, True)],
    "tensorflow.Example": [("features", 1, MSG, ".tensorflow.Features", False)],
    # input.proto, classification.proto, regression.proto, inference.proto
    "tensorflow.serving.ExampleList": [("examples", 1, MSG, ".tensorflow.Example", True)],
    "tensorflow.serving.Input": [("example_list", 1, MSG, ".tensorflow.serving.ExampleList", False)],
    "tensorflow.serving.ClassificationRequest": [("model_spec", 1, MSG, ".tensorflow.serving.ModelSpec", False),
                                                 ("input", 2, MSG, ".tensorflow.serving.Input", False)],
    "tensorflow.serving.RegressionRequest": [("model_spec", 1, MSG, ".tensorflow.serving.ModelSpec", False),
                                             ("input", 2, MSG, ".tensorflow.serving.Input", False)],
    "tensorflow.serving.InferenceTask": [("model_spec", 1, MSG, ".tensorflow.serving.ModelSpec", False),
                                         ("method_name", 2, STR, None, False)],
    "tensorflow.serving.MultiInferenceRequest": [("tasks", 1, MSG, ".tensorflow.serving.InferenceTask", True),
                                                 ("input", 2, MSG, ".tensorflow.serving.Input", False)],
    # prediction_log.proto: TF Serving's warmup records (assets.extra/tf_serving_warmup_requests)
    "tensorflow.serving.ClassifyLog": [("request", 1, MSG, ".tensorflow.serving.ClassificationRequest", False)],
    "tensorflow.serving.RegressLog": [("request", 1, MSG, ".tensorflow.serving.RegressionRequest", False)],
    "tensorflow.serving.PredictLog": [("request", 1, MSG, ".tensorflow.serving.PredictRequest", False)],
    "tensorflow.serving.MultiInferenceLog": [("request", 1, MSG, ".tensorflow.serving.MultiInferenceRequest", False)],
    # model_server_config.proto, model_management.proto, util/status.proto: a config reload (ModelService)
    "tensorflow.serving.ModelConfig": [("name", 1, STR, None, False), ("base_path", 2, STR, None, False),
                                       ("model_platform", 4, STR, None, False)],
    "tensorflow.serving.ModelConfigList": [("config", 1, MSG, ".tensorflow.serving.ModelConfig", True)],
    "tensorflow.serving.ModelServerConfig": [("model_config_list", 1, MSG, ".tensorflow.serving.ModelConfigList",
                                              False)],
    "tensorflow.serving.ReloadConfigRequest": [("config", 1, MSG, ".tensorflow.serving.ModelServerConfig", False)],
    "tensorflow.serving.StatusProto": [("error_code", 1, I32, None, False), ("error_message", 2, STR, None, False)],
    "tensorflow.serving.ReloadConfigResponse": [("status", 1, MSG, ".tensorflow.serving.StatusProto", False)],
    "tensorflow.serving.PredictionLog": [("classify_log", 2, MSG, ".tensorflow.serving.ClassifyLog", False),
                                         ("regress_log", 3, MSG, ".tensorflow.serving.RegressLog", False),
                                         ("multi_inference_log", 4, MSG, ".tensorflow.serving.MultiInferenceLog", False),
                                         ("predict_log", 6, MSG, ".tensorflow.serving.PredictLog", False)],
    # saved_model.proto, meta_graph.proto, graph.proto, node_def.proto, attr_value.proto, function.proto: only
    # the fields the load generator reads (a signature's parse spec); protobuf skips the rest of the file
    "tensorflow.SavedModel": [("meta_graphs", 2, MSG, ".tensorflow.MetaGraphDef", True)],
    "tensorflow.MetaGraphDef": [("graph_def", 2, MSG, ".tensorflow.GraphDef", False),
                                ("signature_def", 5, (STR, ".tensorflow.SignatureDef"), None, True)],
    "tensorflow.GraphDef": [("node", 1, MSG, ".tensorflow.NodeDef", True),
                            ("library", 2, MSG, ".tensorflow.FunctionDefLibrary", False)],
    "tensorflow.FunctionDefLibrary": [("function", 1, MSG, ".tensorflow.FunctionDef", True)],
    "tensorflow.FunctionDef": [("node_def", 3, MSG, ".tensorflow.NodeDef", True)],
    "tensorflow.NodeDef": [("name", 1, STR, None, False), ("op", 2, STR, None, False), ("input", 3, STR, None, True),
                           ("attr", 5, (STR, ".tensorflow.AttrValue"), None, True)],
    "tensorflow.AttrValue": [("list", 1, MSG, ".tensorflow.AttrValue.ListValue", False), ("s", 2, BYTES, None, False),
                             ("i", 3, I64, None, False), ("type", 6, I32, None, False),
                             ("shape", 7, MSG, ".tensorflow.TensorShapeProto", False),
                             ("tensor", 8, MSG, ".tensorflow.TensorProto", False)],
    "tensorflow.AttrValue.ListValue": [("s", 2, BYTES, None, True), ("i", 3, I64, None, True),
                                       ("type", 6, I32, None, True),
                                       ("shape", 7, MSG, ".tensorflow.TensorShapeProto", True)],
    "tensorflow.serving.GetModelMetadataRequest": [("model_spec", 1, MSG, ".tensorflow.serving.ModelSpec", False),
                                                   ("metadata_field", 2, STR, None, True)],
    "tensorflow.serving.GetModelMetadataResponse": [("model_spec", 1, MSG, ".tensorflow.serving.ModelSpec", False),
                                                    ("metadata", 2, (STR, ".google.protobuf.Any"), None, True)],
}


def _add_fields(msg, fields) -> None:
    for name, number, ftype, type_name, repeated in fields:
        f = msg.field.add(name=name, number=number, label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
        if isinstance(ftype, tuple):  # map<key, value>: a nested *Entry message, as protoc writes it
            entry = msg.nested_type.add(name="".join(p.capitalize() for p in name.split("_")) + "Entry")
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, type=ftype[0], label=_F.LABEL_OPTIONAL)
            entry.field.add(name="value", number=2, type=MSG, type_name=ftype[1], label=_F.LABEL_OPTIONAL)
            f.type, f.type_name = MSG, entry.name
        else:
            f.type = ftype
            if type_name:
                f.type_name = type_name


def _build() -> dict:
    pool = descriptor_pool.DescriptorPool()
    for dep in (wrappers_pb2, any_pb2):
        pool.AddSerializedFile(dep.DESCRIPTOR.serialized_pb)
    files = {}
    for full, fields in _MESSAGES.items():
        package, _, name = full.rpartition(".")
        parent = None
        if package.endswith(("TensorShapeProto", "AttrValue")):  # the nested Dim, ListValue
            package, _, parent = package.rpartition(".")
        fdp = files.setdefault(package, descriptor_pb2.FileDescriptorProto(
            name=f"tfsb/{package}.proto", package=package, syntax="proto3",
            dependency=["google/protobuf/wrappers.proto", "google/protobuf/any.proto"]))
        if parent:
            holder = next(m for m in fdp.message_type if m.name == parent)
            _add_fields(holder.nested_type.add(name=name), fields)
        else:
            _add_fields(fdp.message_type.add(name=name), fields)
    tf_file = files["tensorflow"]
    serving = files["tensorflow.serving"]
    serving.dependency.append(tf_file.name)
    pool.Add(tf_file)
    pool.Add(serving)
    try:  # protobuf >= 4.21
        from google.protobuf.message_factory import GetMessageClass
        return {k: GetMessageClass(pool.FindMessageTypeByName(k)) for k in _MESSAGES}
    except ImportError:  # protobuf 3.x
        from google.protobuf.message_factory import MessageFactory
        factory = MessageFactory(pool)
        return {k: factory.GetPrototype(pool.FindMessageTypeByName(k)) for k in _MESSAGES}


_CLASSES = _build()
TensorProto = _CLASSES["tensorflow.TensorProto"]
SignatureDefMap = _CLASSES["tensorflow.serving.SignatureDefMap"]
PredictRequest = _CLASSES["tensorflow.serving.PredictRequest"]
PredictResponse = _CLASSES["tensorflow.serving.PredictResponse"]
GetModelMetadataRequest = _CLASSES["tensorflow.serving.GetModelMetadataRequest"]
GetModelMetadataResponse = _CLASSES["tensorflow.serving.GetModelMetadataResponse"]
Example = _CLASSES["tensorflow.Example"]
ClassificationRequest = _CLASSES["tensorflow.serving.ClassificationRequest"]
RegressionRequest = _CLASSES["tensorflow.serving.RegressionRequest"]
MultiInferenceRequest = _CLASSES["tensorflow.serving.MultiInferenceRequest"]
SavedModel = _CLASSES["tensorflow.SavedModel"]
PredictionLog = _CLASSES["tensorflow.serving.PredictionLog"]
ReloadConfigRequest = _CLASSES["tensorflow.serving.ReloadConfigRequest"]
ReloadConfigResponse = _CLASSES["tensorflow.serving.ReloadConfigResponse"]


def tensor_array(proto) -> np.ndarray:
    """A TensorProto's values as an ndarray (the inverse of tensor_proto; a single value fills the shape, as in
    TensorFlow)."""
    shape = [d.size for d in proto.tensor_shape.dim]
    name = DT_NAME.get(proto.dtype, "")
    if name == "DT_STRING":
        flat = np.array(list(proto.string_val), dtype=object)
    else:
        dtype = next((d for d, v in NP_DT.items() if v == proto.dtype), None)
        if dtype is None:
            raise UsageError(f"a tensor of {name or proto.dtype} cannot be read here")
        if proto.tensor_content:
            flat = np.frombuffer(proto.tensor_content, dtype=dtype.newbyteorder("<")).astype(dtype)
        else:
            field = {1: "float_val", 2: "double_val", 9: "int64_val", 10: "bool_val", 19: "half_val",
                     22: "uint32_val", 23: "uint64_val"}.get(proto.dtype, "int_val")
            flat = np.array(list(getattr(proto, field)), dtype=np.uint16 if field == "half_val" else dtype)
            if field == "half_val":
                flat = flat.view(np.float16)
    n = int(np.prod(shape)) if shape else 1
    if flat.size == 1 and n != 1:
        flat = np.repeat(flat, n)
    return flat.reshape(shape)


def tensor_proto(arr: np.ndarray):
    """A TensorProto of arr: numbers as tensor_content (raw little-endian bytes, what
    tf.make_tensor_proto writes too), strings as string_val."""
    arr = np.asarray(arr)
    proto = TensorProto()
    for d in arr.shape:
        proto.tensor_shape.dim.add(size=int(d))
    if arr.dtype == object or arr.dtype.kind in "SU":
        proto.dtype = DT["DT_STRING"]
        proto.string_val.extend(v if isinstance(v, bytes) else str(v).encode() for v in arr.ravel())
        return proto
    dt = NP_DT.get(arr.dtype)
    if dt is None:
        raise UsageError(f"no TensorFlow dtype for numpy {arr.dtype}")
    proto.dtype = dt
    proto.tensor_content = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
    return proto

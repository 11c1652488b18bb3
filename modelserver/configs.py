"""TF Serving's text-proto config files, parsed as strictly as the real server does.

ModelServerConfig comes from tensorflow-serving-api. MonitoringConfig and
BatchingParameters are not shipped there, so their messages are declared below
with the same field names and types as TF Serving's monitoring_config.proto and
session_bundle_config.proto; protobuf's text_format then rejects a misspelt field
or a wrong type exactly as tensorflow_model_server does.
"""
from __future__ import annotations

import dataclasses
import os

from google.protobuf import descriptor_pb2, descriptor_pool, text_format, wrappers_pb2


class ConfigError(ValueError):
    """A config file that TF Serving would refuse; the message names file and line."""


_F = descriptor_pb2.FieldDescriptorProto
_FIELDS = {
    "tensorflow.serving.PrometheusConfig": [("enable", 1, _F.TYPE_BOOL, None, False), ("path", 2, _F.TYPE_STRING, None, False)],
    "tensorflow.serving.MonitoringConfig": [("prometheus_config", 1, _F.TYPE_MESSAGE, ".tensorflow.serving.PrometheusConfig", False)],
    "tensorflow.serving.BatchingParameters": [
        ("max_batch_size", 1, _F.TYPE_MESSAGE, ".google.protobuf.Int64Value", False),
        ("batch_timeout_micros", 2, _F.TYPE_MESSAGE, ".google.protobuf.Int64Value", False),
        ("max_enqueued_batches", 3, _F.TYPE_MESSAGE, ".google.protobuf.Int64Value", False),
        ("num_batch_threads", 4, _F.TYPE_MESSAGE, ".google.protobuf.Int64Value", False),
        ("thread_pool_name", 5, _F.TYPE_MESSAGE, ".google.protobuf.StringValue", False),
        ("allowed_batch_sizes", 6, _F.TYPE_INT64, None, True),
        ("pad_variable_length_inputs", 7, _F.TYPE_BOOL, None, False),
        ("enable_large_batch_splitting", 8, _F.TYPE_MESSAGE, ".google.protobuf.BoolValue", False),
        ("max_execution_batch_size", 9, _F.TYPE_MESSAGE, ".google.protobuf.Int64Value", False),
        ("batch_padding_policy", 10, _F.TYPE_STRING, None, False),
    ],
}


def _build_messages():
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    fdp = descriptor_pb2.FileDescriptorProto(name="tfsb/configs.proto", package="tensorflow.serving", syntax="proto3",
                                             dependency=["google/protobuf/wrappers.proto"])
    for full, fields in _FIELDS.items():
        msg = fdp.message_type.add(name=full.split(".")[-1])
        for name, number, ftype, type_name, repeated in fields:
            f = msg.field.add(name=name, number=number, type=ftype,
                              label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL)
            if type_name:
                f.type_name = type_name
    pool.Add(fdp)
    try:  # protobuf >= 4.21
        from google.protobuf.message_factory import GetMessageClass
        return {k: GetMessageClass(pool.FindMessageTypeByName(k)) for k in _FIELDS}
    except ImportError:  # protobuf 3.x, the venvs of TF 2.6-2.11
        from google.protobuf.message_factory import MessageFactory
        factory = MessageFactory(pool)
        return {k: factory.GetPrototype(pool.FindMessageTypeByName(k)) for k in _FIELDS}


_MESSAGES = _build_messages()
MonitoringConfig = _MESSAGES["tensorflow.serving.MonitoringConfig"]
BatchingParameters = _MESSAGES["tensorflow.serving.BatchingParameters"]


def parse_text_proto(path: str, message_cls):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file") from None
    msg = message_cls()
    try:
        text_format.Parse(text, msg)
    except text_format.ParseError as e:  # TF Serving's words: protobuf's TextFormat error, then server.cc's
        raise ConfigError(f"Error parsing text-format {message_cls.DESCRIPTOR.full_name}: {e}; "
                          f"Invalid protobuf file: '{path}'") from None
    return msg


@dataclasses.dataclass(frozen=True)
class BatchingOptions:
    """BatchingParameters with TF Serving's defaults filled in."""
    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 100
    num_batch_threads: int = os.cpu_count() or 1
    thread_pool_name: str = "batch_threads"
    allowed_batch_sizes: tuple = ()


def load_batching(path: str) -> BatchingOptions:
    if not path:
        return BatchingOptions()
    msg = parse_text_proto(path, BatchingParameters)
    opts = {}
    for name in ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads"):
        if msg.HasField(name):
            opts[name] = getattr(msg, name).value
    if msg.HasField("thread_pool_name"):
        opts["thread_pool_name"] = msg.thread_pool_name.value
    opts["allowed_batch_sizes"] = tuple(msg.allowed_batch_sizes)
    result = BatchingOptions(**opts)
    for name in ("max_batch_size", "max_enqueued_batches", "num_batch_threads"):
        if getattr(result, name) <= 0:
            raise ConfigError(f"{path}: {name} must be positive, got {getattr(result, name)}")
    if result.batch_timeout_micros < 0:
        raise ConfigError(f"{path}: batch_timeout_micros must be >= 0")
    sizes = result.allowed_batch_sizes
    if sizes and (list(sizes) != sorted(set(sizes)) or sizes[-1] != result.max_batch_size):
        raise ConfigError(f"{path}: allowed_batch_sizes must increase and end with max_batch_size")
    return result


def load_monitoring(path: str) -> str | None:
    """The Prometheus path to serve, or None when monitoring is off."""
    if not path:
        return None
    msg = parse_text_proto(path, MonitoringConfig)
    prom = msg.prometheus_config
    if not prom.enable:
        return None
    route = prom.path or "/monitoring/prometheus/metrics"
    if not route.startswith("/"):
        raise ConfigError(f"{path}: prometheus_config.path must start with '/', got {route!r}")
    return route


def load_model_server_config(path: str):
    """A ModelServerConfig (tensorflow-serving-api's own message) from a text proto."""
    from tensorflow_serving.config import model_server_config_pb2

    msg = parse_text_proto(path, model_server_config_pb2.ModelServerConfig)
    if msg.WhichOneof("config") != "model_config_list":
        raise ConfigError(f"{path}: expected model_config_list {{ config {{ ... }} }}")
    names = set()
    for cfg in msg.model_config_list.config:
        if not cfg.name or not cfg.base_path:
            raise ConfigError(f"{path}: every config needs a name and a base_path")
        if cfg.name in names:
            raise ConfigError(f"{path}: model {cfg.name!r} configured twice")
        if cfg.model_platform and cfg.model_platform != "tensorflow":
            raise ConfigError(f"{path}: model {cfg.name!r}: unsupported model_platform {cfg.model_platform!r}")
        names.add(cfg.name)
    if not names:
        raise ConfigError(f"{path}: model_config_list has no config")
    return msg

"""TF Serving's gRPC API with the official tensorflow-serving-api stubs.

PredictionService.Predict and GetModelMetadata, ModelService.GetModelStatus. Like TF Serving's
own, the server is gRPC's synchronous one: each RPC runs in a thread of its pool, which decodes
the request, runs TensorFlow (which releases the GIL) and encodes the answer, with no hop
through an event loop (grpc.aio's poller thread and loop hops cost more than the TF call here:
benchmarks/modelserver.py, rows "gRPC").
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc
from tensorflow_serving.apis import (classification_pb2, get_model_metadata_pb2, get_model_status_pb2,
                                     inference_pb2, model_management_pb2, model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc, regression_pb2)
from tensorflow_serving.apis import status_pb2

from modelserver import tensors
from modelserver.status import ServingError, invalid


def _spec(model_spec):
    """(name, version or None, label or None) from a ModelSpec."""
    which = model_spec.WhichOneof("version_choice")
    version = model_spec.version.value if which == "version" else None
    label = model_spec.version_label if which == "version_label" else None
    return model_spec.name, version, label


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, api, manager, metrics):
        self.api, self.manager, self.metrics = api, manager, metrics

    def Predict(self, request, context):
        name, version, label = _spec(request.model_spec)

        def decode(sig):
            return {k: tensors.proto_to_array(k, v) for k, v in request.inputs.items()}
        try:
            servable, sig, outputs = self.api.predict_blocking(
                name, version, label, request.model_spec.signature_name, decode, "GRPC",
                tuple(request.output_filter))
        except ServingError as e:
            context.abort(e.grpc_code, e.message)
        resp = predict_pb2.PredictResponse()
        resp.model_spec.name = name
        resp.model_spec.version.value = servable.version
        resp.model_spec.signature_name = sig.name
        for k, v in outputs.items():
            resp.outputs[k].CopyFrom(tensors.array_to_proto(v))
        return resp

    def _infer(self, kind: str, request, context, response):
        name, version, label = _spec(request.model_spec)
        result = response.result
        try:
            servable, sig = self.api.infer_blocking(kind, name, version, label, request.model_spec.signature_name,
                                                    request.input, "GRPC", result)
        except ServingError as e:
            context.abort(e.grpc_code, e.message)
        response.model_spec.name, response.model_spec.signature_name = name, sig.name
        response.model_spec.version.value = servable.version
        return response

    def Classify(self, request, context):
        return self._infer("classify", request, context, classification_pb2.ClassificationResponse())

    def Regress(self, request, context):
        return self._infer("regress", request, context, regression_pb2.RegressionResponse())

    def MultiInference(self, request, context):
        resp = inference_pb2.MultiInferenceResponse()
        tasks = [(*_spec(t.model_spec), t.model_spec.signature_name, t.method_name) for t in request.tasks]
        try:
            if not tasks:
                raise invalid("MultiInference request has no task")
            self.api.multi_inference_blocking(tasks, request.input, "GRPC", resp)
        except ServingError as e:
            context.abort(e.grpc_code, e.message)
        return resp

    def GetModelMetadata(self, request, context):
        name, version, label = _spec(request.model_spec)
        try:
            if list(request.metadata_field) != ["signature_def"]:
                raise invalid("Metadata field signature_def must be requested (and is the only one supported)")
            servable = self.manager.resolve(name, version, label)
        except ServingError as e:
            context.abort(e.grpc_code, e.message)
        sdm = get_model_metadata_pb2.SignatureDefMap()
        for k, v in servable.signature_defs.items():
            sdm.signature_def[k].CopyFrom(v)
        resp = get_model_metadata_pb2.GetModelMetadataResponse()
        resp.model_spec.name = name
        resp.model_spec.version.value = servable.version
        resp.metadata["signature_def"].Pack(sdm)
        return resp


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, manager):
        self.manager = manager

    def HandleReloadConfigRequest(self, request, context):
        """Serve exactly the models of request.config from now on; a config that cannot be served
        changes nothing and answers its error in the response's status, as TF Serving does."""
        from modelserver.configs import ConfigError
        from modelserver.manager import ModelPathError
        from modelserver.reload import specs_of

        resp = model_management_pb2.ReloadConfigResponse()
        try:
            self.manager.reload_blocking(specs_of(request.config))
        except (ConfigError, ModelPathError) as e:
            resp.status.error_code, resp.status.error_message = 3, str(e)  # INVALID_ARGUMENT
        return resp

    def GetModelStatus(self, request, context):
        name, version, _ = _spec(request.model_spec)
        try:
            states = self.manager.statuses(name, version)
        except ServingError as e:
            context.abort(e.grpc_code, e.message)
        resp = get_model_status_pb2.GetModelStatusResponse()
        for s in states:
            resp.model_version_status.add(
                version=s.version, state=getattr(get_model_status_pb2.ModelVersionStatus, s.state),
                status=status_pb2.StatusProto(error_code=0 if not s.error else 2, error_message=s.error))
        return resp


def build_server(api, manager, metrics, addresses: list, max_message_bytes: int,
                 max_concurrent_rpcs: int = 0, threads: int = 4, channel_arguments: tuple = ()):
    """addresses: "host:port" and/or "unix:path" (--grpc_socket_path); channel_arguments
    (--grpc_channel_arguments) override the defaults below, as TF Serving adds them last."""
    # RPCs beyond max_concurrent_rpcs are answered RESOURCE_EXHAUSTED by grpc itself.
    options = {"grpc.max_receive_message_length": max_message_bytes,
               "grpc.max_send_message_length": max_message_bytes, "grpc.so_reuseport": 0, **dict(channel_arguments)}
    server = grpc.server(ThreadPoolExecutor(max_workers=threads, thread_name_prefix="grpc"),
                         maximum_concurrent_rpcs=max_concurrent_rpcs or None, options=list(options.items()))
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionService(api, manager, metrics),
                                                                        server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(manager), server)
    for address in addresses:
        if server.add_insecure_port(address) == 0:
            raise OSError(f"cannot bind gRPC to {address} (port in use, or the socket's directory missing?)")
    return server

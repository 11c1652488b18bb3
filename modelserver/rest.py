"""TF Serving's REST API (v1) on aiohttp: predict, model status, metadata, metrics.

Routing is one regex over the raw path, so an escaped slash or a `..` in a model
name is just a name that matches no model (404), never a file path.
"""
from __future__ import annotations

import asyncio
import logging
import re
import time

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError
from google.protobuf import json_format

from modelserver import inference, tensors
from modelserver.metrics import CONTENT_TYPE
from modelserver.status import ServingError, invalid

_ROUTE = re.compile(r"^/v1/models/(?P<name>[^/:]+)"
                    r"(?:/versions/(?P<version>-?\d+)|/labels/(?P<label>[^/:]+))?"
                    r"(?::(?P<verb>[a-z]+)|/(?P<meta>metadata))?$")
_JSON = "application/json"
log = logging.getLogger("modelserver")


def _error(err: ServingError) -> web.Response:
    return web.Response(body=orjson.dumps({"error": err.message}), status=err.http_status, content_type=_JSON)


def _ok(payload) -> web.Response:
    return web.Response(body=orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY), content_type=_JSON)


def _message_to_dict(msg) -> dict:
    try:  # protobuf >= 5.26
        return json_format.MessageToDict(msg, preserving_proto_field_name=True,
                                         always_print_fields_with_no_presence=True)
    except TypeError:  # protobuf 3.x / 4.x
        return json_format.MessageToDict(msg, preserving_proto_field_name=True, including_default_value_fields=True)


# Bounds on a JSON body's parse (--rest_api_max_json_containers). Every array or object becomes a Python
# list or dict of 56-64 bytes, so 64 MiB of "[]," would cost 1.3 GB and seconds of numpy: the brackets are
# counted (a C scan, ~20 ms for 64 MiB) before anything is parsed. With the bound, a body under the size
# limit costs at most ~18 times its size (a float or short string per 4-5 bytes, 24-50 bytes each; SECURITY.md) plus
# MAX_JSON_CONTAINERS x 64 bytes.
MAX_JSON_CONTAINERS = 1 << 20
# Bodies above this are parsed, decoded and run in a thread, not on the event loop every other REST
# request waits on (parsing and converting tens of MB takes a second).
LARGE_BODY_BYTES = 1 << 20


def parse_json(raw: bytes):
    """The parsed body, or INVALID_ARGUMENT before the parse when it holds too many arrays and objects."""
    containers = raw.count(b"[") + raw.count(b"{")  # brackets inside strings count too: a bound, not a parse
    if containers > MAX_JSON_CONTAINERS:
        raise invalid(f"JSON body has {containers} arrays and objects, above the server's limit of "
                      f"{MAX_JSON_CONTAINERS} (--rest_api_max_json_containers)")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise invalid(f"JSON Parse error: {e}") from None


def decode_request(body: dict):
    """Return (signature_name, row_format, decode(sig)) for a parsed :predict body."""
    if not isinstance(body, dict):
        raise invalid("JSON body must be an object with \"instances\" or \"inputs\"")
    sig_name = body.get("signature_name", "")
    if not isinstance(sig_name, str):
        raise invalid("\"signature_name\" must be a string")
    if ("instances" in body) == ("inputs" in body):
        raise invalid("JSON body must have exactly one of \"instances\" (row format) or \"inputs\" (columnar)")
    if "instances" in body:
        instances = body["instances"]
        if not isinstance(instances, list) or not instances:
            raise invalid("\"instances\" must be a non-empty list")

        def named(i) -> bool:  # {"x": ...} names inputs; {"b64": "..."} is one binary value
            return isinstance(i, dict) and set(i) != {"b64"}

        def decode_rows(sig):
            names = list(sig.inputs)
            if len(names) == 1 and not any(named(i) for i in instances):
                return {names[0]: tensors.json_to_array(names[0], instances, sig.inputs[names[0]].np_dtype)}
            if not all(named(i) for i in instances):
                raise invalid(f"signature has inputs {names}: every instance must be an object with them")
            out = {}
            for n in names:
                if not all(n in i for i in instances):
                    raise invalid(f"an instance lacks input {n!r}")
                out[n] = tensors.json_to_array(n, [i[n] for i in instances], sig.inputs[n].np_dtype)
            extra = {k for i in instances for k in i} - set(names)
            if extra:
                raise invalid(f"unknown inputs {sorted(extra)}; the signature has {names}")
            return out
        return sig_name, True, decode_rows
    value = body["inputs"]

    def decode_columns(sig):
        names = list(sig.inputs)
        if isinstance(value, dict) and set(value) != {"b64"}:
            unknown = set(value) - set(names)
            if unknown:
                raise invalid(f"unknown inputs {sorted(unknown)}; the signature has {names}")
            return {k: tensors.json_to_array(k, v, sig.inputs[k].np_dtype) for k, v in value.items()}
        if len(names) != 1:
            raise invalid(f"signature has inputs {names}: \"inputs\" must be an object naming them")
        return {names[0]: tensors.json_to_array(names[0], value, sig.inputs[names[0]].np_dtype)}
    return sig_name, False, decode_columns


def encode_response(outputs: dict, row_format: bool) -> dict:
    names = list(outputs)
    if row_format:
        if len(names) == 1:
            return {"predictions": tensors.array_to_json(outputs[names[0]])}
        rows = len(next(iter(outputs.values())))
        return {"predictions": [{k: tensors.array_to_json(outputs[k][i]) if outputs[k].ndim > 1
                                 else outputs[k][i].item() for k in names} for i in range(rows)]}
    if len(names) == 1:
        return {"outputs": tensors.array_to_json(outputs[names[0]])}
    return {"outputs": {k: tensors.array_to_json(v) for k, v in outputs.items()}}


class RestAPI:
    def __init__(self, api, manager, metrics, metrics_path, read_timeout_s: float, timeout_ms: int = 0):
        self.api, self.manager, self.metrics = api, manager, metrics
        self.metrics_path, self.read_timeout_s, self.timeout_ms = metrics_path, read_timeout_s, timeout_ms
        self.max_body_bytes = 0  # set by build_server, which owns the limit

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """Every request gets an answer in TF Serving's {"error": ...} form; a failure that is not
        the request's fault is one log line and a 500, never a traceback."""
        try:
            return await self._route(request)
        except Exception as e:  # noqa: BLE001
            log.error("%s %s failed: %s: %s", request.method, request.rel_url.raw_path, type(e).__name__, e)
            return _error(ServingError("INTERNAL", f"{type(e).__name__}: {e}"))

    async def _route(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.rel_url.raw_path
        try:
            if self.metrics_path and path == self.metrics_path and request.method == "GET":
                return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})
            m = _ROUTE.match(path)
            if m is None:
                raise ServingError("NOT_FOUND", f"Malformed request: {request.method} {path}")
            version = int(m["version"]) if m["version"] is not None else None
            if m["verb"]:
                if request.method != "POST" or m["verb"] not in ("predict", "classify", "regress"):
                    raise ServingError("NOT_FOUND", f"Malformed request: {request.method} {path}")
                if m["verb"] == "predict":
                    return await self._predict(request, m["name"], version, m["label"])
                return await self._classify_regress(request, m["verb"], m["name"], version, m["label"])
            if request.method != "GET":
                raise ServingError("NOT_FOUND", f"Malformed request: {request.method} {path}")
            return self._get(m, version)
        except ServingError as e:
            return _error(e)

    def _get(self, m, version) -> web.Response:
        """Status and metadata: counted as TF Serving counts them (request_count, and request_latency
        with API "" when OK), so healthchecks and probes show on the metrics page as on a real server."""
        t0, status = time.perf_counter(), "OK"
        try:
            if m["meta"]:
                return self._metadata(m["name"], version, m["label"])
            if m["label"] is not None:
                version = self.manager.label_version(m["name"], m["label"])
            return self._status(m["name"], version)
        except ServingError as e:
            status = e.code
            raise
        finally:
            self.metrics.request(self.api.label(m["name"]), "", "REST", status, time.perf_counter() - t0)

    def _too_large(self) -> web.Response:
        too_large = {"error": f"request body larger than {self.max_body_bytes} bytes"}
        return web.Response(body=orjson.dumps(too_large), status=413, content_type=_JSON)

    async def _body(self, request) -> bytes | web.Response:
        """The request body, or the answer when it cannot be read: 413 over the limit (decided from
        Content-Length before a byte is read, and before `100 Continue`), 400 for a body that is not
        what its headers say (bad gzip, a malformed chunk), 408 for one that does not arrive."""
        if request.content_length is not None and request.content_length > self.max_body_bytes:
            return self._too_large()
        if request.headers.get("Expect", "").lower() == "100-continue" and request.version >= (1, 1):
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            if request.content.is_eof():  # the whole body is in: no timer (a task) to read it
                return await request.read()
            return await asyncio.wait_for(request.read(), self.read_timeout_s)
        except web.HTTPRequestEntityTooLarge:  # also a gzip body that inflates past the limit
            return self._too_large()
        except asyncio.TimeoutError:
            return web.Response(body=b'{"error": "timed out reading the request body"}', status=408,
                                content_type=_JSON)
        except (RequestPayloadError, HttpProcessingError) as e:
            detail = str(e).splitlines()[-1].strip()
            if "exceeds the configured limit" in detail:  # aiohttp >= 3.13 stops inflating gzip there
                return self._too_large()
            return _error(invalid(f"cannot read the request body: {detail}"))

    def _parsed(self, raw: bytes, name: str, api: str, decode):
        """decode(parse_json(raw)); a body refused here is counted as TF Serving counts it."""
        try:
            return decode(parse_json(raw))
        except ServingError as e:
            self.metrics.request(self.api.label(name), api, "REST", e.code, 0.0)
            raise

    def _predict_blocking(self, raw: bytes, name, version, label) -> dict:
        sig_name, rows, decode = self._parsed(raw, name, "predict", decode_request)
        _, _, outputs = self.api.predict_blocking(name, version, label, sig_name, decode, "REST",
                                                  timeout_ms=self.timeout_ms)
        return encode_response(outputs, rows)

    async def _predict(self, request, name, version, label):
        raw = await self._body(request)
        if isinstance(raw, web.Response):
            return raw
        if len(raw) > LARGE_BODY_BYTES:
            return _ok(await asyncio.get_running_loop().run_in_executor(
                None, self._predict_blocking, raw, name, version, label))
        sig_name, rows, decode = self._parsed(raw, name, "predict", decode_request)
        _, _, outputs = await self.api.predict(name, version, label, sig_name, decode, "REST",
                                               timeout_ms=self.timeout_ms)
        return _ok(encode_response(outputs, rows))

    async def _classify_regress(self, request, kind: str, name, version, label):
        from tensorflow_serving.apis import classification_pb2, regression_pb2

        raw = await self._body(request)
        if isinstance(raw, web.Response):
            return raw
        if len(raw) > LARGE_BODY_BYTES:
            sig_name, inp = await asyncio.get_running_loop().run_in_executor(
                None, self._parsed, raw, name, kind, inference.input_from_json)
        else:
            sig_name, inp = self._parsed(raw, name, kind, inference.input_from_json)
        result = (classification_pb2.ClassificationResult() if kind == "classify"
                  else regression_pb2.RegressionResult())
        await self.api.infer(kind, name, version, label, sig_name, inp, "REST", result)
        return _ok(inference.classification_json(result) if kind == "classify" else inference.regression_json(result))

    def _status(self, name, version):
        states = self.manager.statuses(name, version)
        return _ok({"model_version_status": [
            {"version": str(s.version), "state": s.state,
             "status": {"error_code": "OK" if not s.error else "UNKNOWN", "error_message": s.error}}
            for s in states]})

    def _metadata(self, name, version, label):
        from tensorflow_serving.apis import get_model_metadata_pb2

        servable = self.manager.resolve(name, version, label)
        sdm = get_model_metadata_pb2.SignatureDefMap()
        for k, v in servable.signature_defs.items():
            sdm.signature_def[k].CopyFrom(v)
        meta = _message_to_dict(sdm)
        return _ok({"model_spec": {"name": name, "signature_name": "", "version": str(servable.version)},
                    "metadata": {"signature_def": meta}})


def build_server(rest: RestAPI, max_body_bytes: int, wrap=lambda h: h, **handler_args) -> web.Server:
    """aiohttp's low-level server: one handler for every path (routing is _ROUTE above), none of
    an Application's router and middleware machinery on the hot path."""
    rest.max_body_bytes = max_body_bytes

    def request_factory(message, payload, protocol, writer, task):
        return web.BaseRequest(message, payload, protocol, writer, task, asyncio.get_running_loop(),
                               client_max_size=max_body_bytes)
    return web.Server(wrap(rest.handle), request_factory=request_factory, **handler_args)

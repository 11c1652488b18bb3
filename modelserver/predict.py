"""The API both front ends share: resolve the servable, decode, validate, run, count.

REST awaits the async methods on its event loop; gRPC calls the *_blocking ones in its handler
thread, where the TF call runs without a hop to another thread (TF Serving's own request threads
run the session the same way). Every request is counted with its status; latency is recorded for
successful ones only, as TF Serving does (metrics.request gives each entrypoint its API label).
"""
from __future__ import annotations

import contextlib
import time

from modelserver import inference
from modelserver.status import ServingError, from_tf_exception, invalid

UNKNOWN_MODEL = "_unknown_"  # the model_name label of requests for models that are not configured


class PredictAPI:
    def __init__(self, manager, runner, metrics):
        self.manager, self.runner, self.metrics = manager, runner, metrics

    def label(self, name: str) -> str:
        """The model_name a request is counted under: configured models by name, any other under one
        label, so a client sending random names cannot grow the metrics page without bound."""
        return name if name in self.manager.specs else UNKNOWN_MODEL

    @contextlib.contextmanager
    def counted(self, name: str, api: str, entrypoint: str):
        t0, status = time.perf_counter(), "OK"
        try:
            yield
        except Exception as e:  # noqa: BLE001 - counted, then answered with its code
            err = e if isinstance(e, ServingError) else from_tf_exception(e)  # anything else: INTERNAL
            status = err.code
            raise err from None
        finally:
            self.metrics.request(self.label(name), api, entrypoint, status, time.perf_counter() - t0)

    # ---- Predict ----------------------------------------------------------------------------
    def _prepare(self, name, version, label, signature_name: str, decode, outputs: tuple):
        servable = self.manager.resolve(name, version, label)
        sig = servable.signature(signature_name)
        unknown = [k for k in outputs if k not in sig.outputs]
        if unknown:
            raise invalid(f"output tensor alias not found in signature: {unknown[0]} Outputs expected to be in the "
                          f"set {{{','.join(sorted(sig.outputs))}}}.")
        seen = set()
        for k in outputs:  # as TF Serving's PreProcessPrediction: each alias once
            if k in seen:
                raise invalid(f"duplicate output tensor alias: {k}")
            seen.add(k)
        inputs = decode(sig)
        return servable, sig, inputs, servable.validate(sig, inputs)

    async def predict(self, name: str, version, label, signature_name: str, decode, entrypoint: str,
                      outputs: tuple = (), timeout_ms: int = 0):
        """decode(sig) -> {input name: ndarray}; returns (servable, signature, outputs)."""
        with self.counted(name, "predict", entrypoint):
            servable, sig, inputs, rows = self._prepare(name, version, label, signature_name, decode, outputs)
            return servable, sig, await self.runner.run(servable, sig, inputs, rows, "predict", outputs, timeout_ms)

    def predict_blocking(self, name: str, version, label, signature_name: str, decode, entrypoint: str,
                         outputs: tuple = (), timeout_ms: int = 0):
        with self.counted(name, "predict", entrypoint):
            servable, sig, inputs, rows = self._prepare(name, version, label, signature_name, decode, outputs)
            return servable, sig, self.runner.run_blocking(servable, sig, inputs, rows, "predict", outputs,
                                                           timeout_ms)

    # ---- Classify / Regress -----------------------------------------------------------------
    def _prepare_examples(self, kind: str, name, version, label, signature_name: str, inp):
        servable = self.manager.resolve(name, version, label)
        sig = servable.signature(signature_name)
        examples = inference.serialized_examples(inp)
        return servable, sig, {inference.check_signature(sig, inference.METHOD[kind]): examples}, len(examples)

    def _result(self, kind: str, outputs: dict, n: int, result) -> None:
        (inference.classification_result if kind == "classify" else inference.regression_result)(outputs, n, result)

    async def infer(self, kind: str, name: str, version, label, signature_name: str, inp, entrypoint: str, result):
        """kind: classify or regress; fills `result` (a Classification- or RegressionResult)."""
        with self.counted(name, kind, entrypoint):
            servable, sig, inputs, n = self._prepare_examples(kind, name, version, label, signature_name, inp)
            self._result(kind, await self.runner.run(servable, sig, inputs, -1, kind), n, result)
            return servable, sig

    def infer_blocking(self, kind: str, name: str, version, label, signature_name: str, inp, entrypoint: str,
                       result):
        with self.counted(name, kind, entrypoint):
            servable, sig, inputs, n = self._prepare_examples(kind, name, version, label, signature_name, inp)
            self._result(kind, self.runner.run_blocking(servable, sig, inputs, -1, kind), n, result)
            return servable, sig

    def multi_inference_blocking(self, tasks: list, inp, entrypoint: str, response) -> None:
        """tasks: [(name, version, label, signature name, method name)], one model, each a classify or
        regress signature; every task's result, in order, into response.results."""
        names = {t[0] for t in tasks}
        if len(names) != 1:
            raise invalid("All tasks of a MultiInference request must use the same model name")
        name = names.pop()
        with self.counted(name, "multi_inference", entrypoint):
            for _, version, label, signature_name, method in tasks:
                kind = {v: k for k, v in inference.METHOD.items()}.get(method)
                if kind is None:
                    raise invalid(f"Unsupported signature method_name: {method}")
                servable, sig, inputs, n = self._prepare_examples(kind, name, version, label, signature_name, inp)
                r = response.results.add()
                r.model_spec.name, r.model_spec.signature_name = name, sig.name
                r.model_spec.version.value = servable.version
                self._result(kind, self.runner.run_blocking(servable, sig, inputs, -1, kind), n,
                             r.classification_result if kind == "classify" else r.regression_result)

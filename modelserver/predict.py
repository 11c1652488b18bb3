"""The API both front ends share: resolve the servable, decode, validate, run, count.

REST awaits `predict` on its event loop; gRPC calls `predict_blocking` in its handler thread,
where the TF call runs without a hop to another thread (TF Serving's own request threads run
the session the same way).
"""
from __future__ import annotations

import time

from modelserver.status import ServingError, from_tf_exception, invalid


UNKNOWN_MODEL = "_unknown_"  # the model_name label of requests for models that are not configured


class PredictAPI:
    def __init__(self, manager, runner, metrics):
        self.manager, self.runner, self.metrics = manager, runner, metrics

    def label(self, name: str) -> str:
        """The model_name a request is counted under: configured models by name, any other under one
        label, so a client sending random names cannot grow the metrics page without bound."""
        return name if name in self.manager.specs else UNKNOWN_MODEL

    def _prepare(self, name, version, label, signature_name: str, decode, outputs: tuple):
        servable = self.manager.resolve(name, version, label)
        sig = servable.signature(signature_name)
        unknown = [k for k in outputs if k not in sig.outputs]
        if unknown:
            raise invalid(f"output tensor alias not found in signature: {unknown[0]} Outputs expected to be in the "
                          f"set {{{','.join(sorted(sig.outputs))}}}.")
        inputs = decode(sig)
        return servable, sig, inputs, servable.validate(sig, inputs)

    def _status(self, e: BaseException) -> ServingError:
        return e if isinstance(e, ServingError) else from_tf_exception(e)  # anything else: INTERNAL, counted

    async def predict(self, name: str, version, label, signature_name: str, decode, entrypoint: str,
                      outputs: tuple = (), timeout_ms: int = 0):
        """decode(sig) -> {input name: ndarray}; returns (servable, signature, outputs).

        Every request is counted with its status; latency is recorded for successful ones only,
        as TF Serving does."""
        t0, status = time.perf_counter(), "OK"
        try:
            servable, sig, inputs, rows = self._prepare(name, version, label, signature_name, decode, outputs)
            return servable, sig, await self.runner.run(servable, sig, inputs, rows, "predict", outputs, timeout_ms)
        except Exception as e:  # noqa: BLE001 - counted, then answered with its code
            err = self._status(e)
            status = err.code
            raise err from None
        finally:
            self.metrics.request(self.label(name), "predict", entrypoint, status, time.perf_counter() - t0)

    def predict_blocking(self, name: str, version, label, signature_name: str, decode, entrypoint: str,
                         outputs: tuple = ()):
        t0, status = time.perf_counter(), "OK"
        try:
            servable, sig, inputs, rows = self._prepare(name, version, label, signature_name, decode, outputs)
            return servable, sig, self.runner.run_blocking(servable, sig, inputs, rows, "predict", outputs)
        except Exception as e:  # noqa: BLE001
            err = self._status(e)
            status = err.code
            raise err from None
        finally:
            self.metrics.request(self.label(name), "predict", entrypoint, status, time.perf_counter() - t0)

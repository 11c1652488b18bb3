"""The API both front ends share: resolve the servable, validate, run, count."""
from __future__ import annotations

import time

from modelserver.status import ServingError, from_tf_exception


class PredictAPI:
    def __init__(self, manager, runner, metrics):
        self.manager, self.runner, self.metrics = manager, runner, metrics

    async def predict(self, name: str, version, label, signature_name: str, decode, entrypoint: str):
        """decode(sig) -> {input name: ndarray}; returns (servable, signature, outputs).

        Every request is counted with its status; latency is recorded for successful
        ones only, as TF Serving does.
        """
        t0 = time.perf_counter()
        status = "OK"
        try:
            servable = self.manager.resolve(name, version, label)
            sig = servable.signature(signature_name)
            inputs = decode(sig)
            rows = servable.validate(sig, inputs)
            outputs = await self.runner.run(servable, sig, inputs, rows, "predict")
            return servable, sig, outputs
        except ServingError as e:
            status = e.code
            raise
        except Exception as e:  # anything else is the server's fault: INTERNAL, still counted
            err = from_tf_exception(e)
            status = err.code
            raise err from None
        finally:
            self.metrics.request(name, "predict", entrypoint, status, time.perf_counter() - t0)

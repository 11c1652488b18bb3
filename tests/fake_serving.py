"""A small TF-Serving-shaped REST server for tests that need exact control of the answers.

It serves the metadata of a [-1, 784] float input and answers :predict after a
chosen delay, with a chosen status, or not at all; it runs on its own thread and
event loop, on a free loopback port.
"""
from __future__ import annotations

import asyncio
import dataclasses
import threading
import time

from aiohttp import web

META = {"model_spec": {"name": "my_model", "signature_name": "", "version": "1"},
        "metadata": {"signature_def": {"signature_def": {"serving_default": {
            "inputs": {"x": {"dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": "-1"}, {"size": "784"}]}}},
            "outputs": {"probabilities": {"dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": "-1"},
                                                                                       {"size": "10"}]}}},
            "method_name": "tensorflow/serving/predict"}}}}}
ANSWER = b'{"predictions": [[0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]]}'


@dataclasses.dataclass
class Behaviour:
    delay: object = None             # callable () -> seconds, per request
    stall_after_s: float = -1.0      # once, this long after the first request: stall everything...
    stall_for_s: float = 1.0         # ...for this long
    status: int = 200
    error_burst: tuple = ()          # (start s, end s): answer 503 inside this window
    body: bytes = ANSWER
    hang: bool = False               # never answer predicts
    reset: bool = False              # close the connection instead of answering
    keepalive_s: float = 75.0        # close keep-alive connections idle this long (aiohttp's default)
    miscount: int = 0                # /monitoring/prometheus/metrics counts each predict 1 + this (-1: none)


class FakeServing:
    def __init__(self, behaviour: Behaviour | None = None):
        self.b = behaviour or Behaviour()
        self.port = None
        self.requests = 0
        self._first = None
        self._stall_until = 0.0
        self._stalled = False
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        assert self._ready.wait(10), "fake server did not start"
        return self

    def __exit__(self, *exc):
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def _run(self):
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._serve())

    async def _serve(self):
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_get("/v1/models/my_model/metadata", lambda r: web.json_response(META))
        app.router.add_post("/v1/models/my_model:predict", self._predict)
        app.router.add_get("/monitoring/prometheus/metrics", self._metrics)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5, keepalive_timeout=self.b.keepalive_s)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    async def _metrics(self, request):
        """TF Serving's request_count and request_latency (1 ms per request), as miscounted as asked."""
        n = self.requests * (1 + self.b.miscount)
        text = ("# TYPE :tensorflow:serving:request_count counter\n"
                f':tensorflow:serving:request_count{{model_name="my_model",status="OK"}} {n}\n'
                "# TYPE :tensorflow:serving:request_latency histogram\n"
                f':tensorflow:serving:request_latency_bucket{{model_name="my_model",API="predict",entrypoint="REST",'
                f'le="+Inf"}} {n}\n'
                f':tensorflow:serving:request_latency_sum{{model_name="my_model",API="predict",entrypoint="REST"}} '
                f"{n * 1000}\n"
                f':tensorflow:serving:request_latency_count{{model_name="my_model",API="predict",entrypoint="REST"}} '
                f"{n}\n")
        return web.Response(text=text, content_type="text/plain")

    async def _predict(self, request):
        await request.read()
        now = time.monotonic()
        if self._first is None:
            self._first = now
        self.requests += 1
        b = self.b
        if b.hang:
            await asyncio.sleep(3600)
        if b.reset:
            request.transport.close()
            return web.Response(status=500)
        if b.stall_after_s >= 0 and not self._stalled and now - self._first >= b.stall_after_s:
            self._stalled, self._stall_until = True, now + b.stall_for_s
        if now < self._stall_until:
            await asyncio.sleep(self._stall_until - now)
        if b.delay is not None:
            await asyncio.sleep(b.delay())
        since = now - self._first
        if b.error_burst and b.error_burst[0] <= since < b.error_burst[1]:
            return web.Response(status=503, body=b'{"error": "burst"}', content_type="application/json")
        return web.Response(status=b.status, body=b.body, content_type="application/json")

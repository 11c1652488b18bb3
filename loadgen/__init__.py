"""An async load generator for TF Serving that measures from the client side.

The pipeline is visible in the module names: scenario (what to run) -> schedule
(when to send) -> http_client / grpc_client (how to send) -> record (a flat
latency per request, cheap) -> exposition (Prometheus, live) -> summary (computed
once at the end).
"""

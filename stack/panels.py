"""The dashboards' panels as data: title, unit, queries and what each shows and how to read it.
stack/dashboards.py turns them into Grafana JSON; `make watch`, `make up`'s graph links and the
report read the same queries back, so nothing can drift.

Selectors use the dashboard variables: $version (several), $model_name (TF Serving's series),
$baseline; Grafana repeats "Where the time goes" once per selected version.
"""
from __future__ import annotations

V = 'version=~"$version"'
M = 'model_name=~"$model_name"'
INFER = 'API!=""'  # TF Serving labels REST status/metadata GETs (healthchecks, probes) API=""
LG = f'{V},outcome="ok",phase!="warmup"'
RATE = "[$__rate_interval]"

# (title, unit, [(expr, legend)], description)
COMPARE = [
    ("QPS (client side)", "reqps",
     [(f"sum by (version) (rate(loadgen_requests_total{{{LG}}}{RATE}))", "{{version}}")],
     "Successful requests per second as the load generator counts them (warmup excluded). Versions under the same "
     "load should sit on the same line; a version below the others cannot keep up."),
    ("QPS (server side)", "reqps",
     [(f'sum by (version) (rate(:tensorflow:serving:request_latency_count{{{V},{M},{INFER}}}{RATE}))', "{{version}}")],
     "Successful inference requests per second as TF Serving counts them (request_latency's count; request_count "
     "would add the healthchecks' status GETs). It follows the client side; a gap means requests were lost or "
     "something else talks to the server."),
    ("P99 latency (client side)", "s",
     [(f"histogram_quantile(0.99, sum by (version, le) (rate(loadgen_request_duration_seconds_bucket{{{LG}}}{RATE})))",
       "{{version}} p99")],
     "99th percentile of the latency the client sees, from its own histogram (16 buckets an octave: within 4.4%). "
     "Lower is better; compare versions at the same QPS."),
    ("P50 latency (client side)", "s",
     [(f"histogram_quantile(0.50, sum by (version, le) (rate(loadgen_request_duration_seconds_bucket{{{LG}}}{RATE})))",
       "{{version}} p50")],
     "Median client-side latency: the typical request. A P99 far above it means a long tail (queueing, GC, batching)."),
    ("P99 latency (server side)", "s",
     [(f"histogram_quantile(0.99, sum by (version, le) (rate(:tensorflow:serving:request_latency_bucket{{{V},{M},{INFER}}}"
       f"{RATE}))) / 1e6", "{{version}} p99")],
     "99th percentile of TF Serving's request_latency. Its buckets are 1.8x apart, so read it as a range, not a point; "
     "the client-side P99 is the precise one."),
    ("Error ratio (client side)", "percentunit",
     [(f'(sum by (version) (rate(loadgen_requests_total{{{V},outcome="error",phase!="warmup"}}{RATE}))'
       f' or sum by (version) (rate(loadgen_requests_total{{{V},phase!="warmup"}}{RATE})) * 0)'
       f' / sum by (version) (rate(loadgen_requests_total{{{V},phase!="warmup"}}{RATE}))', "{{version}}")],
     "Share of requests that failed (any HTTP error, gRPC status, timeout or dropped connection). 0 means none; "
     "anything above 1% fires ErrorRatioHigh."),
    ("Memory (process RSS)", "bytes",
     [(f'sum by (version) (process_resident_memory_bytes{{job="exporter",{V}}})', "{{version}}")],
     "Resident memory of each version's model-server processes (the exporter). A line that keeps rising under "
     "constant load is a leak."),
    ("Memory (GPU, per version)", "bytes",
     [(f"sum by (version) (process_gpu_memory_used_bytes{{{V}}})", "{{version}}")],
     "GPU memory each version's processes hold (NVML). With TF_FORCE_GPU_ALLOW_GROWTH it is what the model needs, "
     "not a pre-allocation; empty without a GPU."),
]
# "Where the time goes", stacked to the client's total, one panel per version (recording rules)
BREAKDOWN = [("TF run", "version:tfserving_tf_run_seconds:mean1m"),
             ("queue", "version:tfserving_queuing_latency_seconds:mean1m"),
             ("front end", "version:tfserving_frontend_seconds:mean1m"),
             ("transport", "version:loadgen_transport_seconds:mean1m")]
BREAKDOWN_DESCRIPTION = (
    "Mean time per request of one version, by stage, stacked to what the client sees: TF run (TensorFlow itself: "
    "what differs between versions), queue (batching), front end (the server around TensorFlow) and transport "
    "(network and client). A version is faster in TensorFlow when its bottom band is thinner.")
DELTA = [  # the table: this window, each version against the baseline
    ("QPS vs baseline", "percentunit", f"version:loadgen_requests:rate1m{{{V}}} / on() group_left() "
     'version:loadgen_requests:rate1m{version="$baseline"} - 1'),
    ("P99 vs baseline", "percentunit", f"version:loadgen_request_duration_seconds:p99_1m{{{V}}} / on() group_left() "
     'version:loadgen_request_duration_seconds:p99_1m{version="$baseline"} - 1'),
    ("P99 (s)", "s", f"version:loadgen_request_duration_seconds:p99_1m{{{V}}}"),
    ("QPS", "reqps", f"version:loadgen_requests:rate1m{{{V}}}"),
]
DELTA_DESCRIPTION = ("Each selected version against the baseline version over the last minute: +10% QPS is 10% more "
                     "throughput, +10% P99 is 10% slower. One minute of noise, no statistics: `make compare` gives "
                     "the verdicts with intervals.")
PHASE_DESCRIPTION = "The load generator's run and its current phase (warmup, steady, ramp steps); empty between runs."

S = 'version="$version"'
DRILL = [
    ("Batching queue latency P99", "s",
     [(f"histogram_quantile(0.99, sum by (le) (rate(:tensorflow:serving:batching_session:queuing_latency_bucket"
       f"{{{S}}}{RATE}))) / 1e6", "queue p99")],
     "How long requests wait for a batch to fill or a batch thread to free (batching on). Near batch_timeout_micros: "
     "batches do not fill at this load."),
    ("Batch size (mean)", "short",
     [(f"sum(rate(:tensorflow:serving:batching_session:processed_batch_size_sum{{{S}}}{RATE})) / "
       f"sum(rate(:tensorflow:serving:batching_session:processed_batch_size_count{{{S}}}{RATE}))", "rows per batch"),
      (f"sum(rate(:tensorflow:serving:batching_session:queuing_latency_count{{{S}}}{RATE})) / "
       f"sum(rate(:tensorflow:core:graph_runs{{{S}}}{RATE}))", "requests per batch")],
     "Rows per TF run with batching on. Near max_batch_size: batches fill; near the rows of one request: they do not. "
     "TF Serving 2.6-2.9 export processed_batch_size as a PercentileSampler (one scalar, no _sum/_count), so rows "
     "per batch is n/a there; requests per batch (queued requests per TF run) works for every version."),
    ("Runtime vs request latency P99", "s",
     [(f"histogram_quantile(0.99, sum by (le) (rate(:tensorflow:serving:runtime_latency_bucket{{{S},{M}}}{RATE}))) "
       "/ 1e6", "runtime p99"),
      (f"histogram_quantile(0.99, sum by (le) (rate(:tensorflow:serving:request_latency_bucket{{{S},{M},{INFER}}}{RATE}))) "
       "/ 1e6", "request p99")],
     "TF Serving's runtime_latency (the session run, queue included with batching) against request_latency (the "
     "whole request in the server). The gap is the serving path around TensorFlow."),
    ("Graph runs per second", "ops",
     [(f"sum(rate(:tensorflow:core:graph_runs{{{S}}}{RATE}))", "graph runs")],
     "TensorFlow executions per second: one per request without batching, one per batch with it."),
    ("Requests by status", "reqps",
     [(f"sum by (status) (rate(:tensorflow:serving:request_count{{{S},{M}}}{RATE}))", "{{status}}")],
     "Requests per second by TF Serving's status code (request_count: the healthchecks' status GETs count as OK "
     "too); everything but OK is an error a client received."),
]
GPU = [
    ("GPU memory used", "bytes", [("gpu_memory_used_bytes", "gpu {{gpu}} {{name}}")],
     "Memory used on each GPU, all processes together (NVML)."),
    ("GPU memory per process", "bytes", [(f"process_gpu_memory_used_bytes{{{V}}}", "{{version}} pid {{pid}}")],
     "GPU memory of each model-server process, attributed to its version."),
    ("GPU utilization", "percentunit", [("gpu_utilization_ratio", "gpu {{gpu}}")],
     "Share of time a kernel ran on the GPU (NVML). Low under load: the GPU waits for the host."),
    ("GPU power", "watt", [("gpu_power_watts", "gpu {{gpu}}")],
     "Power draw of each GPU: near its limit under load it is the bound, and a version that does the same work "
     "with less power is cheaper to run."),
    ("GPU temperature", "celsius", [("gpu_temperature_celsius", "gpu {{gpu}}")],
     "Temperature of each GPU: a hot GPU throttles and slows every version on it."),
    ("Model server RSS", "bytes", [(f'process_resident_memory_bytes{{job="exporter",{V}}}', "{{version}} pid {{pid}}")],
     "Resident memory of each model-server process (the exporter's CPU fallback also works without a GPU)."),
    ("Model server CPU", "percentunit",
     [(f'rate(process_cpu_seconds_total{{job="exporter",{V}}}{RATE})', "{{version}} pid {{pid}}")],
     "CPU time of each model-server process per second (1 = one core busy)."),
]

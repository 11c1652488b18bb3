"""TF Serving's Prometheus metrics, with its names, labels, types and units.

Requests are recorded from the event loop (REST) and from gRPC and batch threads, so every
record takes one lock (uncontended: ~0.1 us): a counter that loses an increment would break
the exact reconciliation of client and server counts. The hot path is otherwise a dict lookup,
a bisect and two adds. The text exposition is written here rather than by prometheus_client:
TF Serving declares counters without a `_total` suffix
(`# TYPE :tensorflow:serving:request_count counter`), which prometheus_client's
writer always appends; dashboards written for TF Serving match these names.
"""
from __future__ import annotations

import bisect
import re
import threading

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _labels(names, values, extra: str = "") -> str:
    parts = [f'{n}="{_escape(str(v))}"' for n, v in zip(names, values)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(v: float) -> str:
    """A double as TF Serving's exporter prints a histogram's `_sum` (absl::StrCat: six significant
    digits): what readers of a real server get, so the drop-in cannot be more precise than it."""
    return format(float(v), ".6g")


def exponential_buckets(scale: float, growth: float, count: int) -> list:
    """TF's monitoring::Buckets::Exponential: scale * growth**i for i < count."""
    return [scale * growth ** i for i in range(count)]


# TF Serving's API label: REST requests carry the URL's verb ("predict"; "" for status and metadata
# GETs, http_server.cc), gRPC and runtime_latency the method's name ("Predict", prediction_service_impl.cc).
RUNTIME_API = {"predict": "Predict", "classify": "Classify", "regress": "Regress", "multi_inference": "MultiInference"}
LATENCY_BUCKETS = exponential_buckets(10, 1.8, 33)  # microseconds, as TF Serving's request_latency
# processed_batch_size from 2.10: a Sampler with Buckets::Exponential(1, 2, 14) (batching_util.h)
BATCH_SIZE_BUCKETS = exponential_buckets(1, 2, 14)
# Before 2.10 it is a PercentileSampler, which the exporter prints as one counter-typed scalar that
# is always 0 (it prints int64_value; a percentile point has none): no _sum, no _count.
HISTOGRAM_BATCH_SIZE_FROM = (2, 10)


def tf_release(version: str) -> tuple:
    """(major, minor) of a TensorFlow version string; (99, 0) when unknown (newest behaviour)."""
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else (99, 0)


class _Histogram:
    def __init__(self, name, doc, labelnames, bounds):
        self.name, self.doc, self.labelnames, self.bounds = name, doc, labelnames, bounds
        self.cells = {}  # label values -> [bucket counts..., +Inf count, sum]

    def observe(self, labels: tuple, value: float) -> None:
        cell = self.cells.get(labels)
        if cell is None:
            cell = self.cells[labels] = [0] * (len(self.bounds) + 1) + [0.0]
        cell[bisect.bisect_left(self.bounds, value)] += 1
        cell[-1] += value

    def render(self, out: list) -> None:
        out.append(f"# HELP {self.name} {self.doc}\n# TYPE {self.name} histogram\n")
        les = [_fmt(b) for b in self.bounds] + ["+Inf"]
        for labels, cell in self.cells.items():
            acc = 0
            for le, n in zip(les, cell[:-1]):
                acc += n
                le_label = 'le="' + le + '"'
                out.append(f"{self.name}_bucket{_labels(self.labelnames, labels, le_label)} {acc}\n")
            lab = _labels(self.labelnames, labels)
            out.append(f"{self.name}_sum{lab} {_num(cell[-1])}\n{self.name}_count{lab} {acc}\n")


class _Counter:
    def __init__(self, name, doc, labelnames):
        self.name, self.doc, self.labelnames, self.cells = name, doc, labelnames, {}

    def inc(self, labels: tuple = (), by: float = 1) -> None:
        self.cells[labels] = self.cells.get(labels, 0) + by

    def render(self, out: list) -> None:
        out.append(f"# HELP {self.name} {self.doc}\n# TYPE {self.name} counter\n")
        for labels, v in self.cells.items():  # TF's counters are int64: printed with %d
            out.append(f"{self.name}{_labels(self.labelnames, labels)} {int(v)}\n")
        if not self.labelnames and not self.cells:
            out.append(f"{self.name} 0\n")


class _PercentileScalar:
    """A PercentileSampler<0> as TF Serving <= 2.9 exports it: `# TYPE name counter` and `name{} 0`
    once the first batch created it. The distribution it keeps never reaches the metrics page."""

    labelnames = ()

    def __init__(self, name, doc):
        self.name, self.doc, self.cells = name, doc, {}

    def observe(self, labels: tuple, value: float) -> None:
        self.cells[labels] = 0

    def render(self, out: list) -> None:
        if self.cells:
            out.append(f"# HELP {self.name} {self.doc}\n# TYPE {self.name} counter\n{self.name}{{}} 0\n")


def _fmt(bound: float) -> str:
    """Bucket bounds with six significant digits, as TF Serving's exporter (absl StrCat) writes them."""
    return "+Inf" if bound == float("inf") else format(bound, ".6g")


class ServingMetrics:
    """Every metric the model server exports; `render()` is what the endpoint writes."""

    def __init__(self, tensorflow: str = ""):
        p = ":tensorflow:serving:"
        self.request_count = _Counter(p + "request_count", "The total number of requests.", ("model_name", "status"))
        self.request_latency = _Histogram(p + "request_latency", "Distribution of wall time (in microseconds) "
                                          "for Tensorflow Serving request.", ("model_name", "API", "entrypoint"),
                                          LATENCY_BUCKETS)
        self.runtime_latency = _Histogram(p + "runtime_latency", "Distribution of wall time (in microseconds) "
                                          "for Tensorflow runtime.", ("model_name", "API", "runtime"), LATENCY_BUCKETS)
        self.queuing_latency = _Histogram(p + "batching_session:queuing_latency", "Distribution of wall time spent "
                                          "(in microseconds) in queuing", ("thread_pool_name",), LATENCY_BUCKETS)
        batch_doc = "Tracks the batch size distribution on processing."
        self.batch_size = _Histogram(p + "batching_session:processed_batch_size", batch_doc, (), BATCH_SIZE_BUCKETS) \
            if tf_release(tensorflow) >= HISTOGRAM_BATCH_SIZE_FROM else \
            _PercentileScalar(p + "batching_session:processed_batch_size", batch_doc)
        self.graph_runs = _Counter(":tensorflow:core:graph_runs", "The number of graph executions used to collect "
                                   "/tensorflow/core/graph_run_time_usecs", ())
        self.graph_run_time = _Counter(":tensorflow:core:graph_run_time_usecs", "The total time spent on executing "
                                       "graphs in microseconds.", ())
        self.graph_build_calls = _Counter(":tensorflow:core:graph_build_calls", "The number of times TensorFlow "
                                          "has created a new client graph. A client graph is a sub-graph of the "
                                          "full graph, induced by a set of options.", ())
        self.graph_build_time = _Counter(":tensorflow:core:graph_build_time_usecs", "The amount of time TensorFlow "
                                         "has spent creating new client graphs in microseconds.", ())
        # This server's own (no TF Serving name): callables dropped from a servable's bounded cache.
        self.callable_evictions = _Counter("tfsb_modelserver_callable_cache_evictions_total", "Session callables "
                                           "dropped because a servable held MAX_CALLABLES (64) output sets.", ())
        self.load_attempts = _Counter(":tensorflow:cc:saved_model:load_attempt_count", "The number of times a "
                                      "SavedModel was successfully loaded.", ("model_path", "status"))
        self.load_latency = _Counter(":tensorflow:cc:saved_model:load_latency", "Latency in microseconds for "
                                     "SavedModels that were successfully loaded.", ("model_path",))
        self.warmup_latency = _Histogram(p + "model_warmup_latency", "Distribution of wall time (in microseconds) "
                                         "for warming up the model.", ("model_path", "status"), LATENCY_BUCKETS)
        self._lock = threading.Lock()
        self._all = [self.request_count, self.request_latency, self.runtime_latency, self.queuing_latency,
                     self.batch_size, self.graph_runs, self.graph_run_time, self.graph_build_calls,
                     self.graph_build_time, self.callable_evictions, self.load_attempts, self.load_latency, self.warmup_latency]

    def render(self) -> bytes:
        out = []
        with self._lock:  # one consistent snapshot: a histogram's count equals its +Inf bucket
            for m in self._all:
                # processed_batch_size is created by the first batch (a function-local static in TF Serving)
                if m.cells or (not m.labelnames and m is not self.batch_size):
                    m.render(out)
        return "".join(out).encode()

    # ---- what the server calls -------------------------------------------
    def request(self, model: str, api: str, entrypoint: str, status: str, latency_s: float) -> None:
        """TF Serving counts every request, REST status and metadata GETs too (api ""), but records
        latency for successful ones only; gRPC labels the API by method name; MultiInference records
        neither (prediction_service_impl.cc)."""
        if entrypoint == "GRPC":
            if api == "multi_inference":
                return
            api = RUNTIME_API.get(api, api)
        with self._lock:
            self.request_count.inc((model, status))
            if status == "OK":
                self.request_latency.observe((model, api, entrypoint), latency_s * 1e6)

    def runtime(self, model: str, api: str, seconds: float) -> None:
        """One unbatched request's TF execution ("TF1": the runtime label TF Serving's SavedModel
        bundle path reports)."""
        with self._lock:
            self.runtime_latency.observe((model, RUNTIME_API.get(api, api), "TF1"), seconds * 1e6)
            self.graph_runs.inc()
            self.graph_run_time.inc(by=seconds * 1e6)

    def batch(self, pool: str, size: int, queued_s: list, model: str, task_runtimes: list, seconds: float) -> None:
        """One batch: its size, each task's wait in the queue and runtime, its one TF execution."""
        with self._lock:
            self.batch_size.observe((), size)
            for q in queued_s:
                self.queuing_latency.observe((pool,), q * 1e6)
            for api, runtime_s in task_runtimes:
                self.runtime_latency.observe((model, RUNTIME_API.get(api, api), "TF1"), runtime_s * 1e6)
            self.graph_runs.inc()
            self.graph_run_time.inc(by=seconds * 1e6)

    def graph_built(self, seconds: float, evicted: int = 0) -> None:
        """A client graph built (a Session callable made for a new set of feeds and fetches), after
        `evicted` older ones were dropped from the servable's bounded cache."""
        with self._lock:
            self.graph_build_calls.inc()
            self.graph_build_time.inc(by=seconds * 1e6)
            if evicted:
                self.callable_evictions.inc(by=evicted)

    def model_loaded(self, path: str, ok: bool, load_s: float, warmup_s: float) -> None:
        with self._lock:
            self.load_attempts.inc((path, "success" if ok else "fail"))
            if ok:
                self.load_latency.inc((path,), load_s * 1e6)
                self.warmup_latency.observe((path, "OK"), warmup_s * 1e6)

"""The load generator's /metrics: a custom collector over the recorder's arrays.

Exposed through prometheus_client's standard HTTP handler (a daemon thread). The
collector only reads snapshots the event loop swapped in whole (record.Series),
so a scrape never blocks the hot path and never sees half an update. All names
are in base units and prefixed loadgen_; labels stay low-cardinality.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from prometheus_client import start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import CollectorRegistry

from loadgen.record import BOUNDS
from core import settings

_LE = [repr(b) for b in BOUNDS] + ["+Inf"]


class LoadgenCollector:
    def __init__(self, rec, live, drivers_fn, shard: tuple = (0, 1)):
        self.rec, self.live, self.drivers_fn = rec, live, drivers_fn
        self.shard = str(shard[0]) if shard[1] > 1 else ""

    def collect(self):
        """Every family, each sample labelled with its shard when the load is split over processes
        (Prometheus sums the shards' histograms and counters by version)."""
        for fam in self._collect():
            if self.shard:
                fam.samples = [smp._replace(labels={**smp.labels, "shard": self.shard}) for smp in fam.samples]
            yield fam

    def _collect(self):
        dur = HistogramMetricFamily("loadgen_request_duration_seconds", "Client-side request latency; open loop "
                                    "measures from the intended send time.", labels=["version", "protocol", "phase",
                                                                                    "outcome"])
        lag = HistogramMetricFamily("loadgen_send_lag_seconds", "Open loop: actual minus intended send time.",
                                    labels=["version", "protocol", "phase"])
        total = CounterMetricFamily("loadgen_requests", "Requests completed, by outcome and code.",
                                    labels=["version", "protocol", "phase", "outcome", "code"])
        ok_code = {"rest": "200", "grpc": "OK"}
        for labels, series in list(self.rec.series.items()):
            counts, ssum, count = series.snapshot
            if not count:
                continue
            acc, buckets = 0, []
            for le, n in zip(_LE, counts.tolist()):
                acc += n
                buckets.append((le, acc))
            version, protocol, phase, kind = labels
            if kind == "lag":
                lag.add_metric([version, protocol, phase], buckets, ssum)
            else:
                dur.add_metric(list(labels), buckets, ssum)
            if kind == "ok":
                total.add_metric([version, protocol, phase, "ok", ok_code.get(protocol, "ok")], count)
        for key, n in list(self.rec.errors.items()):
            total.add_metric([key[0], key[1], key[2], "error", key[3]], n)
        yield dur
        yield lag
        yield total
        live = self.live
        info = GaugeMetricFamily("loadgen_run_info", "The run and its current phase (always 1).",
                                 labels=["run_id", "scenario", "mode", "phase"])
        info.add_metric([live.run_id, live.scenario, live.mode, live.phase], 1)
        yield info
        marks = GaugeMetricFamily("loadgen_phase_start_timestamp_seconds", "When each phase started (unix time).",
                                  labels=["run_id", "phase"])
        ends = GaugeMetricFamily("loadgen_phase_end_timestamp_seconds", "When each phase ended (unix time).",
                                 labels=["run_id", "phase"])
        for phase, start, end in list(live.phase_marks):
            marks.add_metric([live.run_id, phase], start)
            if end is not None:
                ends.add_metric([live.run_id, phase], end)
        yield marks
        yield ends
        inflight = GaugeMetricFamily("loadgen_in_flight_requests", "Requests sent and not yet answered.",
                                     labels=["version", "protocol"])
        reconnects = CounterMetricFamily("loadgen_reconnects", "Connections the server closed that were reopened.",
                                         labels=["version", "protocol"])
        for d in self.drivers_fn():
            inflight.add_metric([d.t.version, d.t.protocol], d.in_flight)
            reconnects.add_metric([d.t.version, d.t.protocol], d.reconnects)
        yield inflight
        yield reconnects
        offered = GaugeMetricFamily("loadgen_offered_rate_requests_per_second", "Open loop: the rate offered now.",
                                    labels=["version", "protocol"])
        achieved = GaugeMetricFamily("loadgen_achieved_rate_requests_per_second", "Completions in the last second.",
                                     labels=["version", "protocol"])
        for name, rate in list(live.offered.items()):
            offered.add_metric(name.split("/", 1), rate)
        for name, rate in list(live.achieved.items()):
            achieved.add_metric(name.split("/", 1), rate)
        yield offered
        yield achieved
        yield GaugeMetricFamily("loadgen_event_loop_lag_seconds", "How late a 100 ms timer fired, last tick.",
                                value=live.loop_lag_s)
        valid = GaugeMetricFamily("loadgen_run_valid", "1 when the finished run's result is valid, 0 when not.",
                                  labels=["run_id", "version", "protocol"])
        for name, ok in list(live.valid.items()):
            valid.add_metric([live.run_id] + name.split("/", 1), ok)
        yield valid


def targets_dir() -> Path:
    """Where the local stack's Prometheus looks for load-generator targets (file_sd)."""
    return Path(settings.loadgen_targets_dir() or settings.state_root() / "local" / "prometheus" / "targets")


def register(port: int, addr: str, run_id: str) -> Path | None:
    """Tell the stack's Prometheus to scrape this run, while it runs: a file_sd file that is removed
    at the end, so `up` never shows a load generator that is simply not running as DOWN. Nothing is
    written when no stack was brought up here (no targets directory)."""
    d = targets_dir()
    if not d.is_dir():
        return None
    from fileio.atomic import write_atomic

    host = "127.0.0.1" if addr in ("", "0.0.0.0", "::") else addr
    path = d / f"loadgen-{port}.json"
    write_atomic(path, json.dumps([{"targets": [f"{host}:{port}"], "labels": {"run_id": run_id}}]))
    return path


class Scraped:
    """The collector behind /metrics, noting when it was last scraped: a run that someone scrapes stays up until
    a scrape after its last request (wait_final_scrape), so Prometheus' last sample equals the summary."""

    def __init__(self, collector):
        self.collector, self.last = collector, 0.0

    def collect(self):
        self.last = time.monotonic()
        yield from self.collector.collect()


FINAL_SCRAPE_S = 10.0  # the longest wait for it: several of the stack's 2 s scrape intervals (stack/promconfig.py)


def serve_metrics(collector, port: int, addr: str = "127.0.0.1", run_id: str = ""):
    """Start /metrics on addr:port and register it; returns a handle for stop_metrics."""
    registry = CollectorRegistry(auto_describe=False)
    scraped = Scraped(collector)
    registry.register(scraped)
    server, thread = start_http_server(port, addr=addr, registry=registry)
    return server, thread, register(port, addr, run_id), scraped


def wait_final_scrape(handle, ended: float, wait=None) -> bool:
    """Where /metrics was scraped during the run, wait (at most FINAL_SCRAPE_S) for a scrape after `ended`
    (time.monotonic() when the last request was recorded); True when it came or nobody scrapes."""
    scraped = handle[3]
    if not scraped.last:
        return True
    deadline = time.monotonic() + FINAL_SCRAPE_S
    while scraped.last <= ended and time.monotonic() < deadline:
        if wait is not None and wait(0.05):
            break
        time.sleep(0 if wait is not None else 0.05)
    return scraped.last > ended


def stop_metrics(handle) -> None:
    if handle:
        server, thread, registered, _ = handle
        if registered:
            registered.unlink(missing_ok=True)
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

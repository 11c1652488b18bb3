"""Grafana dashboards as data: generated here, committed under grafana/dashboards/, read back
by `make up` (Prometheus graph links), `make watch` and the report, so none can drift.

    python -m stack dashboards      # regenerate grafana/dashboards/*.json
"""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIR = ROOT / "grafana" / "dashboards"
DS = {"type": "prometheus", "uid": "tfsb-prometheus"}
V = 'version=~"$version"'
LG = f'{V},outcome="ok",phase!="warmup"'

COMPARE = [  # (title, unit, [(expr, legend)]) -- the side-by-side comparison panels
    ("QPS (client side)", "reqps", [(f"sum by (version) (rate(loadgen_requests_total{{{LG}}}[$__rate_interval]))",
                                     "{{version}}")]),
    ("QPS (server side)", "reqps", [(f'sum by (version) (rate(:tensorflow:serving:request_count{{{V},status="OK"}}'
                                     "[$__rate_interval]))", "{{version}}")]),
    ("P99 latency (client side)", "s", [(
        f"histogram_quantile(0.99, sum by (version, le) (rate(loadgen_request_duration_seconds_bucket{{{LG}}}"
        "[$__rate_interval])))", "{{version}} p99")]),
    ("P50 latency (client side)", "s", [(
        f"histogram_quantile(0.50, sum by (version, le) (rate(loadgen_request_duration_seconds_bucket{{{LG}}}"
        "[$__rate_interval])))", "{{version}} p50")]),
    ("P99 latency (server side)", "s", [(
        f"histogram_quantile(0.99, sum by (version, le) (rate(:tensorflow:serving:request_latency_bucket{{{V}}}"
        "[$__rate_interval]))) / 1e6", "{{version}} p99")]),
    ("Error ratio (client side)", "percentunit", [(  # `or ... * 0`: no errors is 0, not no data
        f'(sum by (version) (rate(loadgen_requests_total{{{V},outcome="error",phase!="warmup"}}[$__rate_interval]))'
        f' or sum by (version) (rate(loadgen_requests_total{{{V},phase!="warmup"}}[$__rate_interval])) * 0)'
        f' / sum by (version) (rate(loadgen_requests_total{{{V},phase!="warmup"}}[$__rate_interval]))',
        "{{version}}")]),
    ("Memory (process RSS)", "bytes", [(f'sum by (version) (process_resident_memory_bytes{{job="exporter",{V}}})',
                                        "{{version}}")]),
    ("Memory (GPU, per version)", "bytes", [(f"sum by (version) (process_gpu_memory_used_bytes{{{V}}})",
                                             "{{version}}")]),
]
BREAKDOWN = [  # "Where the time goes", stacked, one panel per version: the recording rules of the breakdown
    ("TF run", "version:tfserving_tf_run_seconds:mean1m"), ("queue", "version:tfserving_queuing_latency_seconds:mean1m"),
    ("front end", "version:tfserving_frontend_seconds:mean1m"), ("transport", "version:loadgen_transport_seconds:mean1m"),
]
DELTA = [  # the table: this window, each version against the baseline
    ("QPS vs baseline", "percentunit",
     f"version:loadgen_requests:rate1m{{{V}}} / on() group_left() version:loadgen_requests:rate1m"
     '{version="$baseline"} - 1'),
    ("P99 vs baseline", "percentunit",
     f"version:loadgen_request_duration_seconds:p99_1m{{{V}}} / on() group_left() "
     'version:loadgen_request_duration_seconds:p99_1m{version="$baseline"} - 1'),
    ("P99 (s)", "s", f"version:loadgen_request_duration_seconds:p99_1m{{{V}}}"),
    ("QPS", "reqps", f"version:loadgen_requests:rate1m{{{V}}}"),
]
S = 'version="$version"'
DRILL = [
    ("Batching queue latency P99", "s", [(
        f"histogram_quantile(0.99, sum by (le) (rate(:tensorflow:serving:batching_session:queuing_latency_bucket"
        f"{{{S}}}[$__rate_interval]))) / 1e6", "queue p99")]),
    ("Batch size (mean)", "short", [(
        f"sum(rate(:tensorflow:serving:batching_session:processed_batch_size_sum{{{S}}}[$__rate_interval])) / "
        f"sum(rate(:tensorflow:serving:batching_session:processed_batch_size_count{{{S}}}[$__rate_interval]))",
        "mean batch")]),
    ("Runtime vs request latency P99", "s", [
        (f"histogram_quantile(0.99, sum by (le) (rate(:tensorflow:serving:runtime_latency_bucket{{{S}}}"
         "[$__rate_interval]))) / 1e6", "runtime p99"),
        (f"histogram_quantile(0.99, sum by (le) (rate(:tensorflow:serving:request_latency_bucket{{{S}}}"
         "[$__rate_interval]))) / 1e6", "request p99")]),
    ("Graph runs per second", "ops", [(f"sum(rate(:tensorflow:core:graph_runs{{{S}}}[$__rate_interval]))",
                                       "graph runs")]),
    ("Requests by status", "reqps", [(f"sum by (status) (rate(:tensorflow:serving:request_count{{{S}}}"
                                      "[$__rate_interval]))", "{{status}}")]),
]
GPU = [
    ("GPU memory used", "bytes", [("gpu_memory_used_bytes", "gpu {{gpu}} {{name}}")]),
    ("GPU memory per process", "bytes", [(f"process_gpu_memory_used_bytes{{{V}}}", "{{version}} pid {{pid}}")]),
    ("GPU utilization", "percentunit", [("gpu_utilization_ratio", "gpu {{gpu}}")]),
    ("GPU power", "watt", [("gpu_power_watts", "gpu {{gpu}}")]),
    ("GPU temperature", "celsius", [("gpu_temperature_celsius", "gpu {{gpu}}")]),
    ("Model server RSS", "bytes", [(f'process_resident_memory_bytes{{job="exporter",{V}}}',
                                    "{{version}} pid {{pid}}")]),
    ("Model server CPU", "percentunit", [(f'rate(process_cpu_seconds_total{{job="exporter",{V}}}[$__rate_interval])',
                                          "{{version}} pid {{pid}}")]),
]


def _var(name, query, multi, include_all=True):
    return {"name": name, "type": "query", "datasource": DS, "query": {"query": query, "refId": name},
            "definition": query, "multi": multi, "includeAll": include_all and multi, "refresh": 2,
            "current": {}, "sort": 3}


def _timeseries(pid, title, unit, targets, x, y):
    return {"id": pid, "type": "timeseries", "title": title, "datasource": DS,
            "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]}},
            "targets": [{"refId": chr(65 + i), "datasource": DS, "expr": e, "legendFormat": leg}
                        for i, (e, leg) in enumerate(targets)]}


def _breakdown_panel(pid, y):
    """Mean time per request by stage, stacked to the client's total; Grafana repeats it per version."""
    p = _timeseries(pid, "Where the time goes: $version", "s",
                    [(f"{rule}{{{V}}}", label) for label, rule in BREAKDOWN], 0, y)
    p.update({"repeat": "version", "repeatDirection": "h", "maxPerRow": 4})
    p["gridPos"]["w"] = 6
    p["fieldConfig"]["defaults"]["custom"] = {"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 60,
                                              "drawStyle": "line", "lineWidth": 1}
    return p


def _dashboard(uid, title, variables, panels):
    return {"uid": uid, "title": title, "schemaVersion": 39, "version": 1, "editable": True, "refresh": "5s",
            "time": {"from": "now-15m", "to": "now"}, "tags": ["tfserving-bench"],
            "templating": {"list": variables},
            "annotations": {"list": [{"name": "Run phases", "datasource": DS, "enable": True, "iconColor": "blue",
                                      "expr": "changes(loadgen_run_info[30s]) > 0 or loadgen_run_info",
                                      "titleFormat": "run {{run_id}}: {{phase}}", "step": "10s"}]},
            "panels": panels}


def build() -> dict:
    versions = _var("version", 'label_values(up{job="tfserving"}, version)', True)
    baseline = _var("baseline", 'label_values(up{job="tfserving"}, version)', False)
    run = _var("run_id", "label_values(loadgen_run_info, run_id)", True)
    panels = [_timeseries(i + 1, t, u, tg, 12 * (i % 2), 8 * (i // 2)) for i, (t, u, tg) in enumerate(COMPARE)]
    table = {"id": 100, "type": "table", "title": "This window vs the baseline version", "datasource": DS,
             "gridPos": {"h": 8, "w": 24, "x": 0, "y": 8 * ((len(COMPARE) + 1) // 2)},
             "fieldConfig": {"defaults": {"unit": "percentunit"}, "overrides": [
                 {"matcher": {"id": "byFrameRefID", "options": chr(65 + i)},
                  "properties": [{"id": "unit", "value": u}]} for i, (_, u, _) in enumerate(DELTA)]},
             "transformations": [{"id": "merge", "options": {}}],
             "targets": [{"refId": chr(65 + i), "datasource": DS, "expr": e, "legendFormat": t, "instant": True,
                          "format": "table"} for i, (t, _, e) in enumerate(DELTA)]}
    breakdown = _breakdown_panel(102, table["gridPos"]["y"] + 8)
    phase = {"id": 101, "type": "stat", "title": "Load generator phase", "datasource": DS,
             "gridPos": {"h": 4, "w": 24, "x": 0, "y": breakdown["gridPos"]["y"] + 8},
             "fieldConfig": {"defaults": {"unit": "none"}, "overrides": []},
             "options": {"textMode": "name", "reduceOptions": {"calcs": ["lastNotNull"]}},
             "targets": [{"refId": "A", "datasource": DS, "expr": 'loadgen_run_info{run_id=~"$run_id"}',
                          "legendFormat": "{{run_id}}: {{phase}}", "instant": True}]}
    single = _var("version", 'label_values(up{job="tfserving"}, version)', False)
    return {
        "compare.json": _dashboard("tfsb-compare", "TF Serving: version comparison", [versions, baseline, run],
                                   panels + [table, breakdown, phase]),
        "version.json": _dashboard("tfsb-version", "TF Serving: one version in depth", [single],
                                   [_timeseries(i + 1, t, u, tg, 12 * (i % 2), 8 * (i // 2))
                                    for i, (t, u, tg) in enumerate(DRILL)]),
        "gpu.json": _dashboard("tfsb-gpu", "TF Serving: GPUs and host", [versions],
                               [_timeseries(i + 1, t, u, tg, 12 * (i % 2), 8 * (i // 2))
                                for i, (t, u, tg) in enumerate(GPU)]),
    }


def write() -> list:
    DIR.mkdir(parents=True, exist_ok=True)
    out = []
    for name, dash in build().items():
        (DIR / name).write_text(json.dumps(dash, indent=2, sort_keys=True) + "\n")
        out.append(DIR / name)
    return out


def load(name: str) -> dict:
    return json.loads((DIR / name).read_text())


def panel_queries(dash: dict) -> list:
    """[(panel title, target legend, expr)] of every panel of a dashboard."""
    return [(p["title"], t.get("legendFormat", ""), t["expr"]) for p in dash["panels"] for t in p["targets"]]


def substitute(expr: str, versions: list, baseline: str, rate_interval: str = "1m", run_id: str = ".*") -> str:
    """A panel query as Prometheus can run it: Grafana's variables filled in."""
    regex = "|".join(v.replace(".", "\\\\.") for v in versions)
    return (expr.replace("$__rate_interval", rate_interval).replace('=~"$version"', f'=~"{regex}"')
            .replace('="$version"', f'="{versions[0]}"').replace("$baseline", baseline)
            .replace("$run_id", run_id))


def graph_link(prometheus_url: str, expr: str, range_input: str = "15m") -> str:
    """A link into Prometheus' own graph page showing one panel's query."""
    from urllib.parse import urlencode

    return f"{prometheus_url}/graph?" + urlencode({"g0.expr": expr, "g0.tab": "0", "g0.range_input": range_input})

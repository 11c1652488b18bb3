"""Grafana dashboards as data: generated here, committed under grafana/dashboards/, read back
by `make up` (Prometheus graph links), `make watch` and the report, so none can drift.

    python -m stack dashboards      # regenerate grafana/dashboards/*.json
"""
from __future__ import annotations

import json

from core.settings import ROOT
DIR = ROOT / "grafana" / "dashboards"
from stack.panels import (BREAKDOWN, BREAKDOWN_DESCRIPTION, COMPARE, DELTA, DELTA_DESCRIPTION, DRILL, GPU,
                          PHASE_DESCRIPTION, V)

# Every panel and query names its data source through the `datasource` variable, so the dashboards load
# in any Grafana (the Prometheus of kube-prometheus-stack, a provisioned one, one picked by hand).
DS = {"type": "prometheus", "uid": "${datasource}"}
NATURAL_ASC = 7  # Grafana's variable sort "natural (asc)": 2.6, 2.8, 2.9, 2.12, 2.21


def _var(name, query, multi, include_all=True, label=""):
    return {"name": name, "label": label or name, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": name}, "definition": query, "multi": multi,
            "includeAll": include_all and multi, "refresh": 2, "current": {}, "sort": NATURAL_ASC}


def _datasource_var():
    return {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
            "current": {}, "refresh": 1, "regex": "", "hide": 0}


def _timeseries(pid, title, unit, targets, x, y, description):
    return {"id": pid, "type": "timeseries", "title": title, "description": description, "datasource": DS,
            "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]}},
            "targets": [{"refId": chr(65 + i), "datasource": DS, "expr": e, "legendFormat": leg}
                        for i, (e, leg) in enumerate(targets)]}


def _grid(specs: list, first_id: int = 1, y0: int = 0) -> list:
    return [_timeseries(first_id + i, t, u, tg, 12 * (i % 2), y0 + 8 * (i // 2), d)
            for i, (t, u, tg, d) in enumerate(specs)]


def _breakdown_panel(pid, y):
    """Mean time per request by stage, stacked to the client's total; Grafana repeats it per version."""
    p = _timeseries(pid, "Where the time goes: $version", "s",
                    [(f"{rule}{{{V}}}", label) for label, rule in BREAKDOWN], 0, y, BREAKDOWN_DESCRIPTION)
    p.update({"repeat": "version", "repeatDirection": "h", "maxPerRow": 4})
    p["gridPos"]["w"] = 6
    p["fieldConfig"]["defaults"]["custom"] = {"stacking": {"mode": "normal", "group": "A"}, "fillOpacity": 60,
                                              "drawStyle": "line", "lineWidth": 1}
    return p


def _dashboard(uid, title, description, variables, panels):
    return {"uid": uid, "title": title, "description": description, "schemaVersion": 39, "version": 1,
            "editable": False, "refresh": "5s", "time": {"from": "now-15m", "to": "now"}, "tags": ["tfserving-bench"],
            "templating": {"list": [_datasource_var(), *variables]},
            "annotations": {"list": [{"name": "Run phases", "datasource": DS, "enable": True, "iconColor": "blue",
                                      "target": {"refId": "Anno", "expr": "changes(loadgen_run_info[30s]) > 0",
                                                 "titleFormat": "run {{run_id}}: {{phase}}", "step": "10s"}}]},
            "panels": panels}


def build() -> dict:
    versions = _var("version", 'label_values(up{job="tfserving"}, version)', True, label="TF Serving version")
    models = _var("model_name", "label_values(:tensorflow:serving:request_count, model_name)", True, label="model")
    baseline = _var("baseline", 'label_values(up{job="tfserving"}, version)', False)
    run = _var("run_id", "label_values(loadgen_run_info, run_id)", True, label="load run")
    panels = _grid(COMPARE)
    table = {"id": 100, "type": "table", "title": "This window vs the baseline version", "description": DELTA_DESCRIPTION,
             "datasource": DS, "gridPos": {"h": 8, "w": 24, "x": 0, "y": 8 * ((len(COMPARE) + 1) // 2)},
             "fieldConfig": {"defaults": {"unit": "percentunit"}, "overrides": [
                 {"matcher": {"id": "byFrameRefID", "options": chr(65 + i)},
                  "properties": [{"id": "unit", "value": u}]} for i, (_, u, _) in enumerate(DELTA)]},
             "transformations": [{"id": "merge", "options": {}}],
             "targets": [{"refId": chr(65 + i), "datasource": DS, "expr": e, "legendFormat": t, "instant": True,
                          "format": "table"} for i, (t, _, e) in enumerate(DELTA)]}
    breakdown = _breakdown_panel(102, table["gridPos"]["y"] + 8)
    phase = {"id": 101, "type": "stat", "title": "Load generator phase", "description": PHASE_DESCRIPTION,
             "datasource": DS, "gridPos": {"h": 4, "w": 24, "x": 0, "y": breakdown["gridPos"]["y"] + 8},
             "fieldConfig": {"defaults": {"unit": "none"}, "overrides": []},
             "options": {"textMode": "name", "reduceOptions": {"calcs": ["lastNotNull"]}},
             "targets": [{"refId": "A", "datasource": DS, "expr": 'loadgen_run_info{run_id=~"$run_id"}',
                          "legendFormat": "{{run_id}}: {{phase}}", "instant": True}]}
    single = _var("version", 'label_values(up{job="tfserving"}, version)', False, label="TF Serving version")
    return {
        "compare.json": _dashboard("tfsb-compare", "TF Serving: version comparison",
                                   "TF Serving versions side by side under the same load: throughput, latency, "
                                   "errors, memory, and where each request's time goes.",
                                   [versions, models, baseline, run], panels + [table, breakdown, phase]),
        "version.json": _dashboard("tfsb-version", "TF Serving: one version in depth",
                                   "Batching, TensorFlow runtime against the whole request, graph runs and status "
                                   "codes of one version.", [single, models], _grid(DRILL)),
        "gpu.json": _dashboard("tfsb-gpu", "TF Serving: GPUs and host",
                               "The devices (NVML) and the model servers' processes on them.", [versions],
                               _grid(GPU)),
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


def substitute(expr: str, versions: list, baseline: str, rate_interval: str = "1m", run_id: str = ".*",
               model: str = ".*") -> str:
    """A panel query as Prometheus can run it: Grafana's variables filled in."""
    regex = "|".join(v.replace(".", "\\\\.") for v in versions)
    return (expr.replace("$__rate_interval", rate_interval).replace('=~"$version"', f'=~"{regex}"')
            .replace('="$version"', f'="{versions[0]}"').replace("$baseline", baseline)
            .replace("$run_id", run_id).replace("$model_name", model))


def graph_link(prometheus_url: str, expr: str, range_input: str = "15m") -> str:
    """A link into Prometheus' own graph page showing one panel's query."""
    from urllib.parse import urlencode

    return f"{prometheus_url}/graph?" + urlencode({"g0.expr": expr, "g0.tab": "0", "g0.range_input": range_input})

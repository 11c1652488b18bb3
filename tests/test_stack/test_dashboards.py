"""The dashboards load in any Grafana: generated (never stale), valid against the typed dashboard model
of Grafana's own grafana-foundation-sdk, a datasource variable behind every query, versions in natural
order, a description on every panel, read-only when provisioned."""
import json
import re

from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard

from stack import dashboards

# Fields Grafana reads that the SDK's schema does not list (kept on purpose):
SCHEMA_EXTRAS = {"definition",  # a query variable's query as text: Grafana writes it itself
                 "maxPerRow"}   # how many repeats of "Where the time goes" share a row
# The schema types an annotation's target as the built-in annotations' (tags, limit); a Prometheus
# annotation carries its query there (expr, step, titleFormat, refId), as Grafana saves it.
ANNOTATION_QUERY = re.compile(r"/annotations/list\[\d+\]/target/\w+")


def _dropped(a, b, path=""):
    out = []
    if isinstance(a, dict):
        for k, v in a.items():
            out += [f"{path}/{k}"] if k not in b else _dropped(v, b[k], f"{path}/{k}")
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            out += _dropped(x, y, f"{path}[{i}]")
    return out


def test_dashboards_are_regenerated_and_valid_for_grafanas_schema():
    for name, built in dashboards.build().items():
        on_disk = dashboards.load(name)
        assert on_disk == json.loads(json.dumps(built)), f"{name} is stale: run python -m stack dashboards"
        typed = json.loads(json.dumps(Dashboard.from_json(on_disk), cls=JSONEncoder))
        unknown = [p for p in _dropped(on_disk, typed)
                   if p.rsplit("/", 1)[-1] not in SCHEMA_EXTRAS and not ANNOTATION_QUERY.fullmatch(p)]
        assert not unknown, f"{name}: fields Grafana's dashboard schema does not have: {unknown}"


def test_every_query_goes_through_the_datasource_variable_and_reads_well():
    for name, dash in dashboards.build().items():
        assert dash["editable"] is False and dash["description"]
        variables = {v["name"]: v for v in dash["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
        assert variables["version"]["sort"] == dashboards.NATURAL_ASC  # 2.6, 2.8, 2.9, 2.12, 2.21
        for p in dash["panels"]:
            assert p["datasource"]["uid"] == "${datasource}" and len(p["description"]) > 40, p["title"]
            assert p["fieldConfig"]["defaults"].get("unit")
            for t in p["targets"]:
                assert t["datasource"]["uid"] == "${datasource}"
                assert "$__rate_interval" in t["expr"] or "rate(" not in t["expr"]
                if ":tensorflow:serving:request" in t["expr"] or ":tensorflow:serving:runtime" in t["expr"]:
                    assert 'model_name=~"$model_name"' in t["expr"], t["expr"]
        for a in dash["annotations"]["list"]:
            assert a["datasource"]["uid"] == "${datasource}"
    compare = dashboards.build()["compare.json"]
    assert {"version", "model_name", "baseline", "run_id"} <= {v["name"] for v in compare["templating"]["list"]}
    breakdown = next(p for p in compare["panels"] if p["title"].startswith("Where the time goes"))
    assert breakdown["repeat"] == "version" and len(breakdown["targets"]) == 4
    assert breakdown["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"


def test_natural_version_order_is_what_grafana_shows():
    versions = ["2.12", "2.21", "2.6", "2.8", "2.9"]  # what label_values returns, alphabetically
    natural = sorted(versions, key=lambda v: tuple(int(x) for x in v.split(".")))
    assert natural == ["2.6", "2.8", "2.9", "2.12", "2.21"] != sorted(versions)

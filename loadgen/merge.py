"""`python -m loadgen merge SUMMARY...`: the shards of one run as one summary, exactly.

HDR histograms add bin by bin and counts sum, so the merged P99 is the P99 of one histogram that
holds every latency of every shard; the load levels sum back to the whole rate or concurrency.

    python -m loadgen merge results/run-1/shard-*.json --out results/run-1/loadgen.json
"""
from __future__ import annotations

import copy
import json

from loadgen.scenario import Load, Payload, Scenario, ScenarioError, Target, Thresholds, check
from loadgen.summary import merge_raw, summarize
from core.errors import UsageError


def scenario_from_config(config: dict) -> Scenario:
    """The Scenario a summary was run with (its `config`), checked again."""
    th = {k: v for k, v in config["thresholds"].items() if k != "parsed"}
    s = Scenario(targets=[Target(**t) for t in config["targets"]], load=Load(**config["load"]),
                 payload=Payload(**config["payload"]), thresholds=Thresholds(**th), name=config["name"],
                 run_id=config["run_id"], metrics_port=0, linger=0, workers=1, out=config.get("out", ""),
                 shard=tuple(config.get("shard", (0, 1))))
    return check(s)


SUMMARY_LINE = "loadgen-summary: "  # run --summary-log: the whole summary on one line of a container's log


def read_summary(path: str) -> dict:
    """A summary file, or the last `loadgen-summary:` line of a saved log (kubectl logs > shard-0.log)."""
    try:
        with open(path) as f:
            text = f.read()
        if not text.lstrip().startswith("{"):
            lines = [ln for ln in text.splitlines() if ln.startswith(SUMMARY_LINE)]
            if not lines:
                raise UsageError(f"neither a summary JSON nor a log with a '{SUMMARY_LINE.strip()}' line "
                                 "(run with --summary-log)")
            text = lines[-1][len(SUMMARY_LINE):]
        return json.loads(text)
    except (OSError, ValueError) as e:
        raise ScenarioError(f"cannot read summary {path}: {e}") from None


def merge(paths: list) -> dict:
    summaries = [read_summary(p) for p in paths]
    if not summaries:
        raise ScenarioError("merge needs at least one summary")
    runs = {s["run_id"] for s in summaries}
    if len(runs) != 1:
        raise ScenarioError(f"the summaries are of different runs: {', '.join(sorted(runs))}")
    shards = [tuple(s["config"].get("shard", (0, 1))) for s in summaries]
    n = shards[0][1]
    if any(c != n for _, c in shards) or len({i for i, _ in shards}) != len(shards):
        raise ScenarioError(f"the summaries are not distinct shards of one split: {shards}")
    if len(shards) != n:
        raise ScenarioError(f"{len(shards)} of {n} shards given: the merge would not be the whole run")
    s = scenario_from_config(copy.deepcopy(summaries[0]["config"]))
    ld = s.load  # the whole load: what the shards shared out
    ld.rate = sum(x["config"]["load"]["rate"] for x in summaries)
    ld.concurrency = sum(x["config"]["load"]["concurrency"] for x in summaries)
    ld.min_requests = sum(x["config"]["load"]["min_requests"] for x in summaries)
    if ld.steps:
        ld.steps = [sum(x["config"]["load"]["steps"][k] for x in summaries) for k in range(len(ld.steps))]
    s.shard = (0, 1)
    merged = summarize(merge_raw([x["raw"] for x in summaries]), s)
    merged["merged_from"] = len(summaries)
    return merged

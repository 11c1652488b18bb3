"""`make scenario` / `make sweep`: run one of analysis.scenarios, then write scenario.json and a
Markdown table (results/<id>/), atomically, and print the table."""
from __future__ import annotations

import time

from analysis import runstore
from loadgen.summary import write_json_atomic
from fileio.atomic import write_atomic


def _f(x, digits=1) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _side_by_side(rows: list, a: str, b: str, la: str, lb: str) -> list:
    out = [f"| version | concurrency | QPS {la} | QPS {lb} | {lb}/{la} | P99 ms {la} | P99 ms {lb} | errors |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['version']} | {r['concurrency']} | {_f(r[a]['qps'])} | {_f(r[b]['qps'])} | "
                   f"{_f(r['qps_ratio'], 2)}x | {_f(r[a]['p99_ms'], 2)} | {_f(r[b]['p99_ms'], 2)} | "
                   f"{r[a]['errors'] + r[b]['errors']} |")
    return out


def markdown(name: str, res: dict) -> str:
    out = [f"# Scenario: {name}, run {res['run_id']}, runtime {res.get('runtime', 'local')}", ""]
    if name == "batching":
        out += _side_by_side(res["rows"], "off", "on", "off", "on")
    elif name == "protocols":
        out += _side_by_side(res["rows"], "rest", "grpc", "REST", "gRPC")
    elif name == "sweep":
        front = {(x["max_batch_size"], x["batch_timeout_micros"], x["num_batch_threads"]) for x in res["pareto"]}
        out += [f"Version {res['version']}, closed loop at concurrency {res['concurrency']}; SLA P99 <= "
                f"{res['sla_p99_ms']:g} ms. `*`: on the QPS-vs-P99 Pareto front.", "",
                "| max_batch_size | batch_timeout_micros | num_batch_threads | QPS | P99 ms | mean batch | errors | front |",
                "|---|---|---|---|---|---|---|---|"]
        for x in sorted(res["points"], key=lambda x: -x["qps"]):
            key = (x["max_batch_size"], x["batch_timeout_micros"], x["num_batch_threads"])
            out.append(f"| {key[0]} | {key[1]} | {key[2]} | {_f(x['qps'])} | {_f(x['p99_ms'], 2)} | "
                       f"{_f(x.get('mean_batch'))} | {x['errors']} | "
                       f"{'*' if key in front else ''} |")
        b = res["best"]
        out += ["", "Best under the SLA: " + ("none (no configuration met it)" if b is None else
                f"max_batch_size {b['max_batch_size']}, batch_timeout_micros {b['batch_timeout_micros']}, "
                f"num_batch_threads {b['num_batch_threads']}: {b['qps']:.0f} req/s at P99 {b['p99_ms']:.2f} ms")]
    elif name == "reload":
        from analysis.reload import markdown as reload_markdown
        out += reload_markdown(res)
    elif name == "neighbour":
        from analysis.neighbour import markdown as neighbour_markdown
        out += neighbour_markdown(res)
    else:  # hot-update
        out += ["| version | rate | time to switch s | errors | P99 ms before | during | after | max ms during |",
                "|---|---|---|---|---|---|---|---|"]
        for r in res["rows"]:
            p = r["p99_ms"]
            out.append(f"| {r['version']} | {r['rate']:g}/s | {_f(r['switch_s'], 2)} | {r['errors']} | "
                       f"{_f(p['before'], 2)} | {_f(p['during'], 2)} | {_f(p['after'], 2)} | "
                       f"{_f(r['max_ms_during'], 2)} |")
    return "\n".join(out) + "\n"


def run(name: str, serving, profile, repeat: int, opts: dict, runtime: str, log=print) -> dict:
    from analysis import scenarios
    from loadgen.cli import new_run_id

    run_id = f"{name}-{new_run_id()}"
    if name == "batching":
        res = scenarios.batching_on_off(serving, profile, repeat, run_id, log)
    elif name == "protocols":
        res = scenarios.protocols(serving, profile, repeat, run_id, log)
    elif name == "sweep":
        if len(serving.servers) != 1:
            raise ValueError("the sweep tunes one version: VERSION=2.9")
        res = scenarios.sweep(serving, profile, repeat, run_id, opts["max_batch"], opts["timeout_us"],
                              opts["threads"], opts["concurrency"], log)
    elif name == "reload":
        from analysis.reload import reload_cycles
        res = reload_cycles(serving, profile, run_id, opts["cycles"], opts["rate"], opts["cycle_s"], log=log)
    elif name == "neighbour":
        from analysis.neighbour import neighbour
        res = neighbour(serving, profile, run_id, opts["neighbour"], opts["rate"], opts["phase_s"], log=log)
    else:
        res = scenarios.hot_update(serving, profile, run_id, opts["rate"], log=log)
    res.update(run_id=run_id, scenario=name, created=time.time(), profile=profile.__dict__, repeat=repeat,
               runtime=runtime, environment=runstore.environment(serving.servers, runtime))
    d = runstore.run_dir(run_id)
    write_json_atomic(str(d / "scenario.json"), res)
    write_atomic(d / "scenario.md", markdown(name, res))
    res["files"] = {"json": str(d / "scenario.json"), "md": str(d / "scenario.md")}
    return res

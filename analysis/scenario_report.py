"""`make scenario` / `make sweep`: run one of analysis.scenarios, then write scenario.json and a
Markdown table (results/<id>/), atomically, and print the table."""
from __future__ import annotations

import time

from analysis import runstore
from loadgen.summary import write_json_atomic
from fileio.atomic import write_atomic
from core.errors import UsageError


def _f(x, digits=1) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _num(x, digits: int = 2) -> str:
    """The reload and neighbour tables' figures: thousands separated."""
    return "n/a" if x is None else f"{x:,.{digits}f}"


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
        out += _reload(res)
    elif name == "neighbour":
        out += _neighbour(res)
    else:  # hot-update
        out += ["| version | rate | time to switch s | errors | P99 ms before | during | after | max ms during |",
                "|---|---|---|---|---|---|---|---|"]
        for r in res["rows"]:
            p = r["p99_ms"]
            out.append(f"| {r['version']} | {r['rate']:g}/s | {_f(r['switch_s'], 2)} | {r['errors']} | "
                       f"{_f(p['before'], 2)} | {_f(p['during'], 2)} | {_f(p['after'], 2)} | "
                       f"{_f(r['max_ms_during'], 2)} |")
    return "\n".join(out) + "\n"


def _reload(res: dict) -> list:
    out = [f"{res['cycles']} reloads per version under a constant REST load: a new version directory written into "
           "the model base each cycle, the old version unloaded. RSS after each cycle (the exporter's); growth per "
           f"cycle: least-squares slope over the cycles with its 95% interval, \"grows\" above {res['floor_mib']:g} "
           "MiB per cycle, \"flat\" within ±that.", "",
           "| version | cycle | time to switch s | errors | P99 ms (before: first row) | max ms | RSS MiB |",
           "|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        out.append(f"| {r['version']} | before | | | {_num(r['p99_before_ms'])} | | {_num(r['rss_before_mib'], 1)} |")
        for c in r["cycles"]:
            rss = None if c.get("rss_bytes") is None else c["rss_bytes"] / 2**20
            out.append(f"| {r['version']} | {c['cycle']} | {_num(c.get('switch_s'))} | {c['errors']} | "
                       f"{_num(c['p99_ms'])} | {_num(c['max_ms'])} | {_num(rss, 1)} |")
    out += ["", "| version | growth per cycle | verdict | errors |", "|---|---|---|---|"]
    for r in res["rows"]:
        g = r["growth_per_cycle"]
        fig = "n/a" if not g else f"{g['slope']:+.2f} MiB [{g['ci_low']:+.2f}, {g['ci_high']:+.2f}]"
        out.append(f"| {r['version']} | {fig} | {g['verdict'] if g else 'not measured'} | {r['errors']} |")
    return out


def _neighbour(res: dict) -> list:
    out = [f"Model A under a constant REST load; B ({res['model_b']}) loaded, reloaded and unloaded in the same "
           "server, one step per phase. A's P99 against the phase before any step; B's step: seconds until done.", "",
           "| version | phase | A's P99 ms | vs before | A's max ms | A's errors | B's step s |",
           "|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        for name in r["phases"]:
            ph = r["phases"][name]
            ratio = "" if name == "before" or ph.get("p99_ratio") is None else f"{ph['p99_ratio']:.2f}x"
            out.append(f"| {r['version']} | {name} | {_num(ph['p99_ms'])} | {ratio} | {_num(ph['max_ms'])} | "
                       f"{ph['errors']} | {_num(ph['b_s'])} |")
    out += [f"- {r['version']}: B's steps failed: {r['error']}" for r in res["rows"] if r.get("error")]
    return out


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
            raise UsageError("the sweep tunes one version: VERSION=2.9")
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

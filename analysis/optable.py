"""The op table: where each version's TensorFlow time goes, op type by op type, and which op types make
up a difference of the ceiling.

Measured like the ceiling (analysis/ceiling.py): fresh processes of `python -m modelserver.optrace` in
each version's venv, where the headline ceiling runs (the servers' cores), the versions' order flipped every round, with the
knob settings of the server. Tracing costs time (RunMetadata is built and copied per call), so these
runs are separate from the ceiling's, and each records a traced and an untraced call time to say
how much. The report compares every op type's µs per call against the baseline in its Holm family.
"""
from __future__ import annotations

from analysis import stats
from analysis.ceiling import ceiling_core, run_process

# Kernels that compute another op under a name of their own: oneDNN's (_Mkl*, _MklNative*, by release and
# by CPU: 2.9 turns it on only where the CPU has AVX512_VNNI, BF16 or AMX) and grappler's fusions of an op
# with its bias/activation (_FusedMatMul). The op table groups each under the op it computes, so a rename
# never reads as one op vanishing and another appearing; the kernel's name stays beside it.
_MKL_PREFIXES = ("_MklNative", "_Mkl")
_MKL_OWN = {"_MklToTf", "_MklInputConversion"}  # oneDNN's layout conversions: ops of their own, no TF op renamed
_FUSIONS = {"FusedMatMul": "MatMul", "FusedConv2D": "Conv2D", "FusedConv3D": "Conv3D",
            "FusedDepthwiseConv2dNative": "DepthwiseConv2dNative", "FusedBatchMatMulV2": "BatchMatMulV2"}


def op_identity(kernel: str) -> str:
    """The op a kernel computes: "_MklSoftmax" -> "Softmax", "_MklNativeFusedMatMul" and "_FusedMatMul" ->
    "MatMul", "_MklNativeConv2D" -> "Conv2D"; any other name is its own (FusedBatchNormV3 is an op of TF's)."""
    name = kernel
    for prefix in () if kernel in _MKL_OWN else _MKL_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix) and name[len(prefix)].isupper():
            name = name[len(prefix):]
            break
    name = name.removeprefix("_") if name.removeprefix("_") in _FUSIONS else name
    return _FUSIONS.get(name, name)


def grouped(op_us: dict) -> tuple[dict, dict]:
    """Per-process µs lists by kernel -> ({op: summed per-process list}, {op: [its kernels' names]})."""
    ops, kernels = {}, {}
    for kernel, values in op_us.items():
        op = op_identity(kernel)
        got = ops.get(op)
        ops[op] = list(values) if got is None else [a + b for a, b in zip(got, values)]
        kernels.setdefault(op, []).append(kernel)
    return ops, {op: sorted(k) for op, k in kernels.items()}


def trace_one(python: str, model_dir, rows: list, calls: int, cpus: list | None, settings: tuple = (),
              timeout_s: float = 600, requests: str = "") -> dict:
    return run_process(python, "optrace", ["--model-dir", str(model_dir), "--rows", *map(str, rows), "--calls",
                                           str(calls), *(["--requests", str(requests)] if requests else [])],
                       cpus, settings, timeout_s, "the op trace")


def measure_all(serving, servers: list, rows: list, processes: int, calls: int, done: dict, save,
                log=print, pin: bool = False, requests: dict | None = None) -> dict:
    """done[name] = {"tensorflow", "rows": {"32": {"op_us": {op: [per process]}, "traced_us_per_call": [...],
    "untraced_us_per_call": [...]}}}; resumable like the ceiling (save() after each process)."""
    todo = []
    for s in servers:
        python, model_dir = serving.ceiling_command(s)
        if python is not None:
            todo.append((s.name, python, model_dir, s.knobs))
    core = ceiling_core(serving, servers, pin)  # where the headline ceiling ran: its difference is the one explained
    for i in range(processes):
        for name, python, model_dir, settings in todo if i % 2 == 0 else todo[::-1]:
            if len((done.get(name) or {}).get("pids", [])) > i:
                continue
            one = trace_one(python, model_dir, rows, calls, core, settings, requests=(requests or {}).get(name, ""))
            got = done.setdefault(name, {"tensorflow": one["tensorflow"], "rows": {}, "pids": []})
            for r, t in one["rows"].items():
                mine = got["rows"].setdefault(r, {"op_us": {}, "traced_us_per_call": [], "untraced_us_per_call": []})
                n_before = len(mine["traced_us_per_call"])
                for op in set(mine["op_us"]) | set(t["op_us"]):  # an op type a process did not run: 0 µs
                    mine["op_us"].setdefault(op, [0.0] * n_before).append(t["op_us"].get(op, 0.0))
                mine["traced_us_per_call"].append(t["traced_us_per_call"])
                mine["untraced_us_per_call"].append(t["untraced_us_per_call"])
            got["pids"].append(one["pid"])
            save()
        log(f"  op trace process {i + 1}/{processes} done")
    return done


def table(run: dict, versions: list, tests: list) -> list:
    """[{"rows_per_request", "op", "version", "us_per_call": ci, "vs_baseline": welch}, ...]; each comparison
    is appended to `tests` (the report's Holm family), lower µs being better."""

    traced, out = run.get("optrace") or {}, []
    base = versions[0]
    for nrows in run["config"]["rows"]:
        per = {v: traced[v]["rows"][str(nrows)] for v in versions if str(nrows) in (traced.get(v) or {}).get("rows", {})}
        if base not in per:
            continue
        by_op = {v: grouped(t["op_us"]) for v, t in per.items()}
        ops = sorted({op for g, _ in by_op.values() for op in g},
                     key=lambda op: -stats.mean_ci(by_op[base][0].get(op, [0.0]))["mean"])
        for op in ops:
            for v, t in per.items():
                vals = by_op[v][0].get(op) or [0.0] * len(t["traced_us_per_call"])
                row = {"rows_per_request": nrows, "op": op, "kernels": by_op[v][1].get(op, []), "version": v,
                       "us_per_call": stats.mean_ci(vals)}
                if v != base:
                    b = by_op[base][0].get(op) or [0.0] * len(per[base]["traced_us_per_call"])
                    row["vs_baseline"] = stats.compare(vals, b, stats.welch, False)
                    tests.append(row["vs_baseline"])
                out.append(row)
        for v, t in per.items():  # tracing's own cost: a traced call against an untraced one, same process
            out.append({"rows_per_request": nrows, "op": "(call, traced)", "version": v,
                        "us_per_call": stats.mean_ci(t["traced_us_per_call"]),
                        "untraced_us_per_call": stats.mean_ci(t["untraced_us_per_call"])})
    return out


def _named(row: dict) -> str:
    """"Softmax (as _MklSoftmax in 2.21)" where the version's kernel has another name than its op."""
    other = [k for k in row.get("kernels", []) if k != row["op"]]
    return f"{row['op']} (as {', '.join(other)} in {row['version']})" if other else row["op"]


def attribution(rep: dict) -> list:
    """Per non-baseline version and row count: the ceiling's difference in µs per call, and the op types
    whose differences are significant, largest first, with what they add up to."""
    out = []
    base = rep["baseline_version"]
    ceil = {(c["version"], c["rows_per_request"]): c for c in rep.get("ceiling", [])}
    for (v, nrows), c in ceil.items():
        b = ceil.get((base, nrows))
        if v == base or not b or not c["ceiling_rows_per_s"]["mean"] or not b["ceiling_rows_per_s"]["mean"]:
            continue
        ops = [r for r in rep.get("optable", []) if r["version"] == v and r["rows_per_request"] == nrows
               and r.get("vs_baseline")]
        if not ops:
            continue
        per_call = 1e6 * nrows * (1 / c["ceiling_rows_per_s"]["mean"] - 1 / b["ceiling_rows_per_s"]["mean"])
        sig = sorted((r for r in ops if r["vs_baseline"].get("significant")),
                     key=lambda r: -abs(r["vs_baseline"]["diff"]))
        out.append({"version": v, "rows_per_request": nrows, "ceiling_us_per_call_diff": per_call,
                    "ceiling_significant": bool((c.get("vs_baseline") or {}).get("significant")),
                    "ops": [(_named(r), r["vs_baseline"]["diff"]) for r in sig],
                    "ops_sum_us": sum(r["vs_baseline"]["diff"] for r in sig),
                    "all_ops_sum_us": sum(r["vs_baseline"]["diff"] for r in ops)})
    return out

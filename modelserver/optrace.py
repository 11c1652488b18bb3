"""Where TensorFlow's time goes, op by op: the model's signature run through the same Session callable
the server makes (Servable.run's), with TensorFlow's step statistics (RunOptions FULL_TRACE ->
RunMetadata.step_stats), in this venv's TensorFlow.

    python -m modelserver.optrace --model-dir models/build/tf2.9/my_model/1 --rows 32 --calls 300

prints {"tensorflow": "2.9.3", "python": "3.10.16", "pid": 123, "rows": {"32": {"op_us": {"MatMul": 41.2, ...},
"node_us": {...}, "traced_us_per_call": 160.1, "untraced_us_per_call": 140.2}}}: mean µs per call of each op
type (and node), summed over the executor's devices, and the wall time of a traced and an untraced call
(alternating, so tracing's own cost is measured beside it). Op types are the executor's own labels
("MatMul = MatMul(x, w)"), so ops inlined from a function (a TF2 SavedModel's StatefulPartitionedCall)
count as what they are; the executor's nodes for feeds and fetches appear as _Arg and _Retval.
"""
from __future__ import annotations

import sys
import time

from modelserver.ceiling import load_requests, model_parser, print_result



def op_type(graph, node) -> str:
    """"MatMul" from the label "name = MatMul(a, b)"; the graph's own record where a release has no label."""
    label = node.timeline_label.split(" = ", 1)
    if len(label) == 2 and "(" in label[1]:
        return label[1].split("(", 1)[0]
    try:
        return graph.get_operation_by_name(node.node_name).type
    except (KeyError, ValueError):
        return "(unlabelled)"


def trace(servable, sig, rows: int, calls: int, warmup_s: float, requests: list | None = None) -> dict:
    from tensorflow.core.protobuf import config_pb2

    from modelserver.servable import example_inputs

    inputs = (requests or [example_inputs(sig, rows)])[0]  # the servers' first request of this size
    args = [inputs[k] for k in sig.inputs]
    feeds, fetches = [sig.feeds[k] for k in sig.inputs], [sig.fetches[k] for k in sorted(sig.outputs)]
    plain = servable._make_callable(feeds, fetches)  # noqa: SLF001 - the server's own callable
    opts = config_pb2.CallableOptions(feed=feeds, fetch=fetches)
    opts.run_options.trace_level = config_pb2.RunOptions.FULL_TRACE
    traced = servable.session._make_callable_from_options(opts)  # noqa: SLF001 - TF 1.8 .. 2.21
    t_end = time.perf_counter() + warmup_s
    while time.perf_counter() < t_end:  # allocator growth, caches: not part of the table
        plain(*args)
        traced(*args, run_metadata=config_pb2.RunMetadata())
    op_us, node_us, t_traced, t_plain = {}, {}, 0.0, 0.0
    for _ in range(calls):
        meta = config_pb2.RunMetadata()
        t0 = time.perf_counter()
        traced(*args, run_metadata=meta)
        t1 = time.perf_counter()
        plain(*args)
        t2 = time.perf_counter()
        t_traced, t_plain = t_traced + t1 - t0, t_plain + t2 - t1
        for dev in meta.step_stats.dev_stats:
            for n in dev.node_stats:
                # all_end_rel_micros: the node's whole run from its start, as TF's own timeline draws it
                us = n.all_end_rel_micros or (n.op_end_rel_micros - n.op_start_rel_micros)
                kind = op_type(servable.graph, n)
                op_us[kind] = op_us.get(kind, 0.0) + us
                node_us[n.node_name] = node_us.get(n.node_name, 0.0) + us
    return {"op_us": {k: v / calls for k, v in sorted(op_us.items())},
            "node_us": {k: v / calls for k, v in sorted(node_us.items())},
            "traced_us_per_call": t_traced / calls * 1e6, "untraced_us_per_call": t_plain / calls * 1e6}


def main(argv=None) -> int:
    p = model_parser("optrace", __doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=300, help="traced calls per row count")
    a = p.parse_args(argv)
    if min(a.rows) < 1 or not 1 <= a.calls <= 1_000_000 or not 0 <= a.warmup_s <= 3600 or min(a.intra_op, a.inter_op) < 0:
        p.error("--rows and --calls must be positive, --warmup-s at most 3600, thread counts >= 0")
    got = load_requests(a, "optrace")
    if got is None:
        return 2
    loaded, requests = got
    print_result(rows={str(r): trace(*loaded, r, a.calls, a.warmup_s, requests[r]) for r in a.rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())

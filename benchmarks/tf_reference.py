"""An in-process reference independent of the product's code, to hold the compare's ceiling against.

    .venv/bin/python benchmarks/tf_reference.py [--versions "2.9 2.21"] [--rows 32] [--processes 6] [--seconds 1.5]

Each process loads the example SavedModel (of that version's own export) with TensorFlow's TF1 loader in the
version's venv, makes a Session callable of serving_default (as TF Serving runs a signature), and calls it back to
back for --seconds with one random batch of --rows rows: TensorFlow's default thread pools, not pinned, as a server
runs. Fresh processes, versions alternating (ABBA), so drift and process-to-process spread land in the interval.
Prints rows/s per version (mean and 95% t interval over processes) and each version against the first.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import table  # noqa: E402

ONE = r'''
import json, sys, time
import numpy as np
import tensorflow as tf
path, rows, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
sess = tf.compat.v1.Session(graph=tf.Graph())
with sess.graph.as_default():
    meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], path)
sig = meta.signature_def["serving_default"]
(name, inp), = sig.inputs.items()
fn = sess.make_callable([t.name for t in sig.outputs.values()], [inp.name])
x = np.random.RandomState(1).rand(rows, inp.tensor_shape.dim[-1].size).astype(np.float32)
t_end = time.perf_counter() + 0.5
while time.perf_counter() < t_end:
    fn(x)
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < seconds:
    fn(x)
    n += 1
print(json.dumps({"tf": tf.__version__, "rows_per_s": n * rows / (time.perf_counter() - t0)}))
'''


def main() -> int:
    from scipy import stats as st

    from models.prepare import ensure_example_model
    from core.registry import load_registry
    from core.venvs import ensure_venv, venv_python

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default="2.9 2.21")
    ap.add_argument("--rows", type=int, default=32)
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=1.5)
    a = ap.parse_args()
    reg = load_registry()
    versions = reg.select(a.versions)
    runs = {v.name: (venv_python(ensure_venv(v, reg, log=lambda *_: None)),
                     ensure_example_model(v, reg, log=lambda *_: None) / "1") for v in versions}
    got, tf = {v.name: [] for v in versions}, {}
    for i in range(a.processes):
        for v in versions if i % 2 == 0 else versions[::-1]:
            py, model = runs[v.name]
            out = subprocess.run([py, "-c", ONE, str(model), str(a.rows), str(a.seconds)], capture_output=True,
                                 text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), check=True)
            one = json.loads(out.stdout.strip().splitlines()[-1])
            got[v.name].append(one["rows_per_s"])
            tf[v.name] = one["tf"]
            print(f"process {i + 1}/{a.processes} {v.name}: {one['rows_per_s']:,.0f} rows/s", file=sys.stderr)
    base = versions[0].name
    rows = []
    for v in versions:
        x = got[v.name]
        m = sum(x) / len(x)
        half = st.t.ppf(0.975, len(x) - 1) * st.tstd(x) / len(x) ** 0.5
        vs = "baseline"
        if v.name != base:
            b = got[base]
            r = st.ttest_ind(x, b, equal_var=False)
            ci = r.confidence_interval(0.95)
            mb = sum(b) / len(b)
            vs = f"{m / mb - 1:+.0%} [{ci.low / mb:+.0%}, {ci.high / mb:+.0%}] p={r.pvalue:.2g}"
        rows.append([v.name, tf[v.name], f"{m:,.0f} ± {half:,.0f}", f"{min(x):,.0f}-{max(x):,.0f}", vs])
    print(table(f"\nSession callable of serving_default, {a.rows} rows, unpinned, {a.processes} fresh processes of "
                f"{a.seconds:g} s per version (ABBA)", ["version", "TensorFlow", "rows/s", "range", "vs first"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

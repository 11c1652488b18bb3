"""`make demo`: the embedded default end to end, on two versions.

Brings the versions up in the local runtime, sends each the same predict request
over REST, and prints what each answered side by side.
"""
from __future__ import annotations

import json
import time
import urllib.request

import numpy as np

from core import ports
from stack import local
from core.registry import Registry


def predict_rest(port: int, model: str, instances: list, timeout: float = 10.0) -> tuple:
    body = json.dumps({"instances": instances}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/models/{model}:predict", data=body,
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = json.load(r)
    return out["predictions"], time.perf_counter() - t0


def run_demo(reg: Registry, versions: str, log=print) -> int:
    chosen = reg.select(versions)
    for v in chosen:
        local.up_version(v, reg, log=log)
    x = np.random.RandomState(7).rand(1, 784).astype(np.float32).round(4).tolist()
    rows = []
    for v in chosen:
        preds, secs = predict_rest(ports.rest(v), local.MODEL_NAME, x)
        p = np.asarray(preds[0])
        rows.append((v.name, v.tensorflow, int(p.argmax()), float(p.max()), secs * 1000))
    log("")
    log(f"{'version':<8} {'tensorflow':<11} {'class':>5} {'prob':>8} {'first request ms':>17}")
    for name, tf, cls, prob, ms in rows:
        log(f"{name:<8} {tf:<11} {cls:>5} {prob:>8.5f} {ms:>17.1f}")
    same = len({r[2] for r in rows}) == 1 and max(r[3] for r in rows) - min(r[3] for r in rows) < 1e-5
    log("\nall versions agree on the prediction" if same else "\nWARNING: versions disagree on the prediction")
    log("servers keep running: `make status`, `make down` to stop them")
    return 0 if same else 1

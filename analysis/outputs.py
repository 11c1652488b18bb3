"""What each version answers: the same requests of the model's request set sent to every server, each version's
outputs against the baseline's. TF 2.9 warns that oneDNN changes numerical results; a version that answers
differently is reported like one that is slower: wrong-but-fast is a regression too.

    run["outputs"] = {server: {"requests": 8, "api": "predict", "bodies": sha256, "outputs": {name: [[floats]]}}}
    rows(run) -> [{"version", "output", "max_abs", "max_rel", "worst_request", "verdict"}, ...]
"""
from __future__ import annotations

import hashlib
import json

import numpy as np

from analysis.plan import Settings
from fileio import http
from loadgen import payload as payload_mod
from loadgen.app import build_payloads
from loadgen.scenario import Load, Payload, Scenario, Target
from core.errors import Failed

REQUESTS = 8                  # requests of the set whose answers are compared
RTOL, ATOL = 1e-5, 1e-6       # "within 1e-5": |a - b| <= ATOL + RTOL * |baseline|
MAX_ANSWER_BYTES = 64 * 2**20


class OutputError(Failed):
    """A server that did not answer the outputs check (exit 3)."""
    exit_code = 3


def _arrays(answer: dict) -> dict:
    """{output name: array, a row per example} from a REST answer (predict's row format, or classify's /
    regress's results); numbers as float64, strings (class labels) as they are."""
    def num(x):
        a = np.asarray(x)
        a = a if a.dtype.kind in "US" else a.astype(np.float64)
        return a.reshape(len(a), -1) if a.ndim else a.reshape(1, 1)
    if "predictions" in answer:
        rows = answer["predictions"]
        if rows and isinstance(rows[0], dict):
            return {k: num([r[k] for r in rows]) for k in rows[0]}
        return {"predictions": num(rows)}
    if "outputs" in answer:
        outs = answer["outputs"]
        return {k: num(v) for k, v in outs.items()} if isinstance(outs, dict) else {"outputs": num(outs)}
    results = answer.get("results", [])
    if results and isinstance(results[0], list):  # classify: [[label, score], ...] per example
        return {"scores": num([[c[1] for c in r] for r in results]),
                "classes": num([[c[0] for c in r] for r in results])}
    return {"outputs": num(results)}


def _post(url: str, body: bytes) -> dict:
    try:
        return json.loads(http.get(url, data=body, headers={"Content-Type": "application/json"}, timeout_s=30,
                                   max_bytes=MAX_ANSWER_BYTES))
    except http.HTTPStatusError as e:
        raise OutputError(str(e)) from None
    except (OSError, ValueError) as e:
        raise OutputError(f"{url} did not answer the outputs check: {e}") from None


def collect(serving, settings: Settings, model_payload, log=print) -> dict:
    """Every server's answers to the first REQUESTS requests of its set (REST, the first row count)."""
    out = {}
    api = "auto" if settings.api == "multi" else settings.api  # MultiInference has no REST API: its signatures
    for s in serving.servers:
        host, port = s.address("rest")
        t = Target(s.name, "rest", host, port, model=s.model, signature=settings.signature)
        payload = Payload(batch_size=settings.rows[0], count=min(REQUESTS, settings.requests), api=api,
                          model_dir=model_payload(s).model_dir)
        reqs = build_payloads(Scenario(targets=[t], load=Load(), payload=payload))[t.name]
        url = f"http://{host}:{port}/v1/models/{s.model}{reqs.rest_path}"
        answers = [_arrays(_post(url, body)) for body in reqs.bodies]
        names = payload_mod.fetch_signatures(t).get(reqs.signature, {}).get("outputs", [])
        if reqs.api == "predict" and len(names) == 1:  # REST's row format names no single output: the signature does
            answers = [{names[0]: a["predictions"]} if set(a) == {"predictions"} else a for a in answers]
        out[s.name] = {"requests": len(reqs.bodies), "api": reqs.api, "rows": settings.rows[0],
                       "bodies": hashlib.sha256(b"".join(reqs.bodies)).hexdigest()[:16],
                       "outputs": {k: [a[k].tolist() for a in answers] for k in answers[0]}}
        log(f"  outputs of {s.name}: {len(answers)} requests, {', '.join(sorted(answers[0]))}")
    return out


def rows(run: dict) -> list:
    """Each version's outputs against the baseline's, per output: the largest absolute and relative difference,
    the request that has it, and a verdict (identical, within 1e-5, differ)."""
    got = run.get("outputs") or {}
    versions = run["config"]["versions"]
    base = got.get(versions[0])
    out = []
    for v in versions[1:]:
        mine = got.get(v)
        if not base or not mine:
            continue
        if mine["bodies"] != base["bodies"]:
            out.append({"version": v, "output": "(requests)", "verdict": "not comparable: other requests",
                        "max_abs": None, "max_rel": None, "worst_request": None})
            continue
        for name in sorted(set(base["outputs"]) | set(mine["outputs"])):
            a, b = mine["outputs"].get(name), base["outputs"].get(name)
            if a is None or b is None or [np.shape(x) for x in a] != [np.shape(x) for x in b]:
                out.append({"version": v, "output": name, "verdict": "differ: another shape or a missing output",
                            "max_abs": None, "max_rel": None, "worst_request": None})
                continue
            if np.asarray(b[0]).dtype.kind in "US":  # labels: the same or not
                wrong = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
                out.append({"version": v, "output": name, "max_abs": None, "max_rel": None,
                            "worst_request": wrong[0] if wrong else None,
                            "verdict": "identical" if not wrong else f"differ: {len(wrong)} of {len(b)} requests"})
                continue
            diffs = [np.abs(np.asarray(x) - np.asarray(y)) for x, y in zip(a, b)]
            bound = [ATOL + RTOL * np.abs(np.asarray(y)) for y in b]
            per_req = [float(d.max()) if d.size else 0.0 for d in diffs]
            worst = int(np.argmax(per_req))
            rel = max(float((d / np.maximum(np.abs(np.asarray(y)), 1e-12)).max()) if d.size else 0.0
                      for d, y in zip(diffs, b))
            verdict = "identical" if max(per_req) == 0 else \
                "within 1e-5" if all((d <= bd).all() for d, bd in zip(diffs, bound)) else "differ"
            out.append({"version": v, "output": name, "max_abs": max(per_req), "max_rel": rel,
                        "worst_request": worst, "verdict": verdict})
    return out


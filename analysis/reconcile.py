"""Nothing lost, exactly: per cell, the client's count, the server's own counter and Prometheus.

* client vs server: the load generator's completed requests in the steady window against the
  server's request_count delta read directly at the window's edges (warmup excluded on both
  sides, nothing in flight at either edge). Equal, exactly, when nothing else talks to the
  server; it cannot be exact when the client gave up on requests (timeouts, dropped
  connections: the server may still answer them) or the server could not be read.
* server vs Prometheus: Prometheus' raw samples of request_count just before the cell's warmup
  and just after its window. When the server was idle at both samples (the compare leaves every
  server idle for a scrape interval around its cells), their difference must equal the server's
  own count over warmup + window exactly. Where a sample fell inside other activity, it can only
  agree within the requests of one scrape interval at each edge, and the check says so.
"""
from __future__ import annotations

from stack.promconfig import SCRAPE_INTERVAL_S

CLIENT_GAVE_UP = ("timeout", "connection_reset", "connection_refused")


def client_vs_server(cell: dict) -> dict:
    client = cell["client"]["completed"]
    gave_up = sum(n for code, n in cell["client"]["errors"].items() if code in CLIENT_GAVE_UP)
    server = cell["server"]["steady"]["requests"] if cell.get("server") else None
    if server is None:
        return {"client": client, "server": None, "exact": False, "ok": False,
                "why": cell.get("server_error") or "the server's counters could not be read"}
    if gave_up:
        # every request the client gave up on may or may not have reached the server
        ok = client - gave_up <= server <= client
        return {"client": client, "server": round(server), "exact": False, "ok": ok,
                "why": f"the client gave up on {gave_up} request(s) (timeouts, dropped connections)"}
    return {"client": client, "server": round(server), "exact": True, "ok": round(server) == client, "why": ""}


def _overlaps(intervals: list, own: tuple, x: float, y: float) -> bool:
    return any(a <= y and b >= x for a, b in intervals if (a, b) != own)


def server_vs_prometheus(cell: dict, samples: list | None, activity: list) -> dict:
    """samples: [(t, value)] of the server's request_count in Prometheus; activity: every
    [start, end] the compare kept this server busy (its cells, cold start, searches)."""
    if not cell.get("server"):
        return {"prometheus": None, "expected": None, "exact": False, "ok": False, "why": "no server counters"}
    expected = cell["server"]["warmup"]["requests"] + cell["server"]["steady"]["requests"]
    if samples is None:
        return {"prometheus": None, "expected": round(expected), "exact": False, "ok": False,
                "why": "Prometheus did not answer"}
    start, end = cell["warmup_start"], cell["end"]
    before = [(t, v) for t, v in samples if t <= start]
    after = [(t, v) for t, v in samples if t >= end]
    if not before or not after:
        return {"prometheus": None, "expected": round(expected), "exact": False, "ok": False,
                "why": "no Prometheus sample on one side of the window (a gap in scraping)"}
    (t1, v1), (t2, v2) = before[-1], after[0]
    got = v2 - v1
    own = (start, end)
    if not _overlaps(activity, own, t1, start) and not _overlaps(activity, own, end, t2):
        return {"prometheus": round(got), "expected": round(expected), "exact": True,
                "ok": round(got) == round(expected), "why": ""}
    rate = cell["client"]["throughput_qps"]
    slack = rate * SCRAPE_INTERVAL_S * 2  # one scrape interval of requests at each edge
    return {"prometheus": round(got), "expected": round(expected), "exact": False,
            "ok": abs(got - expected) <= slack,
            "why": f"a sample fell inside other activity: within one scrape interval at each edge (±{slack:.0f})"}


def activity_by_server(run: dict) -> dict:
    """{server: [[start, end], ...]} of everything the compare did to each server."""
    out: dict = {}
    for c in run["cells"].values():
        out.setdefault(c["version"], []).append((c["warmup_start"], c["end"]))
    for name, spans in run.get("activity", {}).items():
        out.setdefault(name, []).extend(tuple(s) for s in spans)
    return out

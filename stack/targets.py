"""Prometheus' own view of the stack: which scrape targets are up (for `make status`)."""
from __future__ import annotations

import json
import urllib.parse

from fileio import http
from core.errors import Failed


def query(prometheus_url: str, expr: str, timeout: float = 5.0) -> list:
    url = f"{prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.loads(http.get(url, timeout_s=timeout))
    if body.get("status") != "success":
        raise Failed(f"Prometheus rejected {expr!r}: {body.get('error')}")
    return body["data"]["result"]


def scrape_health(prometheus_url: str) -> list:
    """[(job, instance, version, up 0/1)] from Prometheus' `up` series."""
    try:
        rows = query(prometheus_url, "up")
    except OSError:
        return []
    return sorted((r["metric"].get("job", ""), r["metric"].get("instance", ""), r["metric"].get("version", ""),
                   int(float(r["value"][1]))) for r in rows)

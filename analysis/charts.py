"""Charts for the HTML report as inline SVG (matplotlib): no CDN, no script, works offline."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _decorate(ax, xlabel: str, ylabel: str, title: str, legend: bool = True) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend()


def qps_vs_p99(curves: dict, title: str) -> str:
    """curves: {version: [(qps, p99 ms, p99 ci half-width or 0)]}."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for v, pts in sorted(curves.items()):
        pts = sorted(pts)
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3,
                    label=f"TF {v}")
    _decorate(ax, "achieved QPS", "P99 latency (ms)", title)
    return _svg(fig)


def cdf(latencies: dict, title: str) -> str:
    """latencies: {version: ([latency ms...], [cumulative fraction...])}."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for v, (xs, ys) in sorted(latencies.items()):
        ax.step(xs, ys, where="post", label=f"TF {v}")
    ax.set_xscale("log")
    _decorate(ax, "latency (ms, log scale)", "fraction of requests", title)
    return _svg(fig)


def timeseries(series: dict, title: str, ylabel: str, scale: float = 1.0) -> str:
    """series: {label: [(unix time, value)]} (from a dashboard panel's query_range)."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    t0 = min((p[0] for pts in series.values() for p in pts), default=0)
    for label, pts in sorted(series.items()):
        ax.plot([p[0] - t0 for p in pts], [p[1] * scale for p in pts], label=label)
    _decorate(ax, "seconds since the run started", ylabel, title, legend=bool(series))
    return _svg(fig)

"""Charts for the HTML report as inline SVG (matplotlib): no CDN, no script, works offline.

Each answers a question about an interleaved run, not a time series: bars with their 95% intervals
per cell and version, the QPS-P99 curve, the latency CDF, and where each request's time goes.
"""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

plt.rcParams.update({"font.size": 9, "svg.fonttype": "none"})  # text stays text: readable, searchable


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]


def _decorate(ax, xlabel: str, ylabel: str, title: str, legend: bool = True) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=8)


def bars(groups: list, versions: list, values: dict, title: str, ylabel: str) -> str:
    """groups: cell labels; values[(group, version)] = (mean, half-width or 0): bars with 95% whiskers."""
    fig, ax = plt.subplots(figsize=(max(6.5, 0.9 * len(groups) * len(versions)), 3.6))
    width = 0.8 / max(1, len(versions))
    for i, v in enumerate(versions):
        xs = [g + (i - (len(versions) - 1) / 2) * width for g in range(len(groups))]
        got = [values.get((grp, v), (0.0, 0.0)) for grp in groups]
        ax.bar(xs, [m for m, _ in got], width, yerr=[h for _, h in got], capsize=3, label=f"TF {v}")
    ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
    _decorate(ax, "", ylabel, title)
    return _svg(fig)


def qps_vs_p99(curves: dict, title: str) -> str:
    """curves: {label: [(qps, p99 ms, p99 ci half-width or 0)]}."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for label, pts in sorted(curves.items()):
        pts = sorted(pts)
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3,
                    label=label)
    _decorate(ax, "achieved QPS", "P99 latency (ms)", title)
    return _svg(fig)


def _ms_tick(v, _pos) -> str:
    return f"{v:g} ms" if v >= 1 else f"{v * 1000:g} us"


def cdf(latencies: dict, title: str) -> str:
    """latencies: {label: ([latency ms...], [cumulative fraction...])}; log x with 1-2-5 ticks in ms."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    lo, hi = float("inf"), 0.0
    for label, (xs, ys) in sorted(latencies.items()):
        if xs:
            ax.step(xs, ys, where="post", label=label)
            lo, hi = min(lo, xs[0]), max(hi, xs[-1])
    ax.set_xscale("log")
    if hi > 0:
        ticks = [m * 10 ** e for e in range(-3, 5) for m in (1, 2, 5) if lo / 2 <= m * 10 ** e <= hi * 2]
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(_ms_tick))
    for q in (0.5, 0.99):
        ax.axhline(q, color="grey", lw=0.6, ls=":")
    _decorate(ax, "latency (log scale)", "fraction of requests", title, legend=bool(latencies))
    return _svg(fig)


def stacked(groups: list, versions: list, stages: list, values: dict, title: str,
            ylabel: str = "mean ms per request") -> str:
    """values[(group, version)] = {stage: mean}: one stacked bar per version and cell."""
    fig, ax = plt.subplots(figsize=(max(6.5, 0.9 * len(groups) * len(versions)), 3.8))
    width = 0.8 / max(1, len(versions))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, v in enumerate(versions):
        xs = [g + (i - (len(versions) - 1) / 2) * width for g in range(len(groups))]
        bottom = [0.0] * len(groups)
        for k, stage in enumerate(stages):
            hs = [max(0.0, values.get((grp, v), {}).get(stage) or 0.0) for grp in groups]
            ax.bar(xs, hs, width, bottom=bottom, color=colours[k % len(colours)], edgecolor="white",
                   hatch="//" if i % 2 else None, label=stage if i == 0 else None)
            bottom = [b + h for b, h in zip(bottom, hs)]
        for x, b in zip(xs, bottom):
            ax.text(x, b, v, ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
    _decorate(ax, "", ylabel, title)
    return _svg(fig)

"""What a run shows while it goes on: a live table on a terminal (rich), nothing when stderr is not
one; and the per-second history for --csv (Locust's habit), appended to PATH.partial while the run
goes on and renamed to PATH when it ends, so PATH is only ever a whole file."""
from __future__ import annotations

import csv
import os

FIELDS = ["time", "phase", "target", "elapsed_s", "target_rate", "rate", "completed", "ok", "errors", "error_ratio",
          "achieved_qps", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms"]


class LiveDisplay:
    """A rich Live table, refreshed by the runner's reporter once a second."""

    def __init__(self):
        from rich.console import Console
        from rich.live import Live

        self.live = Live(console=Console(stderr=True), refresh_per_second=2, transient=False)
        self.live.start()

    def __call__(self, rows: list) -> None:
        from rich.table import Table

        phase = rows[0]["phase"] if rows else "-"
        t = Table(title=f"phase {phase}: {rows[0]['elapsed_s']:.0f}s elapsed, {rows[0]['remaining_s']:.0f}s to go"
                  if rows else "starting")
        for col in ("target", "req/s (last s)", "target", "completed", "errors", "p50 ms", "p99 ms"):
            t.add_column(col, justify="left" if col == "target" else "right")
        for r in rows:
            lat = r["latency_ms"]
            t.add_row(r["target"], f"{r['rate']:,}", "-" if r["target_rate"] is None else f"{r['target_rate']:g}/s",
                      f"{r['completed']:,}", f"{r['errors']:,}", f"{lat.get('p50', 0):.2f}", f"{lat.get('p99', 0):.2f}")
        self.live.update(t)

    def close(self) -> None:
        self.live.stop()


class CsvHistory:
    def __init__(self, path: str):
        self.path, self.partial = path, f"{path}.partial"
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.f = open(self.partial, "w", newline="")
        self.w = csv.writer(self.f)
        self.w.writerow(FIELDS)

    def __call__(self, rows: list) -> None:
        for r in rows:
            lat = r["latency_ms"]
            self.w.writerow([f"{r['time']:.3f}", r["phase"], r["target"], f"{r['elapsed_s']:.3f}",
                             "" if r["target_rate"] is None else r["target_rate"], r["rate"], r["completed"], r["ok"],
                             r["errors"], f"{r['error_ratio']:.6f}", f"{r['achieved_qps']:.3f}",
                             *(f"{lat[k]:.4f}" if k in lat else "" for k in ("p50", "p90", "p95", "p99", "max"))])
        self.f.flush()

    def close(self) -> None:
        self.f.close()
        os.replace(self.partial, self.path)

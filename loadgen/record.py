"""Recording latencies: constant, cheap work per request; the sums are done in batches.

The hot path appends a float to a list. Every BATCH values, or every flush
interval, the event loop thread turns the batch into two histograms with numpy:

* log-spaced Prometheus buckets, 16 per octave (bucket bounds grow by 2**(1/16),
  4.4%), from 2**-14 s (61 us) to 2**6 s (64 s): 320 buckets + Inf. A quantile
  that histogram_quantile() interpolates inside one bucket is off by at most the
  bucket's width, so the worst-case relative error of a P99 read from Prometheus
  is 4.4% (the issue asks for 5%).
* an exact HDR histogram (hdrhistogram package, 1 us .. 120 s, 3 significant
  digits) for the summary, filled through HDR's own index arithmetic, vectorized
  here because hdrh's pure-Python record_value costs ~1.7 us per value
  (benchmarks/loadgen.py measures both against prometheus_client's observe).

Series are only ever written from the event loop thread; the Prometheus
collector reads `snapshot`, a tuple swapped in whole, so a scrape from another
thread never sees half a flush.
"""
from __future__ import annotations

import numpy as np
from hdrh.histogram import HdrHistogram

BATCH = 4096
PER_OCTAVE = 16
LOW_EXP, HIGH_EXP = -14, 6
BOUNDS = [2.0 ** (LOW_EXP + i / PER_OCTAVE) for i in range((HIGH_EXP - LOW_EXP) * PER_OCTAVE + 1)]
NBUCKETS = len(BOUNDS) + 1  # + the +Inf bucket
HDR_LOW_US, HDR_HIGH_US, HDR_DIGITS = 1, 120_000_000, 3


def new_hdr() -> HdrHistogram:
    return HdrHistogram(HDR_LOW_US, HDR_HIGH_US, HDR_DIGITS)


def bucket_indices(values_s: np.ndarray) -> np.ndarray:
    """Index of the first bucket whose upper bound (le) is >= the value."""
    with np.errstate(divide="ignore"):
        idx = np.ceil((np.log2(np.maximum(values_s, 1e-12)) - LOW_EXP) * PER_OCTAVE - 1e-9)
    return np.clip(idx, 0, NBUCKETS - 1).astype(np.int64)


def hdr_record_many(h: HdrHistogram, values_us: np.ndarray) -> None:
    """h.record_value for each value, in one vectorized pass (same bins as hdrh)."""
    if values_us.size == 0:
        return
    v = np.clip(values_us.astype(np.int64), 0, h.highest_trackable_value)
    pow2ceiling = np.frexp((v | h.sub_bucket_mask).astype(np.float64))[1].astype(np.int64)
    bucket = pow2ceiling - h.unit_magnitude - (h.sub_bucket_half_count_magnitude + 1)
    sub = v >> (bucket + h.unit_magnitude)
    idx = ((bucket + 1) << h.sub_bucket_half_count_magnitude) + sub - h.sub_bucket_half_count
    view = np.frombuffer(h.counts, dtype=np.int64, count=h.counts_len)  # writes through to hdrh's counts
    view += np.bincount(idx, minlength=h.counts_len)
    h.total_count += int(v.size)
    h.min_value = min(h.min_value, int(v.min()))
    h.max_value = max(h.max_value, int(v.max()))


class Series:
    """The latencies of one (target, protocol, phase, outcome)."""

    __slots__ = ("labels", "buf", "counts", "sum", "count", "hdr", "snapshot")

    def __init__(self, labels: tuple):
        self.labels = labels
        self.buf = []
        self.counts = np.zeros(NBUCKETS, np.int64)
        self.sum, self.count = 0.0, 0
        self.hdr = new_hdr()
        self.snapshot = (self.counts.copy(), 0.0, 0)

    def record(self, seconds: float) -> None:
        """The hot path: one append; every BATCH values a vectorized flush."""
        buf = self.buf
        buf.append(seconds)
        if len(buf) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.buf:
            return
        values = np.asarray(self.buf, dtype=np.float64)
        self.buf = []
        self.counts += np.bincount(bucket_indices(values), minlength=NBUCKETS)
        self.sum += float(values.sum())
        self.count += int(values.size)
        hdr_record_many(self.hdr, np.rint(values * 1e6))
        self.snapshot = (self.counts.copy(), self.sum, self.count)


class Recorder:
    """All series of a run, by label tuple; errors counted by (labels..., code)."""

    def __init__(self):
        self.series = {}
        self.errors = {}
        self.first_detail = {}  # (labels..., code) -> what the server said the first time (its error text)

    def get(self, labels: tuple) -> Series:
        s = self.series.get(labels)
        if s is None:
            s = self.series[labels] = Series(labels)
        return s

    def error(self, labels: tuple, code: str, detail: str = "") -> None:
        key = labels + (code,)
        self.errors[key] = self.errors.get(key, 0) + 1
        if detail and key not in self.first_detail:
            self.first_detail[key] = " ".join(detail.split())[:200]

    def flush(self) -> None:
        for s in list(self.series.values()):
            s.flush()


def encode_hdr(h: HdrHistogram) -> str:
    return h.encode().decode() if h.total_count else ""


def decode_hdr(text: str) -> HdrHistogram:
    h = new_hdr()
    if text:
        h.decode_and_add(text)
    return h


def bin_values(h: HdrHistogram, idx: np.ndarray) -> tuple:
    """(lowest equivalent value, equivalent range) of HDR bins, hdrh's get_value_from_index vectorized."""
    bucket = (idx >> h.sub_bucket_half_count_magnitude) - 1
    sub = (idx & (h.sub_bucket_half_count - 1)) + h.sub_bucket_half_count
    low = bucket < 0
    sub = np.where(low, sub - h.sub_bucket_half_count, sub)
    bucket = np.where(low, 0, bucket)
    return sub << (bucket + h.unit_magnitude), np.left_shift(1, bucket + h.unit_magnitude)


def percentiles_us(h: HdrHistogram, pcts) -> dict:
    """hdrh's get_value_at_percentile for each pct, with numpy (hdrh iterates ~28k bins in Python)."""
    counts = np.frombuffer(h.counts, dtype=np.int64, count=h.counts_len)
    cum = np.cumsum(counts)
    out = {}
    for p in pcts:
        want = max(1, int(p * h.total_count / 100 + 0.5))
        i = int(np.searchsorted(cum, want, side="left"))
        low, size = bin_values(h, np.array([i]))
        out[p] = int(low[0] + size[0] - 1)  # highest equivalent value, as hdrh reports
    return out


def quantiles_ms(h: HdrHistogram) -> dict:
    """The summary's latency statistics, in milliseconds, from an exact HDR histogram."""
    if h.total_count == 0:
        return {"count": 0}
    counts = np.frombuffer(h.counts, dtype=np.int64, count=h.counts_len)
    nz = np.nonzero(counts)[0]
    low, size = bin_values(h, nz)
    mean_us = float((counts[nz] * (low + (size >> 1))).sum()) / h.total_count  # hdrh: median-equivalent values
    pct = percentiles_us(h, (50, 90, 95, 99, 99.9, 100))
    return {"count": h.total_count, "avg": mean_us / 1000, "p50": pct[50] / 1000, "p90": pct[90] / 1000,
            "p95": pct[95] / 1000, "p99": pct[99] / 1000, "p999": pct[99.9] / 1000, "max": pct[100] / 1000,
            "min": float(low[0]) / 1000}


SPECTRUM = (50, 75, 90, 95, 99, 99.9, 99.99, 99.999, 100)


def spectrum_ms(h: HdrHistogram) -> list:
    """[(percentile, ms)] over SPECTRUM, what wrk2 --latency prints."""
    if h.total_count == 0:
        return []
    got = percentiles_us(h, SPECTRUM)
    return [(p, got[p] / 1000) for p in SPECTRUM]

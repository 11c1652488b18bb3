"""Recording: vectorized HDR equals hdrh's own, buckets are right, worker merge is exact."""
import numpy as np
import pytest

from loadgen.record import (BOUNDS, NBUCKETS, Series, bucket_indices, decode_hdr, encode_hdr, hdr_record_many,
                            new_hdr, quantiles_ms)
from loadgen.summary import merge_raw


def test_vectorized_hdr_matches_record_value():
    values = np.rint(np.random.default_rng(4).lognormal(7, 1.6, 30000)).astype(np.int64)
    a, b = new_hdr(), new_hdr()
    for v in values:
        a.record_value(int(v))
    hdr_record_many(b, values)
    assert list(a.counts) == list(b.counts)
    assert (a.total_count, a.min_value, a.max_value) == (b.total_count, b.min_value, b.max_value)
    want = a.get_percentile_to_value_dict([50, 90, 99, 99.9])
    got = quantiles_ms(b)
    assert [got["p50"], got["p90"], got["p99"], got["p999"]] == [want[p] / 1000 for p in (50, 90, 99, 99.9)]
    assert got["avg"] == pytest.approx(a.get_mean_value() / 1000)
    assert got["max"] == a.get_max_value() / 1000


def test_bucket_boundaries_follow_prometheus_le_semantics():
    # A value equal to a bound belongs to that bucket (le = less or equal); just above goes to the next.
    idx = bucket_indices(np.array([BOUNDS[10], BOUNDS[10] * 1.001, BOUNDS[0] / 10, 1e6]))
    assert idx.tolist() == [10, 11, 0, NBUCKETS - 1]
    ratios = np.array(BOUNDS[1:]) / np.array(BOUNDS[:-1])
    assert np.allclose(ratios, 2 ** (1 / 16))  # every bucket 4.4% wide: the stated worst-case error
    assert BOUNDS[0] < 62e-6 and BOUNDS[-1] >= 60


def test_series_snapshot_counts_everything_once():
    s = Series(("2.9", "rest", "steady", "ok"))
    values = np.random.default_rng(1).uniform(0.001, 0.05, 10000)
    for v in values:
        s.record(float(v))
    s.flush()
    counts, total, count = s.snapshot
    assert count == 10000 == counts.sum() == s.hdr.total_count
    assert total == pytest.approx(values.sum())
    np.testing.assert_array_equal(counts, np.bincount(bucket_indices(values), minlength=NBUCKETS))


def _raw(values_ms, errors):
    h = new_hdr()
    hdr_record_many(h, np.asarray(values_ms) * 1000)
    return {"run_id": "r", "partial": False, "targets": {"2.9/rest": {
        "version": "2.9", "protocol": "rest", "address": "x", "model": "m", "reconnects": 1,
        "phases": {"steady": {"ok_hdr": encode_hdr(h), "lag_hdr": "", "errors": errors, "sent": len(values_ms),
                              "scheduled": len(values_ms), "level": 50, "seconds": 10.0, "cpu_ratio": 0.2}}}}}


def test_worker_merge_is_exact():
    rng = np.random.default_rng(9)
    a, b = rng.integers(1, 500, 4000), rng.integers(100, 2000, 3000)
    merged = merge_raw([_raw(a, {"503": 2}), _raw(b, {"503": 1, "timeout": 4})])
    info = merged["targets"]["2.9/rest"]["phases"]["steady"]
    whole = new_hdr()
    hdr_record_many(whole, np.concatenate([a, b]) * 1000)
    assert quantiles_ms(decode_hdr(info["ok_hdr"])) == quantiles_ms(whole)
    assert info["errors"] == {"503": 3, "timeout": 4}
    assert info["sent"] == 7000 and info["level"] == 100
    assert merged["targets"]["2.9/rest"]["reconnects"] == 2

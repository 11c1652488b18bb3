"""Open-loop arrival schedules: Poisson statistics, constant spacing, seeded."""
import numpy as np

from loadgen.schedule import arrivals


def test_poisson_schedule_statistics():
    rate, seconds = 1000.0, 60.0
    t = arrivals("poisson", rate, seconds, seed=3)
    gaps = np.diff(t)
    assert abs(len(t) - rate * seconds) < 4 * np.sqrt(rate * seconds)
    assert abs(np.mean(gaps) * rate - 1) < 0.02
    assert abs(np.std(gaps) / np.mean(gaps) - 1) < 0.03           # exponential: CV = 1
    counts = np.bincount((t // 1.0).astype(int), minlength=int(seconds))
    assert abs(counts.var() / counts.mean() - 1) < 0.4            # Poisson counts: dispersion index ~1
    assert abs(np.mean(gaps < np.log(2) / rate) - 0.5) < 0.02     # median gap ln2/rate
    assert t[0] == 0 and t[-1] < seconds and np.all(gaps >= 0)


def test_poisson_is_seeded_and_constant_is_even():
    assert np.array_equal(arrivals("poisson", 100, 5, 7), arrivals("poisson", 100, 5, 7))
    assert not np.array_equal(arrivals("poisson", 100, 5, 7), arrivals("poisson", 100, 5, 8))
    c = arrivals("constant", 250, 2, 0)
    assert len(c) == 500 and np.allclose(np.diff(c), 1 / 250)
    assert len(arrivals("poisson", 0.1, 1, 0)) == 0

"""A sweep row's latency figures come from one population (profiler.analysis.benchmark
.process_figures): with several processes, mean, p90, p99, CV, enqueue and throughput are each
process's figure combined as p50 is (geometric mean), never one window's beside the others'
p50."""

import math

import numpy as np
import pytest

from profiler.analysis.benchmark import process_figures
from profiler.runs.samples import ConfigSamples, ProcessWindow


def window(center: float, spread: float, seed: int, enqueue: float = 1.0) -> ProcessWindow:
    rng = np.random.default_rng(seed)
    latency = tuple(center * np.exp(rng.normal(0, spread, 100)))
    return ProcessWindow(latency, (), (enqueue,) * 100, None, f"r{seed}")


def geomean(values) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def test_every_latency_column_combines_the_processes_as_p50_does():
    # the issue's case: the run's own window (process 0) slow and wide, the rounds' quick
    slow = window(8.2, 0.05, 0, enqueue=4.0)
    quick = [window(4.3, 0.02, s, enqueue=2.0) for s in (1, 2, 3, 4, 5)]
    samples = ConfigSamples((slow, *quick))
    found = process_figures(samples, batch_size=4)
    per = [np.asarray(w.latency_ms) for w in samples.windows]
    assert found["p90_ms"] == pytest.approx(geomean([np.percentile(x, 90) for x in per]))
    assert found["p99_ms"] == pytest.approx(geomean([np.percentile(x, 99) for x in per]))
    assert found["mean_ms"] == pytest.approx(geomean([x.mean() for x in per]))
    assert found["enqueue_ms"] == pytest.approx(geomean([4.0] + [2.0] * 5))
    assert found["throughput_per_s"] == pytest.approx(4 * 1000 / found["mean_ms"])
    p50 = samples.geometric_mean("latency")
    # one population: the p50 beside them lies between their p10 and p90, unlike the own
    # window's p90 (8.6-ish) beside the processes' p50 (about 4.8)
    p10 = geomean([np.percentile(x, 10) for x in per])
    assert p10 <= p50 <= found["p90_ms"] <= found["p99_ms"]
    assert found["p90_ms"] < np.percentile(per[0], 90)
    cvs = [100 * x.std(ddof=1) / x.mean() for x in per]
    assert found["cv_pct"] == pytest.approx(geomean(cvs))


def test_windows_without_spread_or_enqueue():
    flat = ConfigSamples(tuple(ProcessWindow((5.0,) * 10, round=f"r{i}") for i in range(3)))
    found = process_figures(flat, batch_size=1)
    assert found["cv_pct"] == 0.0 and found["p99_ms"] == pytest.approx(5.0)
    assert "enqueue_ms" not in found  # none measured: the run's own figure stands
    assert process_figures(ConfigSamples(), batch_size=1) == {}

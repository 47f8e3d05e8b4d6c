import random

import numpy as np
import pytest

from profiler.timing import latency_stats, percentile, time_iterations


def test_percentiles_match_numpy_linear_interpolation():
    rng = random.Random(3)
    values = sorted(rng.uniform(0.5, 9.0) for _ in range(101))
    for q in (0, 50, 90, 95, 99, 100):
        assert percentile(values, q) == pytest.approx(np.percentile(values, q))


def test_latency_stats_on_known_values():
    stats = latency_stats([4.0, 1.0, 3.0, 2.0], batch_size=8)
    assert stats["mean_ms"] == 2.5 and stats["min_ms"] == 1.0 and stats["max_ms"] == 4.0
    assert stats["p50_ms"] == 2.5
    assert stats["std_ms"] == pytest.approx(np.std([1, 2, 3, 4], ddof=1))
    # 8 samples per iteration, 4 iterations in 10 ms
    assert stats["throughput_samples_per_s"] == pytest.approx(32 / 0.010)


def test_time_iterations_on_cpu_counts_calls_and_keeps_the_output():
    calls = []

    def fn(x):
        calls.append(x)
        return x * 2

    latencies, output = time_iterations(fn, (21,), iters=5, use_cuda=False)
    assert len(latencies) == 5 and all(ms >= 0 for ms in latencies)
    assert len(calls) == 5 and output == 42

"""The verdict of the hierarchical bootstrap on synthetic processes with known answers."""

import numpy as np
import pytest

from profiler.analysis.verdict import (DEFAULT_NOISE_FLOOR, FASTER, SAME, SLOWER, UNDECIDED,
                                       bootstrap_medians, compare)


def processes(rng, count, median=5.0, iters=200, within=0.03, between=0.0):
    """``count`` processes of lognormal latencies; each process' median moved by a
    between-process factor of CV ``between``."""
    shifts = rng.normal(0.0, between, count) if between else np.zeros(count)
    return [median * np.exp(s) * rng.lognormal(0.0, within, iters) for s in shifts]


def test_identical_samples_are_same():
    a = processes(np.random.default_rng(1), 5, between=0.005)
    result = compare(a, [p.copy() for p in a])
    assert result.verdict == SAME
    assert result.ratio == pytest.approx(1.0)
    assert 0.98 <= result.low <= 1.0 <= result.high <= 1.02
    assert (result.processes_a, result.processes_b) == (5, 5)
    assert result.noise_floor is None and "hierarchical" in result.method


def test_b_ten_percent_slower_and_a_slower_reads_faster():
    rng = np.random.default_rng(2)
    a = processes(rng, 5, between=0.01)
    b = [p * 1.10 for p in processes(rng, 5, between=0.01)]
    slower = compare(a, b)
    assert slower.verdict == SLOWER
    assert 1.06 < slower.low < slower.ratio < slower.high < 1.14
    faster = compare(b, a)
    assert faster.verdict == FASTER and faster.high < 1


def test_bimodal_processes_are_undecided_where_a_pooled_bootstrap_is_sure():
    """Half the processes of the config are 20 % slower; B happened to get three slow of four,
    A one of four: pooled iterations call B slower, the processes say it could be chance."""
    rng = np.random.default_rng(3)
    fast = processes(rng, 4, within=0.02)
    slow = [p * 1.2 for p in processes(rng, 4, within=0.02)]
    a = [fast[0], fast[1], fast[2], slow[0]]
    b = [fast[3], slow[1], slow[2], slow[3]]
    result = compare(a, b)
    assert result.verdict == UNDECIDED
    assert result.low < 1 < result.high
    # pooled into one "process" a side with no between-process spread allowed: B slower
    pooled = compare([np.concatenate(a)], [np.concatenate(b)], noise_floor=0.0)
    assert pooled.verdict == SLOWER


def test_one_process_per_side_five_percent_is_undecided():
    rng = np.random.default_rng(4)
    a = processes(rng, 1, within=0.01)
    b = [p * 1.05 for p in processes(rng, 1, within=0.01)]
    result = compare(a, b)
    assert result.low > 1  # the iterations alone would call it
    assert result.verdict == UNDECIDED
    assert result.noise_floor == DEFAULT_NOISE_FLOOR and "default machine floor" in result.method


def test_one_process_per_side_far_beyond_a_small_floor_is_called():
    rng = np.random.default_rng(5)
    a = processes(rng, 1, within=0.01)
    b = [p * 1.5 for p in processes(rng, 1, within=0.01)]
    assert compare(a, b, noise_floor=0.02).verdict == SLOWER
    assert compare(b, a, noise_floor=0.02).verdict == FASTER
    # the same 50 % against a machine known to move 20 % between processes: not far enough
    assert compare(a, b, noise_floor=0.20).verdict == UNDECIDED


def test_one_process_never_reads_same():
    a = processes(np.random.default_rng(6), 1, within=0.01)
    assert compare(a, [a[0].copy()], noise_floor=0.001).verdict == UNDECIDED


def test_deterministic_for_a_seed_and_unequal_window_lengths():
    rng = np.random.default_rng(7)
    a = [rng.lognormal(0, 0.05, n) for n in (50, 51, 200)]
    b = [rng.lognormal(0, 0.05, n) for n in (7, 300)]
    first, second = compare(a, b, seed=11), compare(a, b, seed=11)
    assert first == second
    assert compare(a, b, seed=12).low != first.low


def test_resampled_median_has_the_distribution_of_a_resample():
    """bootstrap_medians draws the median of a resample from its exact distribution: its
    quantiles match those of drawing the n values and taking their median."""
    rng = np.random.default_rng(8)
    for n in (1, 2, 7, 40):
        x = rng.lognormal(0, 0.3, n)
        direct = np.median(x[rng.integers(n, size=(20000, n))], axis=1)
        drawn = bootstrap_medians([x], np.zeros((20000, 1), dtype=int), rng)[:, 0]
        for q in (10, 50, 90):
            assert np.percentile(drawn, q) == pytest.approx(np.percentile(direct, q), rel=0.02)


def test_bad_input():
    with pytest.raises(ValueError):
        compare([], [[1.0]])
    with pytest.raises(ValueError):
        compare([[1.0], []], [[1.0]])


def test_the_statistics_and_records_never_import_torch():
    import subprocess
    import sys

    code = ("import sys\n"
            "import profiler.analysis.verdict, profiler.analysis.sampling\n"
            "import profiler.analysis.difference, profiler.sweep.schedule\n"
            "import profiler.collect.gpu_state, profiler.runs.gpu_record\n"
            "assert 'torch' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_tolerance_decides_same_against_a_small_real_difference():
    """B 1 % slower, measured tightly: the same within ±2 %, slower with ±0.5 %."""
    rng = np.random.default_rng(9)
    a = processes(rng, 8, within=0.005, between=0.001)
    b = [p * 1.01 for p in processes(rng, 8, within=0.005, between=0.001)]
    assert compare(a, b).verdict == SAME
    tight = compare(a, b, tolerance=0.005)
    assert tight.verdict == SLOWER and tight.tolerance == 0.005 and "±0.5 %" in tight.method


def test_one_process_on_one_side_only_uses_the_floor_for_it():
    """Five processes against one: the floor's spread is floor * sqrt(1/5 + 1/1)."""
    rng = np.random.default_rng(10)
    a = processes(rng, 5, within=0.01, between=0.01)
    b = [p * 1.3 for p in processes(rng, 1, within=0.01)]
    # log(1.3) = 0.262: below 3 * 0.10 * sqrt(1.2) = 0.329, above 3 * 0.06 * sqrt(1.2) = 0.197
    assert compare(a, b, noise_floor=0.10).verdict == UNDECIDED
    called = compare(a, b, noise_floor=0.06)
    assert called.verdict == SLOWER and called.processes_a == 5 and called.processes_b == 1
    assert called.noise_floor == 0.06

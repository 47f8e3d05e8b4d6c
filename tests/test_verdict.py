"""The verdict over processes on synthetic processes with known answers: a process enters
through its median (tests/test_verdict_statistics.py holds the designs' statistics)."""

import numpy as np
import pytest

from profiler.analysis.verdict import (
    FASTER,
    FIGURES,
    GPU_TIME,
    LATENCY,
    SAME,
    SLOWER,
    UNDECIDED,
    compare,
)
from profiler.report.sentences import verdict_method


def processes(rng, count, median=5.0, iters=200, within=0.03, between=0.0):
    """``count`` processes of lognormal latencies; each process' median moved by a
    between-process factor of CV ``between``."""
    shifts = rng.normal(0.0, between, count) if between else np.zeros(count)
    return [median * np.exp(s) * rng.lognormal(0.0, within, iters) for s in shifts]


def medians(windows) -> list[float]:
    return [float(np.median(w)) for w in windows]


def test_identical_samples_are_same():
    a = medians(processes(np.random.default_rng(1), 5, between=0.005))
    result = compare(a, list(a))
    assert result.verdict == SAME
    assert result.ratio == pytest.approx(1.0)
    assert 0.98 <= result.low <= 1.0 <= result.high <= 1.02
    assert (result.processes_a, result.processes_b) == (5, 5)
    assert result.noise_floor is None and "Welch t-interval" in verdict_method(result)
    assert result.design == "unpaired" and result.figure == LATENCY


def test_b_ten_percent_slower_and_a_slower_reads_faster():
    rng = np.random.default_rng(2)
    a = medians(processes(rng, 5, between=0.01))
    b = [m * 1.10 for m in medians(processes(rng, 5, between=0.01))]
    slower = compare(a, b)
    assert slower.verdict == SLOWER
    assert 1.06 < slower.low < slower.ratio < slower.high < 1.14
    assert slower.speedup == pytest.approx(1 / slower.ratio)
    faster = compare(b, a)
    assert faster.verdict == FASTER and faster.high < 1


def test_bimodal_processes_are_undecided_where_one_pooled_process_is_sure():
    """Half the processes of the config are 20 % slower; B happened to get three slow of four,
    A one of four: pooled into one process a side, B reads slower; the processes say it could
    be chance."""
    rng = np.random.default_rng(3)
    fast = processes(rng, 4, within=0.02)
    slow = [p * 1.2 for p in processes(rng, 4, within=0.02)]
    a = [fast[0], fast[1], fast[2], slow[0]]
    b = [fast[3], slow[1], slow[2], slow[3]]
    result = compare(medians(a), medians(b))
    assert result.verdict == UNDECIDED
    assert result.low < 1 < result.high
    # pooled into one "process" a side with no between-process spread allowed: B slower
    pooled = compare(
        [np.median(np.concatenate(a))], [np.median(np.concatenate(b))], noise_floor=0.0
    )
    assert pooled.verdict == SLOWER


def test_one_process_per_side_five_percent_is_undecided():
    rng = np.random.default_rng(4)
    a = medians(processes(rng, 1, within=0.01))
    b = [m * 1.05 for m in medians(processes(rng, 1, within=0.01))]
    result = compare(a, b)
    assert result.ratio > 1.03  # the iterations alone would call it
    assert result.verdict == UNDECIDED and result.design == "floor"
    assert result.noise_floor == FIGURES[LATENCY].default_floor == 0.33
    assert result.floor_source == "default" and "default floor of 33.0 % CV" in verdict_method(
        result
    )


def test_one_process_per_side_far_beyond_a_small_floor_is_called():
    rng = np.random.default_rng(5)
    a = medians(processes(rng, 1, within=0.01))
    b = [m * 1.5 for m in medians(processes(rng, 1, within=0.01))]
    assert compare(a, b, noise_floor=0.02).verdict == SLOWER
    assert compare(b, a, noise_floor=0.02).verdict == FASTER
    assert compare(a, b, noise_floor=0.02).floor_source == "given"
    # the same 50 % against a machine known to move 20 % between processes: not far enough
    assert compare(a, b, noise_floor=0.20).verdict == UNDECIDED


def test_one_process_never_reads_same_on_the_default_floors():
    a = medians(processes(np.random.default_rng(6), 1, within=0.01))
    for figure in (LATENCY, GPU_TIME):
        assert compare(a, list(a), figure=figure).verdict == UNDECIDED


def test_deterministic_and_validated():
    rng = np.random.default_rng(7)
    a, b = list(rng.lognormal(0, 0.05, 3)), list(rng.lognormal(0, 0.05, 2))
    first = compare(a, b)
    assert first == compare(a, b)  # no resampling: the same answer every time
    for bad in ([], [0.0], [-1.0], [float("nan")], [float("inf")]):
        with pytest.raises(ValueError):
            compare(a, bad)
    with pytest.raises(ValueError):
        compare(a, b, tolerance=-0.01)


def test_welch_interval_width_for_three_processes_of_ten_percent():
    """Identical configs, 3 processes a side, between-process CV 10 % (the H100's eager floor):
    the interval's half-width is near t(0.975, ~4) x 10 % x sqrt(2/3) = 23 %, not the ±80 % of
    the two-stage bootstrap it replaced."""
    a = [5.0 * f for f in (0.9, 1.0, 1.1)]
    b = [5.0 * f for f in (0.95, 1.05, 1.0)]
    result = compare(a, b)
    assert result.verdict == UNDECIDED
    assert 0.7 < result.low < 0.9 and 1.1 < result.high < 1.35

"""The statistics of the verdicts (profiler.analysis.verdict, profiler.analysis.timed_verdict):
Student's t against table values, the intervals' coverage of a known true ratio over seeded
simulations of per-process medians, when pairing pays, "same" by the equivalence test, the
false discovery control over a sweep of cells identical to their baseline, the one-process
"floor" design, the launch-bound classification and what ``judge`` says, and runs recorded by
earlier versions. All on the CPU, all seeded."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from profiler.analysis.sampling import betainc, processes_needed, t975, t_quantile, t_two_sided_p
from profiler.analysis.timed_verdict import LEVER, Bound, bound_of, control_family, judge
from profiler.analysis.verdict import (
    FASTER,
    FIGURES,
    FLOOR,
    GPU_TIME,
    LATENCY,
    PAIRED,
    SAME,
    SLOWER,
    UNDECIDED,
    UNPAIRED,
    _pairs,
    compare,
    control_fdr,
    design_for,
    pairing_pays,
)
from profiler.report.sentences import fdr_note, note_lines, verdict_method
from profiler.runs.result import read_result
from profiler.runs.samples import (
    GPU_BOUND,
    GPU_BOUND_RATIO,
    LAUNCH_BOUND,
    LAUNCH_LATENCY_RATIO,
    NEAR_LAUNCH_BOUND,
    ConfigSamples,
    ProcessWindow,
    bound_word,
    config_samples,
)

from .conftest import FIXTURES

DECIDED = (FASTER, SLOWER)
#: the figure whose within-process correlation is the higher (the calibration in FIGURES may
#: move; the simulations below need one where five pairs pay)
PAIRING = max(FIGURES, key=lambda name: FIGURES[name].rho)


# ---- Student's t -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "p, df, table",
    [
        (0.975, 1, 12.706),
        (0.975, 2, 4.303),
        (0.975, 4, 2.776),
        (0.975, 10, 2.228),
        (0.975, 30, 2.042),
        (0.95, 5, 2.015),
        (0.95, 1, 6.314),
        (0.995, 20, 2.845),
        (0.975, 7.5, 2.3328),
        (0.975, math.inf, 1.960),
        (0.95, math.inf, 1.645),
    ],
)
def test_t_quantile_matches_the_table(p, df, table):
    assert t_quantile(p, df) == pytest.approx(table, abs=6e-4)


@pytest.mark.parametrize(
    "t, df, p",
    [
        (12.706, 1, 0.05),
        (2.776, 4, 0.05),
        (2.228, 10, 0.05),
        (3.169, 10, 0.01),
        (1.812, 10, 0.10),
        (1.96, math.inf, 0.05),
        (2.576, math.inf, 0.01),
    ],
)
def test_t_two_sided_p_matches_the_table(t, df, p):
    assert t_two_sided_p(t, df) == pytest.approx(p, abs=3e-4)
    assert t_two_sided_p(-t, df) == t_two_sided_p(t, df)  # two-sided


def test_t_edges_and_the_incomplete_beta_function():
    assert t_two_sided_p(0.0, 5) == pytest.approx(1.0)
    assert t_two_sided_p(math.inf, 5) == 0.0
    assert t_quantile(0.975, 3) > t_quantile(0.975, 30) > t_quantile(0.975, math.inf)
    for df in range(1, 31):  # the quantile agrees with sampling's table
        assert t_quantile(0.975, df) == pytest.approx(t975(df), abs=6e-4)
    assert betainc(1, 1, 0.3) == pytest.approx(0.3)  # uniform
    assert betainc(2.5, 1, 0.4) == pytest.approx(0.4**2.5)  # I_x(a, 1) = x^a
    assert betainc(3, 3, 0.5) == pytest.approx(0.5)  # symmetric
    assert betainc(2, 3, 0.2) == pytest.approx(1 - 0.8**4 - 4 * 0.2 * 0.8**3)
    assert (betainc(2, 3, 0.0), betainc(2, 3, 1.0)) == (0.0, 1.0)


# ---- coverage of a known ratio ---------------------------------------------------------------


def rounds_of(k: int) -> list[str]:
    return [f"round-{i}" for i in range(k)]


def draw(rng, k: int, ratio: float, shared: float, own: float, kb: int | None = None):
    """Per-process medians of A and B: log median = config + the round's offset (``shared``,
    the same for A and B in a round: a slow process is slow for every config it times) + the
    config's own process noise (``own``)."""
    kb = k if kb is None else kb
    offsets = rng.normal(0.0, shared, max(k, kb))
    a = 5.0 * np.exp(offsets[:k] + rng.normal(0.0, own, k))
    b = 5.0 * ratio * np.exp(offsets[:kb] + rng.normal(0.0, own, kb))
    return a, b


def coverage(design: str, draws: int = 400, **case) -> tuple[float, float]:
    """(share of 95 % intervals holding the true ratio, median half-width) over ``draws``."""
    rng = np.random.default_rng(case.pop("seed"))
    ratio, paired = case["ratio"], design == PAIRED
    held, widths = 0, []
    for _ in range(draws):
        a, b = draw(rng, **case)
        kw = dict(rounds_a=rounds_of(len(a)), rounds_b=rounds_of(len(b))) if paired else {}
        if design == FLOOR:
            kw["noise_floor"] = case["own"]
        v = compare(a, b, figure=PAIRING, **kw)
        assert v.design == design
        held += v.low <= ratio <= v.high
        widths.append(v.half_width)
    return held / draws, float(np.median(widths))


def test_the_welch_interval_covers_the_true_ratio():
    """Independent processes, 4 against 6, CV 5 %: about 95 % of the intervals hold 1.07."""
    share, _ = coverage(UNPAIRED, seed=1, k=4, kb=6, ratio=1.07, shared=0.0, own=0.05)
    assert 0.90 <= share <= 0.99


def test_the_paired_interval_covers_the_true_ratio():
    """Five rounds, each process's offset (CV 5 %) shared by A and B, own noise 2 %."""
    assert design_for(PAIRING, 5, 5, 5) == PAIRED
    share, _ = coverage(PAIRED, seed=2, k=5, ratio=0.93, shared=0.05, own=0.02)
    assert 0.90 <= share <= 0.99


def test_the_floor_interval_covers_the_true_ratio_when_the_floor_is_the_spread():
    share, width = coverage(FLOOR, seed=3, k=1, ratio=1.2, shared=0.0, own=0.03)
    assert 0.90 <= share <= 0.99
    assert width == pytest.approx(1.959964 * 0.03 * math.sqrt(2))  # the floor's, not the data's


def test_pairing_matters_with_strong_shared_offsets():
    """Processes move 10 % together, each config's own noise 0.5 %, B 5 % slower: pairing
    takes the shared offset out; Welch's interval is several times wider and cannot tell."""
    a, b = draw(np.random.default_rng(4), k=5, ratio=1.05, shared=0.10, own=0.005)
    assert design_for(PAIRING, 5, 5, 5) == PAIRED  # chosen from the counts and rho alone
    paired = compare(a, b, figure=PAIRING, rounds_a=rounds_of(5), rounds_b=rounds_of(5))
    welch = compare(a, b, figure=PAIRING)
    assert paired.design == PAIRED and paired.pairs == 5 and welch.design == UNPAIRED
    assert paired.half_width < welch.half_width / 5
    assert paired.verdict == SLOWER and 1.03 < paired.low < 1.05 < paired.high < 1.07
    assert welch.verdict == UNDECIDED
    assert paired.df == 4 and "paired t-interval" in verdict_method(paired)
    assert "4 degrees of freedom" in verdict_method(paired)


def test_when_pairing_pays():
    # two pairs and a low within-process correlation: one degree of freedom costs more
    assert not pairing_pays(2, 2, 2, rho=0.5) and not pairing_pays(2, 2, 2, rho=0.85)
    assert pairing_pays(2, 2, 2, rho=0.95)  # t(1) x sqrt(0.1 / 2) = 2.84 < t(2) x 1 = 4.30
    assert pairing_pays(5, 5, 5, rho=0.85) and not pairing_pays(5, 5, 5, rho=0.0)
    assert not pairing_pays(1, 5, 5, rho=0.99)  # one pair: no spread to estimate
    for name, figure in FIGURES.items():  # the design follows the figure's calibrated rho
        assert 0 <= figure.rho < 1
        for k in (2, 3, 5, 8):
            expected = PAIRED if pairing_pays(k, k, k, figure.rho) else UNPAIRED
            assert design_for(name, k, k, k) == expected
        assert design_for(name, 2, 2, 2) == UNPAIRED or figure.rho > 0.9
    assert design_for(LATENCY, 1, 5, 0) == FLOOR and design_for(LATENCY, 3, 3, 0) == UNPAIRED
    assert design_for(LATENCY, 3, 3, 1) == UNPAIRED


def test_only_windows_of_one_round_pair_up():
    """The runs' own windows (no round) and rounds only one side has stay out of the pairs."""
    rounds_a = [None, "r1", "r2", "r3", "r4", "r5", "only-a"]
    rounds_b = [None, "r2", "r1", "r3", "r4", "r5", "only-b"]
    assert _pairs(rounds_a, rounds_b) == [(1, 2), (2, 1), (3, 3), (4, 4), (5, 5)]
    assert _pairs(rounds_a, None) == [] and _pairs([None] * 3, [None] * 3) == []
    a = [5.0, 5.1, 5.2, 5.05, 5.15, 4.9]
    b = [5.5, 5.7, 5.6, 5.55, 5.65, 5.4]  # r1 and r2 swapped: pairs by round, not place
    v = compare(a, b, figure=PAIRING, rounds_a=rounds_a[:6], rounds_b=rounds_b[:6])
    assert v.design == design_for(PAIRING, 6, 6, 5) == PAIRED
    assert v.pairs == 5 and (v.processes_a, v.processes_b) == (6, 6)
    diffs = [
        math.log(5.6 / 5.1),
        math.log(5.7 / 5.2),
        math.log(5.55 / 5.05),
        math.log(5.65 / 5.15),
        math.log(5.4 / 4.9),
    ]
    assert v.ratio == pytest.approx(math.exp(np.mean(diffs)))
    assert compare(a, b, rounds_a=[None] * 6, rounds_b=[None] * 6).design == UNPAIRED


# ---- "same" by the equivalence test ----------------------------------------------------------


def quiet(rng, k=5, median=5.0, cv=0.003):
    return list(median * np.exp(rng.normal(0.0, cv, k)))


def test_quiet_identical_configs_are_same_by_tost():
    rng = np.random.default_rng(5)
    v = compare(quiet(rng), quiet(rng))
    assert v.verdict == SAME
    assert 0.98 <= v.same_low <= v.ratio <= v.same_high <= 1.02
    assert v.low < v.same_low and v.same_high < v.high  # the 90 % interval is the narrower
    assert "TOST" in verdict_method(v)


def test_a_five_percent_difference_is_not_same():
    rng = np.random.default_rng(6)
    a = quiet(rng)
    v = compare(a, [m * 1.05 for m in quiet(rng)])
    assert v.verdict == SLOWER and v.same_high > 1.02


def test_a_significant_difference_within_the_tolerance_is_same_not_slower():
    rng = np.random.default_rng(7)
    v = compare(quiet(rng, cv=0.001), [m * 1.01 for m in quiet(rng, cv=0.001)])
    assert v.p_value < 0.001 and v.verdict == SAME
    # the tolerance (--same-within) sets the band: 5 % is same within ±10 %, 1 % is slower
    # within ±0.5 %
    assert (
        compare(
            quiet(rng, cv=0.001), [m * 1.05 for m in quiet(rng, cv=0.001)], tolerance=0.10
        ).verdict
        == SAME
    )
    assert (
        compare(
            quiet(rng, cv=0.001), [m * 1.01 for m in quiet(rng, cv=0.001)], tolerance=0.005
        ).verdict
        == SLOWER
    )


def test_a_wide_interval_is_undecided_not_same():
    rng = np.random.default_rng(8)
    v = compare(quiet(rng, k=3, cv=0.20), quiet(rng, k=3, cv=0.20))
    assert v.verdict == UNDECIDED and v.same_low < 0.98


def test_significant_but_within_the_tolerance_and_not_provably_same_is_undecided():
    """1.5 % slower, p about 0.015, the 90 % interval reaching 2.4 %: neither slower (the ratio
    is within ±2 %) nor same (the interval is not)."""
    a = list(5.0 * np.exp([-0.007, 0.007, -0.003, 0.003]))
    v = compare(a, [m * 1.015 for m in a], figure=GPU_TIME)
    assert v.p_value < 0.05 and abs(v.ratio - 1) < 0.02 and v.same_high > 1.02
    assert v.verdict == UNDECIDED


# ---- false discoveries over a sweep ----------------------------------------------------------


def sweep_of_identical_cells(rng, cells=16, k=5, shared=0.05, own=0.016, speedups=()):
    """One sweep: a baseline and ``cells`` cells timed in the same k rounds (the baseline's
    processes are the same for every cell); the cells of index < len(speedups) are that much
    faster."""
    offsets = rng.normal(0.0, shared, k)
    base = 5.0 * np.exp(offsets + rng.normal(0.0, own, k))
    verdicts = []
    for c in range(cells):
        factor = 1 / speedups[c] if c < len(speedups) else 1.0
        cell = 5.0 * factor * np.exp(offsets + rng.normal(0.0, own, k))
        verdicts.append(
            compare(base, cell, figure=PAIRING, rounds_a=rounds_of(k), rounds_b=rounds_of(k))
        )
    return verdicts


def test_false_discoveries_over_sweeps_of_identical_cells_are_controlled():
    """200 sweeps of 16 cells identical to their baseline (each cell paired with the same
    baseline processes): every faster/slower is false. Without control about one sweep in five
    of this noise calls something; after Benjamini-Hochberg at 5 %, about one in thirty (the
    rate over 600 sweeps of two other seeds: 2.7 % and 3.0 %)."""
    rng = np.random.default_rng(2024)
    raw = controlled = 0
    for _ in range(200):
        verdicts = sweep_of_identical_cells(rng)
        raw += any(v.verdict in DECIDED for v in verdicts)
        held = control_fdr(verdicts)
        controlled += any(v.verdict in DECIDED for v in held)
        assert all(v.fdr_comparisons == 16 and v.fdr_q == 0.05 for v in held)
        assert "Benjamini-Hochberg over 16 comparisons, q = 0.05" == fdr_note(held[0])
    assert raw / 200 > 0.12  # the raw verdicts: many sweeps with a false call
    assert controlled / 200 <= 0.05


def test_real_threefold_speedups_stay_decided_after_the_control():
    rng = np.random.default_rng(7)
    for _ in range(20):
        held = control_fdr(sweep_of_identical_cells(rng, speedups=(3.0, 3.0, 3.0)))
        assert [v.verdict for v in held[:3]] == [FASTER] * 3
        assert all(v.speedup == pytest.approx(3.0, rel=0.1) for v in held[:3])


def test_control_fdr_keeps_gaps_intervals_and_lone_verdicts():
    rng = np.random.default_rng(9)
    a = quiet(rng)
    slower = compare(a, [m * 1.2 for m in quiet(rng)])
    borderline = compare([5.0, 5.3, 4.7, 5.1, 4.9], [x * 1.07 for x in (5.1, 4.8, 5.2, 4.9, 5.0)])
    assert (slower.verdict, borderline.verdict) == (SLOWER, SLOWER)
    assert 0.01 < borderline.p_value < 0.05
    assert control_fdr([borderline]) == [borderline]  # a family of one: nothing to control
    family = [None, slower, borderline, *[compare(a, quiet(rng)) for _ in range(8)]]
    held = control_fdr(family)
    assert held[0] is None and held[1].verdict == SLOWER
    assert held[2].verdict == UNDECIDED  # p above q x rank / m
    assert (held[2].low, held[2].high, held[2].p_value) == (
        borderline.low,
        borderline.high,
        borderline.p_value,
    )


# ---- one process on a side: the floor --------------------------------------------------------


def test_the_floor_design_uses_the_floor_given():
    v = compare([10.0], [11.0], noise_floor=0.05)
    se = 0.05 * math.sqrt(2)
    assert v.design == FLOOR and v.noise_floor == 0.05 and v.floor_source == "given"
    assert v.low == pytest.approx(math.exp(math.log(1.1) - 1.959964 * se), rel=1e-5)
    assert v.high == pytest.approx(math.exp(math.log(1.1) + 1.959964 * se), rel=1e-5)
    assert v.p_value == pytest.approx(math.erfc(math.log(1.1) / se / math.sqrt(2)))
    assert v.df is None and "a given floor of 5.0 % CV" in verdict_method(v)
    # one process against three: se = floor x sqrt(1 + 1/3), B's geometric mean
    three = compare([10.0], [10.0, 12.0, 11.0], noise_floor=0.05)
    assert three.ratio == pytest.approx((10 * 12 * 11) ** (1 / 3) / 10)
    assert three.half_width == pytest.approx(1.959964 * 0.05 * math.sqrt(4 / 3))
    assert "(1 vs 3)" in verdict_method(three)


@pytest.mark.parametrize("figure", [LATENCY, GPU_TIME])
def test_the_floor_design_falls_back_to_each_figures_default(figure):
    floor = FIGURES[figure].default_floor
    words = f"a default floor of {100 * floor:.1f} % CV"
    v = compare([10.0], [10.0], figure=figure)
    assert v.noise_floor == floor and v.floor_source == "default" and words in verdict_method(v)
    assert v.half_width == pytest.approx(1.959964 * floor * math.sqrt(2))
    assert v.figure == figure and v.verdict == UNDECIDED


def test_the_default_floors_differ_by_figure():
    # latency spreads with the host between processes, GPU time far less
    assert FIGURES[LATENCY].default_floor > 5 * FIGURES[GPU_TIME].default_floor
    assert FIGURES[LATENCY].floor_source and FIGURES[GPU_TIME].rho_source


def test_judge_passes_each_figures_floor():
    a = ConfigSamples((window(10.0, gpu=8.0, enqueue=1.0),))
    b = ConfigSamples((window(10.5, gpu=8.4, enqueue=1.0),))
    both = judge(a, b, floors={LATENCY: 0.05})
    assert both.latency.noise_floor == 0.05 and both.latency.floor_source == "given"
    assert both.gpu_time.noise_floor == FIGURES[GPU_TIME].default_floor
    assert both.gpu_time.floor_source == "default"


# ---- launch-bound or GPU-bound, and what judge says ------------------------------------------


def window(
    latency: float,
    gpu: float | None = None,
    enqueue: float | None = None,
    round_id: str | None = None,
    pilot: bool = False,
) -> ProcessWindow:
    """A process whose iterations have these medians (latency +-1 %, GPU time +-0.5 %)."""
    spread = (0.99, 1.0, 1.01)
    return ProcessWindow(
        tuple(latency * f for f in spread),
        () if gpu is None else tuple(gpu * f for f in (0.995, 1.0, 1.005)),
        () if enqueue is None else (enqueue,) * 3,
        None,
        round_id,
        pilot,
    )


#: (enqueue p50, latency p50, GPU time p50) ms -> the word: the H200 runs of eager ResNet50 that
#: the old rule (enqueue p90 >= 0.9 x GPU time) called launch-bound, and the edges of each rule
BOUND_TABLE = [
    # eager FP32 bs 8 on an H200, first and warm run: latency 1.011 x GPU time, enqueue below
    ((3.606, 4.232, 4.185), GPU_BOUND),
    ((3.803, 4.220, 4.173), GPU_BOUND),
    # eager FP16 bs 64 over 6 processes: latency 1.087 x, enqueue just below the GPU time
    ((4.473, 4.872, 4.484), NEAR_LAUNCH_BOUND),
    # eager FP16 bs 1 on an H100: enqueue far above the GPU time
    ((3.815, 3.852, 1.15), LAUNCH_BOUND),
    # a CUDA-graph replay (an H200's TPOT): latency a little under the GPU time
    ((0.64, 1.517, 1.525), GPU_BOUND),
    # a prefill with host work between its kernels: enqueue low, latency 1.26 x
    ((1.906, 6.508, 5.151), LAUNCH_BOUND),
    # the edges, on a GPU time of 2 ms: enqueue at the GPU time, and just below it
    ((2.0, 2.0, 2.0), LAUNCH_BOUND),
    ((1.999, 2.0, 2.0), GPU_BOUND),
    # latency at LAUNCH_LATENCY_RATIO x, just below; at GPU_BOUND_RATIO x, just above
    ((0.5, LAUNCH_LATENCY_RATIO * 2.0, 2.0), LAUNCH_BOUND),
    ((0.5, LAUNCH_LATENCY_RATIO * 2.0 - 1e-6, 2.0), NEAR_LAUNCH_BOUND),
    ((0.5, GPU_BOUND_RATIO * 2.0 + 1e-6, 2.0), NEAR_LAUNCH_BOUND),
    ((0.5, GPU_BOUND_RATIO * 2.0, 2.0), GPU_BOUND),
    # near the launch bound needs the enqueue below the GPU time: at it, launch-bound
    ((2.0, GPU_BOUND_RATIO * 2.0 + 1e-6, 2.0), LAUNCH_BOUND),
]


@pytest.mark.parametrize("figures, word", BOUND_TABLE)
def test_the_bound_word_of_a_calls_enqueue_latency_and_gpu_time(figures, word):
    enqueue, latency, gpu = figures
    assert bound_word(latency, gpu, enqueue) == word
    # a process's word is the rule on its medians
    spread = (0.98, 1.0, 1.03)
    w = ProcessWindow(
        tuple(latency * f for f in spread),
        tuple(gpu * f for f in spread),
        tuple(enqueue * f for f in spread),
    )
    assert w.bound == word


def test_the_thresholds_sit_between_a_call_the_gpu_paces_and_one_the_host_paces():
    assert 1.0 < GPU_BOUND_RATIO < LAUNCH_LATENCY_RATIO == pytest.approx(1.10)


def test_a_process_is_classified_on_its_medians_and_needs_all_three_figures():
    assert window(5.0, gpu=2.0).bound is None and window(5.0, enqueue=1.0).bound is None
    # the median enqueue, not its tail: two slow launches in ten do not make it launch-bound
    tail = ProcessWindow((2.02,) * 10, (2.0,) * 10, (0.2,) * 8 + (2.5, 2.5))
    assert tail.bound == GPU_BOUND
    # and against GPU time's median: a few slow GPU iterations do not change it
    slow_tail = ProcessWindow((2.02,) * 5, (2.0, 2.0, 2.0, 9.0, 9.0), (1.0,) * 5)
    assert slow_tail.bound == GPU_BOUND


def test_a_config_is_classified_on_the_geometric_means_of_its_processes():
    launch = window(2.5, gpu=2.0, enqueue=2.2)  # enqueue above the GPU time
    gpu = window(2.02, gpu=2.0, enqueue=0.5)  # latency 1.01 x
    # half the processes host-paced: the means read latency 1.12 x the GPU time
    assert ConfigSamples((launch, gpu)).bound() == LAUNCH_BOUND
    # a host-paced process in three: the means read latency 1.06 x the GPU time, enqueue below
    mixed = ConfigSamples((window(2.3, gpu=2.0, enqueue=1.2), gpu, gpu))
    assert mixed.bound() == NEAR_LAUNCH_BOUND
    assert mixed.bound_counts() == {LAUNCH_BOUND: 1, NEAR_LAUNCH_BOUND: 0, GPU_BOUND: 2}
    assert ConfigSamples((launch, gpu, gpu, window(5.0))).launch_bound_processes() == (1, 3)
    assert ConfigSamples((gpu, gpu)).bound() == GPU_BOUND
    assert ConfigSamples((window(5.0),)).bound() is None


def test_bound_of_carries_the_figures_behind_the_classification():
    samples = ConfigSamples(
        (
            window(2.5, gpu=2.0, enqueue=2.2),
            window(8.1, gpu=8.0, enqueue=0.45),
            window(2.5, gpu=2.0, enqueue=2.2),
            window(5.0),
        )
    )
    bound = bound_of(samples)
    assert bound.word == LAUNCH_BOUND == samples.bound()
    assert (bound.launch_bound_processes, bound.classified_processes) == (2, 3)
    assert bound.gpu_bound_processes == 1
    assert bound.gpu_p50_ms == pytest.approx((2.0 * 8.0 * 2.0) ** (1 / 3))
    assert bound.enqueue_p50_ms == pytest.approx((2.2 * 0.45 * 2.2) ** (1 / 3))
    assert bound.latency_p50_ms == pytest.approx((2.5 * 8.1 * 2.5) ** (1 / 3))
    assert bound_of(ConfigSamples((window(5.0),))) == Bound(None)


def side(latencies, gpu, enqueue, prefix="r") -> ConfigSamples:
    return ConfigSamples(
        tuple(
            window(lat, gpu=g, enqueue=enqueue, round_id=f"{prefix}{i}")
            for i, (lat, g) in enumerate(zip(latencies, gpu))
        )
    )


WOBBLE = (1.0, 1.002, 0.998, 1.001, 0.999)


def test_both_gpu_bound_latency_leads():
    a = side([10 * w for w in WOBBLE], [9.9 * w for w in WOBBLE], enqueue=2.0)
    b = side([8 * w for w in WOBBLE], [7.92 * w for w in WOBBLE], enqueue=2.0)
    both = judge(a, b)
    assert (both.bound_a.word, both.bound_b.word) == (GPU_BOUND, GPU_BOUND)
    assert both.lead == LATENCY and not both.launch_bound and not both.disagree
    assert both.latency.verdict == both.gpu_time.verdict == FASTER
    assert note_lines(both) == [] and both.latency_processes_for_5pct is None


def test_a_launch_bound_side_names_the_lever_and_the_processes_latency_needs():
    noisy = (0.9, 1.05, 1.1, 0.95, 1.0)  # the host paces the call: its latency spreads 8 %
    a = side([10 * w for w in WOBBLE], [9.9 * w for w in WOBBLE], enqueue=2.0)
    b = side([3 * n for n in noisy], [1.0 * w for w in WOBBLE], enqueue=2.5)
    both = judge(a, b, cuda_graphs_ms=1.234)
    assert both.bound_b.word == LAUNCH_BOUND and both.bound_a.word == GPU_BOUND
    assert both.lead == "both" and both.launch_bound
    needed = processes_needed([3 * n for n in noisy], 0.05, sides=2, max_processes=10_000).processes
    assert both.latency_processes_for_5pct == needed > 5
    assert (
        "launch-bound (B): enqueue p50 2.500 ms >= GPU time 1.000 ms; 5 of 5 processes "
        "launch-bound: the host paces the call, so its latency spreads with the host"
    ) in note_lines(both)
    lever = next(line for line in note_lines(both) if LEVER in line)
    assert lever == (
        f"the latency verdict would need about {needed} processes a side for "
        "±5 %; the GPU-time verdict holds with these; `--cuda-graphs` replays the "
        "call without launches (measured: 1.234 ms)"
    )
    assert not any("launch-bound (A)" in line for line in note_lines(both))


def test_a_side_near_the_launch_bound_says_so_with_its_figures_and_the_lever():
    a = side([10 * w for w in WOBBLE], [9.9 * w for w in WOBBLE], enqueue=2.0)
    # latency 1.08 x the GPU time, enqueue below it: the host's launches show in the latency
    b = side([4.32 * w for w in WOBBLE], [4.0 * w for w in WOBBLE], enqueue=3.6)
    both = judge(a, b)
    assert both.bound_b.word == NEAR_LAUNCH_BOUND and both.bound_a.word == GPU_BOUND
    assert both.lead == "both" and both.host_paced and not both.launch_bound
    assert both.latency_processes_for_5pct is not None
    lines = note_lines(both)
    assert lines[0] == (
        "near the launch bound (B): latency p50 4.320 ms = 1.08 x GPU time 4.000 ms "
        "(1.05-1.1 x), enqueue p50 3.600 ms; 0 of 5 processes launch-bound: the GPU's work "
        "sets most of the call and the host's launches the rest, so its latency spreads with "
        "the host"
    )
    assert LEVER in lines[1]


def test_latency_slower_and_gpu_time_faster_is_a_disagreement():
    a = side([10 * w for w in WOBBLE], [10 * w for w in WOBBLE], enqueue=2.0)
    # 2.5 % slower to the caller, 2.2 % less GPU work: both GPU-bound (latency 1.048 x)
    b = side([10.25 * w for w in WOBBLE], [9.78 * w for w in WOBBLE], enqueue=2.0)
    both = judge(a, b)
    assert (both.bound_a.word, both.bound_b.word) == (GPU_BOUND, GPU_BOUND)
    assert (both.latency.verdict, both.gpu_time.verdict) == (SLOWER, FASTER)
    assert both.disagree and both.lead == LATENCY
    assert note_lines(both) == [
        "the two figures disagree: latency says slower, GPU time says "
        "faster: check the GPU state of both runs (clocks, other tenants)",
    ]
    # B launch-bound: the host's launches are why
    launch = side([11 * w for w in WOBBLE], [7.2 * w for w in WOBBLE], enqueue=7.0)
    again = judge(a, launch)
    assert again.disagree and again.lead == "both"
    assert note_lines(again)[-1].endswith(
        "the host's launches, not the GPU's work, decide what the caller waits"
    )


def test_judge_leaves_pilot_windows_out_and_needs_latencies():
    a = side([10 * w for w in WOBBLE], [8 * w for w in WOBBLE], enqueue=2.0)
    pilot = ConfigSamples(
        tuple(window(20.0, gpu=16.0, enqueue=2.0, round_id=f"p{i}", pilot=True) for i in range(3))
    )
    b = pilot + side([10 * w for w in WOBBLE], [8 * w for w in WOBBLE], enqueue=2.0)
    both = judge(a, b)
    assert both.latency.processes_b == 5 and both.latency.verdict == SAME
    assert judge(a, ConfigSamples()) is None


def test_control_family_holds_each_figure_and_keeps_the_lines():
    a = side([10 * w for w in WOBBLE], [8 * w for w in WOBBLE], enqueue=2.0)
    launch = side([3 * w for w in WOBBLE], [1.0 * w for w in WOBBLE], enqueue=2.5)
    same = side([10 * w for w in reversed(WOBBLE)], [8 * w for w in reversed(WOBBLE)], enqueue=2.0)
    family = [judge(a, launch), None, judge(a, same)]
    held = control_family(family)
    assert held[1] is None
    assert held[0].latency.fdr_comparisons == held[0].gpu_time.fdr_comparisons == 2
    assert held[2].latency.fdr_comparisons == 2
    assert held[0].latency.verdict == FASTER and held[2].latency.verdict == SAME
    assert held[0].bound_b == family[0].bound_b  # the launch-bound figures, counts included
    assert note_lines(held[0]) == note_lines(family[0])
    assert held[0].latency_processes_for_5pct == family[0].latency_processes_for_5pct


# ---- runs recorded by earlier versions -------------------------------------------------------

RESULTS = sorted(FIXTURES.rglob("result.json"))
#: fixtures recorded by a version that times GPU time per iteration (the rest are earlier)
RECORDED_WITH_GPU_TIME = ("h100x4_sweep", "h100_ncu_fp16", "memory_h200", "snapshot_h200")


def test_fixtures_are_there():
    assert len(RESULTS) >= 20


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.parent.relative_to(FIXTURES)))
def test_every_committed_result_json_reads_as_samples(path: Path):
    result = read_result(path)
    samples = config_samples(result, path)
    if (
        not (path.parent / "latency.csv").is_file()
        and not (path.parent / "processes.csv").is_file()
    ):
        assert len(samples) == 0
        return
    assert len(samples) >= 1
    recent = path.relative_to(FIXTURES).parts[0] in RECORDED_WITH_GPU_TIME
    if recent and result.config.workload == "forward":  # a generation times whole generations
        # a run of this version: every window carries its per-iteration GPU and enqueue times
        assert all(w.latency_ms and w.gpu_ms and w.enqueue_ms for w in samples.windows)
        assert samples.geometric_mean("gpu_time") > 0
        return
    for w in samples.windows:
        assert w.latency_ms and w.gpu_ms == () and w.enqueue_ms == ()
        assert w.round is None and not w.pilot and w.bound is None
    assert samples.medians("gpu_time") == [] and samples.geometric_mean("gpu_time") is None
    assert samples.geometric_mean() == pytest.approx(result.timing.p50_ms, rel=0.02)


def test_judge_on_two_runs_of_an_earlier_version():
    runs = FIXTURES / "h200" / "runs"
    a_json, b_json = (
        runs / "pytorch_fp32_bs8" / "result.json",
        runs / "ttrt_fp16_bs8" / "result.json",
    )
    a = config_samples(read_result(a_json), a_json)
    b = config_samples(read_result(b_json), b_json)
    both = judge(a, b)
    assert both.gpu_time is None  # no per-iteration GPU times then
    assert both.latency.verdict == FASTER and both.latency.design == FLOOR
    assert both.latency.speedup == pytest.approx(6.1, rel=0.01)
    assert both.lead == LATENCY and note_lines(both) == [] and not both.launch_bound
    assert both.bound_a == both.bound_b == Bound(None)
    same_json = FIXTURES / "h100_session" / "runs"
    again = judge(
        config_samples(
            read_result(same_json / "pytorch_fp32_bs8" / "result.json"),
            same_json / "pytorch_fp32_bs8" / "result.json",
        ),
        config_samples(
            read_result(same_json / "pytorch_fp32_bs8_again" / "result.json"),
            same_json / "pytorch_fp32_bs8_again" / "result.json",
        ),
    )
    assert again.latency.verdict == UNDECIDED and again.gpu_time is None


def test_compare_timed_on_two_runs_of_an_earlier_version():
    from profiler.analysis.headline import compare_timed

    runs = FIXTURES / "h200" / "runs"
    a_json, b_json = (
        runs / "pytorch_fp32_bs8" / "result.json",
        runs / "ttrt_fp16_bs8" / "result.json",
    )
    timed = compare_timed(read_result(a_json), read_result(b_json), a_json, b_json)
    assert timed.verdict.verdict == FASTER and timed.gpu_verdict is None
    assert timed.gpu_speedup_x is None and timed.source == "recorded processes"
    assert timed.processes_a.processes == 1 and timed.processes_a.gpu_time is None
    assert timed.processes_a.bound is None
    assert timed.verdicts.lead == LATENCY
    # a run without latency.csv (ncu fixtures): no verdict, the p50 ratio alone
    ncu = FIXTURES / "h200_ncu" / "runs"
    c_json = ncu / "pytorch_fp16_bs8" / "result.json"
    bare = compare_timed(read_result(c_json), read_result(b_json), c_json, b_json)
    assert bare.verdict is None and bare.verdicts is None
    assert bare.speedup_x > 0


def test_advise_quotes_the_cuda_graphs_experiment_with_the_lever(tmp_path):
    """advise --try: the latency the --cuda-graphs experiment measured is the figure the
    launch-bound lever is quoted with; an experiment that changed more than that is not it."""
    import shutil

    import numpy as np

    from profiler.analysis.records import TrialCellRecord
    from profiler.analysis.trial import cuda_graphs_latency

    def cell(status, changes, folder):
        return TrialCellRecord(label="", changes=changes, rules=[], folder=folder, status=status)

    runs = Path(__file__).parent / "fixtures" / "h200" / "runs"
    for name in ("graphs", "graphs_and_bs"):
        shutil.copytree(runs / "pytorch_fp16_bs8", tmp_path / name)
    cells = [
        cell("ok", {"cuda_graphs": True, "batch_size": 16}, "graphs_and_bs"),
        cell("failed", {"cuda_graphs": True}, "missing"),
    ]
    assert cuda_graphs_latency(cells, tmp_path) is None
    cells.append(cell("ok", {"cuda_graphs": True}, "graphs"))
    window = np.loadtxt(tmp_path / "graphs" / "latency.csv", delimiter=",", skiprows=1)[:, 1]
    assert cuda_graphs_latency(cells, tmp_path) == pytest.approx(float(np.median(window)))

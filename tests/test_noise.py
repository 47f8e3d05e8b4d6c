import numpy as np
import pytest

from profiler.analysis.timed_window import (
    BIMODAL_D,
    noise,
    read_latency_csv,
    spread_of_runs,
    two_cluster_split,
)
from profiler.analysis.verdict import compare

FIXTURES = "tests/fixtures/h200/runs"


def test_steady_normal_window_raises_no_warning():
    x = np.random.default_rng(1).normal(10.0, 0.2, 100)
    n = noise(x)
    assert n.warnings == []
    assert n.cv == pytest.approx(np.std(x, ddof=1) / np.mean(x))
    assert n.iqr_ms == pytest.approx(np.subtract(*np.percentile(x, [75, 25])))


def test_two_modes_are_called_bimodal_and_noisy():
    rng = np.random.default_rng(2)
    x = rng.permutation(np.r_[rng.normal(10, 0.3, 60), rng.normal(20, 0.3, 40)])
    n = noise(x)
    assert any(w.startswith("bimodal") for w in n.warnings)
    assert any(w.startswith("noisy") for w in n.warnings)
    assert n.clusters_ms[0] == pytest.approx(10, abs=0.2)
    assert n.clusters_ms[1] == pytest.approx(20, abs=0.2)


@pytest.mark.parametrize("seed", range(5))
def test_unimodal_skewed_windows_are_not_called_bimodal(seed):
    x = 5 + np.random.default_rng(seed).lognormal(0, 0.3, 100)
    d, _ = two_cluster_split(x)
    assert d < BIMODAL_D


def test_a_slow_ramp_is_drifting_and_a_shuffled_one_is_not():
    ramp = np.linspace(10, 12, 90) + np.random.default_rng(3).normal(0, 0.05, 90)
    assert any(w.startswith("drifting") for w in noise(ramp).warnings)
    shuffled = np.random.default_rng(4).permutation(ramp)
    assert not any(w.startswith("drifting") for w in noise(shuffled).warnings)


def test_the_real_h200_windows_are_quiet():
    for run in ("pytorch_fp32_bs8", "ttrt_fp16_bs8"):
        n = noise(read_latency_csv(f"{FIXTURES}/{run}/latency.csv"))
        assert n.n == 100 and n.cv < 0.10


def test_one_real_window_against_itself_is_undecided_and_far_slower_is_called():
    a = float(np.median(read_latency_csv(f"{FIXTURES}/pytorch_fp16_bs8/latency.csv")))
    same = compare([a], [a])  # a process enters through its median
    assert same.verdict == "undecided" and same.low <= 1 <= same.high
    assert same.design == "floor" and same.floor_source == "default"
    # one process a side, the latency's default floor (33 % CV): the 95 % interval is
    # exp(±1.96 x 0.33 x sqrt(2)), 0.40-2.5x around the ratio
    assert same.low == pytest.approx(np.exp(-1.959964 * 0.33 * 2**0.5), rel=1e-4)
    assert compare([a], [a * 1.5]).verdict == "undecided"
    slower = compare([a], [a * 3.0])
    assert slower.verdict == "slower" and slower.low > 1.1
    assert compare([a], [a]) == same  # no resampling: the same interval


def test_fp16_vs_fp32_on_the_h200_is_beyond_the_default_floor():
    a = float(np.median(read_latency_csv(f"{FIXTURES}/pytorch_fp32_bs8/latency.csv")))
    b = float(np.median(read_latency_csv(f"{FIXTURES}/ttrt_fp16_bs8/latency.csv")))
    assert compare([a], [b]).verdict == "faster"  # 6.1x, beyond the 33 % floor's 2.5x


def test_spread_of_repeated_runs():
    s = spread_of_runs([10.0, 11.0, 12.0])
    assert s.median_p50_ms == 11.0 and s.range_pct_of_median == pytest.approx(100 * 2 / 11)


def test_timed_window_derives_its_figures_and_noise_from_its_raw_times():
    """The one record of a timed window: raw times in, statistics and the noise rules' verdicts
    derived from them, and its result.json form (timing) carrying both."""
    from profiler.analysis.timed_window import TimedWindow, latency_stats

    raw = [4.0, 1.0, 3.0, 2.0, 2.5, 3.5, 1.5]
    window = TimedWindow(tuple(raw), batch_size=8)
    assert window.stats == latency_stats(raw, 8)
    assert window.p50_ms == 2.5
    assert window.noise == noise(raw) and window.noise.n == len(raw)
    record = window.timing_stats(repeat_runs=spread_of_runs([2.5, 2.75]), prepare_s=1.5)
    assert record.iters == len(raw) and record.p50_ms == 2.5 and record.prepare_s == 1.5
    assert record.noise.cv == window.noise.cv and record.noise.warnings == window.noise.warnings
    assert record.noise.repeat_runs.runs == 2 and window.noise.repeat_runs is None


@pytest.mark.parametrize(
    "cpus, pinned",
    [(range(2), None), ((0, 1, 2), "1-2"), (range(16), "1-4"), ((0, 2, 4, 6, 8, 10), "2,4,6,8")],
)
def test_noise_suggests_pinning_only_to_cpus_that_exist(cpus, pinned):
    """`noise` on a 2-CPU machine suggests no `taskset -c 2-5`: only CPUs this process may run
    on, and nothing where there are too few to leave one out."""
    from profiler.analysis.floor import suggestions
    from profiler.report.sentences import floor_tip

    found = suggestions(
        {},
        within_cv=0.01,
        between_cv=0.01,
        on_gpu=False,
        command="python profile.py",
        cpus=cpus,
    )
    tips = " ".join(floor_tip(tip) for tip in found)
    assert [tip.cpus for tip in found if tip.kind == "pin-cores"] == ([pinned] if pinned else [])
    if pinned is None:
        assert "taskset" not in tips
    else:
        assert f"`taskset -c {pinned} python profile.py ...`" in tips

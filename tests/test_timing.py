import json
import math
import random

import numpy as np
import pytest

from profiler.analysis.timed_window import latency_stats, percentile
from profiler.collect.timing import time_iterations


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


# ---- iterations by time, CPU defaults, the window's noise and memory in result.json --------

from profiler.collect import timing as timing_module  # noqa: E402


def test_gpu_defaults_keep_their_meaning():
    plan = timing_module.plan_window(None, None, None, use_cuda=True)
    assert (plan.warmup, plan.iters, plan.min_time_s) == (20, 100, None)


def test_cpu_default_is_a_time_budget_with_a_short_warmup():
    plan = timing_module.plan_window(None, None, None, use_cuda=False)
    assert plan.warmup == timing_module.CPU_WARMUP and plan.iters is None
    assert plan.min_time_s == timing_module.CPU_MIN_TIME_S
    # about one second per call (ResNet50 bs8 on 2 cores): the bound of 5 iterations applies
    assert plan.iterations(1000.0) == timing_module.MIN_TIME_ITERS_LOW


def test_explicit_counts_win_over_defaults():
    assert timing_module.plan_window(7, 3, None, use_cuda=False).iterations(1.0) == 7
    plan = timing_module.plan_window(None, 0, 2.0, use_cuda=True)
    assert plan.warmup == 0 and plan.iterations(4.0) == 500


def test_budget_is_converted_to_bounded_iterations():
    assert timing_module.iterations_for_budget(10.0, 1.0) == 100
    assert timing_module.iterations_for_budget(1e-6, 10.0) == timing_module.MIN_TIME_ITERS_HIGH
    assert timing_module.iterations_for_budget(5000.0, 1.0) == timing_module.MIN_TIME_ITERS_LOW


def test_warm_up_estimates_only_when_a_budget_needs_it():
    calls = []
    fixed = timing_module.plan_window(4, 2, None, use_cuda=False)
    assert math.isnan(timing_module.warm_up(lambda: calls.append(1), (), fixed, False))
    assert len(calls) == 2
    budget = timing_module.plan_window(None, 0, 1.0, use_cuda=False)
    assert timing_module.warm_up(lambda: calls.append(1), (), budget, False) >= 0
    assert len(calls) == 3  # no warm-up asked: one timed call for the estimate


def test_cpu_memory_is_not_applicable():
    assert timing_module.peak_memory(False)["scope"] == "n/a (CPU)"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--min-time", "0"], "--min-time must be more than 0"),
        (["--min-time", "1", "--iters", "5"], "give --iters or --min-time, not both"),
        (["--repeat-runs", "0"], "--repeat-runs must be at least 1"),
    ],
)
def test_bad_timing_options_are_one_line_errors(cli, args, message):
    out = cli("run", "--model", "tests.tiny_models:conv_net", *args)
    assert out.code == 2 and message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_min_time_run_records_noise_memory_and_repeats(cli):
    out = cli(
        "run",
        "--model",
        "tests.tiny_models:conv_net",
        "--min-time",
        "0.05",
        "--timed-warmup",
        "1",
        "--active",
        "1",
        "--repeat-runs",
        "2",
        "--json",
    )
    assert out.code == 0, out.stderr
    result = json.loads(out.stdout)
    timed = result["timing"]
    assert timed["iterations_chosen_by"].startswith("--min-time 0.05 s: stopped after ")
    assert timed["iters"] >= 5
    assert set(timed["noise"]) >= {"cv", "iqr_ms", "warnings", "bimodal_d"}
    assert timed["noise"]["repeat_runs"]["runs"] == 2
    assert len(timed["noise"]["repeat_runs"]["p50_ms"]) == 2
    assert result["memory"]["scope"] == "n/a (CPU)"
    assert result["memory"]["peak_allocated_bytes"] is None


# ---- --min-time is a time: a deadline read after each iteration, on a fake clock -------------


class FakeClock:
    """Seconds that pass only when told: each call of ``fn`` takes ``call_s``."""

    def __init__(self, call_s: float):
        self.now, self.call_s, self.calls = 0.0, call_s, 0

    def __call__(self) -> float:
        return self.now

    def fn(self):
        self.calls += 1
        self.now += self.call_s
        return self.calls


@pytest.mark.parametrize(
    "call_s, expected",
    [
        (1.0, 3),  # 3 s of one-second calls
        (1 / 1024, 3072),  # fast calls: as many as 3 s hold, whatever the warm-up estimated
        (10.0, 2),  # slow calls: the floor, not 3 s
    ],
)
def test_a_budgeted_window_stops_by_time_with_a_floor(monkeypatch, call_s, expected):
    clock = FakeClock(call_s)
    monkeypatch.setattr(timing_module, "clock", clock)
    deadline = timing_module.Deadline(3.0, floor=2)
    latencies, output = time_iterations(clock.fn, (), deadline.cap, False, deadline=deadline)
    assert len(latencies) == clock.calls == output == expected
    assert latencies[0] == pytest.approx(call_s * 1000.0)


def test_a_budgeted_window_stops_at_its_cap(monkeypatch):
    clock = FakeClock(0.0)  # calls that take no time never reach the deadline
    monkeypatch.setattr(timing_module, "clock", clock)
    deadline = timing_module.Deadline(3.0, floor=2, cap=50)
    assert len(time_iterations(clock.fn, (), deadline.cap, False, deadline=deadline)[0]) == 50


def test_a_fixed_count_ignores_the_clock():
    plan = timing_module.plan_window(7, 0, None, use_cuda=False)
    assert plan.deadline is None
    budget = timing_module.plan_window(None, 0, 5.0, use_cuda=False)
    assert budget.deadline == timing_module.Deadline(5.0)
    assert budget.done(5.04) == "--min-time 5 s: stopped after 5.0 s"


def test_min_time_run_stops_by_time_and_says_so(tmp_path, monkeypatch):
    """A whole run on a fake clock that moves 0.25 s at each reading: the timed window reads
    it once before the loop and three times an iteration (call, return, deadline), so
    --min-time 6 stops after 8 iterations (6.0 s of them), not after a count chosen from the
    warm-up's estimate."""
    from profiler.collect import harness
    from profiler.runs.config import RunConfig
    from tests.conftest import ROOT

    monkeypatch.syspath_prepend(str(ROOT))
    readings = iter(range(10**6))
    monkeypatch.setattr(timing_module, "clock", lambda: 0.25 * next(readings))
    config = RunConfig(
        model="tests.tiny_models:conv_net",
        batch_size=2,
        min_time=6.0,
        timed_warmup=1,
        wait=0,
        warmup=1,
        active=1,
        runs_dir=tmp_path / "runs",
        tb_dir=tmp_path / "tb_logs",
    )
    result = harness.run(config, quiet=True)
    assert result.timing.iters == 8
    assert result.timing.iterations_chosen_by == "--min-time 6 s: stopped after 6.5 s"

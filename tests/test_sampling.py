"""How many processes a figure needs, and the stopping rule, on values with known answers."""

import math

import numpy as np
import pytest

from profiler.analysis.sampling import (
    BUDGET,
    CONTINUE,
    REACHED,
    UNREACHABLE,
    processes_needed,
    relative_half_width,
    stopping_rule,
    t975,
)


def test_t_quantiles():
    assert t975(1) == pytest.approx(12.706)
    assert t975(30) == pytest.approx(2.042)
    assert t975(40) == pytest.approx(2.021, abs=0.001)
    assert t975(1000) == pytest.approx(1.962, abs=0.001)


def test_processes_needed_from_a_known_cv():
    medians = [4.5, 5.0, 5.5]  # mean 5, std 0.5: CV 10 %
    plan = processes_needed(medians, 0.05)
    assert plan.cv == pytest.approx(0.10)
    # t(n-1) * 0.1 / sqrt(n) <= 0.05 first holds at n = 18 (2.110 * 0.1 / sqrt(18) = 0.0497)
    assert plan.processes == 18 and plan.reachable
    assert relative_half_width(0.10, 17) > 0.05 >= relative_half_width(0.10, 18)
    assert plan.half_width_now == pytest.approx(4.303 * 0.1 / math.sqrt(3))
    # a ratio of two configs spreads sqrt(2) more: about twice the processes
    # (n = 33: 2.035 * 0.1 * sqrt(2 / 33) = 0.0502; n = 34: 0.0494)
    assert processes_needed(medians, 0.05, sides=2).processes == 34
    assert processes_needed(medians, 0.001, max_processes=50).reachable is False
    with pytest.raises(ValueError):
        processes_needed([5.0], 0.05)


def test_stopping_rule_reaches_the_target():
    rng = np.random.default_rng(0)
    values = 5 * rng.lognormal(0, 0.02, 40)
    stop = stopping_rule(values, 0.01)
    assert stop.stop and stop.reason == REACHED and stop.half_width <= 0.01
    assert stopping_rule(values[:2], 0.01).reason == CONTINUE  # below min_samples


def test_stopping_rule_keeps_sampling_then_budget():
    rng = np.random.default_rng(1)
    values = 5 * rng.lognormal(0, 0.10, 5)
    going = stopping_rule(values, 0.01, elapsed_s=5, budget_s=1000)
    assert not going.stop and going.reason == CONTINUE and going.samples_needed > 5
    spent = stopping_rule(values, 0.01, elapsed_s=60, budget_s=60)
    assert spent.stop and spent.reason == BUDGET


def test_stopping_rule_gives_up_when_the_noise_has_settled_out_of_reach():
    """A CV that has settled at ~10 % needs hundreds of samples for ±1 %: at 1 s each with a
    60 s budget, stop now rather than at the budget."""
    x = 5 + 0.5 * np.tile([-1.0, 1.0], 20)  # CV settles near 10 %
    stop = stopping_rule(x, 0.01, elapsed_s=40, budget_s=60)
    assert stop.stop and stop.reason == UNREACHABLE and stop.samples_needed > 60
    # with budget for it, keep going
    assert stopping_rule(x, 0.01, elapsed_s=40, budget_s=10_000).reason == CONTINUE

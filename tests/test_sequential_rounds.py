"""Sequential rounds (profiler.analysis.sequential, profiler.sweep.rounds): a cell whose
comparisons are decided at an interim look leaves the rounds; the undecided go on to the last
round the count or the budget allows. Fake rounds with seeded noise; never timings."""

import numpy as np
import pytest

from profiler.analysis import sequential
from profiler.analysis.verdict import FASTER, GPU_TIME, UNDECIDED, compare
from profiler.runs.samples import ConfigSamples, ProcessWindow
from profiler.sweep import rounds
from profiler.sweep.plan import plan


class NoisyRounds:
    """A round runner: each cell's GPU time is its base times a process offset shared by the
    round (correlation) and its own noise, both ~1 %."""

    def __init__(self, base: dict[str, float], seed: int = 3, cv: float = 0.01):
        self.base, self.cv = base, cv
        self.rng = np.random.default_rng(seed)
        self.calls: list[list[str]] = []

    def __call__(self, cells, gpu=None, started=None):
        keys = [key for key, _ in cells]
        self.calls.append(keys)
        shared = self.rng.normal(0, self.cv * 0.5)
        out = {}
        for key in keys:
            ms = self.base[key] * np.exp(shared + self.rng.normal(0, self.cv))
            out[key] = {"latencies_ms": [ms * 1.3] * 5, "gpu_ms": [ms] * 5, "device": "fake"}
        return out


def own(ms: float) -> ConfigSamples:
    """A cell's own run's window (process 0: it pairs with no round)."""
    return ConfigSamples((ProcessWindow((ms * 1.3,) * 5, (ms,) * 5),))


BASE = {"base": 4.0, "fast": 2.3, "same": 4.0, "near": 4.04}
COMPARISONS = [("base", "fast"), ("base", "same"), ("base", "near")]


def run(comparisons, processes=5, budget_s=None, clock=None, base=BASE):
    runner = NoisyRounds(base)
    lines: list[str] = []
    sampled = rounds.sample(
        {k: {} for k in base},
        {k: own(ms) for k, ms in base.items()},
        processes,
        say=lines.append,
        round_runner=runner,
        comparisons=comparisons,
        budget_s=budget_s,
        **({"clock": clock} if clock else {}),
    )
    return sampled, runner, lines


def test_a_decided_cell_leaves_the_rounds_and_an_undecided_one_takes_them_all():
    sampled, runner, lines = run(COMPARISONS)
    taken = {k: len(w) for k, w in sampled.windows.items()}
    # a 1.7x speedup at 1 % noise: decided at the first look (after round 2)
    assert taken["fast"] == sequential.FIRST_LOOK
    assert sampled.settled_after["fast"] == sequential.FIRST_LOOK
    # a 1 % difference is neither more than the 2 % tolerance nor inside it at the interim level:
    # it takes every round, and so does the baseline it is compared with
    assert taken["near"] == taken["base"] == 5
    assert "near" not in sampled.settled_after
    assert sampled.rounds == 5 and sampled.looks == 4
    assert all("fast" not in call for call in runner.calls[sequential.FIRST_LOOK :])
    assert any("fast decided" in line and "Haybittle-Peto" in line for line in lines)


def test_fixed_rounds_time_every_cell_in_every_round():
    sampled, runner, _ = run(None)
    assert {len(w) for w in sampled.windows.values()} == {5}
    assert sampled.looks == 0 and not sampled.settled_after
    assert all(len(call) == 4 for call in runner.calls)


def test_every_comparison_decided_ends_the_rounds_early():
    base = {"base": 4.0, "fast": 2.3}
    sampled, runner, _ = run([("base", "fast")], base=base)
    assert sampled.rounds == sequential.FIRST_LOOK == len(runner.calls)
    assert sampled.settled_after == {"base": 2, "fast": 2}


def test_the_budget_lets_undecided_cells_go_on_past_the_count():
    ticks = iter(range(0, 10_000, 10))  # every clock read 10 s later: a round ~10-20 s
    sampled, _, lines = run(COMPARISONS, processes=3, budget_s=120, clock=lambda: next(ticks))
    assert sampled.rounds > 3  # past --processes, within the budget
    assert len(sampled.windows["near"]) == sampled.rounds
    assert len(sampled.windows["fast"]) == sequential.FIRST_LOOK
    assert any("budget" in line for line in lines) or sampled.rounds == rounds.MAX_ROUNDS


def test_settled_reads_each_comparison_at_the_interim_level():
    def side(latency, *gpu_ms, rounds=True):
        return ConfigSamples(
            tuple(
                ProcessWindow((latency,), (g,), (), None, f"r{i}" if rounds else None)
                for i, g in enumerate(gpu_ms)
            )
        )

    samples = {
        "a": side(5.0, 4.0, 4.04, 3.96),
        "b": side(3.0, 2.0, 2.02, 1.98),
        "c": side(5.0, 4.3, 3.8, 4.1),
    }
    assert sequential.settled(samples, [("a", "b")]) == {"a", "b", "c"}
    # a vs c: 3 noisy processes a side, neither side of the tolerance at the interim level
    assert sequential.settled(samples, [("a", "b"), ("a", "c")]) == {"b"}
    assert sequential.figure_of(samples["a"], samples["b"]) == GPU_TIME
    # windows from no round (a run's own): a look is taken on rounds only, never on a floor
    own = {"a": side(5.0, 4.0, 4.04, 3.96, rounds=False), "b": side(3.0, 2.0, rounds=False)}
    assert sequential.settled(own, [("a", "b")]) == set()


def test_a_smaller_alpha_widens_the_interval_and_can_leave_a_verdict_undecided():
    a = [4.0, 4.1, 3.9, 4.05]
    b = [3.7, 3.85, 3.6, 3.75]
    usual = compare(a, b, figure=GPU_TIME)
    interim = compare(a, b, figure=GPU_TIME, alpha=sequential.INTERIM_ALPHA)
    assert usual.verdict == FASTER and interim.verdict == UNDECIDED
    assert interim.low < usual.low and interim.high > usual.high
    assert interim.ratio == usual.ratio


def test_the_sweep_plan_names_each_comparison_and_budget_needs_no_target_noise(tmp_path):
    p = plan(
        "pytorch_fp32,pytorch_fp16",
        "1,8",
        {"model": "resnet18", "workload": "forward"},
        runs_dir=tmp_path / "runs",
        tb_dir=tmp_path / "tb",
        processes=3,
        budget_s=60,
    )
    assert p.comparisons() == [
        (p.cell_name("pytorch_fp32", 1), p.cell_name("pytorch_fp16", 1)),
        (p.cell_name("pytorch_fp32", 8), p.cell_name("pytorch_fp16", 8)),
    ]
    assert not p.fixed_rounds
    from profiler.errors import UserError

    with pytest.raises(UserError, match="--fixed-rounds"):
        plan(
            "pytorch_fp32,pytorch_fp16",
            "1",
            {"model": "resnet18", "workload": "forward"},
            runs_dir=tmp_path / "runs",
            tb_dir=tmp_path / "tb",
            processes=3,
            budget_s=60,
            fixed_rounds=True,
        )


def test_a_compare_without_windows_of_its_own_takes_its_rounds():
    """compare --processes: A and B have no run window among the samples; the rounds run, and
    a clear difference stops at the first look."""
    runner = NoisyRounds({"A": 4.0, "B": 2.3})
    sampled = rounds.sample(
        {"A": {}, "B": {}},
        {},
        5,
        say=lambda _: None,
        round_runner=runner,
        comparisons=[("A", "B")],
    )
    assert {len(w) for w in sampled.windows.values()} == {sequential.FIRST_LOOK}
    one = rounds.sample(
        {"A": {}, "B": {}}, {}, 1, say=lambda _: None, round_runner=runner, comparisons=[("A", "B")]
    )
    assert {len(w) for w in one.windows.values()} == {1}  # --processes 1: one round, no look


class FailingCell(NoisyRounds):
    def __call__(self, cells, gpu=None, started=None):
        out = super().__call__(cells, gpu, started)
        out["near"] = "it crashed"
        return out


def test_a_cell_that_leaves_with_an_error_does_not_hold_its_baseline():
    runner = FailingCell({k: v for k, v in BASE.items() if k != "same"})
    cells = {k: {} for k in runner.base}
    sampled = rounds.sample(
        cells,
        {k: own(ms) for k, ms in runner.base.items()},
        5,
        say=lambda _: None,
        round_runner=runner,
        comparisons=[("base", "fast"), ("base", "near")],
    )
    assert "near" in sampled.errors
    assert len(sampled.windows["base"]) == sequential.FIRST_LOOK  # only "fast" kept it

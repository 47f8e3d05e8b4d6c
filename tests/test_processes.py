"""Between-process samples: the interleaved rounds (profiler.sweep.rounds, with a fake round
runner), processes.csv and result.json's record of them (profiler.runs.samples), the verdict
columns of a sweep's table, and the one-line errors of --processes / --target-noise."""

import dataclasses
import json
import os
import shutil
from pathlib import Path

import msgspec
import numpy as np
import pytest

from profiler.analysis.sweep_analysis import SweepAnalysis
from profiler.errors import UserError
from profiler.runs.result import read_result
from profiler.runs.samples import (
    ConfigSamples,
    ProcessWindow,
    config_samples,
    processes_text,
    read_own_window,
    read_samples,
    record_processes,
    window_of,
)
from profiler.sweep import rounds

from .conftest import ROOT

H100_SWEEP = ROOT / "tests" / "fixtures" / "h100_sweep" / "runs" / "gpu_sweep"


class FakeRounds:
    """A round runner that records the order it was asked for and answers from ``answer``."""

    def __init__(self, answer):
        self.answer = answer
        self.asked: list[list[str]] = []

    def __call__(self, cells, gpu=None, started=None):
        keys = [key for key, _ in cells]
        self.asked.append(keys)
        return {key: self.answer(key, len(self.asked)) for key in keys}


def steady(value):
    return lambda key, n: {"latencies_ms": [value[key]] * 5, "device": "cpu"}


def own(*latencies_ms: float, **fields) -> ConfigSamples:
    """A cell's own run: one process."""
    return ConfigSamples((ProcessWindow(tuple(latencies_ms), **fields),))


def test_rounds_interleave_and_rotate_the_leader():
    fake = FakeRounds(steady({"A": 1.0, "B": 2.0}))
    have = {"A": own(1.0), "B": own(2.0)}
    got = rounds.sample(
        {"A": {}, "B": {}}, have, 5, say=lambda _: None, round_runner=fake, gpus=["3"]
    )
    # five rounds: the run's own window pairs with no other cell's, so it counts for none
    assert got.rounds == 5 and len(fake.asked) == 5
    assert all(sorted(order) == ["A", "B"] for order in fake.asked)  # both in every round
    assert {order[0] for order in fake.asked} == {"A", "B"}  # no config always first
    assert [len(w) for w in got.windows.values()] == [5, 5]
    # each round is one token, shared by the cells it timed (they pair up), new every round
    tokens_a = [w.round for w in got.windows["A"]]
    assert tokens_a == [w.round for w in got.windows["B"]]
    assert len(set(tokens_a)) == 5 and None not in tokens_a
    assert all(w.gpu == "3" and not w.pilot for w in got.windows["A"])
    merged = got.merged("A", have["A"])
    assert len(merged) == 6 and merged.windows[0] == have["A"].windows[0]
    assert merged.medians() == [1.0] * 6 and merged.rounds()[0] is None


def test_rounds_take_only_what_each_cell_lacks():
    fake = FakeRounds(steady({"A": 1.0, "B": 2.0}))
    # A has three windows of earlier rounds (a resumed sweep), B only its own run's
    have = {
        "A": own(1.0)
        + ConfigSamples(tuple(ProcessWindow((1.0,), round=f"old-{i}") for i in range(3))),
        "B": own(2.0) + ConfigSamples((ProcessWindow((2.0,), round="old-0"),)),
    }
    got = rounds.sample({"A": {}, "B": {}}, have, 3, say=lambda _: None, round_runner=fake)
    assert fake.asked == [["B"], ["B"]]
    assert got.windows["A"] == [] and len(got.windows["B"]) == 2


def test_a_failing_cell_leaves_the_rounds_and_the_others_go_on():
    def answer(key, n):
        return "RuntimeError: boom" if key == "B" else {"latencies_ms": [1.0, 1.1]}

    fake = FakeRounds(answer)
    lines = []
    got = rounds.sample({"A": {}, "B": {}}, {}, 3, say=lines.append, round_runner=fake)
    assert got.errors == {"B": "RuntimeError: boom"}
    assert len(got.windows["A"]) == 3 and got.windows["B"] == []
    assert sum("B" in order for order in fake.asked) == 1
    assert any("B: no sample (RuntimeError: boom)" in line for line in lines)


def test_each_round_is_recorded_as_it_comes():
    seen = []
    rounds.sample(
        {"A": {}},
        {},
        3,
        say=lambda _: None,
        round_runner=FakeRounds(steady({"A": 1.0})),
        on_round=lambda s: seen.append(len(s.windows["A"])),
    )
    assert seen == [1, 2, 3]


class Timed:
    """A fake round runner for --target-noise: each cell's per-round median of GPU time and
    latency from ``medians(key, round)``, each round costing ``round_s`` of a fake clock."""

    def __init__(self, medians, round_s: float = 1.0) -> None:
        self.medians, self.round_s = medians, round_s
        self.now, self.asked = 0.0, []

    def clock(self) -> float:
        return self.now

    def __call__(self, cells, gpu=None, started=None):
        self.asked.append([key for key, _ in cells])
        self.now += self.round_s
        n = len(self.asked)
        out = {}
        for key, _ in cells:
            gpu, latency = self.medians(key, n)
            out[key] = {
                "latencies_ms": [latency * f for f in (0.99, 1.0, 1.01)],
                "gpu_ms": [gpu * f for f in (0.995, 1.0, 1.005)],
                "enqueue_ms": [0.1, 0.1, 0.1],
                "device": "x",
            }
        return out


#: the pilot's spread of the wide cell: CV 1.58 %, which needs 13 processes for ±1 %
WIDE = (-0.02, 0.01, 0.02, -0.01, 0.0)


def wide_and_tight(key, n):
    spread = WIDE[(n - 1) % len(WIDE)] if key == "wide" else 0.0005 * (-1) ** n
    return 10.0 * (1 + spread), 12.0 * (1 + spread)


def test_target_noise_is_two_stage_a_pilot_then_fresh_rounds_it_counted():
    from profiler.analysis.sampling import processes_needed

    fake = Timed(wide_and_tight)
    lines = []
    got = rounds.sample(
        {"tight": {}, "wide": {}},
        {},
        5,
        target_noise=0.01,
        budget_s=1000,
        say=lines.append,
        round_runner=fake,
        clock=fake.clock,
    )
    assert got.pilot_rounds == 5  # --processes 5: five pilot rounds
    needed = processes_needed([10.0 * (1 + e) for e in WIDE], 0.01).processes
    assert needed == 13  # the pilot's CV of the noisier cell sets the count
    assert got.rounds == 5 + needed and len(fake.asked) == 5 + needed
    for key in ("tight", "wide"):
        windows = got.windows[key]
        assert [w.pilot for w in windows] == [True] * 5 + [False] * needed
        used = got.merged(key, ConfigSamples()).for_verdict()
        assert len(used) == needed and not any(w.pilot for w in used.windows)
    assert any("asks for 13 processes; 13 fresh round(s)" in line for line in lines)
    assert got.stops["tight"].reason == "target reached"
    assert got.stops["tight"].samples == needed and got.stops["tight"].half_width <= 0.01
    # the quoted figure is GPU time where every window measured it
    assert rounds.quoted_figure(got.windows["wide"]) == "gpu_time"
    assert rounds.quoted_figure([*got.windows["wide"], ProcessWindow((1.0,))]) == "latency"


def test_target_noise_fresh_rounds_are_capped_by_the_budget():
    fake = Timed(wide_and_tight, round_s=10.0)  # the pilot's 5 rounds take 50 s of 100
    lines = []
    got = rounds.sample(
        {"tight": {}, "wide": {}},
        {},
        5,
        target_noise=0.01,
        budget_s=100,
        say=lines.append,
        round_runner=fake,
        clock=fake.clock,
    )
    assert got.pilot_rounds == 5 and got.rounds == 10  # 50 s left at 10 s a round: 5 more
    assert sum(not w.pilot for w in got.windows["wide"]) == 5
    assert got.stops["wide"].reason == "time budget spent"  # 13 needed, 5 afforded
    assert any("(what the budget of 100 s leaves)" in line for line in lines)


def test_target_noise_with_no_time_left_takes_no_fresh_rounds():
    fake = Timed(wide_and_tight, round_s=30.0)  # the pilot spent 150 s of 100
    got = rounds.sample(
        {"wide": {}},
        {},
        5,
        target_noise=0.01,
        budget_s=100,
        say=lambda _: None,
        round_runner=fake,
        clock=fake.clock,
    )
    assert got.rounds == got.pilot_rounds == 5
    assert got.stops["wide"].reason == "time budget spent"
    # nothing fresh: the verdict falls back to the pilot's windows rather than to none
    assert len(got.merged("wide", ConfigSamples()).for_verdict()) == 5


def test_target_noise_pilot_has_a_spread_even_with_one_process_asked():
    """--target-noise with --processes 1 (a CPU sweep's default): the pilot still takes enough
    windows to estimate a spread, then fresh rounds follow."""
    from profiler.analysis.sampling import MIN_SAMPLES

    fake = Timed(wide_and_tight)
    have = {"wide": own(12.0, gpu_ms=(10.0,))}
    got = rounds.sample(
        {"wide": {}},
        have,
        1,
        target_noise=0.01,
        budget_s=1000,
        say=lambda _: None,
        round_runner=fake,
        clock=fake.clock,
    )
    assert got.pilot_rounds == MIN_SAMPLES  # the run's own window pairs with none
    assert sum(not w.pilot for w in got.windows["wide"]) >= 2
    assert got.stops["wide"].samples >= 2


def test_verdicts_leave_the_pilot_windows_out():
    """B 50 % slower in the pilot (its own run and 5 rounds), the same as A in the fresh rounds:
    the verdicts see only the fresh rounds (the runs' own windows are pilot windows too)."""
    from profiler.analysis.timed_verdict import judge

    def medians(key, n):
        slow = 1.5 if key == "B" and n <= 5 else 1.0  # the 5 pilot rounds
        wobble = 1 + 0.002 * ((n % 3) - 1)
        return 10.0 * slow * wobble, 12.0 * slow * wobble

    fake = Timed(medians)
    have = {"A": own(12.0, gpu_ms=(10.0,)), "B": own(18.0, gpu_ms=(15.0,))}
    got = rounds.sample(
        {"A": {}, "B": {}},
        have,
        5,
        target_noise=0.05,
        budget_s=1000,
        say=lambda _: None,
        round_runner=fake,
        clock=fake.clock,
    )
    fresh = got.rounds - got.pilot_rounds
    assert got.pilot_rounds == 5 and fresh >= 5
    a, b = got.merged("A", have["A"]), got.merged("B", have["B"])
    assert a.windows[0].pilot and len(a) == 6 + fresh  # the own run is a pilot window too
    both = judge(a, b)
    assert both.latency.processes_a == both.latency.processes_b == fresh
    assert both.latency.verdict == "same" and both.gpu_time.verdict == "same"
    # the fresh rounds pair up (where pairing pays for the figure at that count)
    from profiler.analysis.verdict import LATENCY, PAIRED, design_for

    assert both.latency.design == design_for(LATENCY, fresh, fresh, fresh)
    assert both.latency.pairs == (fresh if both.latency.design == PAIRED else None)
    # with the pilot windows in, B would read slower
    everything = judge(
        ConfigSamples(tuple(msgspec.structs.replace(w, pilot=False) for w in a.windows)),
        ConfigSamples(tuple(msgspec.structs.replace(w, pilot=False) for w in b.windows)),
    )
    assert everything.gpu_time.verdict != "same"


def test_processes_csv_round_trip(tmp_path):
    samples = ConfigSamples(
        (
            ProcessWindow((1.0, 1.5, 2.0), (0.8, 0.9, 0.85), (0.3, 0.31, 0.29), "0"),
            ProcessWindow((3.25,), (2.5,), (), "1", "ab12cd34-1"),
            ProcessWindow((4.0, 5.0), (3.0,), (0.5, 0.6), None, "ab12cd34-2", pilot=True),
            ProcessWindow((0.1 + 0.2, 1e-3)),  # floats that need every digit
        )
    )
    path = tmp_path / "processes.csv"
    path.write_text(processes_text(samples))
    assert read_samples(path) == samples
    lines = path.read_text().splitlines()
    assert lines[0] == "process,iteration,latency_ms,gpu_ms,enqueue_ms,gpu,round,pilot"
    assert lines[1] == "0,0,1.0,0.8,0.3,0,,"
    assert "2,1,5.0,,0.6,,ab12cd34-2,1" in lines  # GPU time measured in one iteration of two
    again = read_samples(path)
    assert [w.pilot for w in again.windows] == [False, False, True, False]
    assert again.rounds() == [None, "ab12cd34-1", "ab12cd34-2", None]
    assert again.medians("gpu_time") == [0.85, 2.5, 3.0]  # the fourth measured none
    assert again.rounds("gpu_time") == [None, "ab12cd34-1", "ab12cd34-2"]
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(UserError, match="not a processes.csv"):
        read_samples(tmp_path / "bad.csv")
    (tmp_path / "negative.csv").write_text("process,iteration,latency_ms\n0,0,-1.0\n")
    with pytest.raises(UserError, match="not a processes.csv"):
        read_samples(tmp_path / "negative.csv")


@pytest.mark.parametrize(
    "text, gpus",
    [
        ("process,iteration,latency_ms\n0,0,1.0\n0,1,2.0\n1,0,3.0\n", [None, None]),
        ("process,iteration,latency_ms,gpu\n0,0,1.0,0\n0,1,2.0,0\n1,0,3.0,1\n", ["0", "1"]),
    ],
)
def test_processes_csv_of_earlier_versions_reads_as_latency_only(tmp_path, text, gpus):
    path = tmp_path / "processes.csv"
    path.write_text(text)
    samples = read_samples(path)
    assert [w.latency_ms for w in samples.windows] == [(1.0, 2.0), (3.0,)]
    assert samples.gpus() == gpus and samples.rounds() == [None, None]
    assert all(w.gpu_ms == () and w.enqueue_ms == () and not w.pilot for w in samples.windows)
    assert samples.medians("gpu_time") == [] and samples.bound() is None
    assert samples.medians() == [1.5, 3.0] and len(samples.for_verdict()) == 2


def test_latency_csv_with_and_without_the_gpu_time_columns(tmp_path):
    old = tmp_path / "old.csv"
    old.write_text("iteration,latency_ms\n0,1.5\n1,2.5\n")
    assert read_own_window(old) == ProcessWindow((1.5, 2.5))
    assert read_own_window(old, "2") == ProcessWindow((1.5, 2.5), gpu="2")
    new = tmp_path / "new.csv"
    new.write_text(
        "iteration,latency_ms,gpu_ms,enqueue_ms\n0,1.5,1.0,0.2\n1,2.5,1.1,0.3\n2,2.0,,0.25\n"
    )
    window = read_own_window(new)
    assert window.latency_ms == (1.5, 2.5, 2.0) and window.gpu_ms == (1.0, 1.1)
    assert window.enqueue_ms == (0.2, 0.3, 0.25) and window.round is None
    assert window.median("gpu_time") == pytest.approx(1.05)


def test_a_timing_childs_record_becomes_a_typed_window():
    record = {
        "key": "A",
        "latencies_ms": [2.0, 1.0],
        "gpu_ms": [0.5],
        "enqueue_ms": None,
        "device": "x",
    }
    assert window_of(record, "t-1", "0", pilot=True) == ProcessWindow(
        (2.0, 1.0), (0.5,), (), "0", "t-1", True
    )
    assert window_of({"latencies_ms": [1.0]}) == ProcessWindow((1.0,))


def test_record_processes_writes_the_file_and_result_json(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(H100_SWEEP / "ttrt_fp16_bs8", run)
    result = read_result(run / "result.json")
    mine = config_samples(result, run / "result.json")
    assert len(mine) == 1  # latency.csv alone: one process
    first = mine.windows[0]
    more = ConfigSamples(
        tuple(
            ProcessWindow(
                tuple(v * f for v in first.latency_ms),
                tuple(v * f * 0.98 for v in first.latency_ms),  # latency 1.02 x GPU time
                (0.1,) * 3,
                "0",
                f"r-{i}",
            )
            for i, f in enumerate((1.01, 0.99))
        )
    )
    record_processes(run, mine + more, "interleaved test")
    again = read_result(run / "result.json")
    spread = again.timing.noise.repeat_runs
    assert spread.runs == 3 and spread.samples_csv == "processes.csv"
    assert spread.schedule == "interleaved test"
    assert spread.p50_ms[1] == pytest.approx(1.01 * spread.p50_ms[0])
    assert spread.gpu_p50_ms[0] is None
    assert spread.gpu_p50_ms[1] == pytest.approx(0.98 * spread.p50_ms[1])
    assert spread.bound == [None, "GPU-bound", "GPU-bound"]
    assert config_samples(again, run / "result.json") == mine + more


def _sweep_with_processes(tmp_path, factors_a, factors_b, cell="ttrt_fp16_bs8"):
    """The H100 sweep fixture with processes.csv in the bs 8 cells: each process a real quiet
    window (ttrt_fp16 bs 1, CV 3.8 %) scaled by a factor."""
    sweep = tmp_path / "gpu_sweep"
    shutil.copytree(H100_SWEEP, sweep)
    base = config_samples(
        read_result(sweep / "ttrt_fp16_bs1" / "result.json"),
        sweep / "ttrt_fp16_bs1" / "result.json",
    ).windows[0]
    for name, factors in (("pytorch_fp16_bs8", factors_a), (cell, factors_b)):
        record_processes(sweep / name, scaled(base, factors), "test")
    return SweepAnalysis(sweep).benchmark.set_index(["backend", "bs"])


def scaled(base: ProcessWindow, factors, gpu: str | None = None) -> ConfigSamples:
    """One process per factor: the window's latencies times it."""
    return ConfigSamples(
        tuple(ProcessWindow(tuple(v * f for v in base.latency_ms), gpu=gpu) for f in factors)
    )


def test_sweep_table_verdicts_follow_the_processes(tmp_path):
    table = _sweep_with_processes(
        tmp_path,
        [1.0, 1.004, 0.996, 1.002, 0.998, 1.001, 1.0, 0.999],
        [1.0, 0.997, 1.003, 1.001, 1.002, 0.999, 1.0, 0.998],
    )
    row = table.loc[("ttrt_fp16", 8)]
    assert row["verdict"] == "same" and row["processes"] == 8
    assert row["speedup_low"] <= row["speedup"] <= row["speedup_high"]
    assert 0.98 <= row["speedup_low"] and row["speedup_high"] <= 1.02
    assert table.loc[("pytorch_fp16", 8)]["verdict"] == "baseline"
    assert table.loc[("pytorch_fp16", 8)]["speedup"] == 1.0
    # the p50 quoted is the mean of the per-process medians (of the bs 1 window here)
    assert row["p50_ms"] == pytest.approx(table.loc[("ttrt_fp16", 1)]["p50_ms"], rel=0.01)
    # bs 1 keeps one process each: a 7.9x difference is still called
    assert table.loc[("ttrt_fp16", 1)]["verdict"] == "faster"


def test_sweep_table_calls_a_ten_percent_shift_slower(tmp_path):
    table = _sweep_with_processes(
        tmp_path, [1.0, 1.01, 0.99, 1.0, 1.005], [1.10, 1.11, 1.09, 1.10, 1.105]
    )
    row = table.loc[("ttrt_fp16", 8)]
    assert row["verdict"] == "slower" and row["speedup_high"] < 1
    assert row["speedup"] == pytest.approx(1 / 1.10, rel=0.01)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--processes", "0"], "--processes must be 1 or more"),
        (["--target-noise", "0"], "--target-noise is a percentage between 0 and 100"),
        (["--budget", "30", "--fixed-rounds"], "--budget limits --target-noise or the sequential"),
    ],
)
def test_sampling_options_fail_in_one_line(cli, args, fragment):
    done = cli("sweep", "--backends", "pytorch_fp32", "--bs", "1", *args)
    assert done.code == 2, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    if fragment:
        assert fragment in lines[0]


def test_noise_measures_keeps_and_feeds_the_verdict(cli, tmp_path):
    """`noise` on the CPU with a tiny model: K fresh processes, the floor's figures, the file it
    keeps; a compare of two one-process runs then takes its between-process spread from it."""
    from profiler.analysis.headline import compare_timed
    from profiler.runs.noise_floor import cpu_kind, read_floor

    done = cli(
        "noise",
        "--processes",
        "2",
        "--model",
        "tests.tiny_models:conv_net",
        "--iters",
        "5",
        "--json",
    )
    assert done.code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["$schema"] == "infer-profiler/noise/1"
    floor = data["floor"]
    # kept for this machine's kind: its CPU's model, not "cpu" (a floor of another CPU is none)
    assert floor["gpu"] == cpu_kind() and floor["processes"] == 2 and len(floor["p50_ms"]) == 2
    # each process timed the config at twice the batch size too; two processes give no rho
    assert floor["rho_processes"] == 2 and floor["rho_workload"].endswith(" bs 2")
    assert floor["rho_latency"] is None and floor["rho_gpu_time"] is None
    assert floor["between_process_cv"] >= 0 and floor["within_window_cv"] >= 0
    assert floor["smallest_resolvable_one_process"] >= 0
    # CPU pinning is suggested only with CPUs to spare (the first left to the system)
    assert any("taskset" in tip for tip in floor["suggestions"]) == (
        len(os.sched_getaffinity(0)) >= 3
    )
    assert not any("cuda-graphs" in tip for tip in floor["suggestions"])  # no GPU here
    assert data["gpu_state"]["before"].startswith("GPU state: not recorded")
    kept = read_floor(cpu_kind())
    assert kept is not None and Path(data["saved_to"]).is_file()
    assert kept.between_process_cv == floor["between_process_cv"]
    # the kept floor stands in for the between-process spread of one-process runs on this CPU
    run = H100_SWEEP / "ttrt_fp16_bs8"
    result = read_result(run / "result.json")
    cpu_result = msgspec_replace_device(result)
    verdict = compare_timed(
        cpu_result, cpu_result, run / "result.json", run / "result.json"
    ).verdict
    assert verdict.floor_source == "given" and verdict.floor_from.kind == "noise"
    assert verdict.noise_floor == pytest.approx(kept.between_process_cv)
    assert verdict.floor_from.measured == kept.measured and not verdict.withheld
    # the same runs recorded on a CPU of another model: this machine's floor is not theirs, and
    # one process a side on a CPU gives no faster/slower without one
    other = msgspec_replace_device(result, cpu="another CPU")
    elsewhere = compare_timed(other, other, run / "result.json", run / "result.json").verdict
    assert elsewhere.floor_source == "default" and elsewhere.withheld == "cpu-one-process"


def msgspec_replace_device(result, cpu: str | None = None):
    """``result`` as if it ran on a CPU: this machine's model, or ``cpu``."""
    import msgspec

    from profiler.runs.noise_floor import cpu_model

    env = msgspec.structs.replace(result.environment, gpu=None, cpu=cpu or cpu_model())
    return msgspec.structs.replace(result, device="cpu", environment=env)


def test_floor_figures_and_suggestions():
    from profiler.analysis.floor import floor_of, suggestions
    from profiler.report.sentences import floor_tip

    windows = [
        ProcessWindow((m, m + 0.2, m - 0.2) * 10, (0.9 * g,) * 5)
        for m, g in ((10.0, 10.0), (11.0, 10.1), (10.5, 9.9))
    ]
    figures = floor_of(windows, processes_per_side=3)
    assert figures["p50_ms"] == [10.0, 11.0, 10.5]
    assert figures["between_process_cv"] == pytest.approx(np.std([10, 11, 10.5], ddof=1) / 10.5)
    assert figures["gpu_time_between_process_cv"] == pytest.approx(0.01)
    # one process a side: the half-width of the floor design's normal interval
    assert figures["smallest_resolvable_one_process"] == pytest.approx(
        np.exp(1.959964 * figures["between_process_cv"] * 2**0.5) - 1
    )
    # GPU time missing in a window: no GPU-time spread
    latency_only = [*windows[:2], ProcessWindow(windows[2].latency_ms)]
    assert floor_of(latency_only)["gpu_time_between_process_cv"] is None
    # t(0.975, 4) * CV * sqrt(2 / 3): Welch's interval with equal spreads, 3 processes a side
    assert figures["smallest_resolvable"] == pytest.approx(
        2.776 * figures["between_process_cv"] * (2 / 3) ** 0.5
    )
    with pytest.raises(ValueError):
        floor_of(windows[:1])
    tips = suggestions(
        {
            "persistence_mode": "off",
            "max_sm_clock_mhz": "1980",
            "sm_clock_target_mhz": "1755",
            "cpu_governor": "powersave",
        },
        within_cv=0.2,
        between_cv=0.05,
        on_gpu=True,
        command="python profile.py",
        cpus=range(8),
    )
    assert [tip.kind for tip in tips] == [
        "persistence-mode",
        "clocks-float",
        "launch-jitter",
        "cpu-governor",
        "pin-cores",
        "more-processes",
    ]
    assert tips[1].clock_mhz == "1980" and tips[2].within_cv == 0.2
    text = " ".join(floor_tip(tip) for tip in tips)
    assert "the window's own spread (CV 20.0 %) is mostly host-side launch jitter" in text
    assert "nvidia-smi -pm 1" in text and "-lgc 1980,1980" in text and "--cuda-graphs" in text
    assert "performance" in text and "taskset" in text


def test_run_target_noise_samples_iterations_then_processes(cli):
    """`run --target-noise` on the CPU: an unreachable ±0.01 % within a short budget stops on
    the budget, with at least 3 processes, every window in processes.csv, and says so."""
    done = cli(
        "run",
        "--backend",
        "pytorch_fp32",
        "--bs",
        "1",
        "--model",
        "tests.tiny_models:conv_net",
        "--iters",
        "10",
        "--timed-warmup",
        "1",
        "--active",
        "1",
        "--target-noise",
        "0.01",
        "--budget",
        "2",
    )
    assert done.code == 0, done.stderr
    run = Path("runs/pytorch_fp32_bs1_conv_net")
    result = read_result(run / "result.json")
    target = result.timing.noise.target
    assert target.target == pytest.approx(0.0001) and not target.reached
    assert target.reason == "time budget spent" and target.processes >= 3
    assert target.iterations >= 10 and target.iterations % 10 == 0  # grown by whole chunks
    windows = read_samples(run / "processes.csv")
    assert len(windows) == target.processes == result.timing.noise.repeat_runs.runs
    assert len(windows.windows[0].latency_ms) == target.iterations == result.timing.iters
    assert "--target-noise ±0.01 %: not reached (time budget spent" in done.stdout


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--target-noise", "100"], "--target-noise is a percentage between 0 and 100"),
        (["--budget", "5"], "--budget limits --target-noise"),
    ],
)
def test_run_target_noise_options_fail_in_one_line(cli, args, fragment):
    done = cli("run", "--backend", "pytorch_fp32", "--bs", "1", *args)
    assert done.code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0]


def test_compare_shows_gpu_compute_and_enqueue_beside_latency(cli, tmp_path):
    """Both figures of trtexec's split, labelled, in compare's timed table and the sweep's
    benchmark table, where the runs recorded them."""
    import json as _json

    for part in ("runs", "tb_logs"):  # the trace paths in result.json are relative to here
        shutil.copytree(H100_SWEEP.parent.parent / part, tmp_path / part)
    runs = []
    for name, gpu, enqueue in (("ttrt_fp16_bs1", 1.50, 0.40), ("ttrt_fp16_bs8", 1.20, 0.05)):
        run = tmp_path / "runs" / "gpu_sweep" / name
        data = _json.loads((run / "result.json").read_text())
        data["timing"]["gpu_compute"] = {
            "gpu_p50_ms": gpu,
            "gpu_p90_ms": gpu,
            "enqueue_p50_ms": enqueue,
            "enqueue_p90_ms": enqueue,
            "iterations": 30,
        }
        (run / "result.json").write_text(_json.dumps(data))
        runs.append(f"gpu_sweep/{name}")
    done = cli("compare", *runs, "--top", "1", "--view", "timed")
    assert done.code == 0, done.stderr
    line = next(ln for ln in done.stdout.splitlines() if "GPU compute p50" in ln)
    assert "1.500 ms" in line and "1.200 ms" in line and "-20.0 %" in line
    assert "device gaps between kernels included" in line
    assert any("enqueue p50" in ln and "0.050 ms" in ln for ln in done.stdout.splitlines())
    table = SweepAnalysis(tmp_path / "runs" / "gpu_sweep").benchmark.set_index(["backend", "bs"])
    assert table.loc[("ttrt_fp16", 8), "gpu_compute_ms"] == 1.20
    assert table.loc[("ttrt_fp16", 8), "enqueue_ms"] == 0.05
    assert np.isnan(table.loc[("pytorch_fp16", 8), "gpu_compute_ms"])  # recorded before it was


def test_processes_csv_keeps_the_gpu_of_each_window(tmp_path):
    path = tmp_path / "processes.csv"
    path.write_text(
        processes_text(
            ConfigSamples((ProcessWindow((1.0, 2.0), gpu="0"), ProcessWindow((3.0,), gpu="1")))
        )
    )
    samples = read_samples(path)
    assert samples.gpus() == ["0", "1"]
    assert [w.latency_ms for w in samples.windows] == [(1.0, 2.0), (3.0,)]
    assert samples.on_gpus({"1"}).medians() == [3.0]
    path.write_text(processes_text(own(1.0)))  # no GPU known: an empty cell
    assert path.read_text().splitlines()[1] == "0,0,1.0,,,,,"
    assert read_samples(path).gpus() == [None]


def test_a_verdict_compares_windows_on_the_gpus_both_cells_share(tmp_path):
    """Two fake GPUs: the baseline's windows all on GPU 0, the cell's on 0 and 1, GPU 1 10 %
    slower. The verdict takes the cell's GPU-0 windows only (the same config: same), and the
    table says which GPUs each cell's windows ran on."""
    from profiler.analysis.benchmark import like_with_like

    sweep = tmp_path / "gpu_sweep"
    shutil.copytree(H100_SWEEP, sweep)
    base = config_samples(
        read_result(sweep / "ttrt_fp16_bs1" / "result.json"),
        sweep / "ttrt_fp16_bs1" / "result.json",
    ).windows[0]
    factors = [1.0, 1.002, 0.998, 1.001, 0.999, 1.0]
    record_processes(sweep / "pytorch_fp16_bs8", scaled(base, factors, "0"), "test")
    record_processes(
        sweep / "ttrt_fp16_bs8",
        scaled(base, factors, "0") + scaled(base, [f * 1.10 for f in factors], "1"),
        "test",
    )
    table = SweepAnalysis(sweep).benchmark.set_index(["backend", "bs"])
    row = table.loc[("ttrt_fp16", 8)]
    assert row["gpus"] == "0;1" and row["processes"] == 12
    assert row["verdict"] == "same"  # GPU 1's windows set aside
    assert table.loc[("pytorch_fp16", 8)]["gpus"] == "0"
    # without a GPU in common, every window counts
    one, two = own(1.0, gpu="0"), own(2.0, gpu="1")
    assert like_with_like(one, two) == (one, two)
    # with one in common, the other GPU's windows are set aside on both sides
    a, b = like_with_like(one + two, one)
    assert a.medians() == [1.0] and b.medians() == [1.0]


def test_sweep_rounds_spread_over_the_gpus_one_batch_size_a_process(tmp_path, monkeypatch):
    """The sweep's rounds with two fake GPUs (the scheduler, not timings): every round process
    is started with CUDA_VISIBLE_DEVICES set to the sweep's first GPU, and each new window is
    recorded with it beside the cell's own run's GPU."""
    import os

    from profiler.sweep import plan as sweep_plan, record, runner as sweep_run

    sweep = tmp_path / "gpu_sweep"
    shutil.copytree(H100_SWEEP, sweep)
    seen = []

    def fake_round(cells, gpu=None, started=None):
        seen.append((gpu, sorted(key for key, _ in cells)))
        return {key: {"latencies_ms": [1.0, 1.1, 0.9], "device": "fake"} for key, _ in cells}

    original = rounds.sample

    def sample(*args, **kwargs):
        kwargs["round_runner"] = fake_round
        return original(*args, **kwargs)

    monkeypatch.setattr(rounds, "sample", sample)
    manifest = record.read_manifest(sweep)
    for name, cell in manifest.cells.items():
        cell.gpu = "1" if name.endswith("bs8") else "0"
    p = sweep_plan.SweepPlan(
        name="gpu_sweep",
        backends=["pytorch_fp16", "ttrt_fp16"],
        batch_sizes=[1, 8],
        baseline="pytorch_fp16",
        options=manifest.options,
        runs_dir=tmp_path,
        tb_dir=tmp_path / "tb",
        cells=sweep_plan.planned_cells(manifest.options, ["pytorch_fp16", "ttrt_fp16"], [1, 8]),
        gpus=["0", "1"],
        processes=3,
    )
    monkeypatch.setattr(rounds, "window_config", lambda config, iters, warmup: config)
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    sweep_run.sample_cells(p, manifest, say=lambda _: None)
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == before  # the rounds' children get it
    # three rounds over two GPUs: two whole rounds at once, then the third split in two
    # processes, one per batch size (the cells a verdict compares share a process)
    assert len(seen) == 4 and {gpu for gpu, _ in seen} == {"0", "1"}
    assert [cells for _, cells in seen[:2]] == [
        sorted(["pytorch_fp16_bs1", "pytorch_fp16_bs8", "ttrt_fp16_bs1", "ttrt_fp16_bs8"])
    ] * 2
    assert sorted(cells for _, cells in seen[2:]) == [
        ["pytorch_fp16_bs1", "ttrt_fp16_bs1"],
        ["pytorch_fp16_bs8", "ttrt_fp16_bs8"],
    ]
    bs8 = read_samples(sweep / "ttrt_fp16_bs8" / "processes.csv")
    base8 = read_samples(sweep / "pytorch_fp16_bs8" / "processes.csv")
    assert bs8.gpus()[0] == "1" and set(bs8.gpus()[1:]) <= {"0", "1"}
    # the windows of one process pair: same round token, same GPU
    assert bs8.rounds()[1:] == base8.rounds()[1:] and bs8.gpus()[1:] == base8.gpus()[1:]
    assert (
        len(
            set(bs8.rounds()[1:])
            & set(read_samples(sweep / "ttrt_fp16_bs1" / "processes.csv").rounds()[1:])
        )
        == 2
    )
    # the rounds' windows carry their process's token, the run's own window none
    assert bs8.rounds()[0] is None and None not in bs8.rounds()[1:]


def test_the_default_processes_are_five_on_gpus_and_three_on_a_cpu():
    from profiler.sweep.plan import QUICK_PROCESSES, check_sampling

    assert check_sampling(None, None, None, "local", ["0", "1"], "forward") == 5
    assert QUICK_PROCESSES == 3
    # a CPU sweep that compares backends: three rounds (one window a side decides nothing
    # there); one backend, nothing to compare: none; what the user sets is kept
    assert check_sampling(None, None, None, "local", [], "forward") == 3
    assert check_sampling(None, None, None, "local", [], "forward", compares=False) == 1
    assert check_sampling(1, None, None, "local", [], "forward") == 1
    assert check_sampling(5, None, None, "local", [], "forward") == 5


def test_a_recorded_config_is_read_as_a_run_config_and_crosses_to_a_process_as_the_same():
    """Commands read a run's config as the RunConfig (config_of), with no JSON between; JSON
    is only what a round's fresh process is handed (rounds.window_config), and it reads back as
    that config with the window's own settings."""
    from profiler.runs.config import RunConfig, config_from_json
    from profiler.runs.result import read_result
    from profiler.runs.samples import config_of
    from profiler.sweep import rounds

    from .conftest import FIXTURES

    result = read_result(FIXTURES / "h100_ncu_tf32" / "runs" / "pytorch_fp32_bs8")
    config = config_of(result)
    assert isinstance(config, RunConfig)
    assert (config.backend, config.batch_size) == (result.config.backend, result.config.batch_size)
    handed = config_from_json(rounds.window_config(config, 7, 3))
    assert handed == dataclasses.replace(
        config, iters=7, timed_warmup=3, min_time=None, repeat_runs=1
    )

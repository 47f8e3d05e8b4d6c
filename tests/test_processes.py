"""Between-process samples: the interleaved rounds (profiler.sweep.rounds, with a fake round
runner), processes.csv and result.json's record of them (profiler.runs.samples), the verdict
columns of a sweep's table, and the one-line errors of --processes / --target-noise."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from profiler.analysis.sweep import SweepAnalysis
from profiler.errors import UserError
from profiler.runs.result import read_result
from profiler.runs.samples import (process_windows, processes_text, read_processes_csv,
                                   record_processes)
from profiler.sweep import rounds

from .conftest import ROOT

H100_SWEEP = ROOT / "tests" / "fixtures" / "h100_sweep" / "runs" / "gpu_sweep"


class FakeRounds:
    """A round runner that records the order it was asked for and answers from ``answer``."""

    def __init__(self, answer):
        self.answer = answer
        self.asked: list[list[str]] = []

    def __call__(self, cells):
        keys = [key for key, _ in cells]
        self.asked.append(keys)
        return {key: self.answer(key, len(self.asked)) for key in keys}


def steady(value):
    return lambda key, n: {"latencies_ms": [value[key]] * 5, "device": "cpu"}


def test_rounds_interleave_and_rotate_the_leader():
    fake = FakeRounds(steady({"A": 1.0, "B": 2.0}))
    have = {"A": [[1.0]], "B": [[2.0]]}
    got = rounds.sample({"A": {}, "B": {}}, have, 5, say=lambda _: None, round_runner=fake)
    assert got.rounds == 4 and len(fake.asked) == 4
    assert all(sorted(order) == ["A", "B"] for order in fake.asked)  # both in every round
    assert {order[0] for order in fake.asked} == {"A", "B"}  # no config always first
    assert [len(w) for w in got.windows.values()] == [4, 4]  # + the run's own = 5


def test_rounds_take_only_what_each_cell_lacks():
    fake = FakeRounds(steady({"A": 1.0, "B": 2.0}))
    got = rounds.sample({"A": {}, "B": {}}, {"A": [[1.0]] * 3, "B": [[2.0]]}, 3,
                        say=lambda _: None, round_runner=fake)
    assert fake.asked == [["B"], ["B"]] or sorted(map(tuple, fake.asked)) == [("B",), ("B",)]
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
    rounds.sample({"A": {}}, {}, 3, say=lambda _: None, round_runner=FakeRounds(
        steady({"A": 1.0})), on_round=lambda w: seen.append(len(w["A"])))
    assert seen == [1, 2, 3]


def test_target_noise_stops_a_cell_once_its_interval_is_narrow_enough():
    rng = np.random.default_rng(0)
    spread = {"tight": 0.002, "wide": 0.2}
    fake = FakeRounds(lambda key, n: {
        "latencies_ms": list(5 * (1 + rng.normal(0, spread[key], 1)).repeat(3))})
    ticks = iter(range(0, 10_000, 10))
    got = rounds.sample({"tight": {}, "wide": {}}, {}, 3, target_noise=0.01, budget_s=200,
                        say=lambda _: None, round_runner=fake, clock=lambda: next(ticks))
    assert got.stops["tight"].reason == "target reached"
    assert got.stops["tight"].samples == 3 and got.stops["tight"].half_width <= 0.01
    assert got.stops["wide"].reason != "target reached" and got.stops["wide"].half_width > 0.01
    assert len(got.windows["wide"]) > len(got.windows["tight"])  # it went on alone


def test_processes_csv_round_trip(tmp_path):
    windows = [[1.0, 1.5, 2.0], [3.25], [4.0, 5.0]]
    path = tmp_path / "processes.csv"
    path.write_text(processes_text(windows))
    assert read_processes_csv(path) == windows
    assert path.read_text().splitlines()[0] == "process,iteration,latency_ms"
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(UserError, match="not a processes.csv"):
        read_processes_csv(tmp_path / "bad.csv")


def test_record_processes_writes_the_file_and_result_json(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(H100_SWEEP / "ttrt_fp16_bs8", run)
    result = read_result(run / "result.json")
    own = process_windows(result, run / "result.json")
    assert len(own) == 1  # latency.csv alone: one process
    more = [[v * 1.01 for v in own[0]], [v * 0.99 for v in own[0]]]
    record_processes(run, [*own, *more], "interleaved test")
    again = read_result(run / "result.json")
    spread = again.timing.noise.repeat_runs
    assert spread.runs == 3 and spread.samples_csv == "processes.csv"
    assert spread.schedule == "interleaved test"
    assert spread.p50_ms[1] == pytest.approx(1.01 * spread.p50_ms[0])
    assert process_windows(again, run / "result.json") == [own[0], *more]


def _sweep_with_processes(tmp_path, factors_a, factors_b, cell="ttrt_fp16_bs8"):
    """The H100 sweep fixture with processes.csv in the bs 8 cells: each process a real quiet
    window (ttrt_fp16 bs 1, CV 3.8 %) scaled by a factor."""
    sweep = tmp_path / "gpu_sweep"
    shutil.copytree(H100_SWEEP, sweep)
    base = process_windows(read_result(sweep / "ttrt_fp16_bs1" / "result.json"),
                           sweep / "ttrt_fp16_bs1" / "result.json")[0]
    for name, factors in (("pytorch_fp16_bs8", factors_a), (cell, factors_b)):
        record_processes(sweep / name, [[v * f for v in base] for f in factors], "test")
    return SweepAnalysis(sweep).benchmark.set_index(["backend", "bs"])


def test_sweep_table_verdicts_follow_the_processes(tmp_path):
    table = _sweep_with_processes(tmp_path, [1.0, 1.004, 0.996, 1.002, 0.998, 1.001, 1.0, 0.999],
                                  [1.0, 0.997, 1.003, 1.001, 1.002, 0.999, 1.0, 0.998])
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
    table = _sweep_with_processes(tmp_path, [1.0, 1.01, 0.99, 1.0, 1.005],
                                  [1.10, 1.11, 1.09, 1.10, 1.105])
    row = table.loc[("ttrt_fp16", 8)]
    assert row["verdict"] == "slower" and row["speedup_high"] < 1
    assert row["speedup"] == pytest.approx(1 / 1.10, rel=0.01)


@pytest.mark.parametrize("args, fragment", [
    (["--processes", "0"], "--processes must be 1 or more"),
    (["--target-noise", "0"], "--target-noise is a percentage between 0 and 100"),
    (["--budget", "30"], "--budget limits --target-noise"),
    (["--processes", "2", "--workload", "generate", "--model", "transformer"],
     "do not apply to --workload generate"),
    (["--processes", "2", "--executor", "ray"], None),
])
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
    from profiler.runs.noise_floor import read_floor

    done = cli("noise", "--processes", "2", "--model", "tests.tiny_models:conv_net",
               "--iters", "5", "--json")
    assert done.code == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["$schema"] == "infer-profiler/noise/1"
    floor = data["floor"]
    assert floor["gpu"] == "cpu" and floor["processes"] == 2 and len(floor["p50_ms"]) == 2
    assert floor["between_process_cv"] >= 0 and floor["within_window_cv"] >= 0
    assert floor["smallest_resolvable_one_process"] >= 0
    assert any("taskset" in tip for tip in floor["suggestions"])
    assert not any("cuda-graphs" in tip for tip in floor["suggestions"])  # no GPU here
    assert data["gpu_state"]["before"].startswith("GPU state: not recorded")
    kept = read_floor("cpu")
    assert kept is not None and Path(data["saved_to"]).is_file()
    assert kept.between_process_cv == floor["between_process_cv"]
    # the kept floor stands in for the between-process spread of one-process runs on a "cpu"
    run = H100_SWEEP / "ttrt_fp16_bs8"
    result = read_result(run / "result.json")
    cpu_result = msgspec_replace_device(result)
    verdict = compare_timed(cpu_result, cpu_result, run / "result.json",
                            run / "result.json")["verdict"]
    assert verdict["floor_source"] == "given"
    assert verdict["noise_floor"] == pytest.approx(kept.between_process_cv)


def msgspec_replace_device(result):
    import msgspec

    env = msgspec.structs.replace(result.environment, gpu=None)
    return msgspec.structs.replace(result, device="cpu", environment=env)


def test_floor_figures_and_suggestions():
    from profiler.analysis.floor import floor_of, suggestions

    windows = [[10.0, 10.2, 9.8] * 10, [11.0, 11.2, 10.8] * 10, [10.5, 10.7, 10.3] * 10]
    figures = floor_of(windows, processes_per_side=3)
    assert figures["p50_ms"] == [10.0, 11.0, 10.5]
    assert figures["between_process_cv"] == pytest.approx(np.std([10, 11, 10.5], ddof=1) / 10.5)
    # t(0.975, 4) * CV * sqrt(2 / 3): Welch's interval with equal spreads, 3 processes a side
    assert figures["smallest_resolvable"] == pytest.approx(
        2.776 * figures["between_process_cv"] * (2 / 3) ** 0.5)
    with pytest.raises(ValueError):
        floor_of(windows[:1])
    tips = suggestions({"persistence_mode": "off", "max_sm_clock_mhz": "1980",
                        "sm_clock_target_mhz": "1755", "cpu_governor": "powersave"},
                       within_cv=0.2, between_cv=0.05, on_gpu=True, command="python profile.py")
    text = " ".join(tips)
    assert "nvidia-smi -pm 1" in text and "-lgc 1980,1980" in text and "--cuda-graphs" in text
    assert "performance" in text and "taskset" in text


def test_run_target_noise_samples_iterations_then_processes(cli):
    """`run --target-noise` on the CPU: an unreachable ±0.01 % within a short budget stops on
    the budget, with at least 3 processes, every window in processes.csv, and says so."""
    done = cli("run", "--backend", "pytorch_fp32", "--bs", "1", "--model",
               "tests.tiny_models:conv_net", "--iters", "10", "--timed-warmup", "1",
               "--active", "1", "--target-noise", "0.01", "--budget", "2")
    assert done.code == 0, done.stderr
    run = Path("runs/pytorch_fp32_bs1_conv_net")
    result = read_result(run / "result.json")
    target = result.timing.noise.target
    assert target.target == pytest.approx(0.0001) and not target.reached
    assert target.reason == "time budget spent" and target.processes >= 3
    assert target.iterations >= 10 and target.iterations % 10 == 0  # grown by whole chunks
    windows = read_processes_csv(run / "processes.csv")
    assert len(windows) == target.processes == result.timing.noise.repeat_runs.runs
    assert len(windows[0]) == target.iterations == result.timing.iters
    assert "--target-noise ±0.01 %: not reached (time budget spent" in done.stdout


@pytest.mark.parametrize("args, fragment", [
    (["--target-noise", "100"], "--target-noise is a percentage between 0 and 100"),
    (["--budget", "5"], "--budget limits --target-noise"),
])
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
        data["timing"]["gpu_compute"] = {"gpu_p50_ms": gpu, "gpu_p90_ms": gpu,
                                         "enqueue_p50_ms": enqueue, "enqueue_p90_ms": enqueue,
                                         "iterations": 30}
        (run / "result.json").write_text(_json.dumps(data))
        runs.append(f"gpu_sweep/{name}")
    done = cli("compare", *runs, "--top", "1")
    assert done.code == 0, done.stderr
    line = next(l for l in done.stdout.splitlines() if "GPU compute p50" in l)
    assert "1.500 ms" in line and "1.200 ms" in line and "-20.0 %" in line
    assert "launch gaps excluded" in line
    assert any("enqueue p50" in l and "0.050 ms" in l for l in done.stdout.splitlines())
    table = SweepAnalysis(tmp_path / "runs" / "gpu_sweep").benchmark.set_index(["backend", "bs"])
    assert table.loc[("ttrt_fp16", 8), "gpu_compute_ms"] == 1.20
    assert table.loc[("ttrt_fp16", 8), "enqueue_ms"] == 0.05
    assert np.isnan(table.loc[("pytorch_fp16", 8), "gpu_compute_ms"])  # recorded before it was


def test_processes_csv_keeps_the_gpu_of_each_window(tmp_path):
    from profiler.runs.samples import read_process_gpus

    path = tmp_path / "processes.csv"
    path.write_text(processes_text([[1.0, 2.0], [3.0]], ["0", "1"]))
    assert read_process_gpus(path) == ["0", "1"] and read_processes_csv(path) == [[1.0, 2.0],
                                                                                  [3.0]]
    path.write_text(processes_text([[1.0]], [None]))  # no GPU known: no column
    assert path.read_text().splitlines()[0] == "process,iteration,latency_ms"
    assert read_process_gpus(path) == [None]


def test_a_verdict_compares_windows_on_the_gpus_both_cells_share(tmp_path):
    """Two fake GPUs: the baseline's windows all on GPU 0, the cell's on 0 and 1, GPU 1 10 %
    slower. The verdict takes the cell's GPU-0 windows only (the same config: same), and the
    table says which GPUs each cell's windows ran on."""
    from profiler.analysis.benchmark import like_with_like

    sweep = tmp_path / "gpu_sweep"
    shutil.copytree(H100_SWEEP, sweep)
    base = process_windows(read_result(sweep / "ttrt_fp16_bs1" / "result.json"),
                           sweep / "ttrt_fp16_bs1" / "result.json")[0]
    factors = [1.0, 1.002, 0.998, 1.001, 0.999, 1.0]
    record_processes(sweep / "pytorch_fp16_bs8", [[v * f for v in base] for f in factors],
                     "test", gpus=["0"] * 6)
    record_processes(sweep / "ttrt_fp16_bs8",
                     [[v * f for v in base] for f in factors]
                     + [[v * f * 1.10 for v in base] for f in factors],
                     "test", gpus=["0"] * 6 + ["1"] * 6)
    table = SweepAnalysis(sweep).benchmark.set_index(["backend", "bs"])
    row = table.loc[("ttrt_fp16", 8)]
    assert row["gpus"] == "0;1" and row["processes"] == 12
    assert row["verdict"] == "same"  # GPU 1's windows set aside
    assert table.loc[("pytorch_fp16", 8)]["gpus"] == "0"
    # without a GPU in common, every window counts
    a, b = like_with_like([([1.0], "0")], [([2.0], "1")])
    assert a == [[1.0]] and b == [[2.0]]


def test_sweep_rounds_run_on_the_first_gpu_and_record_it(tmp_path, monkeypatch):
    """The sweep's rounds with two fake GPUs (the scheduler, not timings): every round process
    is started with CUDA_VISIBLE_DEVICES set to the sweep's first GPU, and each new window is
    recorded with it beside the cell's own run's GPU."""
    import os

    from profiler.runs.manifest import SweepCell
    from profiler.sweep import plan as sweep_plan

    sweep = tmp_path / "gpu_sweep"
    shutil.copytree(H100_SWEEP, sweep)
    seen = []

    def fake_round(cells):
        seen.append(os.environ.get("CUDA_VISIBLE_DEVICES"))
        return {key: {"latencies_ms": [1.0, 1.1, 0.9], "device": "fake"} for key, _ in cells}

    original = rounds.sample

    def sample(*args, **kwargs):
        kwargs["round_runner"] = fake_round
        return original(*args, **kwargs)

    monkeypatch.setattr(rounds, "sample", sample)
    manifest = sweep_plan.read_manifest(sweep)
    for name, cell in manifest.cells.items():
        cell.gpu = "1" if name.endswith("bs8") else "0"
    p = sweep_plan.SweepPlan(name="gpu_sweep", backends=["pytorch_fp16", "ttrt_fp16"],
                             batch_sizes=[1, 8], baseline="pytorch_fp16",
                             options=manifest.options, runs_dir=tmp_path, tb_dir=tmp_path / "tb",
                             cells=[(b, n, {}) for b in ("pytorch_fp16", "ttrt_fp16")
                                    for n in (1, 8)],
                             gpus=["0", "1"], processes=3)
    monkeypatch.setattr(rounds, "window_config", lambda config, iters, warmup: config)
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    sweep_plan.sample_cells(p, manifest, say=lambda _: None)
    assert os.environ.get("CUDA_VISIBLE_DEVICES") == before  # set for the rounds only
    assert seen == ["0", "0"]  # two rounds, both on the first GPU
    from profiler.runs.samples import read_process_gpus

    assert read_process_gpus(sweep / "ttrt_fp16_bs8" / "processes.csv") == ["1", "0", "0"]
    assert read_process_gpus(sweep / "ttrt_fp16_bs1" / "processes.csv") == ["0", "0", "0"]


def test_the_default_processes_are_three_on_gpus_and_one_on_a_cpu():
    from profiler.sweep.plan import check_sampling

    assert check_sampling(None, None, None, "local", ["0", "1"], "forward") == 3
    assert check_sampling(None, None, None, "local", [], "forward") == 1
    assert check_sampling(5, None, None, "local", [], "forward") == 5

"""The rounds of --processes over several GPUs (profiler.sweep.rounds), with fake GPUs: how a
round is split, where each process runs, which windows pair, and that a stop ends every
process running at once. Tests of the scheduler, never of timings."""

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from profiler import signals
from profiler.analysis.gpu_offsets import gpu_offsets
from profiler.report.benchmark_view import gpu_offset_lines
from profiler.report.sentences import verdict_method
from profiler.runs.samples import ConfigSamples, ProcessWindow
from profiler.sweep import rounds


def matrix(backends=("fp32", "fp16", "ttrt"), sizes=(1, 8, 16, 32)):
    """A sweep's cells and their comparison groups (the backends at one batch size)."""
    cells = {f"{b}_bs{n}": {} for b in backends for n in sizes}
    groups = {f"{b}_bs{n}": f"bs{n}" for b in backends for n in sizes}
    return cells, groups


class FakeGpus:
    """A round runner on fake GPUs: records each process (its GPU, its cells), checks that no
    GPU runs two processes at once, and answers a latency per cell offset by its GPU."""

    def __init__(self, offset=None, hold_s=0.0):
        self.offset = offset or {}
        self.hold_s = hold_s
        self.lock = threading.Lock()
        self.busy: set = set()
        self.most_at_once = 0
        self.processes: list[tuple[str, list[str]]] = []

    def __call__(self, cells, gpu=None, started=None):
        with self.lock:
            assert gpu not in self.busy, f"two processes at once on GPU {gpu}"
            self.busy.add(gpu)
            self.most_at_once = max(self.most_at_once, len(self.busy))
            index = len(self.processes)
            self.processes.append((gpu, [key for key, _ in cells]))
        self.hold(index)
        with self.lock:
            self.busy.discard(gpu)
        return self.answer([key for key, _ in cells], gpu)

    def hold(self, index: int) -> None:
        """While process ``index`` runs (its GPU busy)."""
        time.sleep(self.hold_s)

    def answer(self, keys: list[str], gpu: str) -> dict:
        scale = 1 + self.offset.get(gpu, 0.0)
        return {
            key: {
                "latencies_ms": [scale * (1 + len(key) / 100)] * 3,
                "gpu_ms": [scale] * 3,
                "device": "fake",
            }
            for key in keys
        }


@pytest.mark.parametrize(
    "rounds_, gpus, groups, chunks",
    [
        (5, 1, 4, [1] * 5),  # one GPU: a round is one process
        (5, 2, 4, [1, 1, 1, 1, 2]),  # two full waves of whole rounds, the last round over both
        (5, 4, 4, [1, 1, 1, 1, 4]),  # one full wave, the fifth round over all four GPUs
        (4, 4, 4, [1] * 4),  # 4 rounds fill 4 GPUs already
        (6, 4, 4, [1, 1, 1, 1, 2, 2]),
        (2, 4, 4, [2, 2]),  # fewer rounds than GPUs: each split
        (3, 4, 4, [1, 1, 1]),  # a split would add a wave
        (5, 4, 2, [1, 1, 1, 1, 2]),  # never more processes than the round's comparison groups
        (5, 4, 1, [1] * 5),  # a compare: its two configs always share a process
        (0, 4, 4, []),
    ],
)
def test_whole_rounds_fill_the_waves_and_only_the_last_wave_is_split(rounds_, gpus, groups, chunks):
    assert rounds.round_chunks(rounds_, gpus, groups) == chunks


def test_split_round_keeps_each_comparison_group_whole_and_the_order():
    turn = ["a_bs8", "b_bs1", "c_bs8", "a_bs1", "b_bs8", "c_bs1", "a_bs16"]
    groups = {k: k.split("_")[1] for k in turn}
    parts = rounds.split_round(turn, groups, 2)
    assert sorted(k for part in parts for k in part) == sorted(turn)
    for part in parts:
        assert part == [k for k in turn if k in part]  # the round's order kept
        for group in {groups[k] for k in part}:  # a group is never in two processes
            assert {k for k in turn if groups[k] == group} <= set(part)
    assert sorted(len(part) for part in parts) == [3, 4]
    assert rounds.split_round(turn, groups, 1) == [turn]


def test_rounds_run_at_once_one_process_per_gpu_and_every_window_knows_its_gpu():
    cells, groups = matrix()
    fake = FakeGpus(hold_s=0.01)
    got = rounds.sample(
        cells,
        {},
        5,
        say=lambda _: None,
        round_runner=fake,
        gpus=["0", "1", "2", "3"],
        groups=groups,
    )
    # four whole rounds, then the fifth over the four GPUs: one comparison group a process
    assert got.rounds == 5 and got.processes == 8 == len(fake.processes)
    assert fake.most_at_once == 4  # all four GPUs busy at once, never two on one
    assert {gpu for gpu, _ in fake.processes} == {"0", "1", "2", "3"}
    assert [len(keys) for _, keys in fake.processes] == [12] * 4 + [3] * 4
    for _, keys in fake.processes[4:]:
        assert len({groups[k] for k in keys}) == 1
    for key in cells:  # five windows a cell, each from its own process, its GPU recorded
        windows = got.windows[key]
        assert len(windows) == 5 and len({w.round for w in windows}) == 5
        assert all(w.gpu in {"0", "1", "2", "3"} for w in windows)
    # the windows that pair (one process) were taken on one GPU; the split round's processes
    # pair only within their comparison group
    for key in cells:
        for other in cells:
            shared = {w.round for w in got.windows[key]} & {w.round for w in got.windows[other]}
            assert len(shared) == (5 if groups[key] == groups[other] else 4)
            gpu_of = {w.round: w.gpu for w in got.windows[other]}
            assert all(gpu_of[w.round] == w.gpu for w in got.windows[key] if w.round in shared)
    assert "8 processes over GPUs 0,1,2,3" in got.schedule(len(cells))


def test_a_gpu_offset_cancels_in_the_pairs():
    """GPU 1 runs 10 % slow: every pair (one process) sits on one GPU, so the ratio of each
    pair is the configs' ratio whatever GPU took it."""
    cells, groups = matrix(backends=("fp32", "ttrt"), sizes=(1, 8))
    got = rounds.sample(
        cells,
        {},
        5,
        say=lambda _: None,
        round_runner=FakeGpus(offset={"1": 0.10}),
        gpus=["0", "1"],
        groups=groups,
    )
    used = set()
    for size in (1, 8):
        a = {w.round: w for w in got.windows[f"fp32_bs{size}"]}
        b = {w.round: w for w in got.windows[f"ttrt_bs{size}"]}
        ratios = {round(b[r].median("latency") / a[r].median("latency"), 9) for r in a}
        assert len(ratios) == 1  # identical in every pair, on either GPU
        assert all(a[r].gpu == b[r].gpu for r in a)
        used |= {w.gpu for w in a.values()}
    assert used == {"0", "1"}  # both GPUs took some


def test_one_gpu_runs_whole_rounds_in_turn():
    cells, groups = matrix()
    fake = FakeGpus()
    got = rounds.sample(
        cells, {}, 3, say=lambda _: None, round_runner=fake, gpus=["2"], groups=groups
    )
    assert got.processes == 3 and [len(keys) for _, keys in fake.processes] == [12] * 3
    assert {gpu for gpu, _ in fake.processes} == {"2"}
    assert all(w.gpu == "2" for ws in got.windows.values() for w in ws)


def test_a_failing_cell_leaves_the_later_processes():
    cells, groups = matrix(backends=("a", "b"), sizes=(1, 8))

    class Failing(FakeGpus):
        def __call__(self, cells, gpu=None, started=None):
            got = super().__call__(cells, gpu, started)
            if "b_bs8" in got:
                got["b_bs8"] = "CUDA error: out of memory"
            return got

    fake = Failing()
    lines = []
    got = rounds.sample(
        cells, {}, 5, say=lines.append, round_runner=fake, gpus=["0", "1"], groups=groups
    )
    assert got.errors == {"b_bs8": "CUDA error: out of memory"}
    assert got.windows["b_bs8"] == [] and len(got.windows["a_bs8"]) == 5
    # asked in the first wave at most (both GPUs' first processes start together)
    assert sum("b_bs8" in keys for _, keys in fake.processes) <= 2
    assert any("b_bs8: no sample" in line for line in lines)


def test_a_stop_ends_every_process_running_on_the_gpus(tmp_path):
    """Ctrl-C (here: raised while recording the first process's windows) stops the processes
    running on the other GPUs, started by real children that would sleep for a minute."""
    cells, groups = matrix(backends=("a", "b"), sizes=(1, 8, 16))
    pids = tmp_path / "pids"
    pids.mkdir()

    def runner(cells, gpu=None, started=None):
        if gpu == "0":
            return {key: {"latencies_ms": [1.0], "device": "fake"} for key, _ in cells}
        script = (
            f"import os, time; open({str(pids)!r} + '/' + str(os.getpid()), 'w').close();"
            " time.sleep(60)"
        )
        signals.run_child([sys.executable, "-c", script], started=started)
        return {key: "stopped" for key, _ in cells}

    def record(sampled):
        deadline = time.time() + 30
        while len(list(pids.iterdir())) < 2 and time.time() < deadline:
            time.sleep(0.05)
        raise KeyboardInterrupt

    began = time.time()
    with pytest.raises(KeyboardInterrupt):
        rounds.sample(
            cells,
            {},
            3,
            say=lambda _: None,
            round_runner=runner,
            on_round=record,
            gpus=["0", "1", "2"],
            groups=groups,
        )
    assert time.time() - began < 30
    found = [int(p.name) for p in pids.iterdir()]
    assert len(found) == 2
    for pid in found:  # reaped and gone
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def windows_on(gpus_values: dict[str, list[float]]) -> ConfigSamples:
    """A config's windows: per GPU the GPU-time medians of its processes."""
    return ConfigSamples(
        tuple(
            ProcessWindow((v,), (v,), gpu=gpu, round=f"r{gpu}{i}")
            for gpu, values in gpus_values.items()
            for i, v in enumerate(values)
        )
    )


def test_each_gpu_gets_its_offset_from_the_others_and_its_floor():
    # three configs on three GPUs; GPU 2 runs 3 % slow, every GPU spreads about 0.5 %
    spread = (0.995, 1.0, 1.005)
    configs = [
        windows_on(
            {
                gpu: [base * (1.03 if gpu == "2" else 1.0) * f for f in spread]
                for gpu in ("0", "1", "2")
            }
        )
        for base in (1.0, 4.0, 9.0)
    ]
    found = {o.gpu: o for o in gpu_offsets(configs)}
    assert list(found) == ["0", "1", "2"]
    assert found["2"].offset == pytest.approx(0.03, rel=1e-6)
    # against the median GPU: one GPU apart moves the others' offsets not at all
    assert found["0"].offset == pytest.approx(0, abs=1e-9)
    assert found["1"].offset == pytest.approx(0, abs=1e-9)
    assert all(o.floor == pytest.approx(0.005, rel=0.01) for o in found.values())
    assert [g for g, o in found.items() if o.apart] == ["2"]
    assert all(o.windows == 9 and o.configs == 3 for o in found.values())
    lines = gpu_offset_lines(list(found.values()))
    assert lines[0].startswith("GPUs on the same configs (GPU time")
    assert "GPU 2 +3.0 % (floor 0.5 %, 9 windows)" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("GPU 2 sits +3.0 % from the other GPUs")
    assert "beyond its floor of 0.5 %" in lines[1]


def test_gpus_within_their_floor_are_named_nowhere_and_one_gpu_gives_no_offsets():
    configs = [windows_on({"0": [1.0, 1.01, 0.99], "1": [1.002, 0.992, 1.011]})]
    found = gpu_offsets(configs)
    assert len(found) == 2 and not any(o.apart for o in found)
    assert len(gpu_offset_lines(found)) == 1
    assert gpu_offsets([windows_on({"0": [1.0, 1.1]})]) == []
    assert gpu_offset_lines([]) == []
    # latency where GPU time was not measured
    latency_only = [
        ConfigSamples(tuple(ProcessWindow((v,), gpu=g) for g, v in (("0", 1.0), ("1", 1.2))))
    ]
    assert gpu_offsets(latency_only) == []
    assert [o.gpu for o in gpu_offsets(latency_only, "latency")] == ["0", "1"]


def test_a_verdict_says_where_its_windows_ran_and_how_the_gpu_offset_is_handled():
    from profiler.analysis.timed_verdict import judge

    cells, groups = matrix(backends=("fp32", "ttrt"), sizes=(1,))
    fake = FakeGpus(offset={"1": 0.10}, hold_s=0.02)
    got = rounds.sample(
        cells, {}, 6, say=lambda _: None, round_runner=fake, gpus=["0", "1"], groups=groups
    )
    # each side: its own run's window (on GPU 0, pairing with none) and six rounds'
    own_run = {k: ProcessWindow((1.0 + len(k) / 100,), (1.0,), gpu="0") for k in cells}
    a, b = (ConfigSamples((own_run[k], *got.windows[k])) for k in ("fp32_bs1", "ttrt_bs1"))
    both = judge(a, b)
    # GPU time pairs (6 rounds): each pair on one GPU, the 10 % offset cancels
    assert both.gpu_time.design == "paired"
    assert len(both.gpu_time.gpus_a) == 7 and set(both.gpu_time.gpus_a) == {"0", "1"}
    assert "each pair's two windows on one GPU (one process)" in verdict_method(both.gpu_time)
    assert both.gpu_time.low == pytest.approx(both.gpu_time.high)  # identical pair ratios
    # latency is unpaired at its measured rho: the GPU is named as a factor, per side
    assert both.latency.design == "unpaired"
    on = {g: sum(1 for w in a.windows if w.gpu == g) for g in ("0", "1")}
    assert (
        f"GPU a recorded factor, not paired out: A's windows by GPU 0:{on['0']} 1:{on['1']}"
    ) in verdict_method(both.latency) and on["0"] + on["1"] == 7
    one_gpu = rounds.sample(
        cells, {}, 6, say=lambda _: None, round_runner=FakeGpus(), gpus=["0"], groups=groups
    )
    alone = judge(*(ConfigSamples(tuple(one_gpu.windows[k])) for k in ("fp32_bs1", "ttrt_bs1")))
    assert alone.latency.gpus_a is None and alone.latency.gpus_b is None
    assert "GPU" not in verdict_method(alone.latency).split("; ")[-1]


H100X4 = Path(__file__).parent / "fixtures" / "h100x4_sweep" / "runs" / "g4"


def test_a_real_sweep_over_four_h100s_pairs_on_one_gpu_and_names_the_gpus():
    """tests/fixtures/h100x4_sweep: five rounds over four H100s (four whole, the fifth split by
    batch size). Every pair of windows sits on one GPU, the table names the GPUs of each
    cell's windows, and no GPU sits further from the others than its floor."""
    from rich.console import Console

    from profiler.analysis.benchmark import (
        benchmark_frame,
        benchmark_rows,
        cell_samples,
        sweep_gpu_offsets,
    )
    from profiler.report.benchmark_view import print_benchmark
    from profiler.runs.manifest import read_manifest

    manifest = read_manifest(H100X4)
    samples = cell_samples(H100X4, manifest)
    for name, found in samples.items():
        rounds_ = [w for w in found.windows if w.round]
        assert len(rounds_) == 5 and {w.gpu for w in rounds_} <= {"0", "1", "2", "3"}
        assert len({w.gpu for w in found.windows}) >= 2
        for other, theirs in samples.items():
            gpu_of = {w.round: w.gpu for w in theirs.windows if w.round}
            shared = [w for w in rounds_ if w.round in gpu_of]
            same_bs = name.rsplit("_bs", 1)[1] == other.rsplit("_bs", 1)[1]
            assert len(shared) == (5 if same_bs else 4)  # the split fifth round: one bs each
            assert all(gpu_of[w.round] == w.gpu for w in shared)
    rows = benchmark_rows(H100X4, manifest)
    frame = benchmark_frame(rows, manifest)
    assert set(frame["gpus"]) == {"0;1;2;3"} and set(frame["processes"]) == {6.0}
    judged = frame[frame["gpu_verdict"].isin(["faster", "slower", "same", "undecided"])]
    assert len(judged) == 8 and set(judged["gpu_verdict"]) == {"faster"}
    offsets = sweep_gpu_offsets(H100X4, manifest)
    assert [o.gpu for o in offsets] == ["0", "1", "2", "3"]
    assert not any(o.apart for o in offsets) and all(o.configs == 12 for o in offsets)
    console = Console(width=250, record=True)
    print_benchmark(rows, manifest, console)
    text = console.export_text()
    assert "GPUs" in text.splitlines()[3] + text.splitlines()[2] and "0,1,2,3" in text


def test_the_real_sweeps_gpu_time_verdicts_say_the_gpu_offset_cancels():
    from profiler.analysis.benchmark import cell_samples
    from profiler.analysis.timed_verdict import judge
    from profiler.runs.manifest import read_manifest

    samples = cell_samples(H100X4, read_manifest(H100X4))
    both = judge(samples["pytorch_fp32_bs16"], samples["inductor_fp16_bs16"])
    assert both.gpu_time.design == "paired" and both.gpu_time.verdict == "faster"
    assert (
        "windows on GPUs 0,1,2,3; each pair's two windows on one GPU (one process)"
        in verdict_method(both.gpu_time)
    )

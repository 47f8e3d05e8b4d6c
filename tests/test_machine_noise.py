"""The floor and the within-process correlation rho per machine kind (profiler.runs.noise_floor,
profiler.analysis.floor, profiler.analysis.headline.machine_noise): `noise` measures rho of
both figures from two configs timed in one process, the pairing choice reads this machine's
rho where one is kept (the H100 constants otherwise), the method line names the source, and on
a CPU one process a side gives no faster/slower without this machine's floor. No model runs:
windows are built from numbers, floors written to a temporary folder."""

from __future__ import annotations

import json
import socket

import msgspec
import numpy as np
import pytest

from profiler.analysis.floor import MIN_RHO_PROCESSES, rho_interval, within_process_rho
from profiler.analysis.headline import compare_timed, machine_kind, machine_noise
from profiler.analysis.records import NoiseSource
from profiler.analysis.verdict import (
    DEFAULT_SOURCE,
    FIGURES,
    FLOOR,
    LATENCY,
    PAIRED,
    UNDECIDED,
    UNPAIRED,
    MachineNoise,
    compare,
)
from profiler.report.compare_view import undecided_note, verdict_words
from profiler.report.sentences import WITHHELD_WORDS, verdict_method
from profiler.runs.noise_floor import NoiseFloor, cpu_kind, cpu_model, read_floor, write_floor
from profiler.runs.result import read_result
from profiler.runs.samples import ProcessWindow

from .conftest import FIXTURES

RUN = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep" / "ttrt_fp16_bs8" / "result.json"


def _windows(medians: list[float], tag: str = "r") -> list[ProcessWindow]:
    """One window per process, each of three iterations around its median, round r0, r1 ..."""
    return [
        ProcessWindow((m * 0.99, m, m * 1.01), (m * 0.9,) * 3, round=f"{tag}{i}")
        for i, m in enumerate(medians)
    ]


def test_rho_is_the_correlation_of_two_configs_in_one_process():
    rng = np.random.default_rng(3)
    shared = rng.normal(0, 0.05, 12)  # each process's offset, common to both configs
    first = np.exp(np.log(10) + shared + rng.normal(0, 0.02, 12))
    second = np.exp(np.log(20) + shared + rng.normal(0, 0.02, 12))
    found = within_process_rho(_windows(list(first)), _windows(list(second)))
    expected = np.corrcoef(np.log(first), np.log(second))[0, 1]
    assert found["rho_processes"] == 12
    assert found["rho_latency"] == pytest.approx(expected, abs=1e-3) and expected > 0.7
    assert found["rho_gpu_time"] == pytest.approx(expected, abs=1e-3)
    # windows pair by the round (process) that timed them, never by position
    shuffled = _windows(list(second))[::-1]
    assert within_process_rho(_windows(list(first)), shuffled)["rho_latency"] == pytest.approx(
        found["rho_latency"]
    )
    # too few processes: no rho (two give +-1 whatever the noise); its interval is wide
    few = within_process_rho(_windows([10, 11, 12]), _windows([20, 19, 25]))
    assert few["rho_processes"] == 3 and few["rho_latency"] is None
    low, high = rho_interval(0.3, MIN_RHO_PROCESSES + 1)
    assert low < 0 < 0.3 < high < 1
    # a figure a side did not measure gives no rho
    cpu = [ProcessWindow(w.latency_ms, round=w.round) for w in _windows(list(first))]
    assert within_process_rho(cpu, _windows(list(second)))["rho_gpu_time"] is None


def _paired_rounds(seed: int = 0, k: int = 5):
    """k rounds, each timing A and B once, their latencies moving together a little."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(0, 0.1, k)
    a = np.exp(np.log(10) + shared + rng.normal(0, 0.1, k))
    b = np.exp(np.log(10.5) + shared + rng.normal(0, 0.1, k))
    rounds = [f"r{i}" for i in range(k)]
    return list(a), list(b), rounds


def test_the_pairing_choice_reads_this_machines_rho_and_the_method_line_names_it():
    a, b, rounds = _paired_rounds()
    default = compare(a, b, rounds_a=rounds, rounds_b=rounds)
    # five pairs pay at the H100's latency rho (0.34)
    assert FIGURES[LATENCY].rho == 0.34 and default.design == PAIRED
    assert default.rho == 0.34 and default.rho_source == DEFAULT_SOURCE
    assert "paired: at ρ 0.34 (the H100 default) pairing narrows" in verdict_method(default)
    measured = NoiseSource("noise", "NVIDIA H200", socket.gethostname(), "2026-05-01T10:00:00Z")
    machine = MachineNoise(rhos={LATENCY: 0.06}, rho_sources={LATENCY: measured})
    here = compare(a, b, rounds_a=rounds, rounds_b=rounds, machine=machine)
    # at the rho measured here (0.06) pairing widens the expected interval: Welch instead
    assert here.design == UNPAIRED and here.rho == 0.06 and here.rho_source == measured
    said = verdict_method(here)
    assert (
        "not paired: at ρ 0.06 (measured on this machine (NVIDIA H200) by `noise` at "
        "2026-05-01T10:00:00Z) pairing would widen the expected interval" in said
    )
    elsewhere = msgspec.structs.replace(measured, host="another-host")
    assert "measured on another-host (NVIDIA H200)" in verdict_method(
        compare(
            a,
            b,
            rounds_a=rounds,
            rounds_b=rounds,
            machine=MachineNoise(rhos={LATENCY: 0.06}, rho_sources={LATENCY: elsewhere}),
        )
    )
    # without rounds in common, or one process a side, rho chose nothing and is not named
    assert compare(a, b).rho is None and "ρ" not in verdict_method(compare(a, b))
    assert compare(a[:1], b[:1], machine=machine).rho is None


def test_one_process_a_side_on_a_cpu_gives_no_faster_or_slower_without_its_floor():
    a, b = [10.0], [30.0]  # 3x apart: the H100 floor (33 %) calls it slower
    assert compare(a, b).verdict == "slower"
    cpu = MachineNoise(cpu=True)
    withheld = compare(a, b, machine=cpu)
    assert withheld.design == FLOOR and withheld.verdict == UNDECIDED
    assert withheld.withheld == "cpu-one-process" and withheld.floor_from == DEFAULT_SOURCE
    assert verdict_words(withheld) == WITHHELD_WORDS
    assert WITHHELD_WORDS == "undecided (one process a side; measure this machine with `noise`)"
    assert "no faster/slower: one process a side on a CPU" in verdict_method(withheld)
    assert "`python profile.py noise` measures this machine's floor" in undecided_note(withheld)
    # this CPU's floor, measured by `noise`: the verdict is the interval's
    kept = NoiseSource("noise", cpu_kind(), socket.gethostname(), "2026-05-01T10:00:00Z")
    measured = compare(
        a, b, machine=MachineNoise(floors={LATENCY: 0.1}, floor_sources={LATENCY: kept}, cpu=True)
    )
    assert measured.verdict == "slower" and measured.withheld is None
    assert measured.floor_source == "given" and measured.floor_from == kept
    assert "measured on this machine" in verdict_method(measured)
    # two processes a side or more: the spread is measured, nothing withheld
    assert compare([10.0, 10.1], [30.0, 30.2], machine=cpu).withheld is None
    # on a GPU the H100's floor still stands in
    assert compare(a, b, machine=MachineNoise()).verdict == "slower"


def _cpu_result(cpu: str | None, host: str | None = None):
    result = read_result(RUN)
    env = msgspec.structs.replace(
        result.environment, gpu=None, cpu=cpu, hostname=host or result.environment.hostname
    )
    return msgspec.structs.replace(result, device="cpu", environment=env)


def test_floors_are_kept_per_machine_kind(tmp_path):
    assert cpu_kind("AMD EPYC 7B13") == "CPU AMD EPYC 7B13" and cpu_model()
    assert machine_kind(read_result(RUN)) == "NVIDIA H100 80GB HBM3"
    assert machine_kind(_cpu_result("AMD EPYC 7B13")) == "CPU AMD EPYC 7B13"
    # a CPU run recorded before the model was: this machine's kind only where it ran here
    assert machine_kind(_cpu_result(None, socket.gethostname())) == cpu_kind()
    assert machine_kind(_cpu_result(None, "elsewhere")) is None
    floor = NoiseFloor(
        gpu=cpu_kind(),
        host=socket.gethostname(),
        measured="2026-05-01T10:00:00+00:00",
        workload="resnet18 pytorch_fp32 bs 1",
        processes=5,
        p50_ms=[10.0, 11.0, 10.5, 10.2, 10.8],
        between_process_cv=0.04,
        within_window_cv=0.1,
        smallest_resolvable=0.1,
        rho_latency=0.2,
        rho_processes=5,
    )
    write_floor(floor, tmp_path)
    here = _cpu_result(cpu_model())
    found = machine_noise(here, here, floors_dir=tmp_path)
    assert found.cpu and found.floor(LATENCY) == 0.04
    assert found.floor_source(LATENCY) == NoiseSource(
        "noise", cpu_kind(), socket.gethostname(), "2026-05-01T10:00:00+00:00"
    )
    assert found.rho(LATENCY) == (0.2, found.floor_source(LATENCY))
    assert found.rho("gpu_time") == (FIGURES["gpu_time"].rho, DEFAULT_SOURCE)
    verdict = compare_timed(here, here, RUN, RUN, floors_dir=tmp_path).verdict
    assert verdict.floor_source == "given" and verdict.withheld is None
    # the same runs from a CPU of another model: this floor is not theirs
    other = _cpu_result("another CPU")
    assert machine_noise(other, floors_dir=tmp_path).floor(LATENCY) is None
    verdict = compare_timed(other, other, RUN, RUN, floors_dir=tmp_path).verdict
    assert verdict.floor_source == "default" and verdict.withheld == "cpu-one-process"


def test_a_kept_rho_that_is_no_correlation_is_one_note_and_the_default_stands_in(tmp_path):
    from profiler import notices

    floor = NoiseFloor(
        gpu="NVIDIA H200",
        host="h",
        measured="2026-05-01T10:00:00+00:00",
        workload="w",
        processes=5,
        p50_ms=[1.0, 1.1],
        between_process_cv=0.01,
        within_window_cv=0.01,
        smallest_resolvable=0.01,
    )
    path = write_floor(floor, tmp_path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "rho_latency": 1.7, "rho_gpu_time": 0.4}))
    said: list[str] = []
    with notices.told(said.append):
        kept = read_floor("NVIDIA H200", tmp_path)
    assert kept is not None and kept.rho_latency is None and kept.rho_gpu_time == 0.4
    assert len(said) == 1 and "rho_latency 1.7 is no correlation from -1 to 1" in said[0]


def test_the_noise_view_says_rho_with_its_interval_or_why_there_is_none():
    from profiler.report.noise_view import rho_line

    floor = NoiseFloor(
        gpu="NVIDIA H200",
        host="h",
        measured="2026-05-01T10:00:00+00:00",
        workload="resnet50 pytorch_fp32 bs 8",
        processes=10,
        p50_ms=[1.0, 1.1],
        between_process_cv=0.01,
        within_window_cv=0.01,
        smallest_resolvable=0.01,
        rho_latency=0.06,
        rho_gpu_time=0.17,
        rho_processes=10,
        rho_workload="resnet50 pytorch_fp32 bs 16",
    )
    line = rho_line(floor)
    low, high = rho_interval(0.06, 10)
    assert f"latency 0.06 [{round(low, 2):g}, {round(high, 2):g}]" in line
    assert "GPU time 0.17 [" in line and "over 10 processes" in line
    assert "resnet50 pytorch_fp32 bs 16" in line
    few = msgspec.structs.replace(floor, rho_latency=None, rho_gpu_time=None, rho_processes=2)
    assert "not measured, needs 4 processes or more" in rho_line(few)
    assert "the H100's rho stands in" in rho_line(few)

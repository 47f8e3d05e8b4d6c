"""The analysis returns reasons and figures as data; the sentences are written from them, once:
by profiler.report.sentences for the views (a sweep's benchmark.csv verdict_note included), and,
for the text a run keeps in result.json (a window's noise warnings), where it is kept."""

from pathlib import Path
from typing import get_args

import msgspec
import numpy as np
import pandas as pd
import pytest

from profiler.analysis.difference import explain_difference
from profiler.analysis.records import (
    Bound,
    BoundWord,
    Explanation,
    GpuStateFigures,
    TimedVerdicts,
)
from profiler.analysis.timed_window import flags_of, noise, warning_line, window_flags
from profiler.analysis.verdict import compare, control_fdr
from profiler.report.sentences import (
    difference_lines,
    explanation_line,
    fdr_note,
    gpu_state_line,
    note_lines,
    verdict_method,
)
from profiler.runs.gpu_record import GpuSample, GpuState
from profiler.runs.result import read_result

from .conftest import FIXTURES


def test_a_windows_flags_are_data_and_its_warnings_are_written_from_its_figures():
    x = np.r_[np.full(20, 5.0), np.full(20, 7.0)] + np.tile([0.0, 0.01], 20)
    window = noise(list(x))
    assert flags_of(window) == ["noisy", "bimodal"]
    assert window.clusters_ms == pytest.approx([5.005, 7.005])
    assert window.warnings == [warning_line(flag, window) for flag in flags_of(window)]
    assert window.warnings[1] == (
        f"bimodal: two clusters around 5.005 and 7.005 ms (Ashman's D {window.bimodal_d:.1f} > 4.5)"
    )
    assert window.warnings[0] == (
        f"noisy: CV {100 * window.cv:.1f} %, IQR {100 * window.relative_iqr:.1f} % of the "
        "median (above 10 %)"
    )
    ramp = noise(list(np.linspace(10.0, 11.0, 30)))
    assert flags_of(ramp) == ["drifting"] and ramp.warnings == [
        f"drifting: median of the first third {ramp.first_third_median_ms:.3f} ms, of the last "
        f"third {ramp.last_third_median_ms:.3f} ms"
    ]


def test_the_committed_runs_warnings_are_what_their_figures_say():
    """result.json keeps the warnings in words (timing.noise.warnings, read back by every
    view); the committed runs' words are what warning_line writes from their figures today."""
    windows = [
        r.timing.noise
        for path in sorted(Path(FIXTURES).rglob("result.json"))
        if (r := read_result(path)).timing and r.timing.noise
    ]
    assert sum(bool(w.warnings) for w in windows) >= 3
    for window in windows:
        assert flags_of(window) == window_flags(window.warnings)
        assert [warning_line(f, window) for f in flags_of(window)] == window.warnings


def test_a_verdicts_method_is_data_and_the_view_says_it():
    unpaired = compare([10.0, 10.2, 9.9], [11.0, 11.1, 10.8])
    assert unpaired.design == "unpaired" and 3 < unpaired.df < 5
    assert verdict_method(unpaired) == (
        f"Welch t-interval on the log of per-process medians, 3 vs 3 processes, "
        f"{unpaired.df:.1f} degrees of freedom; 95 % interval; same when the 90 % interval is "
        "within ±2 % (TOST), faster/slower when p < 0.05 and the ratio is beyond ±2 %"
    )
    refused = compare([10.0], [10.5], noise_floor=-0.5, tolerance=0.05)
    assert refused.design == "floor" and refused.df is None and refused.floor_refused == -0.5
    assert verdict_method(refused).startswith(
        "one process on a side (1 vs 1): the between-process spread is unknown, a default "
        "floor of 33.0 % CV stands in (normal interval; the H100 default, not this machine's: "
        "`noise` measures it); the floor given, -0.5, is no spread "
        "from 0 to 10; 95 % interval; same when the 90 % interval is within ±5 % (TOST)"
    )
    held = control_fdr([unpaired, None, refused])
    assert (held[0].fdr_comparisons, held[0].fdr_q) == (2, 0.05) and held[1] is None
    assert fdr_note(held[0]) == "Benjamini-Hochberg over 2 comparisons, q = 0.05"
    assert fdr_note(unpaired) is None


def test_the_verdicts_lines_are_written_from_their_figures():
    """TimedVerdicts carry the classification, the processes the latency needs and the lever's
    figure; the view writes the lines from them (benchmark.csv's verdict_note too)."""
    latency = compare([10.0, 10.2, 9.9], [11.0, 11.1, 10.8])
    launch = Bound("launch-bound", 4, 5, enqueue_p50_ms=5.0, gpu_p50_ms=3.0, latency_p50_ms=6.0)
    gpu = compare([3.0, 3.01, 2.99], [3.3, 3.31, 3.29], figure="gpu_time")
    v = TimedVerdicts(latency, gpu, launch, Bound("GPU-bound", 0, 5), "both", 12, 2.5)
    assert note_lines(v) == [
        "launch-bound (A): enqueue p50 5.000 ms >= GPU time 3.000 ms; 4 of 5 processes "
        "launch-bound: the host paces the call, so its latency spreads with the host",
        "the latency verdict would need about 12 processes a side for ±5 %; the GPU-time "
        "verdict holds with these; `--cuda-graphs` replays the call without launches "
        "(measured: 2.500 ms)",
    ]
    # without a GPU-time verdict (a side's GPU time not measured) the line says so
    alone = TimedVerdicts(latency, None, launch, Bound("GPU-bound", 0, 5), "both", 12, None)
    assert note_lines(alone)[1] == (
        "the latency verdict would need about 12 processes a side for ±5 %; no GPU-time "
        "verdict here (a side's GPU time was not measured); `--cuda-graphs` replays the call "
        "without launches"
    )


def _strings(value) -> list[str]:
    """Every string in a record's JSON values."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [s for v in value for s in _strings(v)] if isinstance(value, list) else []


def test_a_sweeps_verdict_notes_are_data_and_the_view_writes_benchmark_csvs_text(tmp_path):
    """A sweep cell's record carries its verdicts (figures, words, classification) and no
    sentence; the view writes benchmark.csv's verdict_note from them: the text, and the column
    order, of the committed benchmark.csv of the sweep."""
    from profiler.analysis.records import BenchmarkCell, plain
    from profiler.analysis.sweep_analysis import SweepAnalysis
    from profiler.report.benchmark_view import write_benchmark
    from profiler.report.sentences import verdict_note

    folder = FIXTURES / "h100x4_sweep" / "runs" / "g4"
    sweep = SweepAnalysis(folder)
    assert "lines" not in TimedVerdicts.__struct_fields__
    assert "verdict_note" not in BenchmarkCell.__struct_fields__
    judged = [row.verdicts for row in sweep.rows if row.verdicts is not None]
    words = set(get_args(BoundWord))  # a classification's words are data, not a sentence
    assert judged and all(
        " " not in text or text in words for v in judged for text in _strings(plain(v))
    )
    committed = pd.read_csv(folder / "benchmark.csv", keep_default_na=False)
    csv_path, _ = write_benchmark(tmp_path, sweep.rows, sweep.manifest)
    written = pd.read_csv(csv_path, keep_default_na=False)
    assert list(written.columns) == list(committed.columns)
    notes = committed["verdict_note"].tolist()
    assert (
        written["verdict_note"].tolist() == notes == [verdict_note(r.verdicts) for r in sweep.rows]
    )
    assert sum(map(bool, notes)) == 8 and any("launch-bound (A): enqueue p50" in n for n in notes)


def _gpu(mhz):
    sample = GpuSample(sm_clock_mhz=mhz, throttle_reasons=["sw_power_cap"])
    return GpuState(device="H100", before=sample, after=sample, max_sm_clock_mhz=1980)


def _figures(state: GpuState) -> GpuStateFigures:
    return GpuStateFigures(
        **msgspec.structs.asdict(state),
        sm_clock_mhz=state.sm_clock_mhz,
        throttle_reasons=state.throttle_reasons,
    )


def test_the_gpu_state_is_a_record_and_the_view_says_it_in_one_line():
    """Each compare side's GPU state travels as figures (no line in the record); the view
    writes the line, the same from the figures as from result.json's record."""
    state = GpuState(
        device="H100",
        max_sm_clock_mhz=1980,
        before=GpuSample(sm_clock_mhz=1755, temperature_c=40, power_w=120.4),
        after=GpuSample(sm_clock_mhz=1755, temperature_c=52, power_w=650.6),
        load_average=(0.52, 0.4, 0.3),
        cpus=16,
    )
    assert "line" not in GpuStateFigures.__struct_fields__
    said = gpu_state_line(_figures(state))
    assert said == gpu_state_line(state)
    assert said == (
        "GPU state: H100, SM 1755 of 1980 MHz, 40 C -> 52 C, 120 W -> 651 W, throttle: none, "
        "host load 0.52 on 16 CPUs"
    )
    assert gpu_state_line(GpuState(not_recorded="no NVML"), "B") == (
        "GPU state B: not recorded (no NVML)"
    )


def test_a_difference_is_a_cause_and_evidence_and_the_view_says_it():
    conv = "sm80_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nchw_kernel"
    wino = "cudnn::winograd_nonfused::winogradForwardData4x4_kernel"
    a = pd.DataFrame(
        [(conv, 10, 900.0), ("relu", 10, 100.0)], columns=["name", "calls", "total_us"]
    )
    b = pd.DataFrame(
        [(wino, 10, 500.0), ("relu", 10, 100.0)], columns=["name", "calls", "total_us"]
    )
    found = explain_difference(a, b, _gpu(1980), _gpu(1700), 0.7, ["precision"])
    assert found.cause == "clock and kernels" and found.differs_in == ["precision"]
    assert found.throttle_reasons_b == ["sw_power_cap"] and found.latency_ratio == 0.7
    assert difference_lines(found) == [
        f"different kernels (the runs differ in precision): B adds {wino} (83.3 %); B drops "
        f"{conv} (90.0 %)",
        "lower SM clock in B: 1700 MHz against 1980 MHz (-14.1 %); the kernels both ran took "
        "+0.0 % (the clock alone predicts +16.5 %); throttle reasons in B: sw_power_cap",
    ]
    e = Explanation(
        **{f: getattr(found, f) for f in found.__struct_fields__},
        same_config=False,
        gpu_state_a=_figures(_gpu(1980)),
        gpu_state_b=_figures(_gpu(1700)),
    )
    assert explanation_line(e) == "; ".join(difference_lines(found))
    short = explanation_line(e, short=True)
    assert wino not in short and conv not in short and len(short) < len(explanation_line(e))

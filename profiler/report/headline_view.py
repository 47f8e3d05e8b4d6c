"""The headline of a run: timed figures first, then the noise of the window, memory, the config,
and the profiled step time labelled as measured under the profiler (a view over
profiler.analysis.headline.Headline)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from profiler.analysis.records import Headline
from profiler.analysis.timed_window import window_flags
from profiler.report.console import FitTable, print_prose
from profiler.report.fmt import (
    interval_figure,
    marked,
    missing,
    number,
    percent,
    ratio,
    size,
    time,
)
from profiler.report.sentences import gpu_state_line, tail_meaning, tail_value
from profiler.runs.result import GpuCompute


def gpu_compute_line(
    gpu: GpuCompute | None,
    latency_p50_ms: float | None,
    kernel_ms: float | None = None,
    cv: float | None = None,
) -> str | None:
    """GPU compute and enqueue time beside the host-synchronized latency (to the figures its
    window's ``cv`` allows, where given), each named, and with ``kernel_ms`` (the time with a
    kernel running in a profiled step) the kernels' share of the GPU compute and the device's
    gaps between them; one line saying why when they were not measured; None for a run
    recorded before they were."""
    if gpu is None:
        return None
    if gpu.not_measured is not None or gpu.gpu_p50_ms is None:
        return f"GPU compute: not measured ({gpu.not_measured or 'no figures'})"
    redone = gpu.invalid_iterations or 0
    line = (
        f"GPU compute p50 {time(gpu.gpu_p50_ms)}, enqueue p50 "
        f"{time(gpu.enqueue_p50_ms)} (host-synchronized latency p50 "
        + (time(latency_p50_ms) if cv is None else time(latency_p50_ms, decimals=None, noise=cv))
        + "): GPU "
        "compute is the device's time for one call's work, its "
        "first kernel to its last, with the host's launch gaps excluded and the device's own "
        "gaps between kernels included; enqueue the host's time to launch it; "
        f"{gpu.iterations} iterations after the timed window"
        + (f", {redone} redone with a longer sleep" if redone else "")
    )
    if kernel_ms is None:
        return line
    gap = gpu.gpu_p50_ms - kernel_ms
    return line + (
        f"; kernels {time(kernel_ms)} per call (time with a kernel running, profiled steps): "
        + (
            f"{time(gap)} of the GPU compute is the device's gaps between kernels"
            if gap >= 0
            else "more than the GPU compute (the profiled steps' kernels ran longer)"
        )
    )


def print_headline(data: Headline, console: Console) -> None:
    """The headline's table, then its GPU compute, config, GPU state and warning lines."""
    console.print(headline_table(data))
    phase_gpu = data.generation.phase_gpu if data.generation else None
    gpu_lines = (
        [phase_gpu_line(phase, gpu) for phase, gpu in phase_gpu.items()]
        if phase_gpu
        else [
            gpu_compute_line(
                data.timed.gpu_compute,
                data.timed.p50_ms,
                data.kernel_ms_per_step,
                data.noise.cv if data.noise else None,
            )
        ]
    )
    for gpu_line in filter(None, gpu_lines):
        print_prose(console, escape(gpu_line))
    console.print(f"config: {escape(data.config)}", highlight=False)
    console.print(escape(gpu_state_line(data.gpu_state)), highlight=False)
    for warning in (data.noise.warnings if data.noise else None) or []:
        console.print(f"[bold yellow]warning:[/] {escape(warning)}", highlight=False)


#: what each generation figure is, in the headline
GENERATION_MEANINGS = {
    "TTFT": "time to first token: the prefill and its token",
    "TPOT": "time per output token: each generation's mean decode step",
    "ITL p50": "inter-token latency: every decode step",
    "ITL p99": "inter-token latency, tail",
    "tokens/s": "batch size x new tokens / generation latency",
}


#: a generation's phases as the GPU-time lines name them
PHASE_CALLS = {"ttft": "TTFT (one prefill and its token)", "tpot": "TPOT (one decode step)"}


def phase_gpu_line(phase: str, gpu: GpuCompute) -> str:
    """A generation phase's GPU time and enqueue, measured apart (or why not)."""
    what = PHASE_CALLS.get(phase, phase)
    if gpu.not_measured is not None:
        return f"GPU compute, {what}: not measured ({gpu.not_measured})"
    return (
        f"GPU compute, {what}: GPU time p50 {time(gpu.gpu_p50_ms)}, enqueue p50 "
        f"{time(gpu.enqueue_p50_ms)} ({gpu.iterations} iterations behind a sleep kernel, launch "
        "gaps excluded; enqueue from the timed window)"
    )


def _generation_rows(table: FitTable, data: Headline) -> None:
    """A generation's figures over the run's processes, each with its 95 % interval when there
    are several, and each phase's classification."""
    found = data.generation
    if found is None:
        return
    for figure in found.figures:
        processes = (
            f"over {figure.processes} processes, 95 % interval"
            if figure.low is not None
            else "one process"
        )
        table.add_row(
            figure.figure,
            interval_figure(figure),
            f"{GENERATION_MEANINGS[figure.figure]} ({processes})",
        )
    for phase, word in (("TTFT", found.ttft_bound), ("TPOT", found.tpot_bound)):
        if word:
            table.add_row(
                f"{phase} bound",
                word,
                "latency and enqueue p50 against GPU time p50: launch-bound (the host's "
                "launches pace it), near the launch bound or GPU-bound",
            )


def headline_table(data: Headline) -> FitTable:
    """The timed window's figures (latency to the figures its noise allows, throughput,
    noise), then memory and the step time under the profiler: one row each, with what it
    means."""
    table = FitTable(title="Timed window (no profiler attached; quote these)", show_header=False)
    table.add_column("metric")
    table.add_column("value", number=True)
    table.add_column("what it means", style="dim")
    _timed_rows(table, data)
    _generation_rows(table, data)
    memory = data.memory
    table.add_row(
        "peak memory allocated / reserved",
        f"{size(memory.peak_allocated_mib, 'MiB', blank=memory.note or '-')} / "
        f"{size(memory.peak_reserved_mib, 'MiB', blank=memory.note or '-')}",
        "PyTorch allocator, timed window",
    )
    if memory.engine_mib is not None:
        table.add_row(
            "TensorRT engine device memory",
            size(memory.engine_mib, "MiB"),
            "activations and scratch the engines ask for",
        )
    step = data.profiled_step_ms
    if step is not None:
        overhead = data.profiler_overhead_ratio
        table.add_row(
            "step time under the profiler",
            time(step),
            "not a latency to quote"
            + ("" if overhead is None else f"; {ratio(overhead)} the timed p50"),
        )
    _utilization_rows(table, data)
    return table


def _utilization_rows(table: FitTable, data: Headline) -> None:
    """The GPU's utilization over the timed window beside the profiled step's, each named."""
    kernel_ms, timed, profiled = (
        data.kernel_ms_per_step,
        data.gpu_utilization_timed_pct,
        data.gpu_utilization_profiled_pct,
    )
    if kernel_ms is None:
        return
    if timed is not None:
        table.add_row(
            "GPU utilization, timed window",
            percent(timed),
            f"kernels running {time(kernel_ms)} per call (profiled steps) / the timed p50: how "
            "busy a caller's call keeps the GPU",
        )
    if profiled is not None:
        table.add_row(
            "GPU utilization, profiled steps",
            percent(profiled),
            "the same kernel time / the step under the profiler (the overview's GPU "
            "utilization): the profiler slows the host's side of the step",
        )


def _timed_rows(table: FitTable, data: Headline) -> None:
    """p50 (flagged), p90 and p99 with their intervals, throughput, CV / IQR and the spread
    over processes."""
    timed, window = data.timed, data.noise
    cv = window.cv if window else None
    flags = window_flags(window.warnings if window else None)
    table.add_row(
        "p50 latency",
        marked(time(timed.p50_ms, decimals=None, noise=cv), flags),
        f"median of {timed.iters} synchronized iterations ({timed.timer}), "
        "to the figures its CV allows"
        + ("; the window is flagged, see the warning below" if flags else ""),
    )
    for tail in data.tails:  # each with its interval, from the window's latency.csv
        table.add_row(f"p{tail.percentile} latency", tail_value(tail, cv), tail_meaning(tail))
    if not data.tails:
        table.add_row(
            "p90 / p99 latency",
            f"{time(timed.p90_ms, decimals=None, noise=cv)} / "
            f"{time(timed.p99_ms, decimals=None, noise=cv)}",
            "tail latency (no latency.csv: no interval)",
        )
    throughput = timed.throughput_samples_per_s
    table.add_row(
        "throughput",
        "-" if missing(throughput) else f"{number(throughput)} samples/s",
        "batch size x iterations / total time",
    )
    if window:
        table.add_row(
            "CV / IQR",
            f"{percent(100 * window.cv)} / {time(window.iqr_ms)}",
            "std / mean; p75 - p25: the spread of the window",
        )
    spread = timed.repeat_runs
    if spread:
        table.add_row(
            f"p50 over {spread.runs} processes",
            f"{time(spread.min_p50_ms)} to {time(spread.max_p50_ms)}",
            f"{percent(spread.range_pct_of_median)} of the median (--repeat-runs)",
        )

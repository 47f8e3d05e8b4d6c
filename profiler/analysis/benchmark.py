"""A sweep's benchmark table: one row per cell, built from the manifest and each cell's
result.json (profiler.report.benchmark_view writes it as benchmark.csv and benchmark.md and
prints it).

Columns (times in ms, as the timed window measured them; the trace figures come from the
profiled steps, summarized with profiler.trace):

model, device, backend, bs, mean_ms, p50_ms (with several processes per cell: the geometric mean
of the per-process medians, the figure the latency speedup and verdict speak of), p90_ms, p99_ms
(the cell's own window), gpu_compute_ms and enqueue_ms (trtexec's split of one call: the
device's work with launch gaps excluded, the geometric mean over processes of each process's
GPU-time p50, and the host's launch time, p50 of the run's timed window; empty where not
measured), bound (launch-bound or GPU-bound: the host's enqueue p90 against 0.8 x the GPU time
in most processes), throughput_per_s,
speedup (latency: the baseline's p50 / this cell's p50 at the same batch size; empty when the
baseline cell did not finish), speedup_low and speedup_high (its 95 % interval) and verdict
(faster, slower, same within ±2 %, undecided; "baseline" on the baseline's own cells), and the
same four for GPU time (gpu_speedup, gpu_speedup_low, gpu_speedup_high, gpu_verdict), each
figure's verdicts held to a false discovery rate of 5 % over the sweep's cells
(profiler.analysis.timed_verdict, profiler.analysis.verdict; the intervals are the raw 95 %
ones), verdict_note (launch-bound explanations and disagreements), processes (the timed
windows behind the cell's figures, each in its own process: --processes), gpus (the GPUs those
windows ran on, ";"-joined; a verdict between two cells uses only their windows on the GPUs
they share, when they share one), baseline, ready_s (prepare + first call: from handing the model to
the backend to the first output, every backend), compile_s and compile_what (TensorRT: engine build
time, with ModelOpt's extension build for ttrt_fp8/ttrt_int8, or the engine cache load time; ONNX
Runtime: export + session creation, or the session alone from a cached ONNX file; Inductor: the
first call, where torch.compile compiles; empty for eager and TorchScript), rel_l2_error (vs the
FP32 eager reference; empty for pytorch_fp32, the reference itself), tensor_core_pct (time in Tensor
Core kernels, % of kernel time: a kernel that uses Tensor Cores at all counts whole; not how busy
the tensor pipe was), gpu_util_pct, cv_pct (the timed window's coefficient of variation), noise (its
warnings, ";"-joined),
peak_allocated_mib and peak_reserved_mib (PyTorch allocator, timed window; empty on a CPU),
engine_mib (TensorRT engines' device memory),
tflops, pct_peak_compute, gbs, pct_peak_bandwidth, flop_per_byte (the roofline of the timed
p50: FLOPs and minimum bytes (weights + inputs + outputs) from result.json's roofline_inputs,
against the measured ceilings of `profile.py peaks`, else the datasheet's; gbs and
pct_peak_bandwidth are the minimum bytes over the p50, so the run moved at least that much; empty
for runs without roofline_inputs),
status, reason, gpu (the GPU that ran the cell, as CUDA_VISIBLE_DEVICES names it; empty on a
CPU), node (the host), elapsed_s (the cell in its worker, wall time), then where the cell's seconds
went: wall_s (the run's own wall time: imports + harness, result.json's timing.wall_s) and one
column per phase, <phase>_s in run order (profiler.runs.phases: imports_s, build_s, flops_s,
prepare_s, first_call_s, graph_capture_s, warm_up_s, timed_s, gpu_compute_s, untraced_call_s,
profile_s, trace_write_s, after_windows_s, numerics_s, repeat_runs_s, write_s; empty where the
phase did not run). A column per phase rather than one text column: the seconds sort, sum and
plot as numbers; benchmark.md and the terminal table leave them out to stay readable.

A sweep given a list of an option's values (``--max-new-tokens 16,64``) has a column of that
option after bs (named as the manifest's options: max_new_tokens, src_len, prompt_len, seq_len,
image_size), and speedup compares cells with the same batch size and the same values.

With ``--workload generate`` a cell's timed unit is one whole generation (mean_ms ... p99_ms,
throughput_per_s in sequences/s), and four more columns are filled: ttft_ms (time to first
token, p50), token_p50_ms and token_p99_ms (decode latency per token after the first) and
tokens_per_s (generated tokens per second, batch included); token_agreement is the share of
generated tokens equal to FP32 eager generation's. The seed's benchmark_times.csv (mean, p50,
p90, p99 per backend) is the first columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from profiler.analysis.gpu_offsets import GpuOffset, gpu_offsets
from profiler.analysis.headline import memory_figures, verdicts_between, window_noise
from profiler.analysis.records import TimedVerdicts
from profiler.analysis.roofline import roofline_of
from profiler.analysis.timed_verdict import control_family
from profiler.analysis.verdict import GPU_TIME, LATENCY
from profiler.runs import backends as backend_facts
from profiler.runs.layout import RESULT_FILE, peaks_dir
from profiler.runs.manifest import OK, SweepCell, SweepManifest, axis_options, grid_cells
from profiler.runs.phases import ORDER as PHASE_ORDER
from profiler.runs.result import RunResult, try_read_result
from profiler.runs.samples import ConfigSamples, config_samples

#: the reason of a finished cell whose output holds NaN or Inf: its latency is not one to quote
NOT_FINITE = "output holds NaN or Inf"
PHASE_COLUMNS = ["wall_s", *(f"{phase}_s" for phase in PHASE_ORDER)]
ROOFLINE_COLUMNS = ["tflops", "pct_peak_compute", "gbs", "pct_peak_bandwidth", "flop_per_byte"]
COLUMNS = [
    "model",
    "device",
    "backend",
    "bs",
    "mean_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "gpu_compute_ms",
    "enqueue_ms",
    "bound",
    "throughput_per_s",
    "speedup",
    "speedup_low",
    "speedup_high",
    "verdict",
    "gpu_speedup",
    "gpu_speedup_low",
    "gpu_speedup_high",
    "gpu_verdict",
    "verdict_note",
    "processes",
    "gpus",
    "baseline",
    "ready_s",
    "compile_s",
    "compile_what",
    "rel_l2_error",
    "tensor_core_pct",
    "gpu_util_pct",
    "cv_pct",
    "noise",
    "peak_allocated_mib",
    "peak_reserved_mib",
    "engine_mib",
    *ROOFLINE_COLUMNS,
    "ttft_ms",
    "token_p50_ms",
    "token_p99_ms",
    "tokens_per_s",
    "token_agreement",
    "status",
    "reason",
    "gpu",
    "node",
    "elapsed_s",
    *PHASE_COLUMNS,
]
GENERATION_COLUMNS = ("ttft_ms", "token_p50_ms", "token_p99_ms", "tokens_per_s", "token_agreement")


def roofline_columns(result: RunResult) -> dict[str, Any]:
    """The roofline figures of one cell's result (empty without roofline_inputs)."""
    if result.roofline_inputs is None:
        return {}
    r = roofline_of(result, peaks_dir())
    if r is None:
        return {}
    return {
        "tflops": r.achieved_tflops,
        "pct_peak_compute": r.pct_of_compute,
        "gbs": r.achieved_gbs,
        "pct_peak_bandwidth": r.pct_of_bandwidth,
        "flop_per_byte": r.intensity,
    }


def compile_time(result: RunResult) -> tuple[float | None, str]:
    """The seconds the backend spent compiling (or loading its engines) and what they were
    (profiler.runs.backends: the family's facts)."""
    family = backend_facts.family(result.backend.family)
    if result.backend.compile_s is not None:
        return float(result.backend.compile_s), family.compiled(result.backend.extra)
    if result.backend.cache_load_s is not None:
        return float(result.backend.cache_load_s), "engine cache load"
    if family.compiles_on_first_call:
        return float(result.timing.first_call_s), "first call (torch.compile)"
    return None, ""


def generation_columns(result: RunResult) -> dict[str, Any]:
    """TTFT, per-token p50/p99, tokens/s and token agreement of a --workload generate run."""
    generation = result.generation
    if generation is None:
        return {}
    tokens = result.numerics.tokens if result.numerics else None
    return {
        "ttft_ms": generation.ttft_ms.p50,
        "token_p50_ms": generation.per_token_ms.p50,
        "token_p99_ms": generation.per_token_ms.p99,
        "tokens_per_s": generation.tokens_per_s,
        "token_agreement": tokens.positions_equal if tokens else None,
    }


def axis_columns(manifest: SweepManifest) -> list[str]:
    """The options the sweep was given a list of: a column each, after bs."""
    return [key for key in axis_options() if isinstance(manifest.options.get(key), list)]


@dataclass(frozen=True)
class CellAnalysis:
    """One cell of a sweep, read once: its manifest entry, its result.json (None unless the
    cell finished and the file reads) and its windows (each with the GPU it ran on). The
    benchmark table and the GPU offsets are both built from these."""

    name: str
    cell: SweepCell
    result: RunResult | None
    samples: ConfigSamples


def cell_analyses(sweep_dir: Path, manifest: SweepManifest) -> list[CellAnalysis]:
    """Every cell of the sweep's grid, in the grid's order, each read once."""
    found = []
    for name, cell in grid_cells(manifest):
        path = sweep_dir / name / RESULT_FILE
        result = try_read_result(path) if cell.status == OK else None
        samples = (
            ConfigSamples() if result is None else with_gpus(config_samples(result, path), cell.gpu)
        )
        found.append(CellAnalysis(name, cell, result, samples))
    return found


#: the columns of the benchmark table that hold floats (missing figures: NaN)
FLOAT_COLUMNS = (
    "mean_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "gpu_compute_ms",
    "enqueue_ms",
    "throughput_per_s",
    "speedup",
    "speedup_low",
    "speedup_high",
    "gpu_speedup",
    "gpu_speedup_low",
    "gpu_speedup_high",
    "processes",
    "ready_s",
    "compile_s",
    "rel_l2_error",
    "tensor_core_pct",
    "gpu_util_pct",
    "elapsed_s",
    "cv_pct",
    "peak_allocated_mib",
    "peak_reserved_mib",
    "engine_mib",
    *ROOFLINE_COLUMNS,
    *GENERATION_COLUMNS,
    *PHASE_COLUMNS,
)

#: a cell's run and its samples, as the verdicts read them
_CellSamples = tuple[RunResult | None, ConfigSamples]


def benchmark_table(
    sweep_dir: Path,
    manifest: SweepManifest,
    floors_dir: Path | None = None,
    cells: list[CellAnalysis] | None = None,
) -> pd.DataFrame:
    """One row per cell (the module doc), from ``cells`` (cell_analyses) when given."""
    rows, samples = [], []
    axes = axis_columns(manifest)
    for analysed in cells if cells is not None else cell_analyses(sweep_dir, manifest):
        rows.append(_cell_row(manifest, analysed))
        samples.append((analysed.result, analysed.samples))
    frame = pd.DataFrame(rows).reindex(columns=[*COLUMNS[:4], *axes, *COLUMNS[4:]])
    frame = frame.astype({c: float for c in FLOAT_COLUMNS})
    same = ["bs", *axes]  # speedup: the baseline's cell with the same batch size and values
    keys = [tuple(v) for v in frame[same].itertuples(index=False)]
    base = {key: i for i, key in enumerate(keys) if frame["backend"].iloc[i] == manifest.baseline}
    verdicts = control_family(_cell_verdicts(keys, base, samples, floors_dir))
    is_base = [base.get(key) == i and samples[i][0] is not None for i, key in enumerate(keys)]
    _add_speedups(frame, keys, base, is_base, verdicts)
    return frame


def _cell_row(manifest: SweepManifest, analysed: CellAnalysis) -> dict[str, Any]:
    """A cell's row of the benchmark table, before its speedups."""
    cell, result, found = analysed.cell, analysed.result, analysed.samples
    row = {
        "model": manifest.model,
        "device": "",
        "backend": cell.backend,
        "bs": cell.batch_size,
        **(cell.axis or {}),
        "status": cell.status,
        "reason": cell.reason or "",
        "gpu": cell.gpu or "",
        "node": cell.node or "",
        "elapsed_s": cell.elapsed_s,
        "baseline": manifest.baseline,
    }
    if cell.status == OK and result is None:
        row.update(status="failed", reason="result.json missing or unreadable")
    if result is not None:
        row.update(_result_columns(result, cell.metrics or {}))
        if result.output.finite is False:  # it ran, but what it timed is broken
            row["reason"] = NOT_FINITE
        used = found.for_verdict()
        row["processes"] = len(used) or None
        row["gpus"] = ";".join(sorted({g for g in used.gpus() if g}))  # one CSV cell
        if len(used) > 1:  # the figures a verdict speaks of: over the processes
            row["p50_ms"] = used.geometric_mean("latency")
            row["gpu_compute_ms"] = used.geometric_mean("gpu_time") or row["gpu_compute_ms"]
        row["bound"] = used.bound() or ""
    return row


def _cell_verdicts(
    keys: list[tuple[Any, ...]],
    base: dict[tuple[Any, ...], int],
    samples: list[_CellSamples],
    floors_dir: Path | None,
) -> list[TimedVerdicts | None]:
    """Each cell's verdicts against its baseline cell (None for a baseline, or without one)."""
    found_verdicts: list[TimedVerdicts | None] = []
    for i, key in enumerate(keys):
        j = base.get(key)
        (result, cell_samples), judged = samples[i], None
        if (
            j is not None
            and j != i
            and result is not None
            and (base_result := samples[j][0]) is not None
        ):
            ours, theirs = like_with_like(samples[j][1], cell_samples)
            judged = verdicts_between(base_result, result, ours, theirs, floors_dir)
        found_verdicts.append(judged)
    return found_verdicts


def _add_speedups(
    frame: pd.DataFrame,
    keys: list[tuple[Any, ...]],
    base: dict[tuple[Any, ...], int],
    is_base: list[bool],
    verdicts: list[TimedVerdicts | None],
) -> None:
    """Fill the speedup and verdict columns of ``frame``."""
    p50 = frame["p50_ms"].to_numpy()
    # without latencies to judge (a cell whose latency.csv is gone) the p50 ratio stands alone
    plain = [
        p50[base[key]] / p50[i] if base.get(key) is not None and p50[i] > 0 else math.nan
        for i, key in enumerate(keys)
    ]
    latency = [v.latency if v else None for v in verdicts]
    gpu = [v.gpu_time if v else None for v in verdicts]
    frame["speedup"] = [
        v.speedup if v else (1.0 if own else bare) for v, own, bare in zip(latency, is_base, plain)
    ]
    frame["speedup_low"] = [1 / v.high if v else math.nan for v in latency]
    frame["speedup_high"] = [1 / v.low if v else math.nan for v in latency]
    frame["verdict"] = [
        v.verdict if v else ("baseline" if own else "") for v, own in zip(latency, is_base)
    ]
    frame["gpu_speedup"] = [
        v.speedup if v else (1.0 if own and not math.isnan(g) else math.nan)
        for v, own, g in zip(gpu, is_base, frame["gpu_compute_ms"])
    ]
    frame["gpu_speedup_low"] = [1 / v.high if v else math.nan for v in gpu]
    frame["gpu_speedup_high"] = [1 / v.low if v else math.nan for v in gpu]
    frame["gpu_verdict"] = [
        v.verdict if v else ("baseline" if own and not math.isnan(g) else "")
        for v, own, g in zip(gpu, is_base, frame["gpu_compute_ms"])
    ]
    frame["verdict_note"] = ["; ".join(v.lines) if v else "" for v in verdicts]


#: the figures a sweep's geometric-mean rows summarize over batch sizes
GEOMEAN_FIGURES = ("p50_ms", "gpu_compute_ms", "speedup", "gpu_speedup")


def geomean_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per backend: the geometric mean over its finished cells (batch sizes, and any
    swept option) of p50_ms, gpu_compute_ms and both speedups, each over the cells that have
    the figure (``cells``: the cells behind p50_ms), as pyperf's geometric mean of a suite."""
    finished = frame[(frame["status"] == OK) & (frame["reason"] != NOT_FINITE)]
    rows = []
    for backend in dict.fromkeys(frame["backend"]):
        cells = finished[finished["backend"] == backend]
        row = {"backend": backend, "cells": int(cells["p50_ms"].gt(0).sum())}
        for column in GEOMEAN_FIGURES:
            values = cells[column].astype(float)
            values = values[values > 0]
            row[column] = float(np.exp(np.log(values).mean())) if len(values) else math.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=["backend", "cells", *GEOMEAN_FIGURES])


def cell_samples(sweep_dir: Path, manifest: SweepManifest) -> dict[str, ConfigSamples]:
    """Every finished cell's windows (its processes, each with the GPU it ran on)."""
    return {c.name: c.samples for c in cell_analyses(sweep_dir, manifest) if c.result is not None}


def sweep_gpu_offsets(
    sweep_dir: Path, manifest: SweepManifest, cells: list[CellAnalysis] | None = None
) -> list[GpuOffset]:
    """Each GPU's offset and floor over the sweep's finished cells (profiler.analysis
    .gpu_offsets), from ``cells`` (cell_analyses) when given, on GPU time where the cells
    measured it, else on latency; [] with fewer than two GPUs."""
    cells = cell_analyses(sweep_dir, manifest) if cells is None else cells
    samples = [c.samples for c in cells if c.result is not None]
    return gpu_offsets(samples, GPU_TIME) or gpu_offsets(samples, LATENCY)


def with_gpus(samples: ConfigSamples, gpu: str | None) -> ConfigSamples:
    """Windows without a recorded GPU take the cell's (its own run's GPU)."""
    if not gpu:
        return samples
    return ConfigSamples(
        tuple(w if w.gpu else msgspec.structs.replace(w, gpu=gpu) for w in samples.windows)
    )


def like_with_like(a: ConfigSamples, b: ConfigSamples) -> tuple[ConfigSamples, ConfigSamples]:
    """Two cells' windows as the verdict takes them: where both cells have windows on a GPU in
    common, only the windows on their common GPUs (two GPUs of one host differ in clocks,
    temperature and memory: a GPU difference must not read as a backend difference); otherwise
    all of them."""
    ga, gb = set(a.gpus()), set(b.gpus())
    common = {g for g in ga if g} & {g for g in gb if g}
    if common and (ga | gb) != common:
        return a.on_gpus(common), b.on_gpus(common)
    return a, b


def _result_columns(result: RunResult, metrics: dict[str, Any]) -> dict[str, Any]:
    timing = result.timing
    compile_s, compile_what = compile_time(result)
    return {
        "device": (result.environment.gpu or {}).get("name") or "CPU",
        "mean_ms": timing.mean_ms,
        "p50_ms": timing.p50_ms,
        "gpu_compute_ms": timing.gpu_compute.gpu_p50_ms if timing.gpu_compute else None,
        "enqueue_ms": timing.gpu_compute.enqueue_p50_ms if timing.gpu_compute else None,
        "p90_ms": timing.p90_ms,
        "p99_ms": timing.p99_ms,
        "throughput_per_s": timing.throughput_samples_per_s,
        "ready_s": timing.prepare_s + timing.first_call_s,
        "compile_s": compile_s,
        "compile_what": compile_what,
        "rel_l2_error": result.numerics.rel_l2_error if result.numerics else None,
        "tensor_core_pct": metrics.get("tensor_core_pct"),
        "gpu_util_pct": metrics.get("gpu_util_pct"),
        **_noise_and_memory(result),
        **roofline_columns(result),
        **generation_columns(result),
        **phase_columns(result),
    }


def phase_columns(result: RunResult) -> dict[str, Any]:
    """wall_s and <phase>_s of one cell's result (empty for runs recorded before phases)."""
    timing = result.timing
    if not timing.phases_s:
        return {}
    return {
        "wall_s": timing.wall_s,
        **{f"{phase}_s": seconds for phase, seconds in timing.phases_s.items()},
    }


def _noise_and_memory(result: RunResult) -> dict[str, Any]:
    window = window_noise(result)
    memory = memory_figures(result)
    return {
        "cv_pct": None if window is None else 100 * window.cv,
        "noise": "; ".join(w.split(":")[0] for w in window.warnings) if window else "",
        "peak_allocated_mib": memory.peak_allocated_mib,
        "peak_reserved_mib": memory.peak_reserved_mib,
        "engine_mib": memory.engine_mib,
    }

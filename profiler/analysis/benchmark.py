"""A sweep's benchmark table: one typed row per cell (profiler.analysis.records.BenchmarkCell),
built in one pass from the manifest and each cell's one read of its result.json and windows
(cell_analyses -> cell_figures -> the speedups against the baseline's cells, the verdicts held
over the sweep -> benchmark_rows); profiler.report.benchmark_view writes the rows as
benchmark.csv and benchmark.md and prints them, column spec by column spec; geomeans sums them
up per backend; benchmark_frame lays them out as one frame for the plots and the HTML page's
table.

Columns (times in ms, as the timed window measured them; the trace figures come from the
profiled steps, summarized with profiler.trace):

model, device, backend, bs, mean_ms, p50_ms, p90_ms, p99_ms (with several processes per cell,
every latency column comes from the same processes: each process's figure from its own window,
then their geometric mean; p50_ms is the figure the latency speedup and verdict speak of),
gpu_compute_ms and enqueue_ms (trtexec's split of one call: the device's work with launch gaps
excluded, the geometric mean over processes of each process's GPU-time p50, and the host's
launch time, the geometric mean of each process's enqueue p50; empty where not measured),
bound (launch-bound, near the launch bound or GPU-bound: latency and enqueue against GPU time,
on the geometric means of the processes' medians; profiler.runs.samples.bound_word),
throughput_per_s (bs over mean_ms),
speedup (latency: the baseline's p50 / this cell's p50 at the same batch size; empty when the
baseline cell did not finish), speedup_low and speedup_high (its 95 % interval) and verdict
(faster, slower, same within ±2 %, undecided; "baseline" on the baseline's own cells), and the
same four for GPU time (gpu_speedup, gpu_speedup_low, gpu_speedup_high, gpu_verdict), each
figure's verdicts held to a false discovery rate of 5 % over the sweep's cells
(profiler.analysis.timed_verdict, profiler.analysis.verdict; the intervals are the raw 95 %
ones), verdict_note (launch-bound explanations and disagreements: the view writes them from the
cell's verdicts record, the frame's column ``verdicts``), processes (the timed
windows behind the cell's figures, each in its own process: --processes), gpus (the GPUs those
windows ran on, ";"-joined; a verdict between two cells uses only their windows on the GPUs
they share, when they share one), baseline, ready_s (prepare + first call: from handing the model to
the backend to the first output, every backend), compile_s and compile_what (TensorRT: engine build
time, with ModelOpt's extension build for ttrt_fp8/ttrt_int8, or the engine cache load time; ONNX
Runtime: export + session creation, or the session alone from a cached ONNX file; Inductor: the
first call, where torch.compile compiles; empty for eager and TorchScript), rel_l2_error (vs the
FP32 eager reference; empty for pytorch_fp32, the reference itself), tensor_core_pct (time in Tensor
Core kernels, % of kernel time: a kernel that uses Tensor Cores at all counts whole; not how busy
the tensor pipe was), gpu_util_pct, cv_pct (the coefficient of variation inside a window: with
several processes the geometric mean of each process's), noise (the warnings of the cell's own
run's window, ";"-joined: that one window's),
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from profiler.analysis.gpu_offsets import GpuOffset, gpu_offsets
from profiler.analysis.headline import (
    machine_noise,
    memory_figures,
    phase_comparisons,
    verdicts_between,
    window_noise,
)
from profiler.analysis.records import (
    BenchmarkCell,
    PhaseComparison,
    TimedVerdicts,
    Verdict,
    plain,
)
from profiler.analysis.roofline import Roofline, roofline_of
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
#: benchmark.csv's columns: the fields of a cell's record (BenchmarkCell), the swept options'
#: left out (axis_columns: a sweep has a column of an option only when it was given a list of it)
COLUMNS = [
    name
    for name in BenchmarkCell.__struct_fields__
    if name not in axis_options() and name != "phases"
]
GENERATION_COLUMNS = ("ttft_ms", "token_p50_ms", "token_p99_ms", "tokens_per_s", "token_agreement")
#: the columns a sweep of generations adds: TPOT and each phase's speedup and verdicts
PHASE_COLUMNS_OF_GENERATION = (
    "tpot_ms",
    "ttft_speedup",
    "ttft_verdict",
    "ttft_gpu_verdict",
    "tpot_speedup",
    "tpot_verdict",
    "tpot_gpu_verdict",
)
#: fields of a cell's record that are no benchmark.csv column (their words are: verdict_note)
RECORD_ONLY = ("verdicts", "phases")


def _roofline(result: RunResult) -> Roofline | None:
    """One cell's roofline against this machine's ceilings (None without roofline_inputs)."""
    return None if result.roofline_inputs is None else roofline_of(result, peaks_dir())


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
        samples = ConfigSamples() if result is None else config_samples(result, path, cell.gpu)
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
    "tpot_ms",
    "ttft_speedup",
    "tpot_speedup",
    *PHASE_COLUMNS,
)


def benchmark_table(
    sweep_dir: Path,
    manifest: SweepManifest,
    floors_dir: Path | None = None,
    cells: list[CellAnalysis] | None = None,
) -> pd.DataFrame:
    """One row per cell (the module doc), from ``cells`` (cell_analyses) when given: the frame
    of benchmark_rows' typed rows."""
    return benchmark_frame(benchmark_rows(sweep_dir, manifest, floors_dir, cells), manifest)


def benchmark_rows(
    sweep_dir: Path,
    manifest: SweepManifest,
    floors_dir: Path | None = None,
    cells: list[CellAnalysis] | None = None,
) -> list[BenchmarkCell]:
    """One typed row per cell, in the grid's order, from ``cells`` (cell_analyses) when given:
    each cell's own figures, taken once from its one read (cell_figures), then each figure's
    speedup and verdict against the baseline's cell with the same batch size and swept values,
    the verdicts held to a false discovery rate over the sweep's cells."""
    analysed = cell_analyses(sweep_dir, manifest) if cells is None else cells
    figures = [cell_figures(manifest, c) for c in analysed]
    axes = axis_columns(manifest)
    keys = [(f.bs, *(getattr(f, key) for key in axes)) for f in figures]
    base = {key: i for i, key in enumerate(keys) if figures[i].backend == manifest.baseline}
    found = [
        _verdicts(analysed[i], analysed[j], floors_dir)
        if (j := base.get(key)) not in (None, i)
        else None
        for i, key in enumerate(keys)
    ]
    phases = _phase_family(
        [
            _phases(analysed[i], analysed[j], floors_dir)
            if (j := base.get(key)) not in (None, i)
            else None
            for i, key in enumerate(keys)
        ]
    )
    rows = []
    for i, (cell, verdicts) in enumerate(zip(figures, control_family(found))):
        j = base.get(keys[i])
        own = j == i and analysed[i].result is not None
        row = with_speedups(cell, None if j is None else figures[j], own, verdicts)
        rows.append(with_phases(row, phases[i], own, _gpu_phases(analysed[i].result)))
    return rows


def _phases(
    cell: CellAnalysis, base: CellAnalysis, floors_dir: Path | None
) -> list[PhaseComparison] | None:
    """A generation cell's TTFT and TPOT against its baseline cell (None where either did not
    finish or timed no phases)."""
    if cell.result is None or base.result is None:
        return None
    if not base.samples.phase_names or not cell.samples.phase_names:
        return None
    ours, theirs = like_with_like(base.samples, cell.samples)
    found = phase_comparisons(
        ours, theirs, machine=machine_noise(base.result, cell.result, floors_dir=floors_dir)
    )
    return found or None


def _phase_family(
    found: list[list[PhaseComparison] | None],
) -> list[list[PhaseComparison] | None]:
    """Each phase's verdicts held to a false discovery rate over the sweep's cells, as the
    whole call's (control_family)."""
    by_phase: dict[str, list[TimedVerdicts | None]] = {}
    for comparisons in found:
        present = {c.phase: c.verdicts for c in comparisons or []}
        for phase in ("ttft", "tpot"):
            by_phase.setdefault(phase, []).append(present.get(phase))
    held = {phase: control_family(verdicts) for phase, verdicts in by_phase.items()}
    out: list[list[PhaseComparison] | None] = []
    for i, comparisons in enumerate(found):
        out.append(
            None
            if comparisons is None
            else [msgspec.structs.replace(c, verdicts=held[c.phase][i]) for c in comparisons]
        )
    return out


def _gpu_phases(result: RunResult | None) -> set[str]:
    """The phases whose GPU time the cell's run measured."""
    found = result.generation.phase_gpu if result and result.generation else None
    return {phase for phase, gpu in (found or {}).items() if gpu.not_measured is None}


def with_phases(
    cell: BenchmarkCell,
    phases: list[PhaseComparison] | None,
    own: bool,
    gpu_measured: set[str] | None = None,
) -> BenchmarkCell:
    """A generation cell's row with each phase's speedup and verdicts over the baseline's
    cell (``own``: the baseline's own cell, "baseline"; on GPU time only for the phases whose
    GPU time it measured, ``gpu_measured``)."""
    if cell.ttft_ms is None:  # not a generation
        return cell
    words: dict[str, Any] = {}
    for phase in ("ttft", "tpot"):
        comparison = next((c for c in phases or [] if c.phase == phase), None)
        verdicts = comparison.verdicts if comparison else None
        latency = verdicts.latency if verdicts else None
        gpu = verdicts.gpu_time if verdicts else None
        words[f"{phase}_speedup"] = latency.speedup if latency else (1.0 if own else None)
        words[f"{phase}_verdict"] = latency.verdict if latency else ("baseline" if own else "")
        own_gpu = own and phase in (gpu_measured or set())
        words[f"{phase}_gpu_verdict"] = gpu.verdict if gpu else ("baseline" if own_gpu else "")
    return msgspec.structs.replace(cell, phases=phases, **words)


def benchmark_frame(rows: list[BenchmarkCell], manifest: SweepManifest) -> pd.DataFrame:
    """The typed rows as one frame, in one pass (benchmark.csv's columns, the swept options'
    after bs; a missing figure NaN), for the plots and the HTML page's table. In verdict_note's
    place the column ``verdicts`` holds each cell's TimedVerdicts (None without)."""
    axes = axis_columns(manifest)
    found = [
        {
            **{k: v for k, v in plain(row).items() if v is not None and k != "phases"},
            "verdicts": row.verdicts,
        }
        for row in rows
    ]
    columns = [*COLUMNS[:4], *axes, *COLUMNS[4:]]
    if manifest.options.get("workload", "forward") != "generate":
        columns = [c for c in columns if c not in PHASE_COLUMNS_OF_GENERATION]
    frame = pd.DataFrame(found).reindex(columns=columns)
    return frame.astype({c: float for c in FLOAT_COLUMNS if c in frame.columns})


def cell_figures(manifest: SweepManifest, analysed: CellAnalysis) -> BenchmarkCell:
    """A cell's own figures, from its one read (CellAnalysis): everything of its row but the
    speedups against the baseline's cell (with_speedups)."""
    cell, result = analysed.cell, analysed.result
    where = {key: value for key, value in (cell.axis or {}).items() if key in axis_options()}
    if result is None:
        figures = BenchmarkCell(
            model=manifest.model,
            device="",
            backend=cell.backend,
            bs=cell.batch_size,
            baseline=manifest.baseline,
            status="failed" if cell.status == OK else cell.status,
            reason=_reason(cell, result),
            gpu=cell.gpu or "",
            node=cell.node or "",
            elapsed_s=cell.elapsed_s,
        )
        return msgspec.structs.replace(figures, **where)
    return msgspec.structs.replace(_finished(manifest, cell, result, analysed.samples), **where)


def _reason(cell: SweepCell, result: RunResult | None) -> str:
    if cell.status == OK and result is None:
        return "result.json missing or unreadable"
    if result is not None and result.output.finite is False:  # it ran, but what it timed is
        return NOT_FINITE  # broken
    return cell.reason or ""


def _verdicts(
    cell: CellAnalysis, base: CellAnalysis, floors_dir: Path | None
) -> TimedVerdicts | None:
    """A cell's verdicts against its baseline cell (None where either did not finish), on the
    windows both ran on the same GPUs where they share one (like_with_like)."""
    if cell.result is None or base.result is None:
        return None
    ours, theirs = like_with_like(base.samples, cell.samples)
    return verdicts_between(base.result, cell.result, ours, theirs, floors_dir)


def with_speedups(
    cell: BenchmarkCell, base: BenchmarkCell | None, own: bool, verdicts: TimedVerdicts | None
) -> BenchmarkCell:
    """A cell's row: its figures with each figure's speedup over ``base`` (the baseline's cell
    at its batch size and swept values, None without one), its 95 % interval and its verdict
    (``verdicts``: the family's); ``own``: the cell is the baseline's own finished cell."""
    latency = verdicts.latency if verdicts else None
    gpu = verdicts.gpu_time if verdicts else None
    # without latencies to judge (a cell whose latency.csv is gone) the p50 ratio stands alone
    theirs, ours = _number(base.p50_ms) if base else None, _number(cell.p50_ms)
    bare = theirs / ours if theirs is not None and ours is not None and ours > 0 else None
    gpu_baseline = own and _number(cell.gpu_compute_ms) is not None
    return msgspec.structs.replace(
        cell,
        speedup=latency.speedup if latency else (1.0 if own else bare),
        speedup_low=_low(latency),
        speedup_high=_high(latency),
        verdict=latency.verdict if latency else ("baseline" if own else ""),
        gpu_speedup=gpu.speedup if gpu else (1.0 if gpu_baseline else None),
        gpu_speedup_low=_low(gpu),
        gpu_speedup_high=_high(gpu),
        gpu_verdict=gpu.verdict if gpu else ("baseline" if gpu_baseline else ""),
        verdicts=verdicts,
    )


def _low(v: Verdict | None) -> float | None:
    """A speedup's 95 % low end (A / B: the ratio's high end inverted)."""
    return 1 / v.high if v else None


def _high(v: Verdict | None) -> float | None:
    return 1 / v.low if v else None


def _number(value: float | None) -> float | None:
    """A figure, None where it is missing or NaN."""
    return None if value is None or math.isnan(value) else value


#: the figures a sweep's geometric-mean rows summarize over batch sizes
GEOMEAN_FIGURES = ("p50_ms", "gpu_compute_ms", "speedup", "gpu_speedup")


@dataclass(frozen=True)
class Geomean:
    """One backend's geometric mean over its finished cells (batch sizes, and any swept
    option) of each figure, over the cells that have it (NaN where none has); ``cells``: the
    cells behind p50_ms."""

    backend: str
    cells: int
    p50_ms: float
    gpu_compute_ms: float
    speedup: float
    gpu_speedup: float


def geomeans(rows: Sequence[BenchmarkCell]) -> list[Geomean]:
    """One row per backend, in the sweep's order: the geometric mean over its finished cells of
    p50_ms, gpu_compute_ms and both speedups, each over the cells that have the figure, as
    pyperf's geometric mean of a suite."""
    finished = [r for r in rows if r.status == OK and r.reason != NOT_FINITE]

    def mean(values: list[float | None]) -> float:
        kept = np.asarray([v for v in values if v is not None and v > 0], dtype=float)
        return float(np.exp(np.log(kept).mean())) if len(kept) else math.nan

    found = []
    for backend in dict.fromkeys(r.backend for r in rows):
        cells = [r for r in finished if r.backend == backend]
        found.append(
            Geomean(
                backend=backend,
                cells=sum(1 for r in cells if r.p50_ms is not None and r.p50_ms > 0),
                p50_ms=mean([r.p50_ms for r in cells]),
                gpu_compute_ms=mean([r.gpu_compute_ms for r in cells]),
                speedup=mean([r.speedup for r in cells]),
                gpu_speedup=mean([r.gpu_speedup for r in cells]),
            )
        )
    return found


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


def _finished(
    manifest: SweepManifest, cell: SweepCell, result: RunResult, samples: ConfigSamples
) -> BenchmarkCell:
    """A finished cell's figures: its timed window (over its processes, the geometric means a
    verdict speaks of), the trace's metrics, noise, memory, roofline and generation figures,
    and where its seconds went."""
    timing, gpu_compute, metrics = result.timing, result.timing.gpu_compute, cell.metrics or {}
    used = samples.for_verdict()
    several = len(used) > 1
    gpu_ms = gpu_compute.gpu_p50_ms if gpu_compute else None
    compile_s, compile_what = compile_time(result)
    window, memory, roofline = window_noise(result), memory_figures(result), _roofline(result)
    pooled = process_figures(used, cell.batch_size) if several else {}
    figures = BenchmarkCell(
        model=manifest.model,
        device=(result.environment.gpu or {}).get("name") or "CPU",
        backend=cell.backend,
        bs=cell.batch_size,
        mean_ms=pooled.get("mean_ms", timing.mean_ms),
        p50_ms=used.geometric_mean("latency") if several else timing.p50_ms,
        p90_ms=pooled.get("p90_ms", timing.p90_ms),
        p99_ms=pooled.get("p99_ms", timing.p99_ms),
        gpu_compute_ms=(used.geometric_mean("gpu_time") or gpu_ms) if several else gpu_ms,
        enqueue_ms=pooled.get("enqueue_ms", gpu_compute.enqueue_p50_ms if gpu_compute else None),
        bound=used.bound() or "",
        throughput_per_s=pooled.get("throughput_per_s", timing.throughput_samples_per_s),
        processes=len(used) or None,
        gpus=";".join(sorted({g for g in used.gpus() if g})),  # one CSV cell
        baseline=manifest.baseline,
        ready_s=timing.prepare_s + timing.first_call_s,
        compile_s=compile_s,
        compile_what=compile_what,
        rel_l2_error=result.numerics.rel_l2_error if result.numerics else None,
        tensor_core_pct=_float(metrics.get("tensor_core_pct")),
        gpu_util_pct=_float(metrics.get("gpu_util_pct")),
        cv_pct=pooled.get("cv_pct", None if window is None else 100 * window.cv),
        noise="; ".join(w.split(":")[0] for w in window.warnings) if window else "",
        peak_allocated_mib=memory.peak_allocated_mib,
        peak_reserved_mib=memory.peak_reserved_mib,
        engine_mib=memory.engine_mib,
        tflops=roofline.achieved_tflops if roofline else None,
        pct_peak_compute=roofline.pct_of_compute if roofline else None,
        gbs=roofline.achieved_gbs if roofline else None,
        pct_peak_bandwidth=roofline.pct_of_bandwidth if roofline else None,
        flop_per_byte=roofline.intensity if roofline else None,
        **_generation_figures(result, used),
        status=cell.status,
        reason=_reason(cell, result),
        gpu=cell.gpu or "",
        node=cell.node or "",
        elapsed_s=cell.elapsed_s,
    )
    return msgspec.structs.replace(figures, **phase_seconds(result))


def process_figures(samples: ConfigSamples, batch_size: int) -> dict[str, float]:
    """A row's latency figures from the processes its p50 comes from: each process's mean,
    p90, p99, coefficient of variation and enqueue p50 from its own window, their geometric
    mean over the processes (the p50's rule), and the throughput of that mean."""
    windows = [w for w in samples.windows if len(w.latency_ms)]
    if not windows:
        return {}

    def geomean(values: list[float]) -> float | None:
        kept = [v for v in values if v > 0 and math.isfinite(v)]
        return math.exp(sum(map(math.log, kept)) / len(kept)) if kept else None

    per = [np.asarray(w.latency_ms, dtype=float) for w in windows]
    cvs = [100 * float(x.std(ddof=1) / x.mean()) for x in per if len(x) > 1 and x.mean() > 0]
    found = {
        "mean_ms": geomean([float(x.mean()) for x in per]),
        "p90_ms": geomean([float(np.percentile(x, 90)) for x in per]),
        "p99_ms": geomean([float(np.percentile(x, 99)) for x in per]),
        "cv_pct": 0.0 if cvs and not any(cvs) else geomean(cvs),
        "enqueue_ms": geomean([float(np.median(w.enqueue_ms)) for w in windows if w.enqueue_ms]),
    }
    if found["mean_ms"]:
        found["throughput_per_s"] = batch_size * 1000 / found["mean_ms"]
    return {k: v for k, v in found.items() if v is not None}


def _generation_figures(result: RunResult, used: ConfigSamples) -> dict[str, Any]:
    """A generation cell's TTFT, TPOT (over its processes), ITL, tokens/s and token agreement
    (nothing for another workload)."""
    generation = result.generation
    if generation is None:
        return {}
    tokens = result.numerics.tokens if result.numerics else None
    tpot = used.phase("tpot")
    return {
        "ttft_ms": generation.ttft_ms.p50,
        "tpot_ms": tpot.geometric_mean("latency") if len(tpot) else None,
        "token_p50_ms": generation.per_token_ms.p50,
        "token_p99_ms": generation.per_token_ms.p99,
        "tokens_per_s": generation.tokens_per_s,
        "token_agreement": tokens.positions_equal if tokens else None,
    }


def _float(value: Any) -> float | None:
    """A figure of the manifest's metrics (JSON: an int where it is whole) as a float."""
    return None if value is None else float(value)


def phase_seconds(result: RunResult) -> dict[str, float | None]:
    """wall_s and <phase>_s of one cell's result, the phases of PHASE_COLUMNS (empty for runs
    recorded before phases)."""
    timing = result.timing
    if not timing.phases_s:
        return {}
    found = {"wall_s": timing.wall_s, **{f"{k}_s": v for k, v in timing.phases_s.items()}}
    return {key: seconds for key, seconds in found.items() if key in PHASE_COLUMNS}

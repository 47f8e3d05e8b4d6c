"""The typed records the analysis returns and --json prints: a run's headline, a compare's
timed headline with both verdicts, why two runs differ, a sweep's cell (a row of its benchmark
table), advise's plan, its trial (trial.json), its baseline and what each experiment measured
with the projection held against it. msgspec Structs, read by attribute; ``plain`` turns one
into the JSON values a command prints, and profiler.cli.documents builds the published schemas
(docs/schema/) from the same types.

Only msgspec and the records of profiler.runs here (no numpy, no pandas): the command line
imports these types to describe its documents before any analysis is loaded.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec

from profiler.runs.gpu_record import GpuSample
from profiler.runs.result import GpuCompute, NoiseStats, RepeatSpread
from profiler.trace.diff_rows import (
    CategoryRow,
    Change,
    CpuOperatorRow,
    KernelRow,
    OperatorRow,
    OverviewRow,
)

Unset = msgspec.UnsetType
UNSET = msgspec.UNSET


def _numpy_scalar(value: Any) -> Any:
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    raise TypeError(f"no JSON value for {type(value).__name__}")


def plain(record: Any) -> Any:
    """A record (a msgspec Struct, or data holding some) as JSON values: what --json prints."""
    return msgspec.to_builtins(record, enc_hook=_numpy_scalar)


#: a verdict's word (B against A), the figure it is on and the design it used
#: (profiler.analysis.verdict)
Word = Literal["faster", "slower", "same", "undecided"]
FigureName = Literal["latency", "gpu_time"]
#: how the host and the GPU share a call (profiler.runs.samples.bound_word): the host paces it,
#: nearly, or the GPU does
BoundWord = Literal["launch-bound", "near the launch bound", "GPU-bound"]
Design = Literal["paired", "unpaired", "floor"]
FloorSource = Literal["default", "given"]
#: why a verdict says undecided whatever its interval: one process a side on a CPU whose floor
#: `noise` has not measured (profiler.analysis.verdict)
Withheld = Literal["cpu-one-process"]


class Record(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A record of figures: a key the type does not name is refused when read back."""


class NoiseSource(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where a verdict's floor or within-process correlation (rho) came from: ``noise`` (kept
    on this machine by `profile.py noise` for the runs' machine kind, with when and where it
    measured it), ``recorded`` (the floor a run recorded when it ran, measured by `noise` on
    its machine), ``given`` (passed in, no provenance) or ``default`` (the figure's H100
    constants, profiler.analysis.verdict.FIGURES)."""

    kind: Literal["noise", "recorded", "given", "default"]
    machine: str | None = None  # the machine kind: a GPU's name, "CPU <model>"
    host: str | None = None
    measured: str | None = None  # when `noise` measured it (ISO time)


class Verdict(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """B against A on one figure: the ratio of the geometric means of the per-process medians
    (B / A), its 95 % interval, the 90 % interval the "same" test used, the verdict (faster /
    slower / same / undecided: B relative to A) and how it was reached: the design, its degrees
    of freedom, the floor and the GPUs (profiler.analysis.verdict.compare; the views say it in
    words, profiler.report.sentences.verdict_method)."""

    ratio: float
    low: float
    high: float
    verdict: Word
    tolerance: float
    processes_a: int
    processes_b: int
    noise_floor: float | None  # the between-process CV assumed (design "floor")
    #: where noise_floor came from: "default" (the figure's worst case) or "given" (measured)
    floor_source: FloorSource | None = None
    figure: FigureName = "latency"
    design: Design = "unpaired"
    p_value: float = 1.0
    same_low: float | None = None  # the 90 % interval of the equivalence test
    same_high: float | None = None
    pairs: int | None = None  # design "paired": rounds with both configs
    #: the t-interval's degrees of freedom (paired, unpaired); None: a normal interval (floor)
    df: float | None = None
    #: the floor given that was no spread (below 0, not finite, above the largest): the
    #: figure's default stood in
    floor_refused: float | None = None
    #: the GPU of each side's windows (an index, "?" where unknown), when they ran on several
    gpus_a: list[str] | None = None
    gpus_b: list[str] | None = None
    #: the false discovery rate the verdict was held to over its family (a sweep's cells,
    #: advise's experiments): the comparisons in the family and q (Benjamini-Hochberg)
    fdr_comparisons: int | None = None
    fdr_q: float | None = None
    #: the within-process correlation that chose the design, where it did (both sides two
    #: processes or more, two rounds or more in common), and where it came from
    rho: float | None = None
    rho_source: NoiseSource | None = None
    #: where the floor (design "floor") came from
    floor_from: NoiseSource | None = None
    #: why the verdict is undecided whatever its interval says (None: it says what it found)
    withheld: Withheld | None = None

    @property
    def speedup(self) -> float:
        """A / B: above 1 when B is faster."""
        return 1 / self.ratio

    @property
    def half_width(self) -> float:
        """The 95 % interval's relative half-width, on the log scale."""
        return (math.log(self.high) - math.log(self.low)) / 2


class Bound(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One config's classification over its processes (profiler.runs.samples: the rule on the
    geometric means, over the processes, of each process's latency, GPU time and enqueue
    medians, ms, which it carries) and the processes each word holds in."""

    word: BoundWord | None  # None: no GPU time or enqueue measured
    launch_bound_processes: int = 0
    classified_processes: int = 0
    enqueue_p50_ms: float | None = None
    gpu_p50_ms: float | None = None
    latency_p50_ms: float | None = None
    gpu_bound_processes: int = 0


class TimedVerdicts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """B against A on both figures; ``lead`` names the verdict to quote first ("latency" when
    both configs are GPU-bound, "both" otherwise); the views say why in words
    (profiler.report.sentences.note_lines)."""

    latency: Verdict | None
    gpu_time: Verdict | None
    bound_a: Bound
    bound_b: Bound
    #: "latency": both configs GPU-bound, latency leads and GPU time is the cross-check;
    #: "both": read both
    lead: Literal["latency", "both"]
    #: a side launch-bound or near the launch bound: the processes a side the latency verdict
    #: would need for ±5 %
    latency_processes_for_5pct: int | None = None
    #: the --cuda-graphs figure of the side the host paces, when one was measured (ms)
    cuda_graphs_ms: float | None = None

    @property
    def launch_bound(self) -> bool:
        return "launch-bound" in (self.bound_a.word, self.bound_b.word)

    @property
    def host_paced(self) -> bool:
        """A side launch-bound or near the launch bound: its latency spreads with the host."""
        return bool(
            {"launch-bound", "near the launch bound"} & {self.bound_a.word, self.bound_b.word}
        )

    @property
    def disagree(self) -> bool:
        """Both figures decided, and not the same way."""
        words = [v.verdict for v in (self.latency, self.gpu_time) if v is not None]
        return len(words) == 2 and "undecided" not in words and words[0] != words[1]

    @property
    def split(self) -> bool:
        """Both configs GPU-bound, one figure undecided and the other faster or slower."""
        words = {v.verdict for v in (self.latency, self.gpu_time) if v is not None}
        gpu_bound = self.bound_a.word == self.bound_b.word == "GPU-bound"
        return gpu_bound and len(words) == 2 and "undecided" in words and "same" not in words


class GpuComputeFigures(GpuCompute, frozen=True, omit_defaults=False, forbid_unknown_fields=True):
    """result.json's timing.gpu_compute with every key, defaults included."""


class TimedFigures(Record):
    """A run's timed window as result.json recorded it (profiler.runs.result.TimingStats): p50,
    p90, p99 (ms), throughput (samples/s), iterations, the window's CV and IQR, and GPU compute
    and enqueue time beside it; ``device`` in a compare's sides ("cpu": no GPU time to judge)."""

    p50_ms: float
    p90_ms: float
    p99_ms: float
    throughput_samples_per_s: float
    iters: int
    warmup_iters: int
    timer: str
    iterations_chosen_by: str | None
    cv: float | None
    iqr_ms: float | None
    noise_warnings: list[str] | None
    repeat_runs: RepeatSpread | None
    gpu_compute: GpuComputeFigures | None
    device: str | Unset = UNSET


class WindowNoise(NoiseStats, frozen=True, forbid_unknown_fields=True):
    """The noise of the timed window (profiler.runs.result.NoiseStats); a window read back from
    latency.csv (a run recorded before noise was) was timed once and has no ``repeat_runs``."""

    # the key left out, as --json printed it, rather than null
    repeat_runs: RepeatSpread | None | Unset = UNSET  # type: ignore[assignment]


class MemoryFigures(Record):
    """Peak PyTorch-allocator memory of the timed window and the TensorRT engines' device
    memory, in MiB; ``note`` says "n/a (CPU)" on a CPU run and "not recorded" for runs made
    before memory was recorded."""

    peak_allocated_mib: float | None
    peak_reserved_mib: float | None
    engine_mib: float | None
    note: str | None


class GpuStateFigures(Record):
    """The GPU's state around the timed window: the record's fields (profiler.runs.gpu_record
    .GpuState) and what is derived from it, kept as values: the SM clock over the window and
    the throttle reasons (idle left out); the views say it in one line
    (profiler.report.sentences.gpu_state_line)."""

    not_recorded: str | None
    device: str | None
    max_sm_clock_mhz: int | None
    before: GpuSample | None
    after: GpuSample | None
    power_limited_ms: float | None
    thermal_limited_ms: float | None
    load_average: tuple[float, float, float] | None
    cpus: int | None
    sm_clock_mhz: float | None
    throttle_reasons: list[str]


class TailFigure(Record):
    """A tail percentile of a window (p90, p99; ms) with its distribution-free 95 % interval
    (profiler.analysis.tails): the order statistics ``low_rank`` and ``high_rank`` (1 = the
    smallest of ``iterations`` values) and their values; an end the window is too small for is
    None (``needed``: the iterations an interval with both ends takes); ``coverage``: the
    probability the interval holds the percentile, at least 0.95 where both ends are there."""

    percentile: int
    value_ms: float
    low_ms: float | None
    high_ms: float | None
    low_rank: int | None
    high_rank: int | None
    iterations: int
    needed: int
    coverage: float


class IntervalFigure(Record):
    """One figure of a generation over a config's processes: the geometric mean of the
    per-process values, its 95 % interval (a t-interval on the logs; None with one process:
    one process says nothing of the spread between processes) and the between-process CV."""

    figure: Literal["TTFT", "TPOT", "ITL p50", "ITL p99", "tokens/s"]
    unit: Literal["ms", "tokens/s"]
    value: float
    low: float | None
    high: float | None
    processes: int
    cv: float | None = None


class GenerationFigures(Record):
    """A generation's figures over a config's processes (profiler.analysis.generation): TTFT,
    TPOT, inter-token latency p50 and p99, tokens/s, each with its interval; each phase's
    classification (launch-bound: the host's launches pace it)."""

    figures: list[IntervalFigure]
    ttft_bound: BoundWord | None = None
    tpot_bound: BoundWord | None = None
    #: the run's own process: each phase's GPU time and enqueue (result.json
    #: generation.phase_gpu: "ttft", "tpot"), or why not measured
    phase_gpu: dict[str, GpuCompute] | None = None


class Headline(Record):
    """The run's timed window beside the trace: what the headline of `summarize` shows."""

    timed: TimedFigures
    noise: WindowNoise | None
    memory: MemoryFigures
    config: str
    profiled_step_ms: float | None
    profiler_overhead_ratio: float | None
    gpu_state: GpuStateFigures
    #: a generation's TTFT, TPOT, ITL and tokens/s over the run's processes (None otherwise)
    generation: GenerationFigures | None = None
    #: the timed window's p90 and p99 with their order-statistic intervals, from its
    #: latency.csv (empty when the file is not there)
    tails: list[TailFigure] = msgspec.field(default_factory=list)
    #: the time with at least one kernel running in a profiled step (ms, the trace's mean over
    #: its steps; None without GPU work), and the GPU's utilization it makes of the timed p50
    #: (what a caller's call keeps the GPU busy) and of the profiled step (the trace's own
    #: "GPU utilization"), % (profiler.analysis.headline.utilization)
    kernel_ms_per_step: float | None = None
    gpu_utilization_timed_pct: float | None = None
    gpu_utilization_profiled_pct: float | None = None


class FigureOverProcesses(Record):
    """One figure over a config's processes: the geometric mean of the per-process medians,
    their range (ms) and their between-process CV."""

    geomean_ms: float | None
    min_ms: float
    max_ms: float
    processes: int
    #: the between-process CV of the medians; None with one process
    cv: float | None = None


class ProcessFigures(Record):
    """What a config's processes measured, over the processes a verdict uses (pilot rounds
    left out): each figure (FigureOverProcesses, None where no process measured it) and the
    config's classification (launch-bound, near the launch bound or GPU-bound) with the
    processes each word holds in."""

    processes: int
    pilot_processes: int
    latency: FigureOverProcesses | None
    gpu_time: FigureOverProcesses | None
    enqueue: FigureOverProcesses | None
    bound: BoundWord | None
    launch_bound_processes: int
    classified_processes: int
    gpu_bound_processes: int = 0


class PhaseComparison(Record):
    """One phase of a generation judged on its own, B against A: "ttft" (the prefill and its
    token) or "tpot" (the mean decode step): each side's processes' figures of that phase,
    the speedups (A / B of the geometric means) and both verdicts (latency, GPU time)."""

    phase: Literal["ttft", "tpot"]
    processes_a: ProcessFigures
    processes_b: ProcessFigures
    speedup_x: float | None
    gpu_speedup_x: float | None
    verdicts: TimedVerdicts | None


class DifferingField(Record):
    """A config, precision or environment field whose value differs between two runs."""

    field: str
    a: Any
    b: Any


class CompareTimed(Record):
    """Both sides runs: the compare's timed headline. ``a``/``b``: each run's own timed window
    as result.json recorded it; ``processes_a``/``processes_b``: the processes the verdicts
    use, ``source`` says whose; ``verdict``: latency (what a caller waits), ``gpu_verdict``: GPU
    time (the device's work), each with its speedup (A / B of the geometric means;
    ``speedup_x`` is the p50 ratio of result.json where no latency verdict could be taken)."""

    a: TimedFigures
    b: TimedFigures
    source: Literal["fresh processes", "recorded processes"]
    processes_a: ProcessFigures
    processes_b: ProcessFigures
    speedup_x: float | None
    gpu_speedup_x: float | None
    verdict: Verdict | None
    gpu_verdict: Verdict | None
    verdicts: TimedVerdicts | None
    noise_a: WindowNoise | None
    noise_b: WindowNoise | None
    memory_a: MemoryFigures
    memory_b: MemoryFigures
    config_a: str
    config_b: str
    differences: list[DifferingField]
    #: generations: TTFT and TPOT judged apart (empty unless both sides timed them)
    phases: list[PhaseComparison] = []
    #: generations: each side's TTFT, TPOT, ITL and tokens/s with their intervals
    generation_a: GenerationFigures | None = None
    generation_b: GenerationFigures | None = None


class KernelShare(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A kernel in one run only, with its time."""

    name: str
    total_us: float
    share: float  # of its run's kernel time


#: why two runs differ (profiler.analysis.difference)
Cause = Literal["clock", "kernels", "clock and kernels", "kernel time", "host", "none"]


class Difference(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The cause (profiler.analysis.difference: another SM clock, other kernels, both, the
    time of the same kernels, host-side, none) and the evidence the views say it from
    (profiler.report.sentences.difference_lines)."""

    cause: Cause
    added: list[KernelShare] = []  # in B only, by time
    removed: list[KernelShare] = []  # in A only, by time
    kernel_time_ratio: float | None = None  # common kernels, B / A at A's call counts
    clock_a_mhz: float | None = None
    clock_b_mhz: float | None = None
    #: the kernels both ran took longer or shorter in B beyond the tolerance
    kernel_time_moved: bool = False
    latency_ratio: float | None = None  # the timed p50 ratio B / A
    #: the fields of the work that differ (the runs' configs: their cause); empty: one config
    differs_in: list[str] = []
    throttle_reasons_b: list[str] = []  # B's GPU during its timed window, idle left out


class Explanation(Difference, frozen=True, kw_only=True):
    """Why run B differs from run A (profiler.analysis.difference.explain_runs): the
    Difference, whether the work is the same, and each run's GPU state around its timed
    window."""

    same_config: bool
    gpu_state_a: GpuStateFigures
    gpu_state_b: GpuStateFigures


class CompareFigures(Record):
    """What `compare` finds, as --json prints it (profiler.analysis.run_analysis.Comparison
    .figures): the two targets, both timed windows and verdicts (None unless both are runs),
    the diff's tables as typed rows (profiler.trace.diff_rows; the kernel, operator and CPU
    operator lists and the largest changes cut at --top, ``totals`` saying how many rows each
    had), its notes, and why B differs from A at the kernel level (None unless both are GPU
    runs)."""

    a: str
    b: str
    timed: CompareTimed | None
    overview: list[OverviewRow]
    categories: list[CategoryRow]
    kernels: list[KernelRow]
    operators: list[OperatorRow]
    cpu_operators: list[CpuOperatorRow]
    faster_in_b: list[Change]
    slower_in_b: list[Change]
    notes: list[str]
    explanation: Explanation | None
    totals: dict[str, int]


class BaselineNoise(Record):
    """A baseline's noise: its timed window's CV and warnings (headline.window_noise), the
    processes it was timed in and, with two or more, the CV of their medians."""

    cv: float | None
    warnings: list[str]
    processes: int
    between_cv: float | None


class BaselineRow(Record):
    """advise --try's re-run baseline (profiler.analysis.trial.baseline_row): the geometric
    mean of its per-process p50s and its noise, GPU time and classification; a baseline that
    did not finish has its status, the reason and no figures."""

    status: str
    reason: str | None
    processes: int
    p50_ms: float | None
    cv: float | None = None
    gpu_ms: float | None = None
    bound: str | None = None
    noise: BaselineNoise | None = None


#: where the roofline puts a run ("unknown" without ceilings)
RooflineBound = Literal["memory", "compute", "unknown"]


class RooflineFigures(Record):
    """A run's roofline as --json prints it (profiler.analysis.roofline.Roofline.record): per
    batch, its FLOPs and minimum bytes, the timed p50 (s), the rates reached, the ceilings
    and where the roofline puts it; a figure that is not finite (an intensity without bytes)
    is null."""

    flops: float | None
    min_bytes: float | None
    seconds: float | None  # timed p50
    achieved_tflops: float | None
    achieved_gbs: float | None  # min_bytes / seconds: the bandwidth used is at least this
    intensity: float | None  # FLOPs per minimum byte
    peak_tflops: float | None
    peak_gbs: float | None
    ridge: float | None  # intensity where the two ceilings meet
    pct_of_compute: float | None
    pct_of_bandwidth: float | None
    bound: RooflineBound
    pct_of_roof: float | None  # achieved TFLOP/s over the roofline at this intensity
    matmul_key: str
    ceilings_source: str
    backend: str


class MeasuredAlternative(Record):
    """Another backend's cell of the sweep at the same batch size: its p50 and its speedup over
    the run (profiler.analysis.advice)."""

    p50_ms: float
    speedup: float


class AdviceRecord(Record):
    """One piece of advice as --json prints it (profiler.report.advice_view.advice_record): what
    the rule saw (label -> text) and the gain it projects, in words, whether that gain is a
    bound or an estimate, and what the sweep measured for the action (backend -> cell)."""

    rule: str
    title: str
    action: str
    evidence: dict[str, str]
    projected_gain: str
    projection: Literal["bound", "estimate"] | None
    source: str
    measured: dict[str, MeasuredAlternative]


class PlannedAdvice(AdviceRecord, kw_only=True):
    """advise's advice: the projected speedup its experiments are ranked by, and the kind of
    that projection, both null when it is no speedup (at most 1)."""

    projected_speedup: float | None


#: a sweep cell's verdict on one figure: the verdict's word against the baseline's cell,
#: "baseline" on the baseline's own cells, "" where none was taken
CellVerdict = Literal["faster", "slower", "same", "undecided", "baseline", ""]


class BenchmarkCell(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One cell of a sweep, a row of its benchmark table (benchmark.csv; the fields in its
    column order; profiler.analysis.benchmark's module doc says what each figure is): what ran,
    its timed figures (ms; with several processes every latency figure, p50_ms to cv_pct, is
    the geometric mean of each process's, and gpu_compute_ms of each process's GPU-time
    median), the classification, each figure's speedup over the
    baseline's cell with its 95 % interval and its verdict, both verdicts' records, the processes
    and GPUs behind them, numerics, noise, memory, the roofline, the generation figures, how the
    cell ended and where its seconds went. A figure not measured is null; a swept option
    (``--max-new-tokens 16,64``) has its field only in a sweep given a list of it; a cell that
    did not finish has no ``bound``, ``gpus``, ``compile_what`` or ``noise``."""

    model: str
    device: str  # the GPU's name, "CPU", or "" for a cell that did not finish
    backend: str
    bs: int
    image_size: int | Unset = UNSET
    seq_len: int | Unset = UNSET
    src_len: int | Unset = UNSET
    prompt_len: int | Unset = UNSET
    max_new_tokens: int | Unset = UNSET
    mean_ms: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    gpu_compute_ms: float | None = None
    enqueue_ms: float | None = None
    #: launch-bound, near the launch bound or GPU-bound over the processes; "" without GPU
    #: time and enqueue time
    bound: BoundWord | Literal[""] | None = None
    throughput_per_s: float | None = None
    speedup: float | None = None  # latency: the baseline's p50 / this cell's
    speedup_low: float | None = None
    speedup_high: float | None = None
    verdict: CellVerdict = ""
    gpu_speedup: float | None = None  # GPU time: the baseline's / this cell's
    gpu_speedup_low: float | None = None
    gpu_speedup_high: float | None = None
    gpu_verdict: CellVerdict = ""
    #: the two verdicts behind the speedups, with each cell's classification (None on the
    #: baseline's cells and where a side did not finish); benchmark.csv has them in words here
    #: (verdict_note: profiler.report.sentences.verdict_note)
    verdicts: TimedVerdicts | None = None
    processes: int | None = None
    gpus: str | None = None  # the GPUs of the windows behind the figures, ";"-joined
    baseline: str
    ready_s: float | None = None
    compile_s: float | None = None
    compile_what: str | None = None
    rel_l2_error: float | None = None
    tensor_core_pct: float | None = None
    gpu_util_pct: float | None = None
    cv_pct: float | None = None
    noise: str | None = None  # the timed window's warnings, ";"-joined
    peak_allocated_mib: float | None = None
    peak_reserved_mib: float | None = None
    engine_mib: float | None = None
    tflops: float | None = None
    pct_peak_compute: float | None = None
    gbs: float | None = None
    pct_peak_bandwidth: float | None = None
    flop_per_byte: float | None = None
    ttft_ms: float | None = None
    token_p50_ms: float | None = None
    token_p99_ms: float | None = None
    tokens_per_s: float | None = None
    token_agreement: float | None = None
    #: a generation's TPOT (ms: the geometric mean over processes of each one's median) and
    #: each phase's speedup over the baseline's cell and verdict, latency and GPU time
    #: (profiler.analysis.headline.phase_comparisons); benchmark.csv has these columns only in
    #: a sweep of generations
    tpot_ms: float | None = None
    ttft_speedup: float | None = None
    ttft_verdict: CellVerdict = ""
    ttft_gpu_verdict: CellVerdict = ""
    tpot_speedup: float | None = None
    tpot_verdict: CellVerdict = ""
    tpot_gpu_verdict: CellVerdict = ""
    #: the phases' comparisons behind those columns (None on the baseline's cells and where a
    #: side did not finish; --json only)
    phases: list[PhaseComparison] | None = None
    status: str
    reason: str
    gpu: str
    node: str
    elapsed_s: float | None = None
    wall_s: float | None = None
    imports_s: float | None = None
    build_s: float | None = None
    flops_s: float | None = None
    prepare_s: float | None = None
    first_call_s: float | None = None
    graph_capture_s: float | None = None
    warm_up_s: float | None = None
    timed_s: float | None = None
    gpu_compute_s: float | None = None
    untraced_call_s: float | None = None
    profile_s: float | None = None
    trace_write_s: float | None = None
    after_windows_s: float | None = None
    numerics_s: float | None = None
    repeat_runs_s: float | None = None
    write_s: float | None = None


#: a run option's value, as an experiment changes it (profiler.runs.config.RunConfig field)
OptionValue = bool | int | float | str | None
#: whether a projection is a bound or an estimate (profiler.analysis.advice.Projection)
ProjectionKind = Literal["bound", "estimate"]


class PlannedExperiment(Record):
    """One experiment of advise's plan (profiler.analysis.experiments.Experiment): its label,
    the options it changes, the rules it tests and why, the projected speedup it is ranked by
    and whether that is a bound or an estimate (both null when it is no speedup), and its setup
    cost."""

    label: str
    changes: dict[str, OptionValue]
    rules: list[str]
    source: str
    projected_speedup: float | None
    projection: ProjectionKind | None
    cost: float


class TrialCellRecord(Record):
    """One cell of advise --try's trial.json (profiler.sweep.trial_cells.TrialCell): the experiment
    (its label, the options it changes, the rules it tests), the cell's run folder, how it
    ended (ok, failed, oom, timeout, interrupted, not run; ``kind`` typed,
    profiler.sweep.cell.KINDS), and its wall time (s)."""

    label: str
    changes: dict[str, OptionValue]
    rules: list[str]
    folder: str
    status: str
    reason: str | None = None
    elapsed_s: float | None = None
    kind: str | None = None


#: why advise --try stopped before every cell ran: the time budget ran out, --max-cells was
#: reached, the baseline failed
StoppedBy = Literal["budget", "cells", "baseline"]


class TrialRecord(Record):
    """advise --try's trial.json (profiler.sweep.trial_cells.Trial): its folder, its wall time and
    the re-timing's (s), the processes per cell, why it stopped before every cell ran (null
    when every cell ran), why the baseline was timed once more, and its cells, the baseline
    first."""

    folder: str
    wall_s: float = 0.0
    rounds_s: float = 0.0
    processes: int = 1
    stopped_by: StoppedBy | None = None
    baseline_again: str | None = None
    cells: list[TrialCellRecord] = []


class KernelChange(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What changed at the kernel level from the baseline to an experiment: kernel names gone
    and added (counts, and the biggest few by short name), and launches and GPU idle time (µs)
    per profiled step, (baseline, experiment)."""

    gone: int = 0  # kernel names in the baseline only
    added: int = 0  # in the experiment only
    top_gone: list[str] = []
    top_added: list[str] = []
    launches_per_step: tuple[float | None, float | None] = (None, None)
    idle_us_per_step: tuple[float | None, float | None] = (None, None)


class Unjudged(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Why no verdict is drawn from a baseline: its one timed window is flagged (noisy,
    bimodal), and that window's CV."""

    flags: list[str]
    cv: float


#: what an experiment's measurement says of its projection (profiler.analysis.trial.judge):
#: no verdict drawn (unjudged), undecided, the same, the same though the projection promised
#: more than 5 % (not borne out), slower, faster with no projection to hold, faster beyond the
#: projection with its whole interval above it (above) or reaching below it (exceeded), faster
#: but far short of it, faster within it
Outcome = Literal[
    "unjudged",
    "undecided",
    "same",
    "not borne out",
    "slower",
    "faster",
    "above",
    "exceeded",
    "far short",
    "within",
]


class Judgement(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """An experiment's projection held against what it measured (profiler.analysis.trial.judge;
    profiler.report.trial_view words it): the outcome, the projection (a speedup above 1; null:
    none) and whether it is a bound or an estimate, the measured latency speedup with its 95 %
    interval, the processes of each side (baseline, experiment) and, where no verdict was
    drawn, why."""

    outcome: Outcome
    projected: float | None
    projection: ProjectionKind
    speedup: float
    low: float | None
    high: float | None
    processes: tuple[int, int] | None = None
    unjudged: Unjudged | None = None


class TrialRow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What one experiment of advise --try measured against the re-run baseline
    (profiler.analysis.trial.trial_rows): the change, the figure quoted (the geometric mean of
    the per-process p50s, ms, and its relative noise ``cv``), the processes, each figure's
    speedup (``figure``: per call, or per sample when the batch changed) with its 95 % interval
    and verdict (latency, then GPU time where measured), the classification and both verdicts'
    records, the numeric error, the rule's projection and its kind, the processes each
    latency interval spans (baseline's, experiment's), the projection against the measurement
    (``judgement``) and the kernel changes."""

    label: str
    changes: dict[str, OptionValue]
    rules: list[str]
    status: str
    reason: str | None = None
    p50_ms: float | None = None
    cv: float | None = None
    processes: int = 0
    speedup: float | None = None
    low: float | None = None
    high: float | None = None
    verdict: Word | None = None
    gpu_speedup: float | None = None
    gpu_low: float | None = None
    gpu_high: float | None = None
    gpu_verdict: Word | None = None
    bound: BoundWord | None = None
    #: the two verdicts behind the speedups (the views word them:
    #: profiler.report.sentences.note_lines)
    verdicts: TimedVerdicts | None = None
    rel_l2_error: float | None = None
    projected: float | None = None  # the rule's projection as a speedup factor, if any
    projected_kind: ProjectionKind | None = None
    interval_processes: list[int] | None = None
    judgement: Judgement | None = None
    kernels: KernelChange | None = None
    figure: Literal["per call", "per sample"] = "per call"

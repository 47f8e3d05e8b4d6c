"""The typed records the analysis returns and --json prints: a run's headline, a compare's
timed headline with both verdicts, why two runs differ, advise's baseline. msgspec Structs,
read by attribute; ``plain`` turns one into the JSON values a command prints, and
profiler.cli.documents builds the published schemas (docs/schema/) from the same types.

Only msgspec and the records of profiler.runs here (no numpy, no pandas): the command line
imports these types to describe its documents before any analysis is loaded.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec

from profiler.runs.gpu_record import GpuSample
from profiler.runs.result import GpuCompute, NoiseStats, RepeatSpread

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
Design = Literal["paired", "unpaired", "floor"]
FloorSource = Literal["default", "given"]


class Record(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A record of figures: a key the type does not name is refused when read back."""


class Verdict(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """B against A on one figure: the ratio of the geometric means of the per-process medians
    (B / A), its 95 % interval, the 90 % interval the "same" test used, the verdict (faster /
    slower / same / undecided: B relative to A) and how it was reached
    (profiler.analysis.verdict.compare)."""

    ratio: float
    low: float
    high: float
    verdict: Word
    tolerance: float
    processes_a: int
    processes_b: int
    noise_floor: float | None  # the between-process CV assumed (design "floor")
    method: str
    #: where noise_floor came from: "default" (the figure's worst case) or "given" (measured)
    floor_source: FloorSource | None = None
    figure: FigureName = "latency"
    design: Design = "unpaired"
    p_value: float = 1.0
    same_low: float | None = None  # the 90 % interval of the equivalence test
    same_high: float | None = None
    pairs: int | None = None  # design "paired": rounds with both configs
    #: how the verdict was held against the other comparisons of its family (a sweep's cells)
    fdr: str | None = None

    @property
    def speedup(self) -> float:
        """A / B: above 1 when B is faster."""
        return 1 / self.ratio

    @property
    def half_width(self) -> float:
        """The 95 % interval's relative half-width, on the log scale."""
        return (math.log(self.high) - math.log(self.low)) / 2


class Bound(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One config's classification over its processes, and the two figures behind it (the
    geometric means over processes of each process's enqueue p90 and GPU time p50, ms)."""

    word: Literal["launch-bound", "GPU-bound"] | None  # None: no GPU time measured
    launch_bound_processes: int = 0
    classified_processes: int = 0
    enqueue_p90_ms: float | None = None
    gpu_p50_ms: float | None = None


class TimedVerdicts(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """B against A on both figures; ``lead`` names the verdict to quote first ("latency" when
    both configs are GPU-bound, "both" otherwise); ``lines`` say why, in words."""

    latency: Verdict | None
    gpu_time: Verdict | None
    bound_a: Bound
    bound_b: Bound
    #: "latency": both configs GPU-bound, latency leads and GPU time is the cross-check;
    #: "both": read both
    lead: Literal["latency", "both"]
    #: launch-bound: the processes a side the latency verdict would need for ±5 %
    latency_processes_for_5pct: int | None = None
    #: the --cuda-graphs figure of the launch-bound side, when one was measured (ms)
    cuda_graphs_ms: float | None = None
    lines: tuple[str, ...] = ()

    @property
    def launch_bound(self) -> bool:
        return "launch-bound" in (self.bound_a.word, self.bound_b.word)

    @property
    def disagree(self) -> bool:
        """Both figures decided, and not the same way."""
        words = [v.verdict for v in (self.latency, self.gpu_time) if v is not None]
        return len(words) == 2 and "undecided" not in words and words[0] != words[1]


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
    .GpuState) and what is derived from it, kept as values: the SM clock over the window, the
    throttle reasons (idle left out) and the one line a person reads ("GPU state: not recorded
    (no NVML)" ...)."""

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
    line: str


class Headline(Record):
    """The run's timed window beside the trace: what the headline of `summarize` shows."""

    timed: TimedFigures
    noise: WindowNoise | None
    memory: MemoryFigures
    config: str
    profiled_step_ms: float | None
    profiler_overhead_ratio: float | None
    gpu_state: GpuStateFigures


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
    config's classification (launch-bound or GPU-bound) with the processes behind it."""

    processes: int
    pilot_processes: int
    latency: FigureOverProcesses | None
    gpu_time: FigureOverProcesses | None
    enqueue: FigureOverProcesses | None
    bound: Literal["launch-bound", "GPU-bound"] | None
    launch_bound_processes: int
    classified_processes: int


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


class KernelShare(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A kernel in one run only, with its time."""

    name: str
    total_us: float
    share: float  # of its run's kernel time


class Difference(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The cause (one of CLOCK, KERNELS, CLOCK_AND_KERNELS, KERNEL_TIME, HOST, NONE of
    profiler.analysis.difference), the lines that say it, and the evidence."""

    cause: str
    lines: list[str]
    added: list[KernelShare] = []  # in B only, by time
    removed: list[KernelShare] = []  # in A only, by time
    kernel_time_ratio: float | None = None  # common kernels, B / A at A's call counts
    clock_a_mhz: float | None = None
    clock_b_mhz: float | None = None


class Explanation(Difference, frozen=True, kw_only=True):
    """Why run B differs from run A (profiler.analysis.difference.explain_runs): the
    Difference, its lines in one (``line``; ``short_line`` with kernels' short names, for a
    terminal), the timed p50 ratio B / A, whether the work is the same and the fields of the
    work that differ, and each run's GPU state in one line."""

    line: str
    short_line: str
    latency_ratio: float | None
    same_config: bool
    differs_in: list[str]
    gpu_state_a: str
    gpu_state_b: str


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
    """One piece of advice as --json prints it (profiler.report.advice_view.advice_dict): what
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

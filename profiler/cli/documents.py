"""What the commands print with ``--json``, and the files a run and a sweep write, as types: the
one source of the JSON Schemas in docs/schema/ (``python scripts/gen_schemas.py`` writes them;
tests/test_cli_output.py fails when they are out of date, and checks real outputs against them).

Every ``--json`` document is one JSON object whose first key, ``"$schema"``, names its kind and
version: ``infer-profiler/<kind>/<version>`` (e.g. ``infer-profiler/summarize/1``); the rest are
the keys the command printed before the key was added. The version goes up when a key is renamed
or removed or changes meaning, not when one is added. A table is a list of row objects (column ->
value), typed: compare's rows (profiler.trace.diff_rows) name every column and no other, the
trace's tables' rows (profiler.trace.table_rows) name their columns and let others through; what
each column means is in docs/summarizer.md.
"""

from __future__ import annotations

import inspect
from typing import Any

import msgspec

from profiler.analysis.history_records import ChangePoint, SeriesSummary
from profiler.analysis.rank_records import RankComparisonFigures, RankRunFigures
from profiler.analysis.records import (
    AdviceRecord,
    BaselineRow,
    BenchmarkCell,
    CompareTimed,
    Explanation,
    Headline,
    PlannedAdvice,
    PlannedExperiment,
    RooflineFigures,
    TrialRecord,
    TrialRow,
)
from profiler.runs.manifest import MANIFEST_SCHEMA, SweepManifest
from profiler.runs.noise_floor import NoiseFloor
from profiler.runs.result import RESULT_SCHEMA, EngineMemory, RunResult
from profiler.trace.diff_rows import (
    CategoryRow,
    Change,
    CpuOperatorRow,
    KernelRow,
    OperatorRow,
    OverviewRow,
)
from profiler.trace.memory_records import MemoryCurve, MemoryPeak, MemoryStep, OperatorMemory
from profiler.trace.snapshot import SnapshotDevice
from profiler.trace.table_rows import (
    CategoryTableRow,
    DeviceMetricsRow,
    HardwareKernelRow,
    KernelTableRow,
    KernelTimeRow,
    LayerRow,
    OperatorTableRow,
    PhaseRow,
    PositionRow,
    StepRow,
    TraceDevice,
)

Unset = msgspec.UnsetType
UNSET = msgspec.UNSET


class Record(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A typed part of a document: a key the type does not name is refused (and the generated
    schema says "additionalProperties": false), so the types cannot fall behind the output."""


class Document(Record):
    #: infer-profiler/<kind>/<version>
    schema_id: str = msgspec.field(name="$schema")


class Insight(Record):
    """A run folder's roofline (None without roofline inputs), where its ceilings come from,
    and the advice of the rules that fired."""

    roofline: RooflineFigures | None
    ceilings: str
    advice: list[AdviceRecord]


class TensorCores(Record):
    kernel_time_us: float | None
    tensor_core_us: float | None
    tensor_core_share_pct: float | None
    unknown_us: float | None
    gemm_conv_us: float | None
    gemm_conv_tensor_core_us: float | None
    tensor_core_share_of_gemm_conv_pct: float | None


class Overview(Record):
    steps: int
    mean_step_us: float | None
    steps_window_us: list[float | None]
    dropped_tail_steps: int
    breakdown_mean_us_per_step: dict[str, float | None]
    breakdown_definitions: str  # whose definitions the breakdown follows: "tool" or "plugin"
    devices: list[DeviceMetricsRow]
    per_step: list[StepRow]


class Hardware(Record):
    """Nsight Compute measurements joined to the kernel table (--ncu, or the run's ncu.csv)."""

    ncu_csv: str
    agreement_share: float | None
    coverage_of_kernel_time: float | None
    profiled_us: float | None
    agree_us: float | None
    disagree_us: float | None
    unknown_rule_us: float | None
    unclear_hardware_us: float | None
    kernel_us: float | None
    profiled_kernels: int
    disagreeing: list[Any]
    # over the profiled kernels: time in kernels the name rules call Tensor Core, and the tensor
    # pipe's busy share weighted by kernel time (ncu)
    tensor_core_kernels_share: float | None
    tensor_pipe_busy_share: float | None
    tensor_core_kernel_us: float | None
    tensor_pipe_busy_us: float | None
    pipe_measured_us: float | None
    kernels: list[HardwareKernelRow]


class PhaseKernels(Record):
    """One phase's kernels (as the whole trace's): its kernel time, the share of it in Tensor
    Core kernels, the category table and the kernel table (--top rows)."""

    kernel_us: float | None
    tensor_core_share_pct: float | None
    categories: list[CategoryTableRow]
    kernels: list[KernelTableRow]


class PhaseRoofline(Record):
    """A generation's phase against the GPU's ceilings, at its timed figure ("TTFT p50" for
    the prefill, "TPOT p50" for one decode step; profiler.analysis.roofline.phase_rooflines)."""

    phase: str
    at: str
    roofline: RooflineFigures


class PhaseTables(Record):
    """Where the kernels go, phase by phase (profiler.trace.phase_kernels.PhaseSummary): one row per
    phase (and one for kernels outside every phase span), one per (phase, position inside a
    generation), whether the trace holds GPU kernels at all, each phase's kernels, and (a run
    folder of a decoder-only LM) each phase's roofline."""

    phases: list[PhaseRow]
    positions: list[PositionRow]
    has_kernels: bool
    kernels: dict[str, PhaseKernels] | Unset = UNSET
    rooflines: list[PhaseRoofline] | Unset = UNSET


class Graphs(Record):
    """The trace's CUDA graph replays and how much of their kernel time carries the operator
    that launched each kernel at capture (profiler.trace.graphs.GraphSummary)."""

    captures: int
    replays: int
    attributed_replays: int
    replay_kernels: int
    attributed_kernels: int
    replay_kernel_us: float
    attributed_kernel_us: float
    attributed_pct: float | None
    replayed_pct_of_all_kernel_time: float | None
    #: why replays stayed on their graph launch: reason -> replays
    unattributed: dict[str, int]


class Summarize(Document, kw_only=True):
    """``summarize --json``: one trace's tables (the headline and insight of a run folder)."""

    headline: Headline | Unset = UNSET  # a run folder only
    trace: str
    schema: str  # the trace's own schema version, as Kineto wrote it
    devices: list[TraceDevice]
    event_counts: dict[str, int]
    tensor_cores: TensorCores
    overview: Overview
    categories: list[CategoryTableRow]
    kernels: list[KernelTableRow]
    operators: list[OperatorTableRow]
    notes: list[str]
    warnings: list[str]
    excluded_events: dict[str, int]
    phases: PhaseTables | Unset = UNSET  # a trace with generation phase spans
    graphs: Graphs | Unset = UNSET  # a trace with CUDA graph replays
    insight: Insight | Unset = UNSET  # a run folder only
    hardware: Hardware | Unset = UNSET  # with Nsight Compute measurements
    #: the rows of each list --top cuts (kernels, operators) before the cut
    totals: dict[str, int] | Unset = UNSET


class Engine(Record):
    method: str
    calls: int
    engine_kernel_us: float | None
    attributed_us: float | None
    coverage_pct: float | None
    layers: list[LayerRow]
    not_attributed: list[KernelTimeRow]
    outside_engine: list[KernelTimeRow]


class SummarizeLayers(Document, kw_only=True):
    """``summarize --view layers --json``: each TensorRT engine's layers, kernels attributed."""

    engines: list[Engine]


class SummarizeMemory(Document, kw_only=True):
    """``summarize --view memory --json``: memory over time from the trace's [memory] events
    (profiler.trace.memory.MemoryView: the TensorBoard plugin's Memory view, sizes in bytes)."""

    trace: str
    #: the curves' time origin: the trace's first event, µs as the trace writes it
    first_ts_us: float
    devices: list[str]
    peaks: list[MemoryPeak]
    curves: list[MemoryCurve]
    #: the profiled steps (ProfilerStep spans), each device's peak in each
    steps: list[MemoryStep]
    #: per device and operator name: the plugin's Memory view table
    operators: list[OperatorMemory]
    events: int
    attributed_events: int


class SummarizeSnapshot(Document, kw_only=True):
    """``summarize --view snapshot --json``: run --memory-history's snapshot replayed
    (profiler.trace.snapshot): per device, the peak of allocated memory, the blocks live at it
    grouped by allocation stack (largest first, --top of them), the timeline; or, for a run
    that recorded none (a CPU run), why (``why_none``). ``memory_viz``: where PyTorch's viewer
    opens ``file``."""

    file: str | None
    why_none: str | None
    memory_viz: str
    #: the most events the history keeps (the allocator's ring buffer), and whether it filled
    max_entries: int | None
    truncated: bool
    devices: list[SnapshotDevice]


class ModuleRow(Record):
    """One module path of the tree (µs summed over its calls): host time of its calls (total)
    less the operators and module calls directly in them (self); GPU time (kernels, copies,
    memsets) and kernel time launched inside it (total) or directly in it (self)."""

    path: str
    module: str
    type: str
    depth: int
    parent: str
    calls: int
    operators: int
    host_total_us: float
    host_self_us: float
    gpu_total_us: float
    gpu_self_us: float
    kernel_total_us: float
    kernel_self_us: float


class ModulePhaseRow(ModuleRow):
    """One module path's calls that started in one generation phase span."""

    phase: str


class ModuleType(Record):
    type: str
    instances: int
    calls: int
    operators: int
    host_total_us: float
    host_self_us: float
    gpu_total_us: float
    gpu_self_us: float
    kernel_total_us: float
    kernel_self_us: float


class BlockPart(Record):
    """A repeated block's part (a child module type, or the block's own time) in one phase,
    with its share of the block's host and GPU time (None: the block has none)."""

    phase: str
    block: str
    part: str
    calls: int
    host_us: float
    gpu_us: float
    kernel_us: float
    host_share_pct: float | None
    gpu_share_pct: float | None


class SummarizeModules(Document, kw_only=True):
    """``summarize --view modules --json``: time per nn.Module of a trace recorded with
    ``--with-stack``, as the TensorBoard plugin's Module view; per type, phase and repeated
    block; the kernel time inside and outside the modules."""

    trace: str
    has_gpu: bool
    kernel_us: float
    kernel_in_modules_us: float
    kernel_outside_us: float
    gpu_us: float
    gpu_in_modules_us: float
    gpu_outside_us: float
    module_calls: int
    left_out_calls: int
    tree: list[ModuleRow]
    types: list[ModuleType]
    phases: list[ModulePhaseRow]
    blocks: list[BlockPart]
    notes: list[str]


class Compare(Document, kw_only=True):
    """``compare --json``: two targets, B against A (delta = B - A): the figures of
    profiler.analysis.records.CompareFigures, the diff's tables as typed rows
    (profiler.trace.diff_rows)."""

    a: str
    b: str
    timed: CompareTimed | None  # both sides runs: their timed windows and both verdicts
    overview: list[OverviewRow]
    categories: list[CategoryRow]
    kernels: list[KernelRow]
    operators: list[OperatorRow]
    #: CPU operators matched by name: calls, self and total CPU µs per step (two CPU runs:
    #: faster_in_b and slower_in_b are its rows, by self time)
    cpu_operators: list[CpuOperatorRow]
    #: the largest changes at the level the runs differ at (their "level": kernel, operator,
    #: CPU operator)
    faster_in_b: list[Change]
    slower_in_b: list[Change]
    notes: list[str]
    #: both sides GPU runs: why B differs from A at the kernel level (another SM clock, other
    #: kernels named, kernel time, host-side; profiler.analysis.difference.explain_runs)
    explanation: Explanation | None
    #: the rows of each list --top cuts (kernels, operators, cpu_operators, faster_in_b,
    #: slower_in_b) before the cut
    totals: dict[str, int]


class GpuOffsetRecord(Record):
    """One GPU of a sweep's windows: its figure against the other GPUs' on the same configs
    (offset, a ratio minus 1) and its between-process CV there (floor); apart when the offset
    is beyond the floor."""

    gpu: str
    figure: str
    windows: int
    configs: int
    offset: float | None
    floor: float | None
    apart: bool


class Benchmark(Document, kw_only=True):
    """``sweep --json``: the benchmark table, one record per cell (BenchmarkCell: benchmark.csv's
    columns)."""

    sweep: str
    folder: str
    model: str
    baseline: str
    #: each GPU's offset from the others on the same configs and its floor (several GPUs)
    gpus: list[GpuOffsetRecord] = []
    cells: list[BenchmarkCell]


class Backend(Record):
    name: str
    family: str
    precision: str
    available: bool
    why_not: str | None
    description: str
    #: what --workload generate runs on it (encoder-decoder, decoder-only) and its known limits
    generation: str


class Backends(Document, kw_only=True):
    """``backends --json``: every backend, whether it runs on this machine and why not."""

    backends: list[Backend]


class Plot(Document, kw_only=True):
    """``plot --json``: the PNG files written."""

    target: str
    written: list[str]


class Extensible(msgspec.Struct, kw_only=True):
    """A part of a file another version may have written with more keys (the peaks cache):
    the keys it names are typed, others are let through."""


class PeaksMachine(Extensible):
    """The machine the ceilings were measured on (profiler.collect.measured_peaks.machine_facts)."""

    device: str  # the GPU's name, or "CPU <processor>"
    driver: str | None
    torch: str
    compute_capability: str | None


class PeaksSizes(Extensible):
    """The sizes measured: the matmuls' side n (INT8's apart) and the copy's bytes."""

    matmul_n: int
    copy_bytes: int
    int8_n: int


class PeaksMethod(Extensible):
    """How the ceilings were measured: the data, warm-up calls and repeats, the statistic over
    the repeats, the timer, what a matmul and a copy are, and the sizes."""

    data: str
    warmup_calls: int
    repeats: int
    statistic: str
    timer: str
    matmul: str
    copy: str
    sizes: PeaksSizes


class MatmulRate(Extensible):
    """One precision's matmul ceiling: TFLOP/s (null where this GPU or build cannot run it, and
    why not), the side n, the median time of one call (s), the kernel asked for and the CUDA
    kernels that ran (caches of older versions may lack these), and INT8's B layout."""

    tflops: float | None
    why_not: str | Unset = UNSET
    n: int | Unset = UNSET
    median_s: float | Unset = UNSET
    kernel: str | Unset = UNSET
    cuda_kernels: list[str] | None | Unset = UNSET
    b_layout: str | Unset = UNSET


class CopyRate(Extensible):
    """The copy bandwidth: GB/s (read + write over the median time), bytes copied, median
    time of one copy (s)."""

    gb_per_s: float
    bytes: int
    median_s: float


class Peaks(Document, kw_only=True, forbid_unknown_fields=False):
    """``peaks --json``: this machine's measured ceilings
    (profiler.collect.measured_peaks.measure: the cached measurement's keys, which a cache
    written by another version may extend)."""

    schema: int  # the peaks cache's own version
    source: str
    machine: PeaksMachine
    method: PeaksMethod
    matmul_tflops: dict[str, float | None]
    matmul_detail: dict[str, MatmulRate]
    copy: CopyRate
    cache_file: str


class NoiseGpuState(Record):
    """The GPU's state read before and after a noise measurement, one line each."""

    before: str
    after: str


class Noise(Document, kw_only=True):
    """``noise --json``: this machine's noise floor (profiler.runs.noise_floor.NoiseFloor), where
    it was kept, and the GPU's state read before and after the measurement."""

    floor: NoiseFloor
    saved_to: str | None
    gpu_state: NoiseGpuState | None


class Advise(Document, kw_only=True):
    """``advise --json``: the run's advice, the experiments planned for it, and with --try what
    they measured (profiler.analysis.trial rows, ranked) beside the re-run baseline."""

    run: str
    config: str
    advice: list[PlannedAdvice]
    plan: list[PlannedExperiment]
    without_experiments: dict[str, str]
    trial: TrialRecord | None
    baseline: BaselineRow | None
    rows: list[TrialRow] | None
    report: str | None  # with --try: the HTML page written into the trial's folder


class BackendNotes(Extensible):
    """result.json's ``backend.notes``: BackendFacts' named facts (engine or graph build time,
    a cached engine's load time, warnings, the TensorRT engines' device memory) beside any
    other fact a backend records (ONNX Runtime's providers, calibration time ...)."""

    compile_s: float | Unset = UNSET
    load_s: float | Unset = UNSET
    warnings: list[str] = []
    engine_memory: EngineMemory | Unset = UNSET


class _BackendInFile(msgspec.Struct):
    """result.json's ``backend``: BackendFacts with its named facts inside ``notes``."""

    name: str
    family: str
    precision: str
    notes: BackendNotes


class HistoryCheck(Document, kw_only=True):
    """``history check --json``: the database and its schema version, the method, the gate
    (figure, slowdown allowed), every series, every change point with both verdicts and the
    kernel and category shifts behind it, the numbers of the changes that fail the gate and
    the exit status (profiler.analysis.history_records.HistoryCheck)."""

    database: str
    schema_version: int
    method: str
    figure: str
    max_slowdown_pct: float
    series: list[SeriesSummary]
    changes: list[ChangePoint]
    failing: list[int]
    exit_status: int


class SummarizeRanks(RankRunFigures, kw_only=True):
    """``summarize --json`` of a folder of rank traces (profiler.analysis.rank_run): each
    rank's figures, every rank's steps, the straggler; ``plugin_figures`` names the figures the
    TensorBoard plugin's Distributed view gives too."""

    schema_id: str = msgspec.field(name="$schema")


class CompareRanks(RankComparisonFigures, kw_only=True):
    """``compare --json`` of two folders of rank traces: both runs' figures, rank by rank
    (B - A from the pairs of fields) and as a whole."""

    schema_id: str = msgspec.field(name="$schema")


#: kind -> (version, type) of every --json document; "run" is `run --json`: the run's result.json
#: with the "$schema" key first
DOCUMENTS: dict[str, tuple[int, type]] = {
    # 2: headline.gpu_state.line gone (the views word the record); 4: a generation's
    # ttft_bound and tpot_bound by the latency and enqueue rule, "near the launch bound" added
    "summarize": (4, Summarize),
    "summarize-layers": (1, SummarizeLayers),
    "summarize-modules": (1, SummarizeModules),
    "summarize-ranks": (1, SummarizeRanks),
    "compare-ranks": (1, CompareRanks),
    "summarize-snapshot": (1, SummarizeSnapshot),
    "summarize-memory": (1, SummarizeMemory),
    # 2: timed.verdict (over processes) replaced timed.p50_ratio; 3: timed.verdict is latency's,
    # timed.gpu_verdict and timed.verdicts added, speedup_x the ratio of geometric means;
    # 4: timed.verdicts.lines gone, explanation.gpu_state_a/_b records, not lines (the views
    # word the records); 6: a config's bound by latency and median enqueue against GPU time
    # ("near the launch bound" added), its record's enqueue_p90_ms now enqueue_p50_ms; 7: the
    # tables typed rows, each of faster_in_b and slower_in_b says its "level"
    "compare": (7, Compare),
    # 2: cells[].verdicts (the record) replaced cells[].verdict_note (its words); 4: the bound
    # as compare's 6
    "benchmark": (4, Benchmark),
    "backends": (2, Backends),
    "plot": (1, Plot),
    "peaks": (1, Peaks),
    "noise": (1, Noise),
    # 2: rows[].judgement is the projection against the measurement as a record (Judgement),
    # no longer a sentence; 3: rows[].verdicts (the record) replaced rows[].verdict_lines; 4:
    # the bound as compare's 6
    "advise": (4, Advise),
    "history-check": (1, HistoryCheck),
    "run": (RESULT_SCHEMA, RunResult),
}
#: the files a run and a sweep write (their own "schema" key holds the version)
FILES: dict[str, tuple[int, type]] = {
    "result": (RESULT_SCHEMA, RunResult),
    "sweep": (MANIFEST_SCHEMA, SweepManifest),
}
KINDS = {**DOCUMENTS, **FILES}


def schema_id(kind: str) -> str:
    """infer-profiler/<kind>/<version>: a document's "$schema" and its schema file's "$id"."""
    return f"infer-profiler/{kind}/{KINDS[kind][0]}"


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one kind, generated from its type."""
    kind_type = KINDS[kind][1]
    schema = msgspec.json.schema(kind_type)
    top = schema["$defs"][kind_type.__name__]
    if kind_type is RunResult:  # the file's form of the backend facts (runs.result_to_dict)
        in_file = msgspec.json.schema(_BackendInFile)["$defs"]
        schema["$defs"]["BackendFacts"] = in_file.pop("_BackendInFile")
        schema["$defs"].update(in_file)  # the notes' types
        top["properties"]["artifacts"] = {"type": "array", "items": {"type": "string"}}
    if kind in DOCUMENTS:
        if "$schema" not in top["properties"]:  # run: result.json's keys after "$schema"
            top["properties"] = {"$schema": {"type": "string"}, **top["properties"]}
            top["required"] = ["$schema", *top["required"]]
        top["properties"]["$schema"]["const"] = schema_id(kind)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": schema_id(kind),
        **_dedented(schema),
    }


def _dedented(value: Any) -> Any:  # noqa: ANN401 (a JSON value of any shape)
    """Every ``description`` with its docstring's indent removed (inspect.cleandoc): msgspec
    0.23 does it and 0.22 does not, and the published schemas must not depend on which one is
    installed."""
    if isinstance(value, dict):
        return {
            k: inspect.cleandoc(v) if k == "description" and isinstance(v, str) else _dedented(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_dedented(v) for v in value]
    return value


def all_schemas() -> dict[str, dict[str, Any]]:
    """file name under docs/schema/ -> its JSON Schema."""
    return {f"{kind}.json": json_schema(kind) for kind in KINDS}

"""The typed run contract: result.json as RunResult, read and written only here.

The result structs mirror result.json's keys, so files written by earlier versions read
(schema 1, upgraded on reading) and tools reading the JSON keep working. A backend reports a
fact by putting it into ``Prepared.notes``: ``compile_s``, ``load_s`` (engine cache load),
``warnings`` and ``artifacts`` become BackendFacts' named fields, every other key lands in
``BackendFacts.extra`` (written under ``backend.notes`` in result.json, as before).
"""

from __future__ import annotations

import json
import math
import os
import stat
import typing
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Annotated, Any

import msgspec

from profiler.errors import UserError, first_line
from profiler.fsutil import write_text_atomic
from profiler.runs.gpu_record import GpuState
from profiler.runs.layout import LATENCY_CSV, RESULT_FILE
from profiler.runs.model_source import ModelSource

#: 1: the dict the harness wrote until the contract was typed (no profile.capture in the
#: earliest runs); 2: the same keys, written from RunResult
RESULT_SCHEMA = 2


# ---- the run contract ----------------------------------------------------------------------


def _config_struct() -> type:
    """ConfigRecord: RunConfig's fields as recorded in result.json (paths as strings), plus the
    derived run_name. Generated from RunConfig, so a new option is recorded without a second
    declaration; fields a file lacks take RunConfig's defaults."""
    from profiler.runs.config import RunConfig

    hints = typing.get_type_hints(RunConfig)
    spec = []
    for f in fields(RunConfig):
        kind = hints[f.name]
        if Path in typing.get_args(kind) or kind is Path:
            kind = str | None
        default = (
            f.default
            if f.default_factory is MISSING
            else msgspec.field(default_factory=f.default_factory)
        )
        if isinstance(default, Path):
            default = str(default)
        spec.append((f.name, kind, default))
    spec.append(("run_name", str, ""))
    return msgspec.defstruct("ConfigRecord", spec, frozen=True, module=__name__)


ConfigRecord = _config_struct()


class RepeatSpread(msgspec.Struct, frozen=True):
    """The p50 of each timed window of this config in its own process (the first is the run's
    own: --repeat-runs, or a sweep's or compare's --processes), and their spread."""

    runs: int
    p50_ms: list[float]
    median_p50_ms: float
    min_p50_ms: float
    max_p50_ms: float
    range_pct_of_median: float
    #: the file beside result.json holding every window's latencies (processes.csv), and how
    #: the windows were scheduled; absent in runs recorded before processes.csv was written
    samples_csv: str | None = None
    schedule: str | None = None
    #: each process's GPU time p50 and enqueue p50 (ms) and its classification (launch-bound,
    #: GPU-bound; profiler.runs.samples); absent in runs recorded before they were
    gpu_p50_ms: list[float | None] | None = None
    enqueue_p50_ms: list[float | None] | None = None
    bound: list[str | None] | None = None


class TargetNoise(msgspec.Struct, frozen=True):
    """--target-noise: what the sampling reached (profiler.analysis.sampling.stopping_rule)."""

    target: float  # relative: 0.02 for ±2 %
    reached: bool
    reason: str  # "target reached", "time budget spent", ...
    half_width: float | None  # relative 95 % half-width of the quoted p50 where it stopped
    iterations: int  # of the run's own window
    processes: int  # windows in fresh processes, the run's own included
    spent_s: float
    budget_s: float


class NoiseStats(msgspec.Struct, frozen=True):
    """The timed window's spread, shape and drift in ms (profiler.analysis.timed_window.Noise)."""

    n: int
    median_ms: float
    cv: float
    iqr_ms: float
    relative_iqr: float
    bimodal_d: float | None = None
    clusters_ms: list[float] | None = None
    first_third_median_ms: float | None = None
    last_third_median_ms: float | None = None
    warnings: list[str] = []
    repeat_runs: RepeatSpread | None = None
    #: this machine's between-process CV as `profile.py noise` last measured it for this GPU
    #: model when the run ran (runs.noise_floor); None when never measured
    machine_floor_cv: float | None = None
    target: TargetNoise | None = None


class GpuCompute(msgspec.Struct, frozen=True, omit_defaults=True):
    """trtexec's split of one call's time (profiler.collect.gpu_time): the device's work for
    the call, launch gaps excluded (GPU time, a window of its own after the timed one), and the
    host's time to launch it without a synchronize (enqueue, in the timed window), in ms; or
    why it was not measured (``not_measured``: "no GPU", "the call waits for the GPU inside
    (host sync)" ...)."""

    gpu_p50_ms: float | None = None
    gpu_p90_ms: float | None = None
    enqueue_p50_ms: float | None = None
    enqueue_p90_ms: float | None = None
    iterations: int = 0  # valid iterations the figures are taken from
    invalid_iterations: int = 0  # attempts whose sleep ended before the call was enqueued
    sleep_ms: float | None = None  # the longest sleep that held the stream
    method: str | None = None
    not_measured: str | None = None
    #: the host's time to return from the call behind the sleep (a stream holding queued work):
    #: longer than enqueue onto an idle stream; runs recorded before kept this as enqueue
    held_enqueue_p50_ms: float | None = None


#: a time or a rate a run measured: never negative (a file saying -1 is not read as a run's)
Figure = Annotated[float, msgspec.Meta(ge=0)]


class TimingStats(msgspec.Struct, frozen=True):
    """The timed window (profiler.collect.timing) and the time to get there. Runs recorded before
    iterations could be chosen by time, or noise was recorded, lack the last three fields."""

    iters: int
    mean_ms: Figure
    std_ms: Figure
    min_ms: Figure
    p50_ms: Figure
    p90_ms: Figure
    p95_ms: Figure
    p99_ms: Figure
    max_ms: Figure
    throughput_samples_per_s: Figure
    prepare_s: float = 0.0
    first_call_s: float = 0.0
    timer: str = "perf_counter"
    sync: str = "every iteration"
    warmup_iters: int = 0
    model_build_s: float | None = None
    unit: str | None = None  # what one iteration is, when not one forward pass ("one whole
    # generation" with --workload generate)
    iterations_chosen_by: str | None = None  # "--iters 50", "CPU default: --min-time 5 s" ...
    min_time_s: float | None = None
    noise: NoiseStats | None = None
    # where the run's seconds went (profiler.runs.phases: phase -> wall seconds, in run order) and
    # the run's wall seconds (imports, when recorded, + harness start to result.json written);
    # absent in runs recorded before phases were
    phases_s: dict[str, float] | None = None
    wall_s: float | None = None
    # GPU compute and enqueue time (trtexec's split); absent in runs recorded before it was
    gpu_compute: GpuCompute | None = None


class Memory(msgspec.Struct, frozen=True):
    """Peak memory of the timed window (PyTorch's caching allocator; None on a CPU) and the
    TensorRT engines' device memory (None for other backends)."""

    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None
    scope: str | None = None
    engine_device_memory_bytes: int | None = None
    engine_device_memory_why_not: list[str] | None = None


class EngineMemory(msgspec.Struct, frozen=True):
    """Device memory each TensorRT engine asks for at execution context creation (backend notes
    key ``engine_memory``): the sum when every engine told it, else None and why not."""

    engine_device_memory_bytes: int | None = None
    per_engine_bytes: list[int | None] = []
    why_not: list[str] | None = None


class Reference(msgspec.Struct, frozen=True):
    backend: str
    how: str
    device: str
    tf32: bool
    # "computed" in this run, or "loaded" from the reference cache (profiler.collect.reference);
    # None in results written before the cache existed, and for a generation's reference
    source: str | None = None
    cache_key: str | None = None
    cache: str | None = None  # "hit", "stored", or why the cache was not used


class Comparison(msgspec.Struct, frozen=True):
    """One tensor against its FP32 eager counterpart (profiler.collect.numerics.compare)."""

    finite: bool | None = None
    elements: int | None = None
    max_abs_error: float | None = None
    mean_abs_error: float | None = None
    rel_l2_error: float | None = None
    cosine_similarity: float | None = None
    top1_agreement: float | None = None
    top1_over: str | None = None


class TokenAgreement(msgspec.Struct, frozen=True):
    """Greedy tokens against the reference's: share of (sequence, position) tokens equal, share
    of sequences identical."""

    positions_equal: float
    sequences_identical: float
    sequences: int
    positions: int


class Numerics(msgspec.Struct, frozen=True):
    """The check against the FP32 eager reference (profiler.collect.numerics), or why it was
    skipped. A generation run's top-level figures are its first-step logits'; the three generation
    comparisons are None for a forward run (and absent from its result.json)."""

    skipped: str | None = None
    reason: str | None = None  # the detail of a skip (e.g. the reference ran out of memory)
    finite: bool | None = None
    elements: int | None = None
    max_abs_error: float | None = None
    mean_abs_error: float | None = None
    rel_l2_error: float | None = None
    cosine_similarity: float | None = None
    top1_agreement: float | None = None
    top1_over: str | None = None
    reference: Reference | None = None
    first_step_logits: Comparison | None = None
    encoder_output: Comparison | None = None
    tokens: TokenAgreement | None = None


class BackendFacts(msgspec.Struct, frozen=True):
    """What the backend did. In result.json: ``backend: {name, family, precision, notes}`` with
    the named facts inside ``notes``, and ``artifacts`` at the top level."""

    name: str
    family: str
    precision: str
    compile_s: float | None = None  # engine or graph build, when the backend compiled
    cache_load_s: float | None = None  # loading a cached engine instead (notes key load_s)
    warnings: list[str] = []
    artifacts: list[str] = []  # file names in the run folder
    engine_memory: EngineMemory | None = None  # ttrt_* backends (notes key engine_memory)
    extra: dict[str, Any] = {}  # any other fact (ORT providers, calibration time ...)


class OutputInfo(msgspec.Struct, frozen=True, omit_defaults=True):
    type: str | None = None
    shape: list[int] | None = None
    dtype: str | None = None
    checksum: float | None = None
    finite: bool | None = None


class Schedule(msgspec.Struct, frozen=True):
    wait: int
    warmup: int
    active: int
    repeat: int


class ProfileInfo(msgspec.Struct, frozen=True):
    activities: list[str]
    schedule: Schedule
    steps_run: int
    capture: str = "torch"
    step_span: str = "inference_step"
    nvtx_domain: str | None = None
    step_is: str | None = None  # what one profiler step is, when not one forward pass
    phase_spans: list[str] | None = None  # record_function spans inside a step (generation)


class TraceInfo(msgspec.Struct, frozen=True):
    files: list[str]  # the trace files, as the run named them
    dir: str | None = None
    skipped: str | None = None  # why there is no trace (--capture cuda-profiler-api)
    #: kernel name -> launches in one call made without the profiler (recorded by the harness
    #: where it can; absent: not recorded). The trace analysis compares the profiled steps with it
    untraced_kernels: dict[str, int] | None = None


class RankFigures(msgspec.Struct, frozen=True):
    """One rank of a run over several (run --nproc): its device, its trace files and its own
    timed window's figures (rank 0's are the run's own, in ``timing`` and ``generation``)."""

    rank: int
    device: str
    trace_files: list[str]
    #: its per-iteration files (latency.csv, generation_steps.csv): rank 0's are the run's own,
    #: another rank's are under ranks/rank<k>/ in the run folder
    files_dir: str
    p50_ms: float
    mean_ms: float
    iterations: int
    ttft_p50_ms: float | None = None
    tpot_p50_ms: float | None = None
    tokens_per_s: float | None = None


class Ranks(msgspec.Struct, frozen=True):
    """How a run over several ranks (run --nproc N) was launched and split, and each rank's
    figures: every rank ran the same timed window and profiled steps, each wrote its trace into
    the run's one trace folder (``<model>.rank<k>.<id>.pt.trace.json[.gz]``, the trace's
    ``distributedInfo`` holding its rank)."""

    world_size: int
    backend: str  # the process group's: nccl (one rank per GPU) or gloo (CPU)
    launcher: str
    parallelism: str
    ranks: list[RankFigures]


class Environment(msgspec.Struct, frozen=True):
    torch: str | None = None
    gpu: dict[str, Any] | None = None
    cuda_runtime: str | None = None
    cudnn: int | None = None
    packages: dict[str, str] = {}
    python: str | None = None
    platform: str | None = None
    hostname: str | None = None
    #: the CPU's model (runs.noise_floor.cpu_model): on a CPU, the machine kind a floor is kept
    #: for; None in runs recorded before it was
    cpu: str | None = None
    command_line: list[str] = []
    git: dict[str, Any] | None = None
    nvtx: bool | None = None


class Precision(msgspec.Struct, frozen=True):
    tf32: bool
    matmul_allow_tf32: bool | None = None
    cudnn_allow_tf32: bool | None = None
    cudnn_benchmark: bool | None = None


class RooflineInputs(msgspec.Struct, frozen=True, omit_defaults=True):
    """What one inference must do at least (profiler.collect.flops): FLOPs counted on the eager
    model and minimum bytes (weights once + inputs + outputs) at the run's precision; or why the
    count failed (``error``). ``source`` (key ``from``) names a table the figures were taken
    from."""

    flops_per_batch: int | None = None
    flops_by_operator: dict[str, int] = {}
    batch_size: int | None = None
    weight_bytes: int | None = None
    input_bytes: int | None = None
    output_bytes: int | None = None
    min_bytes_per_batch: int | None = None
    bytes_per_element: int | None = None
    precision: str | None = None
    method: str | None = None
    error: str | None = None
    source: str | None = msgspec.field(default=None, name="from")


class Quantiles(msgspec.Struct, frozen=True):
    """Mean and percentiles in ms of a set of times (None when the set is empty)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    count: int


class Generation(msgspec.Struct, frozen=True):
    """--workload generate: what one generation is and its per-phase, per-token figures
    (profiler.collect.workloads.generate)."""

    kind: str  # "encoder-decoder" or "decoder-only"
    phases: list[str]  # the record_function spans of one generation
    max_new_tokens: int
    input_len: int  # source (encoder-decoder) or prompt (decoder-only) tokens
    eos: str
    steps_csv: str  # one row per token step
    ttft_ms: Quantiles  # time to first token
    encode_ms: Quantiles | None  # the encoder alone (encoder-decoder)
    per_token_ms: Quantiles  # each token after the first: inter-token latency (ITL)
    sequence_ms: Quantiles  # start to last token
    tokens_per_s: float
    step_ms_by_position: list[float]  # mean step time of each token position
    generations: int  # timed generations
    #: time per output token: each generation's mean step after the first token (runs recorded
    #: before it lack it)
    tpot_ms: Quantiles | None = None
    #: the phases' GPU time and enqueue, each in a window of its own after the timed one
    #: (profiler.collect.gpu_time): "ttft" one prefill and its token (the encoder and the first
    #: step, encoder-decoder), "tpot" one decode step; None where not measured
    phase_gpu: dict[str, GpuCompute] | None = None
    #: a decoder-only LM's phases as the roofline reads them: "prefill" (the prompt) and
    #: "decode" (one step at the middle of the decode), each its FLOPs and minimum bytes
    #: (profiler.collect.flops.lm_phase_inputs); None where not counted
    phase_roofline_inputs: dict[str, RooflineInputs] | None = None


class RunResult(msgspec.Struct, frozen=True, kw_only=True):
    """runs/<run>/result.json: one model x backend x batch size, measured. The field order is
    result.json's key order."""

    schema: int = RESULT_SCHEMA
    run_name: str
    created: str
    model: str
    batch_size: int
    device: str
    workload: str = "forward"  # "generate": one greedy generation per iteration and step
    config: ConfigRecord  # type: ignore[valid-type]  # a Struct built from RunConfig's fields
    backend: BackendFacts
    numerics: Numerics | None = None  # absent in the earliest schema-1 files
    timing: TimingStats
    memory: Memory | None = None  # absent in runs recorded before memory was
    output: OutputInfo
    profile: ProfileInfo
    trace: TraceInfo
    latency_csv: str
    environment: Environment
    precision: Precision | None = None
    roofline_inputs: RooflineInputs | None = None  # absent before FLOPs were counted
    generation: Generation | None = None  # --workload generate
    # the GPU's SM clock, throttle reasons, temperature and power (NVML) and the host's load
    # around the timed window, or why not (profiler.collect.gpu_state); absent in runs recorded
    # before it was
    gpu_state: GpuState | None = None
    #: a package.module:function model's module file and its SHA-256, as the run imported it
    #: (profiler.runs.model_source; absent for a built-in model and in runs recorded before)
    model_source: ModelSource | None = None
    #: run --nproc N: the ranks, their process group and each one's figures and traces (absent
    #: for a run in one process)
    ranks: Ranks | None = None

    @property
    def run_dir(self) -> Path:
        return Path(self.latency_csv).parent


def _backend_from_json(data: dict[str, Any]) -> dict[str, Any]:
    backend = dict(data.get("backend") or {})
    notes = dict(backend.pop("notes", None) or {})
    backend.update(
        compile_s=notes.pop("compile_s", None),
        cache_load_s=notes.pop("load_s", None),
        warnings=notes.pop("warnings", []),
        engine_memory=notes.pop("engine_memory", None),
        extra=notes,
        artifacts=list(data.get("artifacts") or []),
    )
    notes.pop("artifacts", None)
    return backend


def _backend_to_json(facts: BackendFacts) -> dict[str, Any]:
    notes = msgspec.to_builtins(facts.extra, enc_hook=str)
    for key, value in (("compile_s", facts.compile_s), ("load_s", facts.cache_load_s)):
        if value is not None:
            notes[key] = value
    notes["warnings"] = list(facts.warnings)
    if facts.engine_memory is not None:
        notes["engine_memory"] = msgspec.to_builtins(facts.engine_memory)
    return {
        "name": facts.name,
        "family": facts.family,
        "precision": facts.precision,
        "notes": notes,
    }


def result_from_dict(data: object, source: str = "result.json") -> RunResult:
    """A parsed result.json (any schema up to the current one) -> RunResult."""
    if not isinstance(data, dict):
        raise UserError(f"{source} is not a run result (not a JSON object)")
    schema = data.get("schema", 1)
    if not isinstance(schema, int) or schema > RESULT_SCHEMA:
        raise UserError(
            f"{source} has result schema {schema!r}; this version reads up to "
            f"{RESULT_SCHEMA}: update the profiler"
        )
    data = {**data, "backend": _backend_from_json(data), "schema": RESULT_SCHEMA}
    data.pop("artifacts", None)
    try:
        return msgspec.convert(data, RunResult, strict=False)
    except msgspec.ValidationError as error:
        raise UserError(f"{source} is not a run result this version reads ({error})") from None


#: keys a forward run's result.json leaves out (a generation run writes them): path -> the
#: value that means absent
_GENERATION_ONLY = {
    ("workload",): "forward",
    ("generation",): None,
    ("timing", "unit"): None,
    ("profile", "step_is"): None,
    ("profile", "phase_spans"): None,
    ("numerics", "first_step_logits"): None,
    ("numerics", "encoder_output"): None,
    ("numerics", "tokens"): None,
}


def _drop_generation_only(data: dict[str, Any]) -> None:
    if data.get("workload") != "forward":
        return
    for *parents, key in _GENERATION_ONLY:
        holder = data
        for parent in parents:
            holder = holder.get(parent) or {}
        path = (*parents, key)
        if key in holder and holder[key] == _GENERATION_ONLY[path]:
            del holder[key]


def result_to_dict(result: RunResult) -> dict[str, Any]:
    """RunResult -> result.json's JSON object (the key names and order of schema 1; the
    generation keys only for a generation run)."""
    data = msgspec.to_builtins(result, enc_hook=str)  # facts of odd types: as text, as before
    _drop_generation_only(data)
    ordered: dict[str, Any] = {}
    for key, value in data.items():
        if key == "backend":
            ordered["backend"] = _backend_to_json(result.backend)
            ordered["artifacts"] = sorted(result.backend.artifacts)
        elif key in ("memory", "gpu_state", "model_source", "ranks") and value is None:  # no key
            continue
        elif key == "trace" and value.get("untraced_kernels") is None:  # not recorded: no key
            ordered[key] = {k: v for k, v in value.items() if k != "untraced_kernels"}
        elif key == "numerics" and value is not None:  # either why it was skipped, or figures
            ordered[key] = _numerics_to_json(value)
        else:
            ordered[key] = value
    return ordered


def _numerics_to_json(value: dict[str, Any]) -> dict[str, Any]:
    """Either why the check was skipped (and its detail, when there is one), or the figures."""
    if value["skipped"] is None:
        return {k: v for k, v in value.items() if k not in ("skipped", "reason")}
    return {k: value[k] for k in ("skipped", "reason") if value[k] is not None}


#: the largest result.json read (one is a few KiB; a generation's tokens add a few more)
MAX_RESULT_BYTES = 64 << 20


def _finite_timing(data: object, path: Path) -> None:
    """Refuse, in one line, a timing figure that is not a finite number (a result.json this
    tool writes holds none: it writes a non-finite number as null); elsewhere in the file
    (an old run's NaN output checksum) one is kept and shown as it is."""
    timing = data.get("timing") if isinstance(data, dict) else None
    stack: list[tuple[str, object]] = [("timing", timing)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(
                f"{path}: {where} is {value}, not a finite number: not a timing this tool "
                "records (the file is damaged or was edited)"
            )
        if isinstance(value, dict):
            stack += [(f"{where}.{key}", item) for key, item in value.items()]
        elif isinstance(value, list):
            stack += [(f"{where}[{index}]", item) for index, item in enumerate(value)]


def read_result(path: Path) -> RunResult:
    """The one way to read a result.json (a run folder is accepted too): a regular file of at
    most MAX_RESULT_BYTES, read before it is parsed; a timing figure that is not finite is
    refused (``_finite_timing``)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULT_FILE
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror}") from None
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):  # a FIFO would hang (a folder: before fdopen refuses)
        os.close(descriptor)
        raise UserError(f"cannot read {path}: not a regular file")
    with os.fdopen(descriptor, "rb") as handle:
        try:  # (its size checked before it is read, and after: it may grow meanwhile)
            raw = b"" if info.st_size > MAX_RESULT_BYTES else handle.read(MAX_RESULT_BYTES + 1)
        except OSError as error:
            raise UserError(f"cannot read {path}: {error.strerror}") from None
    if len(raw) > MAX_RESULT_BYTES or info.st_size > MAX_RESULT_BYTES:
        raise UserError(
            f"{path} is larger than {MAX_RESULT_BYTES >> 20} MiB: not a run's result.json"
        )
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as error:
        raise UserError(f"{path} is not readable JSON ({first_line(error)[:200]})") from None
    _finite_timing(data, path)
    return result_from_dict(data, str(path))


def try_read_result(path: Path) -> RunResult | None:
    """read_result, or None for a missing or unreadable file (views that show what they can)."""
    try:
        return read_result(path)
    except UserError:
        return None


def result_text(result: RunResult) -> str:
    """result.json's text: indented JSON; a non-finite number is written as null."""
    encoded = msgspec.json.encode(result_to_dict(result), enc_hook=str)
    return msgspec.json.format(encoded, indent=2).decode("utf-8") + "\n"


def write_result(run_dir: Path, result: RunResult) -> Path:
    path = Path(run_dir) / RESULT_FILE
    write_text_atomic(path, result_text(result))
    return path


def latency_csv_of(result: RunResult, result_json: Path | None = None) -> Path | None:
    """A run's latency.csv: beside its result.json first, else where result.json names it."""
    candidates = [] if result_json is None else [Path(result_json).parent / LATENCY_CSV]
    candidates.append(Path(result.latency_csv))
    return next((p for p in candidates if p.is_file()), None)

"""The one owner of the folder layout, and the typed run contract.

Layout (``--runs-dir`` and ``--tb-dir`` move the two roots)::

    runs/<run>/result.json         RunResult, read back only through read_result()
    runs/<run>/latency.csv         one row per timed iteration
    runs/<run>/ncu.csv[.gz]        `profile.py ncu`'s raw metrics
    runs/<run>/engine_layers_<i>.json, engine_layer_times_<i>.json   a TensorRT run's engines
    tb_logs/<run>/*.pt.trace.json[.gz]   the run's Kineto traces (named in result.json)
    runs/<sweep>/sweep.json        SweepManifest, read back only through read_manifest()
    runs/<sweep>/<cell>/ and tb_logs/<sweep>/<cell>/   a sweep cell's run

A TARGET on the command line is resolved here, by one rule set (resolve_target): a file; a
folder (run folder, tb_logs folder, folder of traces); or a name looked up as runs/<name> then
tb_logs/<name> (``<sweep>/<cell>`` included). Analysis (profiler.trace) gets the paths and never
sees these conventions.

The result structs mirror result.json's keys, so files written by earlier versions read
(schema 1, upgraded on reading) and tools reading the JSON keep working. A backend reports a
fact by putting it into ``Prepared.notes``: ``compile_s``, ``load_s`` (engine cache load),
``warnings`` and ``artifacts`` become BackendFacts' named fields, every other key lands in
``BackendFacts.extra`` (written under ``backend.notes`` in result.json, as before).
"""

from __future__ import annotations

import json
import typing
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

import msgspec

from .errors import UserError
from .fsutil import LEFTOVER, write_text_atomic

RESULT_FILE = "result.json"
LATENCY_CSV = "latency.csv"
MANIFEST = "sweep.json"
NCU_CSV_NAMES = ("ncu.csv", "ncu.csv.gz")
RUNS_ROOT, TB_ROOT = "runs", "tb_logs"
TRACE_PATTERNS = ("*.pt.trace.json", "*.pt.trace.json.gz")
LOOSE_PATTERNS = ("*.json", "*.json.gz")
#: files in a run or sweep folder that are never traces, whatever their extension
NOT_TRACES = {RESULT_FILE, MANIFEST}

#: 1: the dict the harness wrote until the contract was typed (no profile.capture in the
#: earliest runs); 2: the same keys, written from RunResult
RESULT_SCHEMA = 2
MANIFEST_SCHEMA = 1


# ---- the run contract ----------------------------------------------------------------------

def _config_struct() -> type:
    """ConfigRecord: RunConfig's fields as recorded in result.json (paths as strings), plus the
    derived run_name. Generated from RunConfig, so a new option is recorded without a second
    declaration; fields a file lacks take RunConfig's defaults."""
    from .config import RunConfig

    hints = typing.get_type_hints(RunConfig)
    spec = []
    for f in fields(RunConfig):
        kind = hints[f.name]
        if Path in typing.get_args(kind) or kind is Path:
            kind = str | None
        default = f.default if f.default_factory is MISSING else msgspec.field(
            default_factory=f.default_factory)
        if isinstance(default, Path):
            default = str(default)
        spec.append((f.name, kind, default))
    spec.append(("run_name", str, ""))
    return msgspec.defstruct("ConfigRecord", spec, frozen=True, module=__name__)


ConfigRecord = _config_struct()


class RepeatSpread(msgspec.Struct, frozen=True):
    """--repeat-runs: the p50 of each timed window (the first is the run's own), and spread."""

    runs: int
    p50_ms: list[float]
    median_p50_ms: float
    min_p50_ms: float
    max_p50_ms: float
    range_pct_of_median: float


class NoiseStats(msgspec.Struct, frozen=True):
    """The timed window's spread, shape and drift (profiler.trace.noise.Noise; times in ms)."""

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


class TimingStats(msgspec.Struct, frozen=True):
    """The timed window (profiler.timing) and the time to get there. Runs recorded before
    iterations could be chosen by time, or noise was recorded, lack the last three fields."""

    iters: int
    mean_ms: float
    std_ms: float
    min_ms: float
    p50_ms: float
    p90_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    throughput_samples_per_s: float
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
    # where the run's seconds went (profiler.phases: phase -> wall seconds, in run order) and
    # the run's wall seconds (imports, when recorded, + harness start to result.json written);
    # absent in runs recorded before phases were
    phases_s: dict[str, float] | None = None
    wall_s: float | None = None


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
    # "computed" in this run, or "loaded" from the reference cache (profiler.reference); None in
    # results written before the cache existed, and for a generation's reference
    source: str | None = None
    cache_key: str | None = None
    cache: str | None = None  # "hit", "stored", or why the cache was not used


class Comparison(msgspec.Struct, frozen=True):
    """One tensor against its FP32 eager counterpart (profiler.numerics.compare)."""

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
    """The check against the FP32 eager reference (profiler.numerics), or why it was skipped.
    A generation run's top-level figures are its first-step logits'; the three generation
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


class Environment(msgspec.Struct, frozen=True):
    torch: str | None = None
    gpu: dict[str, Any] | None = None
    cuda_runtime: str | None = None
    cudnn: int | None = None
    packages: dict[str, str] = {}
    python: str | None = None
    platform: str | None = None
    hostname: str | None = None
    command_line: list[str] = []
    git: dict[str, Any] | None = None
    nvtx: bool | None = None


class Precision(msgspec.Struct, frozen=True):
    tf32: bool
    matmul_allow_tf32: bool | None = None
    cudnn_allow_tf32: bool | None = None
    cudnn_benchmark: bool | None = None


class RooflineInputs(msgspec.Struct, frozen=True, omit_defaults=True):
    """What one inference must do at least (profiler.flops): FLOPs counted on the eager model
    and minimum bytes (weights once + inputs + outputs) at the run's precision; or why the count
    failed (``error``). ``source`` (key ``from``) names a table the figures were taken from."""

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
    (profiler.workloads.generate)."""

    kind: str  # "encoder-decoder" or "decoder-only"
    phases: list[str]  # the record_function spans of one generation
    max_new_tokens: int
    input_len: int  # source (encoder-decoder) or prompt (decoder-only) tokens
    eos: str
    steps_csv: str  # one row per token step
    ttft_ms: Quantiles  # time to first token
    encode_ms: Quantiles | None  # the encoder alone (encoder-decoder)
    per_token_ms: Quantiles  # each token after the first
    sequence_ms: Quantiles  # start to last token
    tokens_per_s: float
    step_ms_by_position: list[float]  # mean step time of each token position
    generations: int  # timed generations


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
    config: ConfigRecord  # type: ignore[valid-type]
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

    @property
    def run_dir(self) -> Path:
        return Path(self.latency_csv).parent


def _backend_from_json(data: dict) -> dict:
    backend = dict(data.get("backend") or {})
    notes = dict(backend.pop("notes", None) or {})
    backend.update(compile_s=notes.pop("compile_s", None), cache_load_s=notes.pop("load_s", None),
                   warnings=notes.pop("warnings", []),
                   engine_memory=notes.pop("engine_memory", None), extra=notes,
                   artifacts=list(data.get("artifacts") or []))
    notes.pop("artifacts", None)
    return backend


def _backend_to_json(facts: BackendFacts) -> dict:
    notes = msgspec.to_builtins(facts.extra, enc_hook=str)
    for key, value in (("compile_s", facts.compile_s), ("load_s", facts.cache_load_s)):
        if value is not None:
            notes[key] = value
    notes["warnings"] = list(facts.warnings)
    if facts.engine_memory is not None:
        notes["engine_memory"] = msgspec.to_builtins(facts.engine_memory)
    return {"name": facts.name, "family": facts.family, "precision": facts.precision,
            "notes": notes}


def result_from_dict(data: object, source: str = "result.json") -> RunResult:
    """A parsed result.json (any schema up to the current one) -> RunResult."""
    if not isinstance(data, dict):
        raise UserError(f"{source} is not a run result (not a JSON object)")
    schema = data.get("schema", 1)
    if not isinstance(schema, int) or schema > RESULT_SCHEMA:
        raise UserError(f"{source} has result schema {schema!r}; this version reads up to "
                        f"{RESULT_SCHEMA}: update the profiler")
    data = {**data, "backend": _backend_from_json(data), "schema": RESULT_SCHEMA}
    data.pop("artifacts", None)
    try:
        return msgspec.convert(data, RunResult, strict=False)
    except msgspec.ValidationError as error:
        raise UserError(f"{source} is not a run result this version reads ({error})") from None


#: keys a forward run's result.json leaves out (a generation run writes them): path -> the
#: value that means absent
_GENERATION_ONLY = {("workload",): "forward", ("generation",): None, ("timing", "unit"): None,
                    ("profile", "step_is"): None, ("profile", "phase_spans"): None,
                    ("numerics", "first_step_logits"): None,
                    ("numerics", "encoder_output"): None, ("numerics", "tokens"): None}


def _drop_generation_only(data: dict) -> None:
    if data.get("workload") != "forward":
        return
    for *parents, key in _GENERATION_ONLY:
        holder = data
        for parent in parents:
            holder = holder.get(parent) or {}
        if key in holder and holder[key] == _GENERATION_ONLY[(*parents, key)]:
            del holder[key]


def result_to_dict(result: RunResult) -> dict:
    """RunResult -> result.json's JSON object (the key names and order of schema 1; the
    generation keys only for a generation run)."""
    data = msgspec.to_builtins(result, enc_hook=str)  # facts of odd types: as text, as before
    _drop_generation_only(data)
    ordered = {}
    for key, value in data.items():
        if key == "backend":
            ordered["backend"] = _backend_to_json(result.backend)
            ordered["artifacts"] = sorted(result.backend.artifacts)
        elif key == "memory" and value is None:  # not recorded: no key, as before
            continue
        elif key == "numerics" and value is not None:  # either why it was skipped, or figures
            ordered[key] = _numerics_to_json(value)
        else:
            ordered[key] = value
    return ordered


def _numerics_to_json(value: dict) -> dict:
    """Either why the check was skipped (and its detail, when there is one), or the figures."""
    if value["skipped"] is None:
        return {k: v for k, v in value.items() if k not in ("skipped", "reason")}
    return {k: value[k] for k in ("skipped", "reason") if value[k] is not None}


def read_result(path: Path) -> RunResult:
    """The one way to read a result.json (a run folder is accepted too)."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULT_FILE
    try:
        data = json.loads(path.read_bytes())
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror}") from None
    except (ValueError, RecursionError) as error:
        raise UserError(f"{path} is not readable JSON ({error})") from None
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


# ---- the sweep manifest --------------------------------------------------------------------

class SweepCell(msgspec.Struct):
    """One backend x batch size of a sweep; updated as it runs."""

    backend: str
    batch_size: int
    status: str = "pending"
    reason: str | None = None
    exit_code: int | None = None
    started: str | None = None
    finished: str | None = None
    elapsed_s: float | None = None
    log: str | None = None
    metrics: dict[str, Any] | None = None
    # the cell's value of each option the sweep was given a list of (--max-new-tokens 16,64)
    axis: dict[str, Any] | None = None
    gpu: str | None = None  # the GPU that ran it (as CUDA_VISIBLE_DEVICES names it)
    node: str | None = None  # the host that ran it
    worker: str | None = None  # the worker process: <slot>/pid<N>


class SweepManifest(msgspec.Struct):
    """runs/<sweep>/sweep.json: the grid, the shared options, and each cell's state."""

    options: dict[str, Any]
    name: str = ""
    model: str = ""
    backends: list[str] = []
    batch_sizes: list[int] = []
    baseline: str = ""
    cells: dict[str, SweepCell] = {}
    schema: int = MANIFEST_SCHEMA
    kind: str = "infer-profiler sweep"
    created: str | None = None
    updated: str | None = None
    cell_timeout_s: float | None = None
    runs_dir: str | None = None
    tb_dir: str | None = None
    command_line: list[str] = []
    wall_s: float | None = None


def is_leftover(path: Path) -> bool:
    """A run's staging folder (``.<run>.partial-*``: half-built, or left by a killed run), a
    replaced run on its way out (``.<run>.old-*``) or a lock file (``.<run>.lock``): never a run,
    a sweep or a trace, whatever it holds."""
    name = Path(path).name
    return bool(LEFTOVER.match(name)) or (name.startswith(".") and name.endswith(".lock"))


def is_sweep_dir(folder: Path) -> bool:
    return not is_leftover(folder) and (Path(folder) / MANIFEST).is_file()


def read_manifest(sweep_dir: Path) -> SweepManifest | None:
    """The sweep manifest in ``sweep_dir``, or None when there is none."""
    path = Path(sweep_dir) / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as error:
        raise UserError(f"{path} is not readable JSON ({error}); remove it or use --name") \
            from None
    if not isinstance(data, dict) or "cells" not in data or "options" not in data:
        raise UserError(f"{path} is not a sweep manifest; use another --name")
    try:  # every part that is read has its type: a damaged file is refused before any rewrite
        return msgspec.convert(data, SweepManifest, strict=False)
    except msgspec.ValidationError as error:
        raise UserError(f"{path} is damaged or not a sweep manifest this version reads "
                        f"({error}); remove it or use another --name") from None


def write_manifest(sweep_dir: Path, manifest: SweepManifest) -> None:
    text = msgspec.json.format(msgspec.json.encode(manifest), indent=2)
    write_text_atomic(Path(sweep_dir) / MANIFEST, text.decode("utf-8") + "\n")


def find_sweep(target: str | Path, root: Path | None = None) -> Path | None:
    """A sweep folder, its sweep.json, or a sweep name under runs/ -> the sweep folder."""
    root = Path.cwd() if root is None else root
    path = Path(target)
    for candidate in (path, root / RUNS_ROOT / path):
        folder = candidate.parent if candidate.name == MANIFEST else candidate
        if is_sweep_dir(folder):
            return folder
    return None


# ---- targets -------------------------------------------------------------------------------

@dataclass
class Target:
    path: Path  # the trace to summarize
    traces: list[Path]  # every trace of the target (one per profiler cycle with --repeat)
    note: str | None = None  # e.g. which of several traces was picked
    result_json: Path | None = None  # the run's result.json, when the target is a run folder
    result: RunResult | None = None  # what it says, when it reads

    @property
    def context(self):
        """What the run's result says about its arithmetic (trace.rules.RunContext)."""
        return run_context(self.result, self.result_json) if self.result else None

    def summary(self):
        """The trace summarized with the run's context (what every view should show)."""
        from .trace.summary import summarize

        return summarize(self.path, self.context)


def run_context(result: RunResult, source: Path | None = None):
    from .trace.rules import RunContext

    name = source.name if source is not None else RESULT_FILE
    return RunContext(precision=result.backend.precision,
                      tf32=result.precision.tf32 if result.precision else None,
                      source=f"{result.backend.name} run, {name}")


def locate(target: str, root: Path | None = None) -> Path:
    """TARGET as given when it exists, else runs/<target> then tb_logs/<target> (a run name or
    ``<sweep>/<cell>``; never an absolute path or one with ``..``)."""
    root = Path.cwd() if root is None else root
    path = Path(target).expanduser()
    if any(is_leftover(part) for part in Path(target).parts):
        raise UserError(f"{target} is a staging folder or lock of an unfinished run, not a run")
    if not path.exists() and not path.is_absolute() and ".." not in Path(target).parts:
        for base in (RUNS_ROOT, TB_ROOT):
            if (root / base / target).exists():
                return root / base / target
    if not path.exists():
        raise UserError(f"no such file, folder or run: {target} (looked in runs/ and tb_logs/ "
                        "too)")
    return path


def resolve_target(target: str, root: Path | None = None) -> Target:
    """A trace file; a run folder (result.json naming its traces); a folder of traces; or a run
    name (see locate). Several traces: the newest is summarized, and the note says so."""
    root = Path.cwd() if root is None else root
    path = locate(target, root)
    if path.is_file():
        return Target(path, [path])
    candidates = traces_named_by_result(path, root) or traces_in_folder(path)
    if not candidates:
        raise UserError(f"no trace files in {path}: expected *.pt.trace.json[.gz] or a "
                        "result.json naming them")
    result_json = path / RESULT_FILE if (path / RESULT_FILE).is_file() else None
    result = try_read_result(result_json) if result_json else None
    if len(candidates) == 1:
        return Target(candidates[0], candidates, result_json=result_json, result=result)
    newest = max(candidates, key=lambda p: p.stat().st_mtime)
    return Target(newest, candidates, note=f"{len(candidates)} traces in {path}; using the newest, "
                                           f"{newest.name}", result_json=result_json, result=result)


def traces_of(target: str, root: Path | None = None) -> list[Path]:
    """Every trace of TARGET (resolved as resolve_target does), leaving out tb-compat copies:
    all traces of a run are converted by tb-compat (one per profiler cycle with --repeat)."""
    from .trace.tb_compat import COMPAT_SUFFIX

    path = locate(target, root)
    found = [path] if path.is_file() else \
        traces_named_by_result(path, root) or traces_in_folder(path)
    found = [p for p in found if path.is_file() or not p.parent.name.endswith(COMPAT_SUFFIX)]
    if not found:
        raise UserError(f"no trace files in {path}")
    return found


def _trace_names(result_json: Path) -> list[str]:
    """The trace file names a result.json lists; tolerant of files that are not RunResults."""
    try:
        data = json.loads(result_json.read_bytes())
    except (OSError, ValueError, RecursionError) as error:
        raise UserError(f"{result_json} is not readable JSON ({error})") from None
    trace = data.get("trace") if isinstance(data, dict) else None
    files = trace.get("files") if isinstance(trace, dict) else None
    if not files:
        return []
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        raise UserError(f"{result_json}: trace.files must be a list of file names (got "
                        f"{json.dumps(files)[:80]})")
    return files


def traces_named_by_result(folder: Path, root: Path | None = None) -> list[Path]:
    result_json = folder / RESULT_FILE
    if not result_json.is_file():
        return []
    files = _trace_names(result_json)
    if not files:
        return []
    root = Path.cwd() if root is None else root
    found = []
    for name in files:
        p = Path(name)
        # relative names are relative to where `run` was started: usually the folder that holds
        # runs/, so try the run folder's ancestors too (runs/<run>/, runs/<sweep>/<run>/)
        bases = [root, Path.cwd(), folder, *list(folder.resolve().parents)[:4]]
        for candidate in ([p] if p.is_absolute() else [base / p for base in bases]):
            if candidate.is_file():
                found.append(candidate)
                break
    if not found:
        raise UserError(f"{result_json} names trace files that do not exist: {', '.join(files)}")
    return found


def traces_in_folder(folder: Path) -> list[Path]:
    """Trace files under ``folder``, outside hidden folders and files: staging folders, replaced
    runs on their way out (see is_leftover) and temporary files are never a trace."""
    for patterns in (TRACE_PATTERNS, LOOSE_PATTERNS):
        try:
            found = sorted({p for pattern in patterns for p in folder.rglob(pattern)
                            if p.is_file() and p.name not in NOT_TRACES
                            and not any(part.startswith(".")
                                        for part in p.relative_to(folder).parts)})
        except OSError as error:  # /proc and the like: give the folder, not a traceback
            raise UserError(f"cannot search {folder} for traces ({error.strerror or error}: "
                            f"{error.filename}); give a trace file or a run folder") from None
        if found:
            return found
    return []


def engine_layer_files(run_dir: Path) -> list[tuple[Path, Path | None]]:
    """A TensorRT run's (engine_layers_<i>.json, engine_layer_times_<i>.json or None), one pair
    per engine."""
    pairs = []
    for layers in sorted(Path(run_dir).glob("engine_layers_*.json")):
        index = layers.stem.rsplit("_", 1)[-1]
        times = Path(run_dir) / f"engine_layer_times_{index}.json"
        pairs.append((layers, times if times.is_file() else None))
    return pairs


def latency_csv_of(result: RunResult, result_json: Path | None = None) -> Path | None:
    """A run's latency.csv: beside its result.json first, else where result.json names it."""
    candidates = [] if result_json is None else [Path(result_json).parent / LATENCY_CSV]
    candidates.append(Path(result.latency_csv))
    return next((p for p in candidates if p.is_file()), None)


def ncu_csv_of(target: str, root: Path | None = None) -> Path | None:
    """``ncu.csv`` for a target: the CSV itself, or the one in the run folder (runs/<run>/, also
    when the target is the run's name, its tb_logs/<run>/ folder or a trace in it)."""
    root = Path.cwd() if root is None else root
    path = Path(target).expanduser()
    if path.is_file() and path.name.endswith((".csv", ".csv.gz")):
        return path
    folders = []
    if path.is_file():  # a trace in tb_logs/<run>/
        folders += [path.parent, path.parent.parent.parent / RUNS_ROOT / path.parent.name]
    elif path.is_dir():
        folders += [path, path.parent.parent / RUNS_ROOT / path.name]
    elif not path.is_absolute() and ".." not in path.parts:  # a run name, as locate() reads it
        folders.append(root / RUNS_ROOT / target)
    for folder in folders:
        for name in NCU_CSV_NAMES:
            if (folder / name).is_file():
                return folder / name
    return None


# ---- where a run may be written ------------------------------------------------------------

#: what makes two runs the same run (besides backend and batch size, which are in the name)
IDENTITY = ("model", "image_size", "seq_len", "weights")


def _identity(record) -> dict:
    return {key: (None if getattr(record, key) is None else str(getattr(record, key)))
            if key == "weights" else getattr(record, key) for key in IDENTITY}


def check_separate_roots(runs_dir: Path, tb_dir: Path) -> None:
    if Path(runs_dir).resolve() == Path(tb_dir).resolve():
        raise UserError(f"--runs-dir and --tb-dir are the same folder ({runs_dir}): the trace "
                        "folder would replace the results folder; give them different folders")


def check_destination(config) -> None:
    """Refuse, before anything is built, a run that would replace what it is not: a sweep
    folder, a run of another model / image size / sequence length / weights (unless
    ``config.replace``), or a run whose results and trace folders are one folder."""
    run_dir = config.runs_dir / config.run_name
    tb_run_dir = config.tb_dir / config.run_name
    check_separate_roots(config.runs_dir, config.tb_dir)
    for folder in (run_dir, tb_run_dir):
        if is_sweep_dir(folder):
            raise UserError(f"{folder} is a sweep ({MANIFEST}); a run never replaces a sweep: "
                            "pass --name for another run name")
    if not run_dir.exists() or config.replace:
        return
    existing = try_read_result(run_dir / RESULT_FILE)
    if existing is None:
        if any(run_dir.iterdir()):
            raise UserError(f"{run_dir} exists and holds no readable {RESULT_FILE}: pass "
                            "--replace to replace it, or --name for another run name")
        return
    old, new = _identity(existing.config), _identity(config)
    if old != new:
        changed = ", ".join(f"{key.replace('_', ' ')} {old[key]} (now {new[key]})"
                            for key in IDENTITY if old[key] != new[key])
        raise UserError(f"{run_dir} holds another run ({changed}): pass --replace to replace "
                        "it, or --name for another run name")

"""Every knob of a run in one validated, frozen place."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from profiler import units
from profiler.errors import UserError
from profiler.runs import backends
from profiler.runs.workloads import WORKLOADS as WORKLOAD_FACTS, workload as workload_facts

# A run name becomes a folder under runs/ and tb_logs/: keep it a single, plain path component.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: a file name is at most 255 bytes on common filesystems; run folders add a backend and batch
#: size in front and staging folders a '.partial-XXXXXXXX' suffix
MAX_NAME_CHARS = 120
#: a batch size a tensor dimension can hold (torch sizes are int64)
MAX_BATCH_SIZE = 2**62
#: the largest sizes, counts and seconds a run takes: beyond them a number is a typo, and torch
#: would overflow (a traceback) rather than refuse
MAX_SIDE = 2**16  # --image-size, --seq-len, --src-len, --prompt-len, --max-new-tokens
MAX_COUNT = 2**31  # --iters, --active, --repeat, --wait, --warmup ...
MAX_SECONDS = 10**6  # --min-time (11 days)
MAX_SEED = 2**63 - 1  # a seed is a C long long in torch: -2**63 to 2**63 - 1
#: fresh processes one command may time (--processes of compare, sweep, advise and noise;
#: --repeat-runs): each takes seconds to minutes, so beyond it a count is a typo
MAX_PROCESSES = 1000

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
MEMORY_FORMATS = ("auto", "channels_last", "contiguous")
# how the profiled steps are captured: torch.profiler (a Kineto trace), or only
# cudaProfilerStart/Stop around the active steps for an outside profiler (nsys, ncu), which then
# owns CUPTI alone (CUPTI takes one subscriber)
CAPTURES = ("torch", "cuda-profiler-api")
# forward: one forward pass per step; generate: one greedy generation per step (models that
# generate: transformer, an encoder-decoder; gpt2, a decoder-only LM): profiler.runs.workloads
WORKLOADS = tuple(WORKLOAD_FACTS)


DEFAULT_MODEL = "resnet50"


def model_slug(model: str) -> str:
    """A model as part of a folder name: ``resnet18``; ``pkg.mod:build`` -> ``build``."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", model.rpartition(":")[2]).strip("-") or "model"


#: the end of the folder name of a run without --name that replays CUDA graphs (--cuda-graphs)
CUDA_GRAPHS_TAG = "_cg"


def run_name(
    backend: str,
    batch_size: int,
    model: str = DEFAULT_MODEL,
    name: str | None = None,
    workload: str = "forward",
    cuda_graphs: bool = False,
) -> str:
    """A run's folder name: its identity (backend, batch size, and the model or --name; a
    generation run without --name ends in ``_gen``, a --cuda-graphs run without --name in
    ``_cg``)."""
    base = f"{backend}_bs{batch_size}"
    if name:
        return f"{base}_{name}"
    base = base if model == DEFAULT_MODEL else f"{base}_{model_slug(model)}"
    base = f"{base}{workload_facts(workload).run_suffix}"
    return f"{base}{CUDA_GRAPHS_TAG}" if cuda_graphs else base


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$", re.IGNORECASE)


def parse_duration(text: str | None, flag: str = "--budget") -> float | None:
    """A duration in seconds from seconds, or a number with s, m or h ("300", "90s", "5m",
    "1h"): what every --budget takes; more than 0 and at most MAX_SECONDS."""
    if text is None:
        return None
    match = _DURATION.match(str(text))
    if not match or float(match[1]) <= 0:
        raise UserError(f"{flag} takes a duration such as 300, 90s, 5m or 1h (got {text!r})")
    seconds = float(match[1]) * {"s": 1, "m": 60, "h": 3600}[(match[2] or "s").lower()[0]]
    if seconds > MAX_SECONDS:
        raise UserError(f"{flag} must be at most {MAX_SECONDS} seconds (got {text!r})")
    return seconds


def check_processes(value: int, least: int = 1, why: str = "", flag: str = "--processes") -> int:
    """A count of fresh processes: at least ``least`` (``why``: the reason, said with it), at
    most MAX_PROCESSES."""
    if value < least:
        raise UserError(f"{flag} must be {least} or more{why} (got {value})")
    if value > MAX_PROCESSES:
        raise UserError(
            f"{flag} {value} is too large (at most {MAX_PROCESSES}: each one is a fresh process)"
        )
    return value


def check_path_component(value: str, what: str) -> str:
    """Reject anything that could escape the folder it is joined to (``..``, ``/``, ``~``)."""
    if len(value) > MAX_NAME_CHARS:
        raise UserError(
            f"{what} is {len(value)} characters long: at most {MAX_NAME_CHARS} (it "
            "becomes a folder name, with a prefix and a suffix)"
        )
    if not _SAFE_NAME.fullmatch(value) or ".." in value:
        raise UserError(
            f"{what} {value!r} is not a plain folder name: use letters, digits, '.', '_' and '-' "
            "(no '/', no '..', not starting with '.')"
        )
    return value


#: the key of a field's CLI declaration in its dataclass metadata
CLI = "cli"
PANEL_PROFILER, PANEL_TIMING, PANEL_CACHE = "Profiler (torch.profiler)", "Timing", "Engine cache"
PANEL_QUANT = "Quantization"
PANEL_GENERATION = "Generation"
PANEL_MODEL, PANEL_BACKEND, PANEL_OUTPUT = "Model and batch", "Backend and numerics", "Output"
PANEL_CUDNN = "cuDNN"


@dataclass(frozen=True)
class CliOption:
    """How a RunConfig field is spelled on the command line: ``run``, ``sweep``, ``ncu`` and
    ``nsys`` take their options from these declarations, and a sweep passes them on to its cells
    with them."""

    flags: tuple[str, ...]  # ("--backend", "-b"), or a bool's ("--gzip/--no-gzip",)
    help: str
    panel: str | None = None
    # the values it takes, listed in --help and offered by shell completion; a callable is
    # asked only when they are needed, and only offered (profiler.runs.backends.names: the
    # backend registry checks the name, so a backend registered at run time runs too)
    choices: tuple[str, ...] | Callable[[], list[str]] | None = None
    envvar: str | None = None
    # may differ when a sweep is resumed (changes how, not what, is measured)
    resumable: bool = False
    # a sweep takes a comma-separated list of values: one cell per value, its folder name
    # ending in _<axis><value> (e.g. _new16 for --max-new-tokens 16)
    axis: str | None = None
    # the flag takes text that this turns into the field's value (--budget: "5m" -> 300.0)
    parse: Callable[[str], object] | None = None

    @property
    def key(self) -> str:
        """The option's name: the keyword of the CLI parameter and its sweep manifest key."""
        return self.flags[0].split("/")[0].lstrip("-").replace("-", "_")

    def argv(self, value: object) -> list[str]:
        """The arguments that give this option ``value`` on `profile.py run`."""
        on, _, off = self.flags[0].partition("/")
        if isinstance(value, bool):
            chosen = on if value else off
            return [chosen] if chosen else []
        return [] if value is None else [self.flags[0], str(value)]


def option(
    default: Any,
    help: str,
    *,
    flag: str | None = None,
    short: str | None = None,
    panel: str | None = None,
    choices: Any = None,
    envvar: str | None = None,
    resumable: bool = False,
    axis: str | None = None,
    parse: Callable[[str], Any] | None = None,
) -> Any:
    """A RunConfig field with its CLI declaration. ``flag`` defaults to the field's name in
    kebab case (booleans: ``--x`` when off by default, ``--x/--no-x`` when on); set it when the
    flag is named otherwise (``--bs`` for batch_size). ``axis``: a sweep takes a list of values
    of this option, one cell per value, named with this tag. ``parse``: the flag takes text,
    turned into the value by this (a UserError when it is none)."""
    declaration = {
        "flag": flag,
        "short": short,
        "help": help,
        "panel": panel,
        "choices": choices,
        "envvar": envvar,
        "resumable": resumable,
        "default": default,
        "axis": axis,
        "parse": parse,
    }
    return field(default=default, metadata={CLI: declaration})


def _declare(name: str, raw: dict[str, Any]) -> CliOption:
    flag = raw["flag"] or "--" + name.replace("_", "-")
    if raw["flag"] is None and isinstance(raw["default"], bool) and raw["default"]:
        flag = f"{flag}/--no-{flag[2:]}"
    flags = (flag, raw["short"]) if raw["short"] else (flag,)
    return CliOption(
        flags=flags,
        help=raw["help"],
        panel=raw["panel"],
        choices=raw["choices"],
        envvar=raw["envvar"],
        resumable=raw["resumable"],
        axis=raw["axis"],
        parse=raw["parse"],
    )


@dataclass(frozen=True)
class RunConfig:
    """One model x backend x batch size, and how to profile and time it.

    Every field but ``extra`` is a run option: declared here once with ``option()``, it is a
    flag of ``run``, ``sweep``, ``ncu`` and ``nsys`` and reaches a sweep's cells.
    """

    backend: str = option(
        "pytorch_fp32",
        "Backend to run (`backends`: which run here).",
        short="-b",
        choices=backends.names,
        panel=PANEL_MODEL,
    )
    batch_size: int = option(8, "Batch size.", flag="--bs", panel=PANEL_MODEL)
    model: str = option(
        DEFAULT_MODEL,
        "resnet50, resnet18, distilbert, transformer, gpt2, "
        "package.module:function returning (model, example_inputs).",
        short="-m",
        panel=PANEL_MODEL,
    )
    image_size: int = option(224, "Image side for vision models.", axis="img", panel=PANEL_MODEL)
    seq_len: int = option(128, "Sequence length for text models.", axis="seq", panel=PANEL_MODEL)
    seed: int = option(0, "Seed for weights and inputs.", panel=PANEL_MODEL)
    weights: Path | None = option(
        None,
        "A state dict to load (torch.load with weights_only=True); random weights otherwise.",
        panel=PANEL_MODEL,
    )
    compile_mode: str = option(
        "default",
        "torch.compile mode for inductor_* backends.",
        choices=COMPILE_MODES,
        panel=PANEL_BACKEND,
    )
    memory_format: str = option(
        "auto",
        "auto (channels_last for conv nets in fp16/bf16), channels_last or contiguous.",
        choices=MEMORY_FORMATS,
        panel=PANEL_BACKEND,
    )
    tf32: bool = option(
        False,
        "Allow TF32 for FP32 matmuls and convolutions (off by default: FP32 means FP32).",
        panel=PANEL_BACKEND,
    )
    # a panel of its own: its long off-switch would narrow every help text beside it
    cudnn_benchmark: bool = option(
        True,
        "Let cuDNN autotune convolution algorithms (during prepare and warm-up).",
        panel=PANEL_CUDNN,
    )
    # torch.profiler schedule
    wait: int = option(1, "Schedule: steps skipped before each cycle.", panel=PANEL_PROFILER)
    warmup: int = option(1, "Schedule: steps traced then discarded.", panel=PANEL_PROFILER)
    active: int = option(3, "Schedule: steps recorded per cycle.", panel=PANEL_PROFILER)
    repeat: int = option(1, "Schedule: cycles (one trace file each).", panel=PANEL_PROFILER)
    record_shapes: bool = option(False, "Record operator input shapes.", panel=PANEL_PROFILER)
    profile_memory: bool = option(False, "Record allocations.", panel=PANEL_PROFILER)
    with_stack: bool = option(False, "Record Python stacks.", panel=PANEL_PROFILER)
    with_flops: bool = option(False, "Estimate FLOPs of matmul/conv.", panel=PANEL_PROFILER)
    memory_history: bool = option(
        False,
        "Keep the CUDA allocator's history of the active steps (memory_snapshot.pickle: "
        "summarize --view snapshot).",
        panel=PANEL_PROFILER,
    )
    gzip: bool = option(True, "Write the trace as .json.gz.", panel=PANEL_PROFILER)
    # timed window
    iters: int | None = option(
        None,
        "Timed iterations (separate from the profiled steps); "
        "default 100 on a GPU, on a CPU chosen by --min-time.",
        panel=PANEL_TIMING,
    )
    timed_warmup: int | None = option(
        None,
        "Untimed iterations before the timed ones; default 20 on a GPU, 2 on a CPU.",
        panel=PANEL_TIMING,
    )
    min_time: float | None = option(
        None,
        "Choose the timed iterations by time: about S seconds "
        "(bounded 5-10000 iterations); the CPU default is 5 s.",
        panel=PANEL_TIMING,
    )
    repeat_runs: int = option(
        1,
        "Repeat the timed window K times in fresh processes and report the spread of p50.",
        panel=PANEL_TIMING,
    )
    target_noise: float | None = option(
        None,
        "Keep sampling until the p50's 95 % interval is within ±P %: more iterations in "
        "the window, then more windows in fresh processes (at least 3), or until --budget "
        "runs out (with --repeat-runs K, at least K processes); the run says what it "
        "reached.",
        panel=PANEL_TIMING,
    )
    budget: float | None = option(
        None,
        "How long --target-noise may sample for (300, 90s, 5m, 1h; default 60 s).",
        panel=PANEL_TIMING,
        parse=parse_duration,
    )
    # where results go
    name: str | None = option(
        None, "Suffix for the run folder: <backend>_bs<N>_<name>.", panel=PANEL_OUTPUT
    )
    runs_dir: Path = option(Path("runs"), "Where run results go.", panel=PANEL_OUTPUT)
    tb_dir: Path = option(Path("tb_logs"), "Where TensorBoard traces go.", panel=PANEL_OUTPUT)
    replace: bool = option(
        False,
        "Replace a run folder of the same name that holds another "
        "model, image size, sequence length, weights or --cuda-graphs "
        "setting (a re-run of the same run always replaces it).",
        resumable=True,
        panel=PANEL_OUTPUT,
    )
    # compiled-engine cache (ttrt_* backends): None means engine_cache.default_dir()
    cache_dir: Path | None = option(
        None,
        "Engine cache folder (default "
        "$XDG_CACHE_HOME/infer-profiler/engines, "
        "$XDG_CACHE_HOME being ~/.cache when unset).",
        panel=PANEL_CACHE,
        envvar="INFER_PROFILER_CACHE",
        resumable=True,
    )
    use_cache: bool = option(
        True,
        "Reuse and save compiled engines (ttrt_*, ort_* "
        "backends), FP32 reference outputs and FLOP counts.",
        flag="--cache/--no-cache",
        panel=PANEL_CACHE,
        resumable=True,
    )
    # numeric check against the FP32 eager reference: fail the run above this relative L2 error
    max_rel_error: float | None = option(
        None,
        "Fail the run (exit 2, nothing written) when the output's relative L2 error "
        "against the FP32 eager reference exceeds this; NaN or Inf always fails. Checked for "
        "every backend except pytorch_fp32, which is the reference.",
        panel=PANEL_BACKEND,
    )
    capture: str = option(
        "torch",
        "torch: torch.profiler traces the profiled steps. cuda-profiler-api: no trace; "
        "cudaProfilerStart/Stop around the active steps, for nsys/ncu.",
        panel=PANEL_PROFILER,
        choices=CAPTURES,
    )
    calib_batches: int = option(
        0,
        "Calibrate INT8/FP8 activation scales on N random batches (inductor_int8: 0 = "
        "dynamic scales; ttrt_int8/ttrt_fp8: 0 = 8 batches).",
        panel=PANEL_QUANT,
    )
    calib_data: Path | None = option(
        None,
        "Calibration batches from a tensor file (torch.save of a tensor, or a tuple of "
        "tensors, one per model input, shaped like the inputs or [N, *input shape]; loaded with "
        "weights_only=True).",
        panel=PANEL_QUANT,
    )
    # --workload generate: one greedy generation per step
    workload: str = option(
        "forward",
        "forward: one forward pass per step. generate: one greedy generation per step "
        "(transformer: encode, then decode token by token; gpt2: prefill, then decode with the "
        "KV cache); --iters counts generations.",
        panel=PANEL_GENERATION,
        choices=WORKLOADS,
    )
    src_len: int = option(
        64, "Source tokens (transformer, --workload generate).", panel=PANEL_GENERATION, axis="src"
    )
    prompt_len: int = option(
        128, "Prompt tokens (gpt2, --workload generate).", panel=PANEL_GENERATION, axis="prompt"
    )
    max_new_tokens: int = option(
        64,
        "Tokens generated per sequence, EOS ignored (--workload generate).",
        panel=PANEL_GENERATION,
        axis="new",
    )
    cuda_graphs: bool = option(
        False,
        "Time, profile and check replays of the forward step captured in a CUDA graph "
        "(a GPU, --workload forward; the run folder ends in _cg).",
        panel=PANEL_TIMING,
    )
    nproc: int = option(
        1,
        "N tensor-parallel ranks of a llama generation (NCCL, a GPU each; gloo on a CPU); "
        "a trace per rank.",
        panel=PANEL_GENERATION,
    )
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse, in one line, an option out of its range: counts, then choices, then times
        and noise targets, then the rest (the order the checks have always run in)."""
        self._check_counts()
        self._check_choices()
        self._check_time_and_noise()
        if self.max_rel_error is not None and not self.max_rel_error >= 0:
            raise UserError(f"--max-rel-error must be 0 or more (got {self.max_rel_error})")
        if self.name is not None:
            check_path_component(self.name, "run name")

    def _check_counts(self) -> None:
        positive = {
            "--bs": self.batch_size,
            "--active": self.active,
            "--repeat": self.repeat,
            "--image-size": self.image_size,
            "--seq-len": self.seq_len,
            "--repeat-runs": self.repeat_runs,
            "--src-len": self.src_len,
            "--prompt-len": self.prompt_len,
            "--max-new-tokens": self.max_new_tokens,
            "--nproc": self.nproc,
        }
        if self.iters is not None:
            positive["--iters"] = self.iters
        for flag, value in positive.items():
            if value < 1:
                raise UserError(f"{flag} must be at least 1 (got {value})")
        if self.batch_size > MAX_BATCH_SIZE:
            raise UserError(
                f"--bs {self.batch_size} is beyond what a tensor dimension can hold "
                f"(at most {MAX_BATCH_SIZE})"
            )
        sides = ("--image-size", "--seq-len", "--src-len", "--prompt-len", "--max-new-tokens")
        for flag, value in positive.items():
            limit = (
                MAX_SIDE
                if flag in sides
                else MAX_PROCESSES
                if flag in ("--repeat-runs", "--nproc")
                else MAX_COUNT
                if flag != "--bs"
                else None
            )
            if limit is not None and value > limit:
                raise UserError(f"{flag} {value} is too large (at most {limit})")
        if not -MAX_SEED - 1 <= self.seed <= MAX_SEED:
            raise UserError(f"--seed must be from {-MAX_SEED - 1} to {MAX_SEED} (got {self.seed})")
        for flag, count in {
            "--wait": self.wait,
            "--warmup": self.warmup,
            "--calib-batches": self.calib_batches,
            "--timed-warmup": self.timed_warmup,
        }.items():
            if count is not None and count < 0:
                raise UserError(f"{flag} must be 0 or more (got {count})")
            if count is not None and count > MAX_COUNT:
                raise UserError(f"{flag} {count} is too large (at most {MAX_COUNT})")

    def _check_choices(self) -> None:
        if self.compile_mode not in COMPILE_MODES:
            raise UserError(
                f"unknown --compile-mode {self.compile_mode!r}; choose one of: "
                + ", ".join(COMPILE_MODES)
            )
        if self.memory_format not in MEMORY_FORMATS:
            raise UserError(
                f"unknown --memory-format {self.memory_format!r}; choose one of: "
                + ", ".join(MEMORY_FORMATS)
            )
        if self.capture not in CAPTURES:
            raise UserError(
                f"unknown --capture {self.capture!r}; choose one of: " + ", ".join(CAPTURES)
            )
        if self.workload not in WORKLOAD_FACTS:
            raise UserError(
                f"unknown --workload {self.workload!r}; choose one of: " + ", ".join(WORKLOAD_FACTS)
            )

    def _check_time_and_noise(self) -> None:
        if self.min_time is not None and not 0 < self.min_time <= MAX_SECONDS:
            raise UserError(
                f"--min-time must be more than 0 and at most {MAX_SECONDS} seconds "
                f"(got {self.min_time})"
            )
        if self.min_time is not None and self.iters is not None:
            raise UserError("give --iters or --min-time, not both")
        if self.target_noise is not None and not 0 < self.target_noise < 100:
            raise UserError(
                f"--target-noise is a percentage between 0 and 100 (got "
                f"{units.plain(self.target_noise)})"
            )
        if self.budget is not None and not 0 < self.budget <= MAX_SECONDS:
            raise UserError(
                f"--budget must be more than 0 and at most {MAX_SECONDS} seconds "
                f"(got {units.plain(self.budget)})"
            )
        if self.budget is not None and self.target_noise is None:
            raise UserError("--budget limits --target-noise: pass --target-noise P too")

    @property
    def run_name(self) -> str:
        """The folder under both runs/ and tb_logs/: ``<backend>_bs<N>_<name>`` with --name,
        else ``<backend>_bs<N>``, with ``_<model>`` added for a model other than the default,
        ``_gen`` for --workload generate, ``_cg`` for --cuda-graphs and ``_tp<N>`` for
        --nproc N (N > 1)."""
        name = run_name(
            self.backend, self.batch_size, self.model, self.name, self.workload, self.cuda_graphs
        )
        return f"{name}_tp{self.nproc}" if self.nproc > 1 and not self.name else name

    @property
    def profiled_steps(self) -> int:
        return (self.wait + self.warmup + self.active) * self.repeat

    def options(self) -> dict[str, Any]:
        """Field name -> value of every run option (every field declared with ``option()``)."""
        return {name: getattr(self, name) for name in run_options()}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("weights", "runs_dir", "tb_dir", "cache_dir", "calib_data"):
            data[key] = None if data[key] is None else str(data[key])
        data["run_name"] = self.run_name
        return data


# ---- the options table -------------------------------------------------------------------


def run_options() -> dict[str, CliOption]:
    """RunConfig field name -> its CLI declaration, in declaration order."""
    return {
        f.name: _declare(f.name, f.metadata[CLI]) for f in fields(RunConfig) if CLI in f.metadata
    }


_PATH_FIELDS = {f.name for f in fields(RunConfig) if "Path" in str(f.type)}


def keyed(values: dict[str, Any]) -> dict[str, Any]:
    """Field-name -> value as option key -> plain value (paths as text): a sweep manifest's
    ``options``."""
    table = run_options()
    return {
        table[name].key: (str(v) if name in _PATH_FIELDS and v is not None else v)
        for name, v in values.items()
    }


def unkeyed(options: dict[str, Any]) -> dict[str, Any]:
    """The inverse of ``keyed``: RunConfig keyword arguments (paths as Path)."""
    by_key = {spec.key: name for name, spec in run_options().items()}
    values = {by_key[key]: value for key, value in options.items() if key in by_key}
    return {
        name: (Path(v) if name in _PATH_FIELDS and v is not None else v)
        for name, v in values.items()
    }


def config_to_json(config: RunConfig) -> dict[str, Any]:
    """Every run option of ``config`` as plain JSON values under its option key: how a config
    travels to another process (a sweep cell, a repeat window) and back (config_from_json)."""
    return keyed(config.options())


def config_from_json(data: dict[str, Any]) -> RunConfig:
    """The RunConfig that config_to_json wrote, validated again; a key that names no option
    is refused (a config from another version, or a typo), never silently dropped."""
    unknown = sorted(set(data) - {spec.key for spec in run_options().values()})
    if unknown:
        raise UserError(f"not run options: {', '.join(unknown)}")
    return RunConfig(**unkeyed(data))


def run_argv(values: dict[str, Any]) -> list[str]:
    """Field-name -> value as `profile.py run` arguments; every option is written out, so the
    run never depends on its defaults (booleans without an off flag excepted)."""
    table = run_options()
    return [arg for name, value in values.items() for arg in table[name].argv(value)]

"""This machine's noise floor, as `profile.py noise` measured it: how much the p50 of one fixed
config moves inside one timed window and between fresh processes, and how much two configs timed
in one process move together (the within-process correlation rho of each figure), kept per
machine kind in ``noise/<kind>.json`` beside the engine cache (runs.layout.noise_dir). The kind
is the GPU's name, or ``CPU <model>`` on a machine without a GPU (``cpu_kind``): a floor measured
on one kind of machine is never read for another. The verdicts read the between-process spread
from it when a side has one process, and rho when they choose whether to pair
(profiler.analysis.verdict); a run records the floor known when it ran."""

from __future__ import annotations

import os
import platform
import re
import socket
import tempfile
from pathlib import Path

import msgspec

from profiler import notices, units
from profiler.errors import UserError, first_line
from profiler.fsutil import read_small, refuse_non_regular, write_bytes_atomic
from profiler.runs.layout import noise_dir


class NoiseFloor(msgspec.Struct, frozen=True):
    """One measurement of the floor (times in ms, spreads relative)."""

    #: the machine kind the floor was measured on and is kept for: the GPU's name, or
    #: ``CPU <model>`` on a machine without one (``cpu_kind``; "cpu" in floors kept before)
    gpu: str
    host: str
    measured: str  # ISO time
    workload: str  # the fixed config: "resnet50 pytorch_fp32 bs 8, 100 iterations"
    processes: int
    p50_ms: list[float]  # each process's median
    between_process_cv: float  # CV of the per-process medians (n - 1)
    within_window_cv: float  # median over processes of the window's CV
    smallest_resolvable: float  # the smallest relative difference a compare resolves here
    #: ... with this many processes per side (and with one: FAR_BEYOND x the floor)
    processes_per_side: int = 3
    smallest_resolvable_one_process: float | None = None
    #: the same spread of GPU time (behind a blocking kernel), where it was measured
    gpu_time_between_process_cv: float | None = None
    sm_clock_mhz: list[float | None] = []
    throttle_reasons: list[str] = []
    settings: dict[str, str | None] = {}  # persistence mode, clocks locked, CPU governor ...
    suggestions: list[str] = []
    #: the within-process correlation of the log medians of two configs timed in one process
    #: (profiler.analysis.floor.within_process_rho), per figure; None where too few processes
    #: timed both, or the figure was not measured
    rho_latency: float | None = None
    rho_gpu_time: float | None = None
    rho_processes: int | None = None  # the processes that timed both configs
    rho_workload: str | None = None  # the second config ("... bs 16")

    def rho(self, figure: str) -> float | None:
        """The measured rho of ``figure`` ("latency" or "gpu_time")."""
        value: float | None = getattr(self, f"rho_{figure}", None)
        return value


#: where /proc/cpuinfo names the CPU
CPUINFO = Path("/proc/cpuinfo")


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """This machine's CPU model: /proc/cpuinfo's ``model name`` (Linux), else the platform's
    processor or machine name."""
    try:
        text = cpuinfo.read_text(errors="replace")[: 1 << 20]
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model", "cpu model") and value.strip():
            return " ".join(value.split())
    return platform.processor() or platform.machine() or "unknown"


def cpu_kind(model: str | None = None) -> str:
    """The machine kind of a CPU, a floor's key: ``CPU <model>`` (default: this machine's)."""
    return f"CPU {model or cpu_model()}"


def this_host() -> str:
    return socket.gethostname()


def _slug(gpu: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", gpu).strip("_").lower() or "unknown"


def floor_path(gpu: str, folder: Path | None = None) -> Path:
    return (noise_dir() if folder is None else folder) / f"{_slug(gpu)}.json"


def check_keepable(folder: Path | None = None, gpu: str | None = None) -> Path:
    """The noise-floor folder, made if need be and checked writable (a file created and
    removed in it), and ``gpu``'s floor file in it checked replaceable (a regular file or
    nothing): what `noise` asks before it measures. A UserError naming the folder otherwise."""
    folder = noise_dir() if folder is None else Path(folder)
    fix = "; set INFER_PROFILER_CACHE or XDG_CACHE_HOME to a folder of yours, or pass --no-save"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor, probe = tempfile.mkstemp(prefix=".probe-", dir=folder)
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        raise UserError(
            f"the noise-floor folder {folder} cannot be written "
            f"({error.strerror or type(error).__name__}): the floor could not be "
            f"kept{fix}"
        ) from None
    if gpu:
        try:
            refuse_non_regular(floor_path(gpu, folder))
        except UserError as error:
            raise UserError(
                f"the noise floor cannot be kept in the noise-floor folder: {error}{fix}"
            ) from None
    return folder


def write_floor(floor: NoiseFloor, folder: Path | None = None) -> Path:
    path = floor_path(floor.gpu, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, msgspec.json.format(msgspec.json.encode(floor), indent=2) + b"\n")
    return path


#: the between-process CVs a floor may be: at least 0.001 (0.1 %: a floor of 0, or one far
#: below what a process-to-process spread ever is, would call any difference real) and at
#: most 10 (1000 %); beyond them the value is no spread `noise` measured
MIN_FLOOR_CV = 0.001
MAX_FLOOR_CV = 10.0
#: the largest floor file read (one is about 2 KiB)
MAX_FLOOR_BYTES = 1 << 20
#: what stands in for a floor that cannot be used, in the notes that say so
DEFAULT_STANDS_IN = "the figure's default floor stands in"


def floor_problem(value: object) -> str | None:
    """Why ``value`` cannot be a between-process CV (not a number, not finite, below
    MIN_FLOOR_CV, beyond MAX_FLOOR_CV); None when it can."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{value!r} is not a number"
    if 0 < value < MIN_FLOOR_CV:
        return (
            f"{units.plain(value)} is below {units.plain(MIN_FLOOR_CV)} "
            f"({units.percent(100 * MIN_FLOOR_CV)}), less than any spread between processes"
        )
    if not 0 < value <= MAX_FLOOR_CV:  # NaN fails it too
        return (
            f"{units.plain(value)} is not a spread above 0 and at most {units.plain(MAX_FLOOR_CV)}"
        )
    return None


def usable_floor(floor: NoiseFloor, source: str) -> NoiseFloor | None:
    """``floor`` with each between-process CV that cannot be one (``floor_problem``) left out,
    one note each naming ``source``, and each rho that is no correlation (not a number from -1
    to 1) left out the same way; None when its latency spread cannot be used."""
    for name in ("rho_latency", "rho_gpu_time"):
        rho = getattr(floor, name)
        if rho is not None and not (
            isinstance(rho, (int, float)) and not isinstance(rho, bool) and -1 <= rho <= 1
        ):
            notices.note(
                f"{source}: the noise floor's {name} {rho!r} is no correlation from -1 to 1: "
                "ignored, the figure's default rho stands in"
            )
            floor = msgspec.structs.replace(floor, **{name: None})
    why = floor_problem(floor.between_process_cv)
    if why is not None:
        notices.note(
            f"{source}: the noise floor's between_process_cv {why}: ignored, {DEFAULT_STANDS_IN}"
        )
        return None
    gpu = floor.gpu_time_between_process_cv
    if gpu is not None and (why := floor_problem(gpu)) is not None:
        notices.note(
            f"{source}: the noise floor's gpu_time_between_process_cv {why}: "
            f"ignored, {DEFAULT_STANDS_IN}"
        )
        return msgspec.structs.replace(floor, gpu_time_between_process_cv=None)
    return floor


def read_floor(gpu: str | None, folder: Path | None = None) -> NoiseFloor | None:
    """The floor measured for this machine kind (a GPU's name, ``cpu_kind``), or None: never
    measured, or a file that does not read or holds a spread that is none (one note each,
    profiler.notices: the figure's default floor stands in)."""
    if not gpu:
        return None
    path = floor_path(gpu, folder)
    if not os.path.lexists(path):
        return None
    try:  # a regular file of a floor's size: never a FIFO, which would hang
        data = read_small(path, MAX_FLOOR_BYTES, "noise floor")
    except UserError as error:
        notices.note(f"{error} (the floor kept for {gpu}): {DEFAULT_STANDS_IN}")
        return None
    try:
        floor = msgspec.json.decode(data, type=NoiseFloor)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        notices.note(
            f"{path}: the noise floor kept for {gpu} is damaged ({first_line(error)}):"
            f" ignored, {DEFAULT_STANDS_IN}; `noise` measures it again"
        )
        return None
    return usable_floor(floor, str(path))

"""This machine's noise floor, as `profile.py noise` measured it: how much the p50 of one fixed
config moves inside one timed window and between fresh processes, per GPU model, kept in
``noise/<gpu>.json`` beside the engine cache (runs.layout.noise_dir). The verdicts read the
between-process spread from it when a side has one process (profiler.analysis.verdict); a run
records the floor known when it ran."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from profiler.fsutil import write_bytes_atomic
from profiler.runs.layout import noise_dir


class NoiseFloor(msgspec.Struct, frozen=True):
    """One measurement of the floor (times in ms, spreads relative)."""

    gpu: str                      # the GPU's name ("cpu" on a machine without one)
    host: str
    measured: str                 # ISO time
    workload: str                 # the fixed config: "resnet50 pytorch_fp32 bs 8, 100 iterations"
    processes: int
    p50_ms: list[float]           # each process's median
    between_process_cv: float     # CV of the per-process medians (n - 1)
    within_window_cv: float       # median over processes of the window's CV
    smallest_resolvable: float    # the smallest relative difference a compare resolves here
    #: ... with this many processes per side (and with one: FAR_BEYOND x the floor)
    processes_per_side: int = 3
    smallest_resolvable_one_process: float | None = None
    #: the same spread of GPU time (behind a blocking kernel), where it was measured
    gpu_time_between_process_cv: float | None = None
    sm_clock_mhz: list[float | None] = []
    throttle_reasons: list[str] = []
    settings: dict[str, str | None] = {}   # persistence mode, clocks locked, CPU governor ...
    suggestions: list[str] = []


def _slug(gpu: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", gpu).strip("_").lower() or "unknown"


def floor_path(gpu: str, folder: Path | None = None) -> Path:
    return (noise_dir() if folder is None else folder) / f"{_slug(gpu)}.json"


def write_floor(floor: NoiseFloor, folder: Path | None = None) -> Path:
    path = floor_path(floor.gpu, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, msgspec.json.format(msgspec.json.encode(floor), indent=2) + b"\n")
    return path


def read_floor(gpu: str | None, folder: Path | None = None) -> NoiseFloor | None:
    """The floor measured for this GPU model, or None (never measured, or unreadable)."""
    if not gpu:
        return None
    path = floor_path(gpu, folder)
    try:
        return msgspec.json.decode(path.read_bytes(), type=NoiseFloor)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None

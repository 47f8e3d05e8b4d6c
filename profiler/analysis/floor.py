"""This machine's noise floor from K timed windows of one fixed config, each in a fresh process
(`profile.py noise`): the spread inside a window, the spread of the window's median between
processes, the smallest difference a compare can resolve here, and what would lower it. Pure
numpy; the measurement itself is profiler.sweep.rounds', the record profiler.runs.noise_floor's.

The smallest resolvable difference, for k processes per side, is the half-width of the 95 %
interval of the ratio of the two sides (profiler.analysis.verdict's Welch interval with equal
spreads), t(0.975, 2k - 2) * CV * sqrt(2 / k): a difference below it cannot exclude 1. With
one process per side it is the half-width of the interval the verdict uses there, with this
floor standing in for the spread: exp(1.96 * CV * sqrt(2)) - 1. Both for latency; the GPU
time's between-process CV beside it, where the processes measured it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from profiler.analysis.noise import noise
from profiler.analysis.sampling import Z975, cv_of, t975
from profiler.runs.samples import ProcessWindow

#: within-window CV above which host-side launch jitter dominates: CUDA graphs are suggested
LAUNCH_JITTER_CV = 0.05


def floor_of(windows: list[ProcessWindow], processes_per_side: int = 3) -> dict[str, Any]:
    """The floor's figures from K >= 2 windows, one per process."""
    if len(windows) < 2:
        raise ValueError("the floor needs windows from at least two processes")
    medians = [m for w in windows if (m := w.median("latency")) is not None]
    between = cv_of(medians)
    within = float(np.median([noise(list(w.latency_ms)).cv for w in windows]))
    gpu = [m for w in windows if (m := w.median("gpu_time")) is not None]
    return {
        "p50_ms": medians,
        "between_process_cv": between,
        "within_window_cv": within,
        "processes_per_side": processes_per_side,
        "smallest_resolvable": t975(2 * processes_per_side - 2)
        * between
        * math.sqrt(2 / processes_per_side),
        "smallest_resolvable_one_process": math.exp(Z975 * between * math.sqrt(2)) - 1,
        "gpu_time_between_process_cv": cv_of(gpu) if len(gpu) == len(windows) else None,
    }


def pinning_cpus(cpus: Iterable[int]) -> str | None:
    """Up to four of ``cpus`` (those this process may run on) for ``taskset -c``, the first
    left out (interrupts and other processes favour it): ``2-5`` or ``1,3,5``; None where fewer
    than three are there to choose from."""
    ordered = sorted(cpus)
    if len(ordered) < 3:
        return None
    chosen = ordered[1:5]
    if chosen == list(range(chosen[0], chosen[-1] + 1)):
        return f"{chosen[0]}-{chosen[-1]}"
    return ",".join(map(str, chosen))


def suggestions(
    settings: dict[str, Any],
    within_cv: float,
    between_cv: float,
    on_gpu: bool,
    command: str,
    cpus: Iterable[int] | None = None,
) -> list[str]:
    """What would lower the floor here, most effective first; none of it is applied.
    ``cpus``: the CPUs this process may run on (default: its affinity)."""
    tips = []
    if on_gpu and settings.get("persistence_mode") == "off":
        tips.append(
            "persistence mode is off: `sudo nvidia-smi -pm 1` keeps the driver loaded "
            "between processes (no re-initialisation per run)"
        )
    top = settings.get("max_sm_clock_mhz")
    if on_gpu and top and settings.get("sm_clock_target_mhz") != top:
        tips.append(
            f"clocks float with load and temperature: `sudo nvidia-smi -lgc {top},{top}` "
            "locks the SM clock (where the driver permits; undo with -rgc)"
        )
    elif on_gpu and top:
        tips.append(
            f"lock the SM clock where permitted: `sudo nvidia-smi -lgc {top},{top}` "
            "(undo with -rgc)"
        )
    if on_gpu and within_cv > LAUNCH_JITTER_CV:
        tips.append(
            f"the window's own spread (CV {100 * within_cv:.1f} %) is mostly host-side "
            "launch jitter: `run --cuda-graphs` replays the forward without launches"
        )
    if settings.get("cpu_governor") not in (None, "performance"):
        tips.append(
            f"the CPU governor is {settings['cpu_governor']!r}: `sudo cpupower "
            "frequency-set -g performance` stops the host clock from ramping"
        )
    if cpus is None:
        cpus = (
            os.sched_getaffinity(0)
            if hasattr(os, "sched_getaffinity")
            else range(os.cpu_count() or 1)
        )
    pinned = pinning_cpus(cpus)
    if pinned is not None:
        tips.append(f"pin the process to a few idle cores: `taskset -c {pinned} {command} ...`")
    if between_cv > 0:
        tips.append(
            "more processes per side narrow the interval: compare --processes 5 "
            "(or --target-noise 2)"
        )
    return tips

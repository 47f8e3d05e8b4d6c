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

The within-process correlation rho of each figure (``within_process_rho``): every process also
times a second config (the same model and backend at twice the batch size), and rho is
Pearson's correlation, over the processes, of the log medians of the two configs' windows. It
is what a paired verdict gains (the variance of a paired log ratio is 2 (1 - rho) times one
config's, for equal spreads: profiler.analysis.verdict.pairing_pays). Two different configs,
as a verdict compares, not two windows of one: identical configs move together far more
(GPU time 0.89-0.96 on the H100, against 0.33-0.94 for different ones). From few processes
rho is rough (``rho_interval``: Fisher's z); a wrong rho costs width, never the test's level,
since either design is a valid interval.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from profiler.analysis.sampling import Z975, cv_of, t975
from profiler.analysis.timed_window import noise
from profiler.runs.samples import ProcessWindow

#: within-window CV above which host-side launch jitter dominates: CUDA graphs are suggested
LAUNCH_JITTER_CV = 0.05
#: the fewest processes timing both configs that give a rho (with 2 it is +-1 whatever the
#: noise, with 3 its 95 % interval spans nearly -1 to 1)
MIN_RHO_PROCESSES = 4


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


def within_process_rho(first: list[ProcessWindow], second: list[ProcessWindow]) -> dict[str, Any]:
    """rho of each figure from the windows of two configs (module doc), paired by the round
    (process) that timed them: ``rho_latency``, ``rho_gpu_time`` (None below
    MIN_RHO_PROCESSES pairs, where a figure was not measured, or where a side did not vary)
    and ``rho_processes``, the processes that timed both."""
    where = {w.round: w for w in second if w.round}
    pairs = [(w, where[w.round]) for w in first if w.round in where]
    found: dict[str, Any] = {"rho_processes": len(pairs)}
    for figure in ("latency", "gpu_time"):
        both = [(a, b) for w, v in pairs if (a := w.median(figure)) and (b := v.median(figure))]
        rho = None
        if len(both) >= MIN_RHO_PROCESSES:
            x, y = np.log(np.array(both, dtype=float)).T
            if x.std() > 0 and y.std() > 0:
                rho = float(np.clip(np.corrcoef(x, y)[0, 1], -1.0, 1.0))
        found[f"rho_{figure}"] = rho
    return found


def rho_interval(rho: float, processes: int) -> tuple[float, float] | None:
    """The 95 % interval of a correlation ``rho`` from ``processes`` pairs (Fisher's z,
    standard error 1 / sqrt(n - 3)); None below four pairs."""
    if processes < MIN_RHO_PROCESSES:
        return None
    z = math.atanh(max(-0.999999, min(0.999999, rho)))
    half = Z975 / math.sqrt(processes - 3)
    return math.tanh(z - half), math.tanh(z + half)


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


#: what would lower the floor (suggestions), most effective first
TipKind = Literal[
    "persistence-mode",
    "clocks-float",
    "lock-clock",
    "launch-jitter",
    "cpu-governor",
    "pin-cores",
    "more-processes",
]


@dataclass(frozen=True)
class Tip:
    """A change that would lower the floor, with what it rests on; none of it is applied. The
    view says it in words (profiler.report.sentences.floor_tip)."""

    kind: TipKind
    clock_mhz: str | None = None  # the GPU's top SM clock (machine_settings), to lock at
    within_cv: float | None = None  # the window's own spread
    governor: str | None = None  # the CPU governor in use
    cpus: str | None = None  # cores to pin to, for ``taskset -c``
    command: str | None = None  # how the profiler is started


def suggestions(
    settings: dict[str, Any],
    within_cv: float,
    between_cv: float,
    on_gpu: bool,
    command: str,
    cpus: Iterable[int] | None = None,
) -> list[Tip]:
    """What would lower the floor here, most effective first; none of it is applied.
    ``cpus``: the CPUs this process may run on (default: its affinity)."""
    tips = []
    if on_gpu and settings.get("persistence_mode") == "off":
        tips.append(Tip("persistence-mode"))
    top = settings.get("max_sm_clock_mhz")
    if on_gpu and top and settings.get("sm_clock_target_mhz") != top:
        tips.append(Tip("clocks-float", clock_mhz=top))
    elif on_gpu and top:
        tips.append(Tip("lock-clock", clock_mhz=top))
    if on_gpu and within_cv > LAUNCH_JITTER_CV:
        tips.append(Tip("launch-jitter", within_cv=within_cv))
    if settings.get("cpu_governor") not in (None, "performance"):
        tips.append(Tip("cpu-governor", governor=settings["cpu_governor"]))
    if cpus is None:
        cpus = (
            os.sched_getaffinity(0)
            if hasattr(os, "sched_getaffinity")
            else range(os.cpu_count() or 1)
        )
    pinned = pinning_cpus(cpus)
    if pinned is not None:
        tips.append(Tip("pin-cores", cpus=pinned, command=command))
    if between_cv > 0:
        tips.append(Tip("more-processes"))
    return tips

"""Per-GPU floors and offsets: how far each GPU of a host sits from the others on the same
configs, against its own noise.

A sweep whose rounds ran over several GPUs (profiler.sweep.rounds) has, for every config,
windows on every GPU. For each config and GPU the mean log of the per-process medians is
taken; a GPU's **offset** is the mean over configs of (its mean log - the median over the GPUs
of their mean logs), as a ratio: against the middle of the GPUs, so that one GPU apart does not
move the others' offsets (with two GPUs the two sit symmetrically: which one is off cannot be
told). Its **floor** is its between-process CV on the same configs (the pooled spread of its
windows about each config's mean on it). A GPU whose offset is beyond its floor is **apart**:
named in one line under the sweep's table.

The verdicts do not need the offsets to cancel (a pair's windows share a process, so a GPU);
they say whether the GPUs of this host may be taken as alike for windows that do not pair.
Pure: no I/O, no torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from profiler.runs.samples import ConfigSamples


@dataclass(frozen=True)
class GpuOffset:
    gpu: str
    figure: str
    windows: int  # this GPU's windows over the configs compared
    configs: int  # configs with windows on it and on another GPU
    offset: float | None  # its figure / the median GPU's on the same configs, minus 1
    floor: float | None  # its between-process CV on those configs (None: one window each)

    @property
    def apart(self) -> bool:
        """Further from the others than its own between-process spread."""
        return self.offset is not None and self.floor is not None and abs(self.offset) > self.floor


def gpu_offsets(configs: Iterable[ConfigSamples], figure: str = "gpu_time") -> list[GpuOffset]:
    """Each GPU's offset and floor on ``figure`` over ``configs`` (each config's windows with
    their GPU recorded; windows without a GPU or the figure are left out). [] when the windows
    ran on fewer than two GPUs."""
    logs: list[dict[str, list[float]]] = []
    for samples in configs:
        by_gpu: dict[str, list[float]] = {}
        for w in samples.for_verdict().windows:
            value = w.median(figure)  # None: no values of the figure
            if w.gpu and value is not None and value > 0 and math.isfinite(value):
                by_gpu.setdefault(w.gpu, []).append(math.log(value))
        if len(by_gpu) >= 2:
            logs.append(by_gpu)
    gpus = sorted({g for by_gpu in logs for g in by_gpu}, key=_gpu_order)
    if len(gpus) < 2:
        return []
    found = []
    for gpu in gpus:
        gaps, squares, dof, windows = [], 0.0, 0, 0
        for by_gpu in logs:
            mine = by_gpu.get(gpu)
            if not mine:
                continue
            middle = float(np.median([np.mean(values) for values in by_gpu.values()]))
            gaps.append(float(np.mean(mine)) - middle)
            windows += len(mine)
            if len(mine) >= 2:
                squares += float(np.sum((np.asarray(mine) - np.mean(mine)) ** 2))
                dof += len(mine) - 1
        found.append(
            GpuOffset(
                gpu,
                figure,
                windows,
                len(gaps),
                offset=math.expm1(float(np.mean(gaps))) if gaps else None,
                floor=math.sqrt(squares / dof) if dof else None,
            )
        )
    return found


def _gpu_order(gpu: str) -> tuple[int, int, str]:
    return (0, int(gpu), gpu) if gpu.isdigit() else (1, 0, gpu)

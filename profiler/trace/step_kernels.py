"""Do the profiled steps run the same kernels? And the same as an untraced call?

Every figure per step assumes that each profiled step did the same work. Nothing says so when a
step lost events (a full CUPTI buffer drops activity records silently), when one step took
another code path (a cuDNN/cuBLAS heuristic picking other kernels, a lazily built graph), or
when the profiler itself changed what ran (a CUDA graph replayed without the profiler, run
kernel by kernel under it). This module counts the kernels of each profiled step and compares:

- the steps with each other: how many kernels each launched, and which kernel names ran in
  some steps only;
- the steps with an untraced call of the same run, when the run recorded one: ``untraced`` is
  kernel name -> launches in one call made without the profiler. The collect side must record
  it (the kernel names and counts of one timed-window call, e.g. from a CUPTI activity buffer
  or an nsys pass over one call; result.json ``trace.untraced_kernels``); without it this
  comparison is skipped and says nothing.

A kernel belongs to the step whose window (``steps.step_windows``: the CPU step extended to
the end of the GPU work it launched) holds its start, as the overview's per-step kernel column.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profiler.trace.load import Trace
from profiler.trace.rules import short_name

#: kernel names quoted in a warning, at most
_EXAMPLES = 3


@dataclass(frozen=True)
class StepKernels:
    steps: list[str]
    #: kernel name -> launches in each step, in step order (every name that ran in a step)
    launches: dict[str, list[int]] = field(default_factory=dict)

    @property
    def counts(self) -> list[int]:
        """Kernels launched in each step."""
        return (
            [int(sum(c)) for c in zip(*self.launches.values())]
            if self.launches
            else [0] * len(self.steps)
        )

    @property
    def partial(self) -> dict[str, int]:
        """Kernel name -> in how many steps it ran, for the names that skipped a step."""
        ran = {name: sum(c > 0 for c in counts) for name, counts in self.launches.items()}
        return {name: n for name, n in ran.items() if n < len(self.steps)}

    @property
    def uneven(self) -> list[str]:
        """Names that ran in every step, a different number of times in some."""
        return [
            name
            for name, counts in self.launches.items()
            if min(counts) > 0 and len(set(counts)) > 1
        ]

    @property
    def differ(self) -> bool:
        return bool(self.partial or self.uneven)


def step_kernels(trace: Trace, kernels: pd.DataFrame, steps: pd.DataFrame) -> StepKernels:
    """``kernels``: kernel_rows(trace); ``steps``: the overview's steps (step, start, end)."""
    names = [str(s) for s in steps["step"]] if len(steps) else []
    if not names or len(kernels) == 0:
        return StepKernels(steps=names)
    starts, ends = steps["start"].to_numpy(), steps["end"].to_numpy()
    ts = kernels["ts"].to_numpy()
    step_of = np.searchsorted(starts, ts, side="right") - 1
    inside = (step_of >= 0) & (ts < ends[np.clip(step_of, 0, None)])
    table = pd.crosstab(kernels["name_id"].to_numpy()[inside], step_of[inside])
    table = table.reindex(columns=range(len(names)), fill_value=0)
    return StepKernels(
        steps=names,
        launches={
            str(trace.names[i]): [int(c) for c in row]
            for i, row in zip(table.index, table.to_numpy())
        },
    )


def _examples(texts: Iterable[str]) -> str:
    texts = list(texts)
    shown = ", ".join(texts[:_EXAMPLES])
    return shown + (f" and {len(texts) - _EXAMPLES} more" if len(texts) > _EXAMPLES else "")


def _per_step(found: StepKernels) -> str:
    return ", ".join(
        f"{n} in step {step.removeprefix('ProfilerStep')}"
        for step, n in zip(found.steps, found.counts)
    )


def step_warnings(found: StepKernels, untraced: dict[str, int] | None = None) -> list[str]:
    """One line per difference found, with counts; [] when the steps agree with each other
    (and with the untraced call, when one was recorded)."""
    lines = []
    if len(found.steps) > 1 and found.differ:
        text = f"profiled steps launched different kernels: {_per_step(found)}"
        partial = found.partial
        if partial:
            examples = _examples(
                f"{short_name(n)} ({k} of {len(found.steps)})" for n, k in partial.items()
            )
            text += f"; {len(partial)} kernel name(s) ran in some steps only: {examples}"
        if found.uneven:
            text += f"; {len(found.uneven)} kernel name(s) ran a different number of times per step"
        lines.append(
            text + " (events dropped, or another code path in some steps: per-step "
            "figures compare unlike steps)"
        )
    if untraced and found.steps:
        lines += _untraced_warnings(found, untraced)
    return lines


def _untraced_warnings(found: StepKernels, untraced: dict[str, int]) -> list[str]:
    """Each step against the untraced call, name by name."""
    if all(
        dict((n, c[k]) for n, c in found.launches.items() if c[k]) == untraced
        for k in range(len(found.steps))
    ):
        return []
    missing = [n for n in untraced if n not in found.launches]
    extra = [n for n in found.launches if n not in untraced]
    text = (
        f"an untraced call of this run launched {sum(untraced.values())} kernels of "
        f"{len(untraced)} names; the profiled steps {_per_step(found)}"
    )
    if missing:
        text += (
            f"; {len(missing)} of the untraced call's kernel name(s) never ran in a "
            f"profiled step: {_examples(map(short_name, missing))}"
        )
    if extra:
        text += (
            f"; {len(extra)} kernel name(s) ran only under the profiler: "
            f"{_examples(map(short_name, extra))}"
        )
    return [text + " (the trace does not show what the timed calls ran)"]

"""Overview: steps, GPU utilization, SM efficiency, occupancy, time breakdown, idle gaps,
top CPU operators. Pure functions of a parsed Trace, each job in its own module: the steps
(trace.steps), each GPU's figures (trace.device_metrics), the breakdown (trace.breakdown), the
operators (trace.operators), on the interval arithmetic of trace.intervals.

Steps, GPU utilization, SM efficiency and occupancy follow the PyTorch profiler TensorBoard
plugin's definitions (its docs/gpu_utilization.md and gpu_metrics_parser.py), implemented
independently here, and equal the plugin's figures on its sample traces; the time breakdown's
roles do not all mean what the plugin's do (trace.breakdown).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profiler.errors import UserError
from profiler.trace.breakdown import (
    BREAKDOWN,
    BREAKDOWN_DEFINITIONS,
    breakdown,
    plugin_version_notes,
)
from profiler.trace.device_metrics import DeviceMetrics, device_metrics
from profiler.trace.intervals import covered_per_window, merge
from profiler.trace.load import Trace
from profiler.trace.operators import operator_table
from profiler.trace.steps import repeated_steps, step_windows


@dataclass
class Overview:
    #: one row per step: name, CPU span, GPU-extended span, breakdown, kernels, idle gaps
    steps: pd.DataFrame
    devices: list[DeviceMetrics]
    #: averages per step of each breakdown role, µs
    breakdown_us: dict[str, float]
    steps_window: tuple[float, float]
    #: CPU operators (and record_function ranges): calls, total/self CPU, kernel time launched
    operators: pd.DataFrame
    has_gpu: bool
    dropped_tail_steps: int = 0
    notes: list[str] = field(default_factory=list)
    #: whose definitions the breakdown follows: "tool" or "plugin" (BREAKDOWN_DEFINITIONS)
    definitions: str = "tool"
    #: what the views print as warning lines (step numbers that repeat)
    warnings: list[str] = field(default_factory=list)

    @property
    def mean_step_us(self) -> float:
        return float(self.steps["step_us"].mean()) if len(self.steps) else 0.0

    def slowest_and_fastest(self, n: int) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The ``n`` slowest steps (longest ``step_us`` first) and the ``n`` fastest (shortest
        first); of equal steps, the earlier comes first."""
        return (
            self.steps.nlargest(n, "step_us", keep="first"),
            self.steps.nsmallest(n, "step_us", keep="first"),
        )

    def step_distribution(self) -> pd.DataFrame:
        """Min, median, 90th percentile and max of every numeric step column, one row each."""
        numeric = self.steps.select_dtypes("number")
        rows = {
            "min": numeric.min(),
            "median": numeric.median(),
            "p90": numeric.quantile(0.9),
            "max": numeric.max(),
        }
        return pd.DataFrame(rows).T


def overview(
    trace: Trace,
    kernels: pd.DataFrame,
    kernel_categories: pd.Series | None = None,
    definitions: str = "tool",
) -> Overview:
    """``kernels``: kernel_rows(trace); ``kernel_categories``: category of each of those rows;
    ``definitions``: the breakdown's, "tool" or "plugin" (BREAKDOWN_DEFINITIONS)."""
    if definitions not in BREAKDOWN_DEFINITIONS:
        raise UserError(
            f"unknown breakdown definitions {definitions!r}; choose one of: "
            f"{', '.join(BREAKDOWN_DEFINITIONS)}"
        )
    steps, dropped = step_windows(trace, definitions)
    has_gpu = trace.has_gpu_activity
    notes = _overview_notes(trace, steps, dropped, definitions)
    repeated = repeated_steps(steps)
    window = (float(steps["start"].min()), float(steps["end"].max())) if len(steps) else trace.span
    communication = np.zeros(len(trace.events), dtype=bool)
    if kernel_categories is not None and len(kernels):
        communication[kernels.index.to_numpy()] = kernel_categories == "communication"
    devices = device_metrics(trace, kernels, window) if has_gpu else []
    table = breakdown(trace, steps, communication, definitions)
    if len(steps):
        per_step = _per_step(steps, table, kernels)
        avg = {role: float(table[role].mean()) for role in BREAKDOWN}
    else:
        per_step = pd.DataFrame()
        avg = {role: 0.0 for role in BREAKDOWN}
    return Overview(
        steps=per_step,
        devices=devices,
        breakdown_us=avg,
        steps_window=window,
        operators=operator_table(trace, kernels),
        has_gpu=has_gpu,
        dropped_tail_steps=dropped,
        notes=notes,
        definitions=definitions,
        warnings=[repeated] if repeated else [],
    )


def _overview_notes(trace: Trace, steps: pd.DataFrame, dropped: int, definitions: str) -> list[str]:
    """What the overview's reader should know: events not read, no GPU activity, steps left
    out, the plugin's version differences."""
    has_gpu = trace.has_gpu_activity
    notes = []
    unanalysed = trace.unanalysed_warning
    if unanalysed:
        notes.append(
            f"device events this tool does not read: {unanalysed}"
            + ("; CPU tables only" if not has_gpu else "")
        )
    elif not has_gpu:
        notes.append(
            "no GPU activity was recorded in this trace (CPU-only profile): CPU tables only"
        )
    if dropped:
        notes.append(
            f"left out the last {dropped} step(s): the recording ended before their "
            "GPU work was captured"
        )
    if definitions == "plugin":
        notes += plugin_version_notes(trace, steps)
    return notes


def _per_step(steps: pd.DataFrame, table: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    """Each step's window, breakdown, GPU busy time and kernel count."""
    per_step = steps.reset_index(drop=True).join(table)
    per_step["step_us"] = per_step["end"] - per_step["start"]
    per_step["cpu_step_us"] = per_step["cpu_end"] - per_step["cpu_start"]
    kts = kernels["ts"].to_numpy() if len(kernels) else np.array([])
    ke = (kernels["ts"] + kernels["dur"]).to_numpy() if len(kernels) else np.array([])
    ms, me = merge(kts, ke)
    per_step["gpu_busy_us"] = covered_per_window(ms, me, per_step["start"], per_step["end"])
    per_step["gpu_utilization_pct"] = np.where(
        per_step["step_us"] > 0, 100 * per_step["gpu_busy_us"] / per_step["step_us"], 0.0
    )
    step_of = np.searchsorted(per_step["start"].to_numpy(), kts, side="right") - 1
    ok = (step_of >= 0) & (kts < per_step["end"].to_numpy()[np.clip(step_of, 0, None)])
    per_step["kernels"] = np.bincount(step_of[ok], minlength=len(per_step))[: len(per_step)]
    return per_step

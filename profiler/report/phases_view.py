"""Terminal tables of the per-phase kernel split and the per-position step times, for one trace
(summarize) or two side by side (compare). Formatting only."""

from __future__ import annotations

import pandas as pd
from rich.table import Table

from profiler.report.console import FitTable
from profiler.report.fmt import count, missing, pct, us
from profiler.trace.phases import PhaseSummary

PER_STEP_NOTE = "summed over the profiled generations"


def phases_table(phases: PhaseSummary, title: str = "Phases") -> Table:
    t = FitTable(title=f"{title} ({PER_STEP_NOTE})")
    t.add_column("phase")
    for col in (
        "spans",
        "CPU wall",
        "kernel time",
        "kernel share",
        "launches",
        "GPU idle",
        "idle share",
        "Tensor Core",
    ):
        t.add_column(col, number=True, optional=col in ("spans", "idle share", "Tensor Core"))
    for r in phases.phases.itertuples():
        t.add_row(
            r.phase,
            count(r.spans),
            us(r.wall_us),
            us(r.kernel_us),
            pct(r.kernel_share_pct),
            count(r.launches),
            us(r.gpu_idle_us),
            pct(r.gpu_idle_pct),
            pct(r.tensor_core_pct),
        )
    return t


def positions_table(phases: PhaseSummary, phase: str = "decode", top: int = 0) -> Table:
    """Mean time of the n-th ``phase`` span of a generation: how a step grows with position."""
    rows = phases.positions[phases.positions["phase"] == phase]
    t = FitTable(title=f"{phase} step by position (mean over generations)")
    for col in ("position", "CPU wall", "kernel time", "launches"):
        t.add_column(col, number=True)
    for r in _spread(rows, top).itertuples():
        t.add_row(
            str(r.position), us(r.mean_wall_us), us(r.mean_kernel_us), count(r.mean_launches, 1)
        )
    return t


def _spread(rows: pd.DataFrame, top: int) -> pd.DataFrame:
    """At most ``top`` rows spread evenly over the positions, first and last kept (all when
    ``top`` is 0 or the table is short)."""
    if not top or len(rows) <= top:
        return rows
    picks = sorted({round(i * (len(rows) - 1) / (top - 1)) for i in range(top)})
    return rows.iloc[picks]


def compare_phases_table(a: PhaseSummary, b: PhaseSummary) -> Table:
    t = FitTable(title=f"Phases, A vs B ({PER_STEP_NOTE})")
    t.add_column("phase")
    for col in (
        "kernel A",
        "kernel B",
        "launches A",
        "launches B",
        "idle A",
        "idle B",
        "TC A",
        "TC B",
    ):
        t.add_column(col, number=True, optional=col.startswith("TC"))
    left, right = a.phases.set_index("phase"), b.phases.set_index("phase")
    for phase in list(dict.fromkeys([*left.index, *right.index])):
        x = left.loc[phase] if phase in left.index else None
        y = right.loc[phase] if phase in right.index else None

        def cell(row, key, fmt):
            return "-" if row is None or missing(row[key]) else fmt(row[key])

        t.add_row(
            phase,
            cell(x, "kernel_us", us),
            cell(y, "kernel_us", us),
            cell(x, "launches", count),
            cell(y, "launches", count),
            cell(x, "gpu_idle_pct", pct),
            cell(y, "gpu_idle_pct", pct),
            cell(x, "tensor_core_pct", pct),
            cell(y, "tensor_core_pct", pct),
        )
    return t


def compare_positions_table(
    a: PhaseSummary, b: PhaseSummary, phase: str = "decode", top: int = 0
) -> Table:
    rows = (
        a.positions[a.positions["phase"] == phase]
        .merge(
            b.positions[b.positions["phase"] == phase],
            on=["phase", "position"],
            how="outer",
            suffixes=("_a", "_b"),
        )
        .sort_values("position")
    )
    t = FitTable(title=f"{phase} step by position, A vs B (mean over generations)")
    for col in ("position", "wall A", "wall B", "kernel A", "kernel B"):
        t.add_column(col, number=True)
    for r in _spread(rows, top).itertuples():
        t.add_row(
            str(r.position),
            us(r.mean_wall_us_a),
            us(r.mean_wall_us_b),
            us(r.mean_kernel_us_a),
            us(r.mean_kernel_us_b),
        )
    return t

"""Terminal tables of the per-phase kernel split and the per-position step times, for one trace
(summarize) or two side by side (compare). Formatting only."""

from __future__ import annotations

import pandas as pd
from rich.table import Table

from profiler.analysis.roofline import Roofline
from profiler.report.console import FitTable
from profiler.report.fmt import (
    NOT_FINITE,
    count,
    head,
    percent,
    safe,
    significant,
    time,
)
from profiler.trace.phase_kernels import PhaseSummary

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
            time(r.wall_us, "µs", "auto", decimals=2),
            time(r.kernel_us, "µs", "auto", decimals=2),
            percent(r.kernel_share_pct),
            count(r.launches),
            time(r.gpu_idle_us, "µs", "auto", decimals=2),
            percent(r.gpu_idle_pct),
            percent(r.tensor_core_pct),
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
            str(r.position),
            time(r.mean_wall_us, "µs", "auto", decimals=2),
            time(r.mean_kernel_us, "µs", "auto", decimals=2),
            count(r.mean_launches, 1),
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

        def cell(row: pd.Series | None, key: str) -> float | None:
            value: float | None = None if row is None else row[key]
            return value

        t.add_row(
            phase,
            time(cell(x, "kernel_us"), "µs", "auto", 2),
            time(cell(y, "kernel_us"), "µs", "auto", 2),
            count(cell(x, "launches")),
            count(cell(y, "launches")),
            percent(cell(x, "gpu_idle_pct")),
            percent(cell(y, "gpu_idle_pct")),
            percent(cell(x, "tensor_core_pct")),
            percent(cell(y, "tensor_core_pct")),
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
            time(r.mean_wall_us_a, "µs", "auto", decimals=2),
            time(r.mean_wall_us_b, "µs", "auto", decimals=2),
            time(r.mean_kernel_us_a, "µs", "auto", decimals=2),
            time(r.mean_kernel_us_b, "µs", "auto", decimals=2),
        )
    return t


def phase_categories_table(phases: PhaseSummary) -> Table:
    """Kernel time by category, one column pair per phase: how the prefill and the decode
    spend their GPU time differently."""
    names = list(phases.kernels)
    t = FitTable(title=f"Kernel time by category, per phase ({PER_STEP_NOTE})")
    t.add_column("category")
    for phase in names:
        t.add_column(f"{phase} time", number=True)
        t.add_column(f"{phase} share", number=True)
    frames = {p: k.categories.set_index("category") for p, k in phases.kernels.items()}
    categories = list(dict.fromkeys(c for f in frames.values() for c in f.index))
    for category in categories:
        cells = []
        for phase in names:
            frame = frames[phase]
            present = category in frame.index
            cells += [
                time(frame.loc[category, "total_us"], "µs", "auto", decimals=2) if present else "-",
                percent(frame.loc[category, "share_pct"]) if present else "-",
            ]
        t.add_row(category, *cells)
    t.add_row(
        "Tensor Core kernels",
        *[
            cell
            for k in phases.kernels.values()
            for cell in (
                time(k.tensor_core_us, "µs", "auto", decimals=2),
                percent(100 * k.tensor_core_share),
            )
        ],
    )
    return t


def phase_kernels_table(phases: PhaseSummary, phase: str, top: int) -> Table:
    """A phase's kernels by total time, with the operator that launched each."""
    table = phases.kernels[phase].table
    shown = head(table, top)
    t = FitTable(title=f"{phase}: kernels by total time (the first {len(shown)} of {len(table)})")
    t.add_column("kernel")
    t.add_column("category", optional=True)
    for col in ("calls", "total", "share"):
        t.add_column(col, number=True)
    t.add_column("Tensor Cores", optional=True)
    t.add_column("launched by (operator)", optional=2)
    for r in shown.itertuples():
        t.add_row(
            safe(r.kernel),
            safe(r.category),
            count(r.calls),
            time(r.total_us, "µs", "auto", decimals=2),
            percent(r.share_pct),
            r.tensor_core,
            safe(r.top_operator),
        )
    return t


def phase_roofline_table(rooflines: list[tuple[str, str, Roofline]]) -> Table:
    """Each phase against the GPU's ceilings, at its timed figure."""
    t = FitTable(title="Roofline per phase (timed, no profiler; minimum bytes: a lower bound)")
    t.add_column("phase")
    for col in (
        "at",
        "FLOPs",
        "min bytes",
        "FLOP/byte",
        "TFLOP/s",
        "GB/s (at least)",
        "bound",
        "% of roof",
    ):
        t.add_column(col, number=col not in ("at", "bound"))
    for phase, label, r in rooflines:
        t.add_row(
            phase,
            f"{label} {time(1e3 * r.seconds, thousands=False, labelled=False)} ms",
            significant(r.flops, not_finite=NOT_FINITE),
            significant(r.min_bytes, not_finite=NOT_FINITE),
            significant(r.intensity, not_finite=NOT_FINITE),
            significant(r.achieved_tflops, not_finite=NOT_FINITE),
            count(round(r.achieved_gbs)),
            r.bound,
            percent(r.pct_of_roof),
        )
    return t

"""Nsight Compute columns beside the name rules: a table, the agreement line, and exports."""

from __future__ import annotations

import pandas as pd
from rich.console import Console
from rich.table import Table

from profiler.report.fmt import percent, plain
from profiler.trace.hardware import TENSOR_NO_PCT, TENSOR_YES_PCT, Agreement

HARDWARE_CSV_COLUMNS = (
    "kernel",
    "name",
    "category",
    "calls",
    "total_us",
    "share_pct",
    "tensor_core",
    "tensor_core_rule",
    "hw_tensor_core",
    "rules_vs_hardware",
    "hw_tensor_pipe_pct",
    "hw_tensor_inst",
    "hw_achieved_occupancy_pct",
    "hw_theoretical_occupancy_pct",
    "theoretical_occupancy_pct",
    "kineto_est_occupancy_pct",
    "hw_launches",
    "hw_match",
    "hw_kernel_name",
)


def hardware_table(joined: pd.DataFrame, top: int) -> Table:
    shown = joined[joined["rules_vs_hardware"] != "not profiled"]
    shown = shown if not top else shown.head(top)
    t = Table(
        title=f"Name rules vs Nsight Compute (Tensor Cores: tensor pipe >= "
        f"{plain(TENSOR_YES_PCT)} % yes, <= {plain(TENSOR_NO_PCT)} % no)",
        title_justify="left",
    )
    t.add_column("kernel", no_wrap=True, overflow="ellipsis", max_width=50)
    for name in (
        "share",
        "rule",
        "hardware",
        "verdict",
        "tensor pipe",
        "occupancy achieved",
        "occupancy theoretical (ncu)",
        "theoretical (computed)",
    ):
        t.add_column(
            name, justify="right" if name not in ("rule", "hardware", "verdict") else "left"
        )
    for r in shown.itertuples():
        verdict = r.rules_vs_hardware
        if verdict == "disagree":
            verdict = "[bold red]disagree[/]"
        t.add_row(
            r.kernel,
            percent(r.share_pct),
            r.tensor_core,
            str(r.hw_tensor_core),
            verdict,
            percent(r.hw_tensor_pipe_pct),
            percent(r.hw_achieved_occupancy_pct),
            percent(r.hw_theoretical_occupancy_pct),
            percent(r.theoretical_occupancy_pct),
        )
    return t


def agreement_lines(agreement: Agreement) -> list[str]:
    a = agreement
    if not a.profiled_us:
        return ["Nsight Compute: none of the trace's kernels were found in the ncu CSV"]
    lines = [
        f"name rules agree with Nsight Compute on {percent(100 * a.share)} of the profiled "
        f"kernel time ({a.profiled_kernels} kernels, {percent(100 * a.coverage)} of all "
        "kernel time)"
    ]
    for label, us in (
        ("disagree", a.disagree_us),
        ("rule says unknown", a.unknown_rule_us),
        ("hardware unclear (between thresholds)", a.unclear_hardware_us),
    ):
        if us:
            lines.append(f"  {label}: {percent(100 * us / a.profiled_us)} of the profiled time")
    return lines + tensor_core_lines(a)


def tensor_core_lines(a: Agreement) -> list[str]:
    """The two Tensor Core readings side by side, over the same profiled kernels: a kernel that
    uses Tensor Cores at all counts whole in the first; the second is how busy the pipe was."""
    if not a.pipe_measured_us:
        return []
    over = (
        f"over the {a.profiled_kernels} profiled kernels ({percent(100 * a.coverage)} of all "
        "kernel time)"
    )
    return [
        f"Tensor Cores, two readings {over}:",
        f"  time in Tensor Core kernels (name rules): {percent(100 * a.tensor_core_kernels_share)}"
        " of that kernel time (a kernel that uses Tensor Cores at all counts whole)",
        f"  tensor pipe busy (ncu, kernel-time weighted): {percent(100 * a.tensor_pipe_busy_share)}"
        " of that kernel time (sm__pipe_tensor_cycles_active: % of peak while the SM is "
        "active)",
    ]


def print_hardware(joined: pd.DataFrame, agreement: Agreement, top: int, console: Console) -> None:
    console.print(hardware_table(joined, top))
    for line in agreement_lines(agreement):
        console.print(line)
    for name in agreement.disagreeing:
        console.print(f"[yellow]rule vs hardware disagree:[/yellow] {name}")


def export_columns(joined: pd.DataFrame) -> pd.DataFrame:
    return joined[[c for c in HARDWARE_CSV_COLUMNS if c in joined.columns]]

"""Terminal tables for a trace Summary (rich): the header line, the overview, the step table,
kernels, launch configurations and CPU operators (profiler.report.sections lays them out for
`summarize`). Printing is a view: nothing is computed here except formatting."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd
from rich.console import Console
from rich.table import Table

from profiler.report.console import FitTable
from profiler.report.fmt import TimeColumn, count, head, percent, safe, size_bytes, time
from profiler.trace.breakdown import BREAKDOWN, BREAKDOWN_DEFINITIONS, DEFINERS
from profiler.trace.device_metrics import DeviceMetrics
from profiler.trace.kernels import TC_KERNELS_LABEL, KernelSummary
from profiler.trace.summary import Summary

if TYPE_CHECKING:
    from profiler.trace.hardware import Agreement


def trace_header(summary: Summary) -> str:
    """The trace, its schema and its first GPU: `summarize`'s first line (rich markup)."""
    header = f"[b]{safe(summary.trace_path)}[/b]  ({safe(summary.schema)}"
    if summary.devices:
        d = summary.devices[0]
        header += (
            f"; {safe(d['name'])}, sm_{d['compute_major']}{d['compute_minor']}, {d['num_sms']} SMs"
        )
    return header + ")"


def overview_tables(
    summary: Summary, top: int, console: Console, agreement: Agreement | None = None
) -> None:
    """The overview's facts, then (when the trace has steps) the step table (the breakdown's
    definitions are a view of their own: ``definitions_table``). ``agreement``: the ncu join's
    (profiler.trace.hardware), when one was made: its tensor-pipe reading sits beside the time
    in Tensor Core kernels."""
    console.print(overview_facts(summary, agreement))
    if len(summary.overview.steps):
        console.print(step_table(summary, top))


def overview_facts(summary: Summary, agreement: Agreement | None = None) -> FitTable:
    """Steps, step time, each GPU's utilization, occupancy and idle gaps, and the time in
    Tensor Core kernels: one fact a row, with what it means."""
    o, k = summary.overview, summary.kernels
    facts = FitTable(title="Overview", show_header=False)
    facts.add_column("metric")
    facts.add_column("value", number=True)
    facts.add_column("what it means", style="dim")
    facts.add_row(
        "steps", str(len(o.steps)), "CPU-side ProfilerStep#N spans (GPU copies not counted)"
    )
    facts.add_row(
        "mean step time under the profiler",
        time(o.mean_step_us, "µs", "auto", decimals=2),
        "step span extended to the end of the GPU work it launched; under the profiler, "
        "not a latency to quote",
    )
    if len(o.steps):
        facts.add_row(
            "mean CPU step span",
            time(float(o.steps["cpu_step_us"].mean()), "µs", "auto", decimals=2),
            "ProfilerStep#N duration on the CPU thread",
        )
    for d in o.devices:
        _device_rows(facts, d)
    if k.total_kernel_us:
        _tensor_core_rows(facts, k, agreement)
    return facts


def _device_rows(facts: FitTable, d: DeviceMetrics) -> None:
    """A GPU's utilization, SM efficiency, occupancy and idle gaps (trace.device_metrics)."""
    name = f"GPU {d.device}"
    facts.add_row(
        f"{name} utilization, profiled steps",
        percent(d.gpu_utilization_pct),
        "time with >= 1 kernel running / steps time, under the profiler (over the timed window: "
        "the headline)",
    )
    facts.add_row(
        f"{name} est. SM efficiency",
        percent(d.est_sm_efficiency_pct),
        "sum over time of min(blocks per SM, 1) / steps time",
    )
    facts.add_row(
        f"{name} est. achieved occupancy (Kineto)",
        percent(d.est_achieved_occupancy_pct),
        "Kineto's per-kernel estimate, kernel-time weighted (0 for >48 KB smem)",
    )
    facts.add_row(
        f"{name} theoretical occupancy (computed)",
        percent(d.theoretical_occupancy_pct),
        "occupancy calculator on regs/smem/block size, kernel-time weighted",
    )
    facts.add_row(
        f"{name} idle gaps between GPU work",
        f"{count(d.idle_gaps)} gaps, {time(d.idle_total_us, 'µs', 'auto', 2)}",
        f"largest {time(d.idle_largest_us, 'µs', 'auto', 2)}, "
        f"median {time(d.idle_median_us, 'µs', 'auto', 2)}; "
        "many short gaps = launch-bound",
    )


def _tensor_core_rows(facts: FitTable, k: KernelSummary, agreement: Agreement | None) -> None:
    """The time in Tensor Core kernels, of all kernel time and of GEMM + convolution time;
    the tensor pipe's reading beside it when ncu measured it."""
    facts.add_row(
        TC_KERNELS_LABEL,
        percent(100 * k.tensor_core_share),
        f"of all kernel time ({time(k.tensor_core_us, 'µs', 'auto', 2)} "
        f"of {time(k.total_kernel_us, 'µs', 'auto', 2)}); "
        "a kernel that uses Tensor Cores at all counts whole",
    )
    facts.add_row(
        "  … of GEMM + convolution time",
        percent(100 * k.tensor_core_share_of_matrix),
        f"{time(k.matrix_tensor_core_us, 'µs', 'auto', 2)} of {time(k.matrix_us, 'µs', 'auto', 2)}",
    )
    if agreement is not None and agreement.pipe_measured_us:
        a = agreement
        facts.add_row(
            "tensor pipe busy (ncu)",
            percent(100 * a.tensor_pipe_busy_share),
            f"kernel-time weighted, over the {a.profiled_kernels} profiled "
            f"kernels ({percent(100 * a.coverage)} of kernel time; time in Tensor "
            f"Core kernels there: {percent(100 * a.tensor_core_kernels_share)})",
        )
    if k.tensor_core_unknown_us:
        facts.add_row(
            "  undecided (name gives no evidence)",
            percent(100 * k.tensor_core_unknown_us / k.total_kernel_us),
            "counted as not Tensor Core",
        )


#: a step table longer than --top rows is summarised: this many slowest and fastest steps
#: (at most; fewer when --top is smaller) and the distribution
STEP_EXTREMES = 5


#: the step table's columns kept at any width (the others are left out, the last first, where
#: the width cannot show them all)
STEP_COLUMNS = ("step time", "kernel", "runtime", "cpu_exec")


def step_table(summary: Summary, top: int) -> Table:
    """Every step when there are at most ``top`` (or ``top`` is 0); else the slowest and the
    fastest steps, then min / median / p90 / max of each column. The mean row closes both."""
    o = summary.overview
    shown = len(o.steps) if not top or len(o.steps) <= top else min(STEP_EXTREMES, top)
    # a trace without GPU work: steps of seconds, in one unit (s, ms or µs) for every column
    column = TimeColumn(o.steps["step_us"], o.steps["cpu_step_us"]) if not o.has_gpu else count
    title = (
        f"Step time breakdown ({getattr(column, 'unit', 'µs')}; each instant counted once, "
        "kernel first; "
        f"{DEFINERS[o.definitions]}'s definitions: --view definitions)"
    )
    if shown < len(o.steps):
        title += (
            f": {count(len(o.steps))} steps, the {shown} slowest and {shown} fastest and the "
            "spread (all: --top 0 or --out)"
        )
    steps = FitTable(title=title)
    steps.add_column("step")
    for col in ("step time", "CPU span", *BREAKDOWN, "GPU util", "kernels"):
        steps.add_column(col, number=True, optional=col not in STEP_COLUMNS)
    if shown == len(o.steps):
        _step_rows(steps, o.steps, column=column)
    else:
        slowest, fastest = o.slowest_and_fastest(shown)
        _step_rows(steps, slowest, "slowest", column)
        _step_rows(steps, fastest, "fastest", column)
        spread = o.step_distribution()
        _step_rows(
            steps, spread.assign(step=[f"[b]{q}[/b]" for q in spread.index]), "all steps", column
        )
    if len(o.steps) > 1:
        steps.add_row(
            "[b]mean[/b]",
            column(o.mean_step_us),
            column(float(o.steps["cpu_step_us"].mean())),
            *[column(o.breakdown_us[r]) for r in BREAKDOWN],
            percent(float(o.steps["gpu_utilization_pct"].mean())),
            count(float(o.steps["kernels"].mean())),
        )
    return steps


def definitions_table(used: str) -> Table:
    """What the breakdown's roles hold here and in the TensorBoard plugin, side by side (the
    roles both read alike are named in the title)."""
    ours, plugin = BREAKDOWN_DEFINITIONS["tool"], BREAKDOWN_DEFINITIONS["plugin"]
    same = [role for role in ours if ours[role] == plugin[role]] + ["memcpy/memset"]
    alike = " and ".join(filter(None, (", ".join(same[:-1]), same[-1])))
    t = Table(
        title=f"Breakdown definitions (the step table's: {DEFINERS[used]}; "
        f"{alike} read alike; --breakdown tool|plugin)",
        title_justify="left",
    )
    for col in ("role", DEFINERS["tool"], DEFINERS["plugin"]):
        t.add_column(col, style="dim" if col != "role" else None)
    for role in ours:
        if role not in same:
            t.add_row(role, ours[role], plugin[role])
    return t


def _step_rows(
    table: Table,
    rows: pd.DataFrame,
    heading: str = "",
    column: Callable[[float | None], str] = count,
) -> None:
    """``column``: how a time column is written (µs counts, or a TimeColumn's unit)."""
    if heading:
        table.add_section()
        table.add_row(f"[i]{heading}[/i]")
    for row in rows.itertuples():
        table.add_row(
            row.step,
            column(row.step_us),
            column(row.cpu_step_us),
            *[column(getattr(row, r)) for r in BREAKDOWN],
            percent(row.gpu_utilization_pct),
            count(row.kernels),
        )


def categories_table(summary: Summary) -> Table:
    t = FitTable(title="Kernel time by category")
    t.add_column("category")
    for col in ("kernels", "calls", "total", "share of kernel time", "TC-kernel time"):
        t.add_column(col, number=True)
    for r in summary.kernels.categories.itertuples():
        t.add_row(
            safe(r.category),
            count(r.kernels),
            count(r.calls),
            time(r.total_us, "µs", "auto", decimals=2),
            percent(r.share_pct),
            percent(r.tensor_core_pct),
        )
    return t


def kernels_table(summary: Summary, top: int) -> Table:
    table = summary.kernels.table
    t = FitTable(title=_top_title("Kernels by total time", top, len(table)))
    t.add_column("kernel (short name; full name in --out/--json)")
    t.add_column("category", optional=True)
    t.add_column("calls", number=True)
    for name in ("total", "mean", "median", "min", "max"):  # the spread before Tensor Cores
        t.add_column(f"{name} µs", number=True, optional=2 * (name in ("median", "min", "max")))
    t.add_column("share", number=True)
    t.add_column("Tensor Cores", optional=True)
    t.add_column("launched by (operator)", optional=2)
    for r in head(table, top).itertuples():
        t.add_row(
            safe(r.kernel),
            safe(r.category),
            count(r.calls),
            *[count(v, 1) for v in (r.total_us, r.mean_us, r.median_us, r.min_us, r.max_us)],
            percent(r.share_pct),
            r.tensor_core,
            safe(r.top_operator),
        )
    return t


def launch_table(summary: Summary, top: int) -> Table:
    table = summary.kernels.table
    t = FitTable(
        title="Kernel launch configuration and occupancy (most time-consuming "
        "configuration; per-SM values and occupancy kernel-time weighted)"
    )
    t.add_column("kernel")
    for name in (
        "regs/ thread",
        "smem/ block",
        "block",
        "grid",
        "blocks/ SM",
        "warps/ SM",
        "occupancy: Kineto est.",
        "occupancy: theoretical (computed)",
        "configs",
    ):
        t.add_column(name, number=True, optional=name in ("grid", "blocks/ SM", "configs"))
    for r in head(table, top).itertuples():
        t.add_row(
            safe(r.kernel),
            count(r.registers_per_thread),
            size_bytes(r.shared_memory_bytes),
            safe(r.block),
            safe(r.grid),
            count(r.blocks_per_sm, 1),
            count(r.warps_per_sm, 1),
            percent(r.kineto_est_occupancy_pct),
            percent(r.theoretical_occupancy_pct),
            count(r.launch_configs),
        )
    return t


def operators_table(summary: Summary, top: int) -> Table:
    """The CPU operators by total CPU time; a trace without GPU work (whose operators run to
    seconds) gives each time column one unit, s, ms or µs (fmt.TimeColumn), and no kernel
    columns."""
    ops = summary.overview.operators
    shown = head(ops, top)
    on_cpu = not summary.overview.has_gpu
    total = TimeColumn(shown["cpu_total_us"]) if on_cpu else None
    own = TimeColumn(shown["cpu_self_us"]) if on_cpu else None
    t = FitTable(title=_top_title("CPU operators by total CPU time", top, len(ops)))
    t.add_column("operator")
    t.add_column("calls", number=True)
    t.add_column(f"CPU total {total.unit if total else 'µs'} (incl. children)", number=True)
    t.add_column(f"CPU self {own.unit if own else 'µs'}", number=True)
    if not on_cpu:
        t.add_column("kernels launched", number=True, optional=True)
        t.add_column("kernel time launched µs", number=True, optional=True)
    for r in shown.itertuples():
        if total is not None and own is not None:
            t.add_row(safe(r.operator), count(r.calls), total(r.cpu_total_us), own(r.cpu_self_us))
            continue
        t.add_row(
            safe(r.operator),
            count(r.calls),
            count(r.cpu_total_us, 1),
            count(r.cpu_self_us, 1),
            count(r.kernels),
            count(r.kernel_us, 1),
        )
    return t


def _top_title(title: str, top: int, rows: int) -> str:
    """``title (top K of N)`` when the table is cut to its top rows."""
    return title + (f" (top {top} of {rows})" if top and rows > top else "")

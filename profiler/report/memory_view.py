"""The memory view (profiler.trace.memory.MemoryView) drawn: each device's peak and its
operator, its allocated and reserved memory over the recording as a chart (a PNG of `plot`, an
inline one on the HTML page), and the operators' table with the TensorBoard plugin's columns."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich.console import Console

from profiler.analysis.run_analysis import RunAnalysis
from profiler.errors import UserError
from profiler.fsutil import write_with
from profiler.report import html
from profiler.report.console import FitTable, print_prose
from profiler.report.fmt import count, safe, size, time
from profiler.trace.memory_records import MemoryPeak, MemoryView, OperatorMemory
from profiler.units import SIZE_UNITS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: the plugin's Memory view columns -> this view's fields (sizes in bytes, counts)
COLUMNS: dict[str, str] = {
    "Operator": "operator",
    "Calls": "calls",
    "Size Increase": "size_increase_bytes",
    "Self Size Increase": "self_size_increase_bytes",
    "Allocation Count": "allocation_count",
    "Self Allocation Count": "self_allocation_count",
    "Allocation Size": "allocation_size_bytes",
    "Self Allocation Size": "self_allocation_size_bytes",
}
#: the size columns are shown in the plugin's unit: KiB (which it labels KB)
UNIT = "KiB"
#: how the rows are ordered: the most bytes allocated (children included) first
ORDER = "Allocation Size"
HOW = (
    "Size Increase: bytes allocated minus bytes freed, each [memory] event counted in the "
    "operator running when it happened (a block freed later, elsewhere, lowers that other "
    "operator's); Allocation Count and Size: allocations only, frees not subtracted; Self: the "
    "operator's own, else with every operator it calls; Calls: the calls on the way to a "
    "[memory] event and each thread's outermost calls (the TensorBoard plugin's count). Sizes "
    "in KiB (the plugin's KB)."
)


def recorded_memory(run: RunAnalysis) -> MemoryView | None:
    """The memory view of a run recorded with --profile-memory, or of a bare trace that holds
    [memory] events; a run recorded without it is not read again for them."""
    # ConfigRecord is built from RunConfig's fields when imported: no attribute a checker sees
    if run.result is not None and not getattr(run.result.config, "profile_memory", False):
        return None
    return run.memory


def _sized(column: str) -> bool:
    return column not in ("Operator", "Calls") and "Count" not in column


def operators_frame(view: MemoryView, device: str) -> pd.DataFrame:
    """The operators' rows of one device, plugin's columns (sizes in bytes), ordered by
    ORDER, largest first."""
    rows: list[OperatorMemory] = [r for r in view.operators if r.device == device]
    frame = pd.DataFrame(
        [{column: getattr(r, field) for column, field in COLUMNS.items()} for r in rows],
        columns=list(COLUMNS),
    )
    return frame.sort_values([ORDER, "Operator"], ascending=[False, True], kind="stable")


def unit_of(largest: float) -> str:
    """The unit a device's sizes read best in: B, KiB, MiB or GiB."""
    for unit in ("GiB", "MiB", "KiB"):
        if largest >= SIZE_UNITS[unit]:
            return unit
    return "B"


def peak_line(peak: MemoryPeak) -> str:
    """``GPU0: peak 130.7 MiB allocated at 2.763 ms, by aten::empty (in
    aten::native_batch_norm); 162.0 MiB reserved at most``."""
    who = "an allocation outside any operator"
    if peak.operator is not None:
        who = peak.operator + (f" (in {peak.parent})" if peak.parent else "")
    unit = unit_of(max(peak.allocated_bytes, peak.reserved_bytes))
    return (
        f"{peak.device}: peak {size(peak.allocated_bytes, 'B', unit)} allocated at "
        f"{time(peak.time_ms)} by {who}; {size(peak.reserved_bytes, 'B', unit)} reserved at most"
    )


def steps_line(view: MemoryView, device: str) -> str | None:
    """``per profiled step, the peak allocated: ProfilerStep#2 130.7 MiB, ...``; None without
    steps holding the device's events."""
    peaks = [
        (s.name, s.peak_allocated_bytes[device])
        for s in view.steps
        if device in s.peak_allocated_bytes
    ]
    if not peaks:
        return None
    unit = unit_of(max(p for _, p in peaks))
    return "per profiled step, the peak allocated: " + ", ".join(
        f"{name} {size(p, 'B', unit)}" for name, p in peaks
    )


def print_memory(view: MemoryView, console: Console, top: int = 20) -> None:
    """Each device's peak, its curve in a line, and its operators' table (``top`` rows)."""
    for peak, curve in zip(view.peaks, view.curves):
        print_prose(console, safe(peak_line(peak)))
        if curve.time_ms:
            unit = unit_of(peak.allocated_bytes)
            print_prose(
                console,
                f"[dim]  {count(len(curve.time_ms))} \\[memory] events over "
                f"{time(curve.time_ms[-1] - curve.time_ms[0])}: allocated "
                f"{size(curve.allocated_bytes[0], 'B', unit)} at the first, "
                f"{size(curve.allocated_bytes[-1], 'B', unit)} at the last "
                "(the curve: `plot` or `report`)[/]",
            )
        steps = steps_line(view, peak.device)
        if steps is not None:
            print_prose(console, f"[dim]  {safe(steps)}[/]")
    for device in view.devices:
        console.print(_operators_table(view, device, top))
    print_prose(console, f"[dim]{safe(HOW)}[/]")
    fewer = sorted({r.operator for r in view.operators if r.calls != r.calls_in_trace})
    if fewer:
        print_prose(
            console,
            f"[yellow]note:[/yellow] Calls is below the operator's calls in the trace for "
            f"{safe(', '.join(fewer))} (the plugin's walk stops at calls without \\[memory] events "
            "below them; --json: calls_in_trace)",
        )
    print_prose(
        console,
        f"[dim]{count(view.attributed_events)} of {count(view.events)} \\[memory] events "
        "attributed to an operator (the rest fall outside any operator, or in a span that is "
        "not one: a ProfilerStep, a module)[/]",
    )


def _operators_table(view: MemoryView, device: str, top: int) -> FitTable:
    frame = operators_frame(view, device)
    shown = frame.head(top) if top else frame
    cut = f" (top {top} of {len(frame)})" if top and len(frame) > top else ""
    t = FitTable(title=f"{device}: memory by operator, by {ORDER.lower()}{cut}")
    for column in COLUMNS:
        header = f"{column} {UNIT}" if _sized(column) else column
        t.add_column(header, number=column != "Operator")
    for row in shown.itertuples(index=False):
        cells = [safe(row[0])]
        for column, value in zip(list(COLUMNS)[1:], row[1:]):
            cells.append(
                size(value, "B", UNIT, 2, labelled=False) if _sized(column) else count(value)
            )
        t.add_row(*cells)
    return t


def memory_figure(view: MemoryView, title: str = "") -> Figure:
    """Allocated and reserved memory over time, one panel per device, the peak marked."""
    from profiler.report.plots import use_agg

    use_agg()
    import matplotlib.pyplot as plt

    devices = len(view.curves)
    fig, axes = plt.subplots(devices, 1, figsize=(9, 3.2 * devices), squeeze=False)
    for ax, curve, peak in zip(axes[:, 0], view.curves, view.peaks):
        unit = unit_of(max(peak.allocated_bytes, peak.reserved_bytes))
        mib = SIZE_UNITS[unit]
        ax.plot(
            curve.time_ms,
            [b / mib for b in curve.reserved_bytes],
            drawstyle="steps-post",
            label="reserved",
            color="#ff7f0e",
        )
        ax.plot(
            curve.time_ms,
            [b / mib for b in curve.allocated_bytes],
            drawstyle="steps-post",
            label="allocated",
            color="#1f77b4",
        )
        for k, step in enumerate(view.steps):  # the profiled steps, shaded in turn
            ax.axvspan(step.start_ms, step.end_ms, color="#e0e0e0" if k % 2 else "#f0f0f0", lw=0)
            ax.annotate(
                step.name,
                (step.start_ms, 1),
                xycoords=("data", "axes fraction"),
                xytext=(2, -10),
                textcoords="offset points",
                fontsize=7,
                color="#555555",
            )
        ax.plot([peak.time_ms], [peak.allocated_bytes / mib], "v", color="#d62728")
        ax.annotate(
            f"peak {size(peak.allocated_bytes, 'B', unit)}"
            + (f"\n{peak.operator}" if peak.operator else ""),
            (peak.time_ms, peak.allocated_bytes / mib),
            textcoords="offset points",
            xytext=(6, -14),
            fontsize=8,
        )
        ax.set_ylabel(f"{curve.device} {unit}")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("ms since the trace's first event")
    axes[0, 0].set_title(title or "Memory over the recorded steps ([memory] events)")
    fig.tight_layout()
    return fig


def memory_plot(view: MemoryView, out: Path, title: str = "") -> Path:
    """The memory figure as a PNG at ``out``."""
    fig = memory_figure(view, title)
    try:
        write_with(out, lambda tmp: fig.savefig(tmp, format="png", dpi=130, bbox_inches="tight"))
    except OSError as error:
        raise UserError(f"cannot write {out}: {error.strerror or error}") from None
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return out


def memory_sections(view: MemoryView, label: str, top: int = 20) -> list[html.Section]:
    """The page's sections: the chart (or why it is missing), then each device's table."""
    missing = html.figures_missing()
    chart = html.note(missing) if missing else html.figure_png(memory_figure(view))
    lines = [peak_line(p) for p in view.peaks]
    lines += [line for d in view.devices if (line := steps_line(view, d)) is not None]
    peaks = "".join(html.note(line, "src") for line in lines)
    found = [html.Section(f"{label}: memory over time", chart + peaks)]
    formats: dict[str, Any] = {
        c: (lambda v: size(v, "B", UNIT, 2, labelled=False)) for c in COLUMNS if _sized(c)
    }
    formats.update({c: count for c in COLUMNS if c != "Operator" and not _sized(c)})
    headers = {c: f"{c} ({UNIT})" for c in COLUMNS if _sized(c)}
    for device in view.devices:
        body = html.table(operators_frame(view, device), top=top, headers=headers, formats=formats)
        found.append(html.Section(f"{label}: {device} memory by operator", body + html.note(HOW)))
    return found


def memory_markdown(view: MemoryView, top: int = 20) -> list[str]:
    """summary.md's memory section: each device's peak, then its operators' table (``top``
    rows, sizes in KiB as the plugin shows them)."""
    from profiler.report.export import markdown_table

    md = ["## Memory ([memory] events, run --profile-memory)\n"]
    md += [f"- {peak_line(p)}" for p in view.peaks]
    md += [f"- {d}: {line}" for d in view.devices if (line := steps_line(view, d)) is not None]
    md += [""]
    for device in view.devices:
        frame = operators_frame(view, device)
        shown = frame.head(top) if top else frame
        for column in COLUMNS:
            if _sized(column):
                shown[column] = [size(v, "B", UNIT, 2, labelled=False) for v in shown[column]]
        cut = f" (top {top} of {len(frame)})" if top and len(frame) > top else ""
        md += [f"### {device}: memory by operator, by {ORDER.lower()}{cut}\n"]
        md += [markdown_table(shown.rename(columns=_HEADERS)), ""]
    return md + [HOW, ""]


#: the table's headers with the sizes' unit
_HEADERS = {c: f"{c} ({UNIT})" for c in COLUMNS if _sized(c)}


def memory_tables(view: MemoryView) -> dict[str, pd.DataFrame]:
    """The view as tables (sizes in bytes): memory_operators (the plugin's columns per device
    and operator, with every call in the trace), memory_curve (a row per event and device) and
    memory_steps (each profiled step's peak per device)."""
    operators = pd.DataFrame(
        [
            {"device": r.device, **{c: getattr(r, f) for c, f in COLUMNS.items()}}
            | {"Calls in trace": r.calls_in_trace}
            for r in view.operators
        ],
        columns=["device", *COLUMNS, "Calls in trace"],
    )
    curve = pd.DataFrame(
        [
            {"device": c.device, "time_ms": t, "allocated_bytes": a, "reserved_bytes": r}
            for c in view.curves
            for t, a, r in zip(c.time_ms, c.allocated_bytes, c.reserved_bytes)
        ],
        columns=["device", "time_ms", "allocated_bytes", "reserved_bytes"],
    )
    steps = pd.DataFrame(
        [
            {
                "step": s.name,
                "start_ms": s.start_ms,
                "end_ms": s.end_ms,
                "device": device,
                "peak_allocated_bytes": peak,
            }
            for s in view.steps
            for device, peak in s.peak_allocated_bytes.items()
        ],
        columns=["step", "start_ms", "end_ms", "device", "peak_allocated_bytes"],
    )
    return {"memory_operators": operators, "memory_curve": curve, "memory_steps": steps}

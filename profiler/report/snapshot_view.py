"""A run's memory snapshot (profiler.analysis.memory_snapshot.MemorySnapshot) drawn: each device's
peak of allocated memory, the allocation stacks live at it with their sizes (terminal, HTML,
Markdown), its allocated and reserved memory over the history as a chart on the HTML page (a PNG
drawn here: PyTorch's own HTML of a snapshot, torch.cuda._memory_viz.trace_plot, loads its viewer
from a CDN and shows nothing offline), and where PyTorch's memory_viz page opens the file."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pandas as pd
from rich.console import Console

from profiler.analysis.memory_snapshot import MemorySnapshot
from profiler.errors import UserError
from profiler.fsutil import write_text_atomic
from profiler.report import html
from profiler.report.console import FitTable, print_prose
from profiler.report.export import write_table
from profiler.report.fmt import count, percent, safe, size, time
from profiler.trace.snapshot import SnapshotDevice, SnapshotView

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: the innermost frames of a stack the terminal shows (the rest counted in one line)
FRAMES_SHOWN = 6
HOW = (
    "A block counts from its allocation to its completed free (a block freed on one stream "
    "while another still uses it counts until then, as PyTorch's memory_viz counts it); stacks "
    "innermost first, trimmed as torch/cuda/_memory_viz.py trims them, nn.Module's call "
    "wrappers left out."
)


def open_line(figure: MemorySnapshot) -> str:
    """Where the raw snapshot opens."""
    gunzip = ", gunzipped" if (figure.file or "").endswith(".gz") else ""
    return (
        f"memory snapshot: {figure.file} (open it in PyTorch's viewer: {figure.memory_viz}, "
        f"drag and drop the file{gunzip})"
    )


def _when(device: SnapshotDevice) -> str:
    if device.peak_event is None:
        return "when the history began (no allocation in it went higher)"
    at = f"at event {count(device.peak_event + 1)} of {count(device.events)}"
    if device.peak_time_us is not None:
        at += f", {time(device.peak_time_us / 1e3)} into the history"
    return at


def peak_line(device: SnapshotDevice) -> str:
    """``GPU 0: peak 101.0 MiB allocated at event 9 of 16, 0.040 ms into the history; ...``"""
    return (
        f"GPU {device.device}: peak {size(device.peak_allocated_bytes, 'B', 'MiB')} allocated "
        f"{_when(device)}, in {count(device.live_blocks)} blocks; "
        f"{size(device.reserved_at_peak_bytes, 'B', 'MiB')} reserved then; "
        f"{size(device.allocated_at_start_bytes, 'B', 'MiB')} allocated when the history began, "
        f"{size(device.allocated_at_end_bytes, 'B', 'MiB')} at its end "
        f"({count(device.allocations)} allocations, {count(device.frees)} frees)"
    )


def truncated_line(view: SnapshotView) -> str | None:
    if not view.truncated:
        return None
    return (
        f"the history filled the {count(view.max_entries)} events it keeps: the earliest were "
        "dropped, and the peak is the highest point of the events kept"
    )


def common_line(device: SnapshotDevice) -> str | None:
    if not device.common_frames:
        return None
    return (
        f"every stack above goes on through the {count(len(device.common_frames))} frames they "
        f"all share, from {device.common_frames[0]} out to {device.common_frames[-1]}"
    )


def _shown_frames(frames: list[str]) -> list[str]:
    if len(frames) <= FRAMES_SHOWN:
        return frames
    return [*frames[:FRAMES_SHOWN], f"... {count(len(frames) - FRAMES_SHOWN)} more frames"]


def print_snapshot(figure: MemorySnapshot, console: Console, top: int = 20) -> None:
    """Each device's peak line and the stacks live at it (``top`` of them, 0: all)."""
    if figure.view is None:
        print_prose(console, safe(figure.why_none or ""))
        return
    print_prose(console, safe(open_line(figure)))
    warning = truncated_line(figure.view)
    if warning:
        print_prose(console, f"[yellow]warning:[/] {safe(warning)}")
    for device in figure.view.devices:
        print_prose(console, safe(peak_line(device)))
        rows = device.stacks[:top] if top else device.stacks
        cut = f" (top {top} of {len(device.stacks)})" if top and len(device.stacks) > top else ""
        t = FitTable(
            title=f"GPU {device.device}: the blocks live at the peak by allocation stack{cut}"
        )
        t.add_column("#", number=True)
        t.add_column("MiB", number=True)
        t.add_column("% of peak", number=True)
        t.add_column("blocks", number=True)
        t.add_column("stack (innermost first)")
        for rank, row in enumerate(rows, 1):
            t.add_row(
                count(rank),
                size(row.bytes, "B", "MiB", 2, labelled=False),
                percent(row.share_pct),
                count(row.blocks),
                "\n".join(safe(frame) for frame in _shown_frames(row.frames)),
            )
        console.print(t)
        common = common_line(device)
        if common:
            print_prose(console, f"[dim]{safe(common)}[/]")
    print_prose(console, f"[dim]{safe(HOW)}[/]")


def snapshot_markdown(figure: MemorySnapshot, top: int = 20) -> list[str]:
    """summary.md's section: the peak lines and each device's stacks table."""
    lines = ["## Memory snapshot (run --memory-history)\n"]
    if figure.view is None:
        return [*lines, f"{figure.why_none}\n"]
    lines.append(f"{open_line(figure)}\n")
    warning = truncated_line(figure.view)
    if warning:
        lines.append(f"warning: {warning}\n")
    for device in figure.view.devices:
        lines.append(f"{peak_line(device)}\n")
        lines += [
            "| # | MiB | % of peak | blocks | stack (innermost first) |",
            "|---|---|---|---|---|",
        ]
        rows = device.stacks[:top] if top else device.stacks
        for rank, row in enumerate(rows, 1):
            frames = "<br>".join(f"`{f.replace('|', '/')}`" for f in row.frames)
            lines.append(
                f"| {count(rank)} | {size(row.bytes, 'B', 'MiB', 2, labelled=False)} | "
                f"{percent(row.share_pct)} | {count(row.blocks)} | {frames} |"
            )
        common = common_line(device)
        lines.append("")
        if common:
            lines.append(f"{common}\n")
    return [*lines, f"{HOW}\n"]


def snapshot_figure(view: SnapshotView) -> Figure:
    """Allocated and reserved memory over each device's history, the peak marked."""
    from profiler.report.plots import use_agg

    use_agg()
    import matplotlib.pyplot as plt

    devices = view.devices
    fig, axes = plt.subplots(len(devices), 1, figsize=(9, 3.2 * len(devices)), squeeze=False)
    mib = 2**20
    for ax, device in zip(axes[:, 0], devices):
        by_time = device.timeline_time_us is not None
        xs: list[float] = (
            [t / 1e3 for t in device.timeline_time_us]
            if device.timeline_time_us is not None
            else [float(i) for i in device.timeline_event]
        )
        ax.plot(
            xs,
            [b / mib for b in device.timeline_reserved_bytes],
            drawstyle="steps-post",
            label="reserved",
            color="#ff7f0e",
        )
        ax.plot(
            xs,
            [b / mib for b in device.timeline_allocated_bytes],
            drawstyle="steps-post",
            label="allocated",
            color="#1f77b4",
        )
        if device.peak_event is not None and device.peak_event in device.timeline_event:
            at = xs[device.timeline_event.index(device.peak_event)]
            ax.plot([at], [device.peak_allocated_bytes / mib], "v", color="#d62728")
            ax.annotate(
                f"peak {size(device.peak_allocated_bytes, 'B', 'MiB')}",
                (at, device.peak_allocated_bytes / mib),
                textcoords="offset points",
                xytext=(6, -14),
                fontsize=8,
            )
        ax.set_ylabel(f"GPU {device.device} MiB")
        ax.set_xlabel("ms since the history's first event" if by_time else "event of the history")
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].set_title("Memory over the recorded history (run --memory-history)")
    fig.tight_layout()
    return fig


def _stacks_html(device: SnapshotDevice, top: int) -> str:
    rows = device.stacks[:top] if top else device.stacks
    head = "".join(
        f"<th>{h}</th>" for h in ("#", "MiB", "% of peak", "blocks", "stack (innermost first)")
    )
    body = "".join(
        "<tr>"
        f"<td>{count(rank)}</td><td>{size(row.bytes, 'B', 'MiB', 2, labelled=False)}</td>"
        f"<td>{percent(row.share_pct)}</td><td>{count(row.blocks)}</td>"
        f"<td class=text>{'<br>'.join(escape(f) for f in row.frames)}</td>"
        "</tr>"
        for rank, row in enumerate(rows, 1)
    )
    shown = (
        html.note(f"the first {len(rows)} of {len(device.stacks)} stacks")
        if len(rows) < len(device.stacks)
        else ""
    )
    return f"<table class='grid'><tr>{head}</tr>{body}</table>{shown}"


def snapshot_sections(figure: MemorySnapshot, label: str, top: int = 20) -> list[html.Section]:
    """The page's sections: the chart and the peak lines, then each device's stacks."""
    title = f"{label}: memory snapshot (run --memory-history)"
    if figure.view is None:
        return [html.Section(title, html.note(figure.why_none or ""))]
    missing = html.figures_missing()
    chart = html.note(missing) if missing else html.figure_png(snapshot_figure(figure.view))
    lines = [open_line(figure)]
    warning = truncated_line(figure.view)
    lines += [f"warning: {warning}"] if warning else []
    lines += [peak_line(d) for d in figure.view.devices]
    found = [html.Section(title, chart + "".join(html.note(line, "src") for line in lines))]
    for device in figure.view.devices:
        common = common_line(device)
        body = _stacks_html(device, top) + (html.note(common) if common else "") + html.note(HOW)
        found.append(html.Section(f"{label}: GPU {device.device} blocks live at the peak", body))
    return found


def snapshot_document(figure: MemorySnapshot, top: int = 20) -> dict[str, Any]:
    """``summarize --view snapshot --json``'s document (profiler.cli.documents.SummarizeSnapshot),
    each device's first ``top`` stacks (0: all)."""
    view = figure.view
    devices = []
    for device in view.devices if view is not None else []:
        data = msgspec.to_builtins(device)
        data["stacks"] = data["stacks"][:top] if top else data["stacks"]
        devices.append(data)
    return {
        "file": figure.file,
        "why_none": figure.why_none,
        "memory_viz": figure.memory_viz,
        "max_entries": view.max_entries if view is not None else None,
        "truncated": view.truncated if view is not None else False,
        "devices": devices,
    }


def stacks_frame(figure: MemorySnapshot) -> pd.DataFrame:
    """Every device's stacks, one row each: device, rank, bytes, blocks, share, frames (one
    text, innermost first, `` <- `` between frames)."""
    rows = [
        {
            "device": device.device,
            "rank": rank,
            "bytes": row.bytes,
            "blocks": row.blocks,
            "share_of_peak_pct": row.share_pct,
            "stack": " <- ".join(row.frames),
        }
        for device in (figure.view.devices if figure.view is not None else [])
        for rank, row in enumerate(device.stacks, 1)
    ]
    columns = ["device", "rank", "bytes", "blocks", "share_of_peak_pct", "stack"]
    return pd.DataFrame(rows, columns=columns)


def write_snapshot(figure: MemorySnapshot, out: Path, top: int = 20) -> list[Path]:
    """``summarize --view snapshot --out DIR``: snapshot_stacks.csv (every stack) and
    summary.md (the view's section, ``top`` stacks per device)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserError(f"cannot create --out folder {out}: {error.strerror}") from None
    written = [write_table(out / "snapshot_stacks.csv", stacks_frame(figure))]
    write_text_atomic(out / "summary.md", "\n".join(snapshot_markdown(figure, top)))
    return [*written, out / "summary.md"]

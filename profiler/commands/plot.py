"""`plot`: a sweep folder (its SweepAnalysis: benchmark table, rooflines) or a run (its
RunAnalysis: the trace's categories) as PNGs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from profiler import notices
from profiler.analysis.run_analysis import RunAnalysis
from profiler.analysis.sweep_analysis import SweepAnalysis
from profiler.commands.sink import Sink
from profiler.errors import UserError
from profiler.runs.manifest import short_label


def plot_and_list(target: str, out: Path | None, sink: Sink) -> list[Path]:
    """Plot, then name the files written to ``sink`` (profiler.cli.output.Output): a line
    each, or JSON with --json."""
    written = plot(target, out, sink.note)
    if sink.json:
        sink.document("plot", {"target": target, "written": [str(p) for p in written]})
    else:
        for path in written:
            sink.line(f"wrote {path}")
    return written


def plot(target: str, out: Path | None, note: Callable[[str], object] = notices.note) -> list[Path]:
    """The figures of a sweep folder or a run; ``note`` says a figure left out."""
    from profiler.runs.manifest import find_sweep

    folder = find_sweep(target)
    if folder is not None:
        return sweep(folder, out if out is not None else folder / "plots", note)
    from profiler.report.plots import require_matplotlib

    require_matplotlib()
    return run(target, out)


def sweep(sweep_dir: Path, out: Path, note: Callable[[str], object]) -> list[Path]:
    from profiler.report.plots import roofline_plot, sweep_plots

    analysis = SweepAnalysis(sweep_dir)
    frame = analysis.benchmark
    if not (frame["status"] == "ok").any():
        raise UserError(f"{analysis.folder}: no cell of this sweep finished; nothing to plot")
    written = sweep_plots(frame, analysis.manifest, out, note)
    points = [(short_label(cell), roofline) for cell, roofline in analysis.rooflines()]
    roofline = roofline_plot(points, out / "roofline.png")
    return written + ([roofline] if roofline is not None else [])


def run(target: str, out: Path | None) -> list[Path]:
    """A run's kernel time by category, and its memory over time where it was recorded with
    --profile-memory (a bare trace: where it holds [memory] events)."""
    from profiler.report.memory_view import memory_plot, recorded_memory
    from profiler.report.plots import run_plot
    from profiler.trace.diff import steps_of

    analysis = RunAnalysis(target)
    summary = analysis.summary
    steps = steps_of(summary)
    cats = {r.category: float(r.total_us) / steps for r in summary.kernels.categories.itertuples()}
    memory = recorded_memory(analysis)
    if not cats and memory is None:
        raise UserError(
            f"{target}: the trace holds no GPU kernels and no [memory] events; nothing to plot"
        )
    device = summary.devices[0]["name"] if summary.devices else "unknown device"
    model = analysis.result.model if analysis.result is not None else ""
    run_dir = analysis.run_folder or analysis.path.parent
    folder = out if out is not None else run_dir / "plots"
    share = {r.category: r.tensor_core_pct for r in summary.kernels.categories.itertuples()}
    written = []
    if cats:
        written.append(run_plot(cats, share, steps, run_dir.name, model, device, folder))
    if memory is not None:
        title = f"Memory over the recorded steps: {run_dir.name}" + (f", {model}" if model else "")
        written.append(memory_plot(memory, folder / f"{run_dir.name}_memory.png", title))
    return written

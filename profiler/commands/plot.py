"""`plot`: a sweep folder (its benchmark table) or a run (its trace's categories) as PNGs."""

from __future__ import annotations

from pathlib import Path

from profiler.errors import UserError
from profiler.analysis.target import summarize_target


def plot_and_list(target: str, out: Path | None, sink) -> list[Path]:
    """Plot, then name the files written to ``sink`` (profiler.cli.output.Output): a line
    each, or JSON with --json."""
    written = plot(target, out)
    if sink.json:
        sink.document("plot", {"target": target, "written": [str(p) for p in written]})
    else:
        for path in written:
            sink.line(f"wrote {path}")
    return written


def plot(target: str, out: Path | None) -> list[Path]:
    from profiler.runs.manifest import find_sweep

    folder = find_sweep(target)
    if folder is not None:
        return sweep(folder, out if out is not None else folder / "plots")
    from profiler.report.plots import require_matplotlib

    require_matplotlib()
    return run(target, out)


def sweep(sweep_dir: Path, out: Path) -> list[Path]:
    from profiler.analysis.benchmark import benchmark_table, load_sweep
    from profiler.report.plots import roofline_plot, sweep_plots

    folder, manifest = load_sweep(sweep_dir)
    frame = benchmark_table(folder, manifest)
    if not (frame["status"] == "ok").any():
        raise UserError(f"{folder}: no cell of this sweep finished; nothing to plot")
    written = sweep_plots(frame, manifest, out)
    roofline = roofline_plot(sweep_rooflines(folder, manifest), out / "roofline.png")
    return written + ([roofline] if roofline is not None else [])


def sweep_rooflines(folder: Path, manifest) -> list:
    """(cell label, Roofline or None) of every finished cell of a sweep."""
    from profiler.collect.engine_cache import peaks_dir
    from profiler.runs.layout import RESULT_FILE
    from profiler.runs.result import result_to_dict, try_read_result
    from profiler.sweep.plan import OK, grid_cells, short_label
    from profiler.analysis.roofline import roofline_of

    points = []
    for name, cell in grid_cells(manifest):
        result = try_read_result(folder / name / RESULT_FILE) if cell.status == OK else None
        if result is not None:
            points.append((short_label(cell),
                           roofline_of(result_to_dict(result), peaks_dir())))
    return points


def run(target: str, out: Path | None) -> list[Path]:
    from profiler.report.plots import run_plot
    from profiler.trace.diff import steps_of
    from profiler.runs.targets import resolve_target

    resolved = resolve_target(target)
    summary = summarize_target(resolved)
    steps = steps_of(summary)
    cats = {r.category: float(r.total_us) / steps for r in summary.kernels.categories.itertuples()}
    if not cats:
        raise UserError(f"{target}: the trace holds no GPU kernels; nothing to plot")
    device = summary.devices[0]["name"] if summary.devices else "unknown device"
    model = resolved.result.model if resolved.result is not None else ""
    run_dir = resolved.result_json.parent if resolved.result_json is not None \
        else resolved.path.parent
    share = {r.category: r.tensor_core_pct for r in summary.kernels.categories.itertuples()}
    return [run_plot(cats, share, steps, run_dir.name, model, device,
                     out if out is not None else run_dir / "plots")]

"""`plot`: a sweep folder (its benchmark table) or a run (its trace's categories) as PNGs."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError


def plot(target: str, out: Path | None) -> list[Path]:
    from ..sweep import MANIFEST

    path = Path(target)
    for candidate in (path, Path("runs") / target):
        folder = candidate.parent if candidate.name == MANIFEST else candidate
        if (folder / MANIFEST).is_file():
            return sweep(folder, out if out is not None else folder / "plots")
    from ..report.plots import require_matplotlib

    require_matplotlib()
    return run(target, out)


def sweep(sweep_dir: Path, out: Path) -> list[Path]:
    from ..report.benchmark import benchmark_table, load_sweep
    from ..report.plots import roofline_plot, sweep_plots

    folder, manifest = load_sweep(sweep_dir)
    frame = benchmark_table(folder, manifest)
    if not (frame["status"] == "ok").any():
        raise UserError(f"{folder}: no cell of this sweep finished; nothing to plot")
    written = sweep_plots(frame, manifest, out)
    roofline = roofline_plot(sweep_rooflines(folder, frame), out / "roofline.png")
    return written + ([roofline] if roofline is not None else [])


def sweep_rooflines(folder: Path, frame) -> list:
    """(cell label, Roofline or None) of every finished cell of a sweep."""
    from ..trace.insight import peaks_folder
    from ..trace.roofline import ceilings_for, load_peaks, result_roofline

    points = []
    for row in frame[frame["status"] == "ok"].itertuples():
        try:
            result = json.loads((folder / f"{row.backend}_bs{row.bs}" / "result.json").read_text())
        except (OSError, ValueError):
            continue
        gpu = ((result.get("environment") or {}).get("gpu") or {}).get("name") or ""
        found = load_peaks(peaks_folder(), gpu) if gpu else None
        points.append((f"{row.backend} bs{row.bs}",
                       result_roofline(result, ceilings_for(result, found[0] if found else None))))
    return points


def run(target: str, out: Path | None) -> list[Path]:
    from ..report.plots import run_plot
    from ..trace.diff import steps_of
    from ..trace.summary import resolve_target

    resolved = resolve_target(target)
    summary = resolved.summary()
    steps = steps_of(summary)
    cats = {r.category: float(r.total_us) / steps for r in summary.kernels.categories.itertuples()}
    if not cats:
        raise UserError(f"{target}: the trace holds no GPU kernels; nothing to plot")
    device = summary.devices[0]["name"] if summary.devices else "unknown device"
    model = ""
    if resolved.result_json is not None:
        run_dir = resolved.result_json.parent
        try:
            model = json.loads(resolved.result_json.read_text()).get("model", "")
        except (OSError, ValueError):
            model = ""
    else:
        run_dir = resolved.path.parent
    share = {r.category: r.tensor_core_pct for r in summary.kernels.categories.itertuples()}
    return [run_plot(cats, share, steps, run_dir.name, model, device,
                     out if out is not None else run_dir / "plots")]

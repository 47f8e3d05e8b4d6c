"""The `report` command: resolve one or two targets (runs, sweep cells, traces) or a sweep folder,
gather their numbers, roofline and advice, and write one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from profiler.collect.engine_cache import peaks_dir as default_peaks_dir
from profiler.errors import UserError
from profiler.fsutil import write_text_atomic
from profiler.runs.layout import RESULT_FILE, ncu_csv_of
from profiler.runs.targets import Target, resolve_target
from profiler.runs.manifest import find_sweep, read_manifest
from profiler.runs.result import result_to_dict
from profiler.trace.diff import diff
from profiler.analysis.insight import Insight, insight, ncu_join
from profiler.trace.summary import Summary
from profiler.report import html
from profiler.analysis.target import summarize_target


def insight_of(resolved: Target, summary: Summary, peaks_dir: Path | None = None,
               flops_table: dict | None = None) -> Insight:
    """Roofline and advice of a resolved target: its result, run folder, ncu.csv and the
    measured peaks (``peaks_dir``, else `profile.py peaks`' cache)."""
    run_folder = resolved.result_json.parent if resolved.result_json else None
    ncu_csv = ncu_csv_of(str(run_folder)) if run_folder else None
    return insight(result_to_dict(resolved.result) if resolved.result else None, run_folder,
                   summary, default_peaks_dir() if peaks_dir is None else peaks_dir,
                   ncu=ncu_join(summary, ncu_csv) if ncu_csv else None, flops_table=flops_table)


def _side(target: str, peaks_dir: Path | None, flops_table: dict | None = None):
    resolved = resolve_target(target)
    summary = summarize_target(resolved)
    return resolved, summary, resolved.result, insight_of(resolved, summary, peaks_dir,
                                                          flops_table)


def _label(target: str) -> str:
    return Path(target).name or target


def _steps(summary) -> int:
    return max(len(summary.overview.steps), 1)


def _run_sections(page: html.Page, label: str, resolved, summary, result, found: Insight) -> None:
    page.add(f"{label}: headline", html.headline(result, label))
    page.add(f"{label}: roofline", html.roofline_block(found.roofline, found.ceilings_source,
                                                           found.roofline_missing))
    page.add(f"{label}: advice", html.advice_block(found.advice))
    k = summary.kernels
    cats = k.categories.assign(ms_per_step=k.categories["total_us"] / _steps(summary) / 1e3)
    page.add(f"{label}: kernel time by category",
             html.category_chart([label], [k.categories], [_steps(summary)]) +
             html.table(cats, ["category", "kernels", "calls", "ms_per_step", "share_pct",
                               "tensor_core_pct"]))
    page.add(f"{label}: top kernels", html.table(
        k.table.assign(ms_total=k.table["total_us"] / 1e3),
        ["name", "category", "calls", "ms_total", "share_pct", "tensor_core"], 15))
    if result is not None and result.config.record_shapes:
        from profiler.analysis.roofline import gemm_roofline

        r = found.roofline
        page.add(f"{label}: GEMMs by recorded shape (--record-shapes)", html.table(
            gemm_roofline(resolved.path, r.peak_tflops if r else None), top=20))
    layers = html.layer_view(resolved.result_json.parent if resolved.result_json else None)
    if layers:
        page.add(f"{label}: TensorRT layers (engine_layer_times)", layers)


def run_page(target: str, peaks_dir: Path | None = None,
             flops_table: dict | None = None) -> html.Page:
    resolved, summary, result, found = _side(target, peaks_dir, flops_table)
    page = html.Page(f"Report: {target}")
    _run_sections(page, _label(target), resolved, summary, result, found)
    chart = html.roofline_chart([(_label(target), found.roofline)])
    if chart:
        page.add("Roofline chart", chart)
    return page


def compare_page(a: str, b: str, peaks_dir: Path | None = None,
             flops_table: dict | None = None) -> html.Page:
    ra, sa, resa, ia = _side(a, peaks_dir, flops_table)
    rb, sb, resb, ib = _side(b, peaks_dir, flops_table)
    result = diff(sa, sb, a_label=a, b_label=b)
    a, b = _label(a), _label(b)
    page = html.Page(f"Comparison: A = {a}, B = {b}")
    from profiler.commands.compare import timed_rows

    overview = pd.concat([timed_rows(resa, resb), result.overview], ignore_index=True)
    page.add("Overview (delta = B - A; times per profiled step)", html.table(
        overview, ["metric", "unit", "a", "b", "delta", "change_pct"]))
    page.add("Kernel time by category", html.category_chart(
        [a, b], [sa.kernels.categories, sb.kernels.categories], [_steps(sa), _steps(sb)]) +
        html.table(result.categories))
    faster, slower = result.top_changes(10)
    level = result.change_level
    page.add(f"Kernel diff: top {level}s faster in B", html.table(faster))
    page.add(f"Kernel diff: top {level}s slower in B", html.table(slower))
    chart = html.roofline_chart([(a, ia.roofline), (b, ib.roofline)])
    if chart:
        page.add("Roofline chart", chart)
    _run_sections(page, "A", ra, sa, resa, ia)
    _run_sections(page, "B", rb, sb, resb, ib)
    return page


def sweep_page(folder: Path, peaks_dir: Path | None = None,
               flops_table: dict | None = None) -> html.Page:
    """The sweep's table (from its manifest and cells' results), plots, and the roofline and
    advice of every finished cell."""
    from profiler.analysis.benchmark import axis_columns, benchmark_table
    from profiler.report.plots import _pyplot, series
    from profiler.sweep.plan import OK, grid_cells, short_label

    manifest = read_manifest(folder)
    frame = benchmark_table(folder, manifest)
    page = html.Page(f"Sweep: {folder.name}")
    page.add("Benchmark", html.table(frame, [c for c in (
        "backend", "bs", *axis_columns(manifest), "p50_ms", "p90_ms", "p99_ms", "throughput_per_s", "speedup",
        "tensor_core_pct", "gpu_util_pct", "rel_l2_error", "status") if c in frame]))
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    ok = frame[frame["status"] == OK]
    for backend, rows in ok.groupby(series(ok), sort=False):
        axes[0].plot(rows["bs"], rows["p50_ms"], marker="o", label=backend)
        axes[1].plot(rows["bs"], rows["throughput_per_s"], marker="o", label=backend)
    axes[0].set(xlabel="batch size", ylabel="p50 latency (ms)", xscale="log")
    axes[1].set(xlabel="batch size", ylabel="samples/s", xscale="log")
    axes[0].legend(fontsize=8)
    page.add("Latency and throughput", html.figure_png(fig))
    points, advice_rows = [], []
    for name, cell in grid_cells(manifest):
        if cell.status != OK or not (folder / name / RESULT_FILE).is_file():
            continue
        try:
            _, _, _, found = _side(str(folder / name), peaks_dir, flops_table)
        except UserError:
            continue
        label = short_label(cell)
        points.append((label, found.roofline))
        r = found.roofline
        advice_rows.append({"cell": label, "TFLOP/s": r.achieved_tflops if r else None,
                            "% of compute": r.pct_of_compute if r else None,
                            "GB/s": r.achieved_gbs if r else None,
                            "% of bandwidth": r.pct_of_bandwidth if r else None,
                            "advice": "; ".join(a.rule for a in found.advice) or "-"})
    if advice_rows:
        page.add("Roofline and advice per cell", html.table(pd.DataFrame(advice_rows)))
    chart = html.roofline_chart(points)
    if chart:
        page.add("Roofline chart", chart)
    return page


def read_flops_table(path: Path | None) -> dict | None:
    if path is None:
        return None
    import json

    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"--flops {path}: not readable JSON ({error})") from None


def run(target: str, target_b: str | None, out: Path | None, peaks_dir: Path | None = None,
        flops: Path | None = None) -> Path:
    flops_table = read_flops_table(flops)
    sweep = find_sweep(target) if target_b is None else None
    if sweep is not None:
        page = sweep_page(sweep, peaks_dir, flops_table)
        default = sweep / "report.html"
    elif target_b is not None:
        page = compare_page(target, target_b, peaks_dir, flops_table)
        default = Path(f"report_{Path(target).name}_vs_{Path(target_b).name}.html")
    else:
        page = run_page(target, peaks_dir, flops_table)
        default = Path(f"report_{Path(target).name}.html")
    path = out or default
    try:
        write_text_atomic(path, page.render())
    except OSError as error:
        raise UserError(f"cannot write {path}: {error.strerror}") from None
    return path

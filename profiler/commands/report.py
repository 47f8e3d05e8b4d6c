"""The `report` command: resolve one or two targets (runs, sweep cells, traces) or a sweep folder,
gather their numbers, roofline and advice, and write one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from profiler.errors import UserError
from profiler.fsutil import read_small, write_text_atomic
from profiler.runs.manifest import OK, find_sweep, short_label
from profiler.analysis.run import Comparison, RunAnalysis
from profiler.analysis.sweep import SweepAnalysis
from profiler.report import html


def _label(target: str) -> str:
    return Path(target).name or target


def _steps(summary) -> int:
    return max(len(summary.overview.steps), 1)


def _run_sections(page: html.Page, label: str, run: RunAnalysis) -> None:
    summary, result = run.summary, run.result
    page.add(f"{label}: headline", html.headline(result, label))
    page.add(f"{label}: roofline", html.roofline_block(run.roofline, run.ceilings_source,
                                                       run.roofline_missing))
    page.add(f"{label}: advice", html.advice_block(run.advice))
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
        page.add(f"{label}: GEMMs by recorded shape (--record-shapes)",
                 html.table(run.gemms(), top=20))
    layers = html.layer_view(run.layer_times)
    if layers:
        page.add(f"{label}: TensorRT layers (engine_layer_times)", layers)


def _analysis(target: str, peaks_dir: Path | None, flops_table: dict | None) -> RunAnalysis:
    """The target's analysis, its advice computed (a trace that does not read fails here)."""
    run = RunAnalysis(target, peaks_dir=peaks_dir, flops_table=flops_table)
    run.advice
    return run


def run_page(target: str, peaks_dir: Path | None = None,
             flops_table: dict | None = None) -> html.Page:
    run = _analysis(target, peaks_dir, flops_table)
    page = html.Page(f"Report: {target}")
    _run_sections(page, _label(target), run)
    chart = html.roofline_chart([(_label(target), run.roofline)])
    if chart:
        page.add("Roofline chart", chart)
    return page


def compare_page(a: str, b: str, peaks_dir: Path | None = None,
                 flops_table: dict | None = None) -> html.Page:
    both = Comparison(_analysis(a, peaks_dir, flops_table), _analysis(b, peaks_dir, flops_table),
                      a, b)
    result, sa, sb = both.diff, both.a.summary, both.b.summary
    a, b = _label(a), _label(b)
    page = html.Page(f"Comparison: A = {a}, B = {b}")
    page.add("Overview (delta = B - A; times per profiled step)", html.table(
        result.overview, ["metric", "unit", "a", "b", "delta", "change_pct"]))
    page.add("Kernel time by category", html.category_chart(
        [a, b], [sa.kernels.categories, sb.kernels.categories], [_steps(sa), _steps(sb)]) +
        html.table(result.categories))
    faster, slower = result.top_changes(10)
    level = result.change_level
    page.add(f"Kernel diff: top {level}s faster in B", html.table(faster))
    page.add(f"Kernel diff: top {level}s slower in B", html.table(slower))
    chart = html.roofline_chart([(a, both.a.roofline), (b, both.b.roofline)])
    if chart:
        page.add("Roofline chart", chart)
    _run_sections(page, "A", both.a)
    _run_sections(page, "B", both.b)
    return page


def sweep_page(folder: Path, peaks_dir: Path | None = None,
               flops_table: dict | None = None) -> html.Page:
    """The sweep's table (from its manifest and cells' results), plots, and the roofline and
    advice of every finished cell."""
    from profiler.analysis.benchmark import axis_columns
    from profiler.report.plots import pyplot, series

    sweep = SweepAnalysis(folder, peaks_dir=peaks_dir, flops_table=flops_table)
    frame = sweep.benchmark
    page = html.Page(f"Sweep: {folder.name}")
    page.add("Benchmark", html.table(frame, [c for c in (
        "backend", "bs", *axis_columns(sweep.manifest), "p50_ms", "p90_ms", "p99_ms",
        "throughput_per_s", "speedup", "tensor_core_pct", "gpu_util_pct", "rel_l2_error",
        "status") if c in frame]))
    plt = pyplot()
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
    for cell, run in sweep.finished():
        try:
            advice = run.advice
        except UserError:
            continue
        label = short_label(cell)
        points.append((label, run.roofline))
        r = run.roofline
        advice_rows.append({"cell": label, "TFLOP/s": r.achieved_tflops if r else None,
                            "% of compute": r.pct_of_compute if r else None,
                            "GB/s": r.achieved_gbs if r else None,
                            "% of bandwidth": r.pct_of_bandwidth if r else None,
                            "advice": "; ".join(a.rule for a in advice) or "-"})
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
        return json.loads(read_small(path, 64 << 20, "--flops"))
    except (ValueError, RecursionError) as error:
        raise UserError(f"--flops {path}: not readable JSON ({error})") from None


def run(target: str, target_b: str | None, out: Path | None, peaks_dir: Path | None = None,
        flops: Path | None = None) -> Path:
    if peaks_dir is not None and peaks_dir.exists() and not peaks_dir.is_dir():
        raise UserError(f"--peaks-dir {peaks_dir} is not a folder: give the folder `profile.py "
                        "peaks` writes its measurements into")
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

"""The HTML bodies of the report pages' sections that are more than one block of html.py: a
run's kernel categories, top kernels, CPU operators and GEMMs, a comparison's kernel and CPU
operator diffs, a sweep's table with its headline, its figures and its cells' roofline and
advice. Each renders figures it is given (profiler.report.sections reads them from the facade
and lays the sections out)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from profiler.analysis.records import BenchmarkCell
from profiler.analysis.roofline import MIN_GBS, MIN_PCT_BANDWIDTH, Roofline
from profiler.errors import UserError
from profiler.report import fmt, html
from profiler.runs.manifest import OK, SweepCell, SweepManifest, short_label
from profiler.trace.diff import Diff
from profiler.trace.hardware import Agreement
from profiler.trace.kernels import PIPE_BUSY_NOTE
from profiler.trace.summary import Summary

if TYPE_CHECKING:
    from profiler.analysis.advice import Advice
    from profiler.analysis.run_analysis import RunAnalysis


def target_label(target: str) -> str:
    """A target as a page names it: its folder's or file's name."""
    return Path(target).name or target


def _steps(summary: Summary) -> int:
    return max(len(summary.overview.steps), 1)


# ---- a run ---------------------------------------------------------------------------------


def run_categories(summary: Summary, name: str, agreement: Agreement | None) -> str:
    """Kernel time by category: `plot`'s figure with the run's ``name`` on its bar, the table
    per profiled step, and the tensor pipe's reading (``agreement``: the ncu join's)."""
    k = summary.kernels
    cats = k.categories.assign(ms_per_step=k.categories["total_us"] / _steps(summary) / 1e3)
    return (
        html.category_chart([name], [k.categories], [_steps(summary)])
        + html.table(cats, fmt.RUN_CATEGORY_COLUMNS)
        + html.note(pipe_busy(agreement))
    )


def pipe_busy(a: Agreement | None) -> str:
    """ncu's tensor-pipe reading beside the time in Tensor Core kernels, or how to get it."""
    if a is None or not a.pipe_measured_us:
        return "note: " + PIPE_BUSY_NOTE
    return (
        f"tensor pipe busy (ncu): {fmt.percent(100 * a.tensor_pipe_busy_share)}, kernel-time "
        f"weighted, over the {a.profiled_kernels} profiled kernels "
        f"({fmt.percent(100 * a.coverage)} of kernel time; time in Tensor Core kernels there: "
        f"{fmt.percent(100 * a.tensor_core_kernels_share)})"
    )


def top_kernels(summary: Summary) -> str:
    table = summary.kernels.table
    return html.table(table.assign(ms_total=table["total_us"] / 1e3), fmt.TOP_KERNEL_COLUMNS, 15)


def cpu_operators(summary: Summary) -> str:
    """A CPU run's operators by self CPU time, per profiled step (its trace has no kernels)."""
    ops = summary.overview.operators
    n = _steps(summary)
    ops = ops.assign(
        calls=ops["calls"] / n,
        cpu_self_us=ops["cpu_self_us"] / n,
        cpu_total_us=ops["cpu_total_us"] / n,
    )
    ops = ops.sort_values("cpu_self_us", ascending=False, kind="stable")
    return html.table(
        ops,
        fmt.CPU_OPERATOR_COLUMNS,
        15,
        headers=fmt.CPU_HEADERS,
        formats=fmt.CPU_OPERATOR_FORMATS,
    )


def gemms(frame: pd.DataFrame, on_gpu: bool) -> str:
    """The GEMMs by recorded shape (RunAnalysis.gemms); GPU time and rates on a GPU run."""
    return html.table(frame, fmt.GEMM_COLUMNS + (fmt.GEMM_GPU_COLUMNS if on_gpu else []), top=20)


# ---- a comparison ----------------------------------------------------------------------------


def cpu_diff(result: Diff) -> list[html.Section]:
    """Two CPU runs: their operators, matched by name, and those that moved most."""
    faster, slower = result.top_changes(10)
    found = [
        html.Section(
            "CPU operators by self CPU time (µs per profiled step)",
            html.table(result.cpu_operators, fmt.CPU_DIFF_COLUMNS, 30, headers=fmt.CPU_HEADERS),
        )
    ]
    for frame, which in ((faster, "faster"), (slower, "slower")):
        found.append(
            html.Section(
                f"CPU operator diff: top CPU operators {which} in B (self CPU µs per profiled "
                "step)",
                html.table(frame, fmt.CPU_DIFF_COLUMNS[:-2], headers=fmt.CPU_HEADERS),
            )
        )
    return found


def kernel_diff(result: Diff, labels: list[str], summaries: list[Summary]) -> list[html.Section]:
    """Kernel time by category, and the kernels (or operators) that moved most."""
    faster, slower = result.top_changes(10)
    level = result.change_level
    found = [
        html.Section(
            "Kernel time by category (µs per profiled step)",
            html.category_chart(
                labels, [s.kernels.categories for s in summaries], [_steps(s) for s in summaries]
            )
            + html.table(result.categories, fmt.CATEGORY_DIFF_COLUMNS),
        )
    ]
    name = level if level == "operator" else "kernel"
    for frame, which in ((faster, "faster"), (slower, "slower")):
        columns = [c for c in (name, *fmt.CHANGE_COLUMNS) if c in frame]
        found.append(
            html.Section(
                f"Kernel diff: top {level}s {which} in B (µs per profiled step)",
                html.table(frame, columns),
            )
        )
    return found


# ---- a sweep -------------------------------------------------------------------------------


def sweep_table(rows: Sequence[BenchmarkCell], manifest: SweepManifest) -> str:
    """The benchmark table as the terminal prints it (benchmark_view.sweep_columns, the same
    headers and cells, its colours dropped): the cell, its latencies to the figures its
    window's CV allows (p50 marked with its first flag), each figure's speedup with its 95 %
    interval and verdict (latency, and GPU time where measured), the processes, the CV with the
    window's noise warnings and the status."""
    from rich.text import Text

    from profiler.report.benchmark_view import has_gpu_time, sweep_columns
    from profiler.report.columns import cells

    shown = list(rows)
    columns = sweep_columns(shown, manifest, has_gpu_time(shown))
    return html.text_table(
        [c.header for c in columns],
        [[Text.from_markup(cell).plain for cell in row] for row in cells(columns, shown)],
    )


def benchmark(
    rows: Sequence[BenchmarkCell], manifest: SweepManifest, only_decided: bool = False
) -> str:
    """The sweep's headline and table; with ``only_decided`` the table leaves out the cells
    undecided on both figures (a line counts them), as `sweep --only-decided` does."""
    from profiler.report.benchmark_view import decided

    kept = decided(rows) if only_decided else list(rows)
    shown = (
        html.note(
            f"--only-decided: {len(rows) - len(kept)} of {len(rows)} cells hidden "
            "(undecided on both figures)"
        )
        if only_decided
        else ""
    )
    return (
        sweep_headline(rows, manifest)
        + sweep_table(kept, manifest)
        + unfinished(kept, manifest)
        + shown
        + html.note("note: TC-kernel time: " + PIPE_BUSY_NOTE)
    )


def unfinished(rows: Sequence[BenchmarkCell], manifest: SweepManifest) -> str:
    """Under the table, each cell that did not finish with its status and why (the table's
    status column says the status only, as the terminal's does; benchmark.md lists them so)."""
    from profiler.analysis.benchmark import axis_columns
    from profiler.report.benchmark_view import field

    lines = []
    for r in rows:
        if r.status != OK:
            values = "".join(f" {key} {field(r, key)}" for key in axis_columns(manifest))
            where = f" (gpu {r.gpu})" if r.gpu else ""
            lines.append(f"{r.backend} bs {r.bs}{values}{where}: {r.status}: {r.reason}")
    return "".join(html.note(line, "warn") for line in lines)


def geomeans(rows: Sequence[BenchmarkCell]) -> str | None:
    """Each backend's geometric mean over its batch sizes, as `sweep` prints it under its table
    (benchmark_view.geomean_columns); None without a finished cell."""
    from profiler.analysis.benchmark import geomeans as geomeans_of
    from profiler.report.benchmark_view import geomean_columns, has_gpu_time
    from profiler.report.columns import cells

    if not any(r.status == OK for r in rows):
        return None
    columns = geomean_columns(rows, has_gpu_time(rows))
    shown = pd.DataFrame(cells(columns, geomeans_of(rows)), columns=[c.header for c in columns])
    return html.table(shown, figures=tuple(c for c in shown.columns if c != "backend")) + (
        html.note("cells: the finished cells behind each mean")
    )


def sweep_headline(rows: Sequence[BenchmarkCell], manifest: SweepManifest) -> str:
    """What the sweep's numbers are: both speedups' definition, their intervals and verdicts
    (held to a false discovery rate over the cells), the timed window, each cell's verdict
    notes and noise warnings."""
    from profiler.report.benchmark_view import NO_GPU_TIME, has_gpu_time, verdict_notes

    gpu_time = has_gpu_time(rows)
    lines = _speedup_definition(rows, manifest, gpu_time)
    if not gpu_time:
        lines.append(html.note(NO_GPU_TIME))
    lines.extend(
        html.note(f"note ({label}): {note}", "warn")
        for label, note in verdict_notes(rows, manifest)
    )
    lines.append(_sweep_options(manifest))
    noisy = [r for r in rows if r.noise]
    if noisy:
        lines.append(
            html.warnings_list(
                [
                    f"{r.backend} bs {r.bs}: {r.noise} (CV {fmt.percent(r.cv_pct)}): "
                    "its speedup is "
                    "less certain than the others'"
                    for r in noisy
                ]
            )
        )
    return "".join(lines)


def _speedup_definition(
    rows: Sequence[BenchmarkCell], manifest: SweepManifest, gpu_time: bool
) -> list[str]:
    """The sweep's headline line and what its speedups are."""
    from profiler.analysis.benchmark import axis_columns
    from profiler.report.benchmark_view import (
        FDR_WORDS,
        GPU_TIME_WORDS,
        LATENCY_WORDS,
        PAIRED_WORDS,
        judged,
    )

    devices = sorted({r.device for r in rows if r.device})
    same = ", ".join(["batch size", *axis_columns(manifest)])
    return [
        f"<p class='big'>{escape(manifest.model)} on "
        f"{escape(', '.join(devices) or 'no finished cell')}: speedup = "
        f"{escape(manifest.baseline)} p50 / p50"
        + (" (latency), and the same on GPU time" if gpu_time else "")
        + "</p>",
        html.note(
            f"speedup: the figure of {manifest.baseline} over the cell's at the same "
            f"{same}, on {LATENCY_WORDS}"
            + (f" and on {GPU_TIME_WORDS}, each with its own verdict" if gpu_time else "")
            + "; with several processes per cell each figure is the geometric mean "
            "of the per-process medians, and the 95 % interval and the verdict "
            "(faster, slower, same within ±2 %, undecided) come from them "
            f"(profiler/analysis/verdict.py); {PAIRED_WORDS}"
            + (f"; {FDR_WORDS}" if judged(rows) > 1 else "")
            + "; processes: the timed windows behind the cell, each in its own "
            "process"
        ),
    ]


def _sweep_options(manifest: SweepManifest) -> str:
    """The sweep's backends, batch sizes, timed window and run options."""
    options = manifest.options
    return html.key_values(
        [
            ("backends", ", ".join(manifest.backends)),
            ("batch sizes", ", ".join(map(str, manifest.batch_sizes))),
            (
                "timed window",
                f"{options.get('iters') or 'default'} iterations after "
                f"{options.get('timed_warmup') or 'default'} warm-up"
                + (f", at least {options['min_time']} s" if options.get("min_time") else ""),
            ),
            ("TF32", "on" if options.get("tf32") else "off"),
            (
                "run options",
                ", ".join(f"{k}={v}" for k, v in options.items() if v not in (None, False, "")),
            ),
        ]
    )


def sweep_figures(frame: pd.DataFrame, manifest: SweepManifest) -> str:
    """`plot`'s sweep figures (plots.sweep_figures), inlined; a note without matplotlib or
    without a finished cell, and one where the cells ran no GPU kernels."""
    missing = html.figures_missing()
    if missing:
        return html.note(missing)
    if not (frame["status"] == OK).any():
        return html.note("no cell of this sweep finished: no figure")
    from profiler.report.plots import NO_SWEEP_KERNELS, sweep_figures as figures_of

    figures = figures_of(frame, manifest)
    missing = (
        ""
        if "categories" in figures
        else html.note(
            NO_SWEEP_KERNELS.replace(": categories.png left out", ": no category figure")
        )
    )
    return html.figures(figures) + missing


def cell_insights(
    finished: list[tuple[SweepCell, RunAnalysis]],
) -> tuple[list[tuple[str, Roofline | None]], list[dict[str, str | float | None]]]:
    """The (label, roofline) points and the roofline-and-advice rows of a sweep's finished
    cells (SweepAnalysis.finished); a cell whose trace does not read is left out."""
    points: list[tuple[str, Roofline | None]] = []
    rows: list[dict[str, str | float | None]] = []
    for cell, run in finished:
        try:
            advice = run.advice
        except UserError:
            continue
        label = short_label(cell)
        points.append((label, run.roofline))
        r = run.roofline
        rows.append(
            {
                "cell": label,
                "TFLOP/s": r.achieved_tflops if r else None,
                "% of compute": r.pct_of_compute if r else None,
                MIN_GBS: r.achieved_gbs if r else None,
                MIN_PCT_BANDWIDTH: r.pct_of_bandwidth if r else None,
                "advice": advice_words(advice),
            }
        )
    return points, rows


def advice_words(advice: list[Advice]) -> str:
    """A cell's advice in words: each rule's title and what to try ("-" when none fired)."""
    return "; ".join(f"{a.title}: try {a.action} ({a.rule})" for a in advice) or "-"

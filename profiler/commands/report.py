"""The `report` command: resolve one or two targets (runs, sweep cells, traces) or a sweep folder,
gather their numbers, roofline and advice, and write one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from profiler import notices
from profiler.analysis.roofline import MIN_GBS, MIN_PCT_BANDWIDTH
from profiler.analysis.run import Comparison, RunAnalysis
from profiler.analysis.sweep import SweepAnalysis
from profiler.errors import UserError
from profiler.fsutil import read_small, write_text_atomic
from profiler.report import fmt, html
from profiler.runs.manifest import OK, find_sweep, short_label
from profiler.trace.kernels import PIPE_BUSY_NOTE


def _label(target: str) -> str:
    return Path(target).name or target


def _steps(summary) -> int:
    return max(len(summary.overview.steps), 1)


#: the headers of the CPU operator tables (per profiled step)
CPU_HEADERS = {
    "cpu_self_us": "self CPU µs per step",
    "cpu_total_us": "total CPU µs per step",
    "calls": "calls per step",
    "us_a": "self A µs",
    "us_b": "self B µs",
    "delta_us": "self delta µs (B - A)",
}
CPU_DIFF_COLUMNS = [
    "operator",
    "side",
    "calls_a",
    "calls_b",
    "us_a",
    "us_b",
    "delta_us",
    "change_pct",
    "total_a_us",
    "total_b_us",
]


def _cpu_operators(summary) -> str:
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
        ["operator", "calls", "cpu_self_us", "cpu_total_us"],
        15,
        headers=CPU_HEADERS,
        formats=fmt.CPU_OPERATOR_FORMATS,
    )


def _run_sections(page: html.Page, label: str, run: RunAnalysis, name: str | None = None) -> None:
    """A run's sections, titled by ``label``; ``name``: the run's name, on its figures."""
    summary, result = run.summary, run.result
    page.add(f"{label}: headline", html.headline(result, label, run.result_json))
    page.add(
        f"{label}: roofline",
        html.roofline_block(run.roofline, run.ceilings_source, run.roofline_missing),
    )
    page.add(f"{label}: advice", html.advice_block(run.advice))
    on_gpu = summary.overview.has_gpu
    if on_gpu:
        k = summary.kernels
        cats = k.categories.assign(ms_per_step=k.categories["total_us"] / _steps(summary) / 1e3)
        page.add(
            f"{label}: kernel time by category",
            html.category_chart([name or label], [k.categories], [_steps(summary)])
            + html.table(
                cats,
                ["category", "kernels", "calls", "ms_per_step", "share_pct", "tensor_core_pct"],
            )
            + html.note(_pipe_busy(run)),
        )
        page.add(
            f"{label}: top kernels",
            html.table(
                k.table.assign(ms_total=k.table["total_us"] / 1e3),
                ["name", "category", "calls", "ms_total", "share_pct", "tensor_core"],
                15,
            ),
        )
    else:  # a CPU run: its operators are what the trace holds
        page.add(f"{label}: CPU operators by self CPU time", _cpu_operators(summary))
    # ConfigRecord is built from RunConfig's fields when imported: no attribute a checker sees
    if result is not None and getattr(result.config, "record_shapes", False):
        gemm_columns = ["operator", "input_dims", "calls", "flops_per_call"] + (
            ["gpu_us", "tflops", "pct_of_peak"] if on_gpu else []
        )
        page.add(
            f"{label}: GEMMs by recorded shape (--record-shapes)",
            html.table(run.gemms(), gemm_columns, top=20),
        )
    layers = html.layer_view(run.layer_times)
    if layers:
        page.add(f"{label}: TensorRT layers (engine_layer_times)", layers)


def _pipe_busy(run: RunAnalysis) -> str:
    """ncu's tensor-pipe reading beside the time in Tensor Core kernels, or how to get it."""
    a = run.agreement if run.ncu_csv is not None else None
    if a is None or not a.pipe_measured_us:
        return "note: " + PIPE_BUSY_NOTE
    return (
        f"tensor pipe busy (ncu): {fmt.pct(100 * a.tensor_pipe_busy_share)}, kernel-time "
        f"weighted, over the {a.profiled_kernels} profiled kernels "
        f"({fmt.pct(100 * a.coverage)} of kernel time; time in Tensor Core kernels there: "
        f"{fmt.pct(100 * a.tensor_core_kernels_share)})"
    )


def _analysis(
    target: str, peaks_dir: Path | None, flops_table: dict | None, detail=None
) -> RunAnalysis:
    """The target's analysis, its advice computed (a trace that does not read fails here);
    ``detail`` (-v) is told what it resolved to."""
    run = RunAnalysis(target, peaks_dir=peaks_dir, flops_table=flops_table)
    _ = run.advice
    if detail is not None:
        detail(
            f"{target}: trace {run.summary.trace_path}; result "
            f"{run.result_json or 'none (a bare trace: no timed window)'}"
        )
    return run


def run_page(
    target: str, peaks_dir: Path | None = None, flops_table: dict | None = None, detail=None
) -> html.Page:
    run = _analysis(target, peaks_dir, flops_table, detail)
    page = html.Page(f"Report: {target}")
    _run_sections(page, _label(target), run)
    chart = html.roofline_chart([(_label(target), run.roofline)])
    if chart:
        page.add("Roofline chart", chart)
    return page


def compare_page(
    a: str, b: str, peaks_dir: Path | None = None, flops_table: dict | None = None, detail=None
) -> html.Page:
    both = Comparison(
        _analysis(a, peaks_dir, flops_table, detail),
        _analysis(b, peaks_dir, flops_table, detail),
        a,
        b,
    )
    result, sa, sb = both.diff, both.a.summary, both.b.summary
    a, b = _label(a), _label(b)
    page = html.Page(f"Comparison: A = {a}, B = {b}")
    verdicts = "the latency verdict" if both.diff.on_cpu else "the verdicts on latency and GPU time"
    page.add(
        f"Timed windows (no profiler attached): {verdicts}, the recorded runs, noise and config",
        html.timed_block(both.timed, a, b),
    )
    why = None if result.on_cpu else html.explanation_block(both.explanation)
    if why:
        page.add("Why B differs from A", why)
    page.add(
        "Overview (delta = B - A; times per profiled step)", html.overview_block(result.overview)
    )
    if result.on_cpu:  # two CPU runs: their operators, matched by name
        _cpu_diff_sections(page, result)
    else:
        _kernel_diff_sections(page, result, [a, b], [sa, sb])
    if result.notes:
        page.add("Notes", "".join(html.note("note: " + n) for n in result.notes))
    chart = html.roofline_chart([(a, both.a.roofline), (b, both.b.roofline)])
    if chart:
        page.add("Roofline chart", chart)
    _run_sections(page, "A", both.a, a)
    _run_sections(page, "B", both.b, b)
    return page


#: the columns of the comparison's category table, in order
CATEGORY_DIFF_COLUMNS = [
    "category",
    "us_a",
    "us_b",
    "delta_us",
    "change_pct",
    "share_a_pct",
    "share_b_pct",
    "tensor_core_a_pct",
    "tensor_core_b_pct",
    "calls_a",
    "calls_b",
]


def _cpu_diff_sections(page: html.Page, result) -> None:
    """Two CPU runs: their operators, matched by name, and those that moved most."""
    faster, slower = result.top_changes(10)
    page.add(
        "CPU operators by self CPU time (µs per profiled step)",
        html.table(result.cpu_operators, CPU_DIFF_COLUMNS, 30, headers=CPU_HEADERS),
    )
    for frame, which in ((faster, "faster"), (slower, "slower")):
        page.add(
            f"CPU operator diff: top CPU operators {which} in B (self CPU µs per profiled step)",
            html.table(frame, CPU_DIFF_COLUMNS[:-2], headers=CPU_HEADERS),
        )


def _kernel_diff_sections(page: html.Page, result, labels: list[str], summaries: list) -> None:
    """Kernel time by category, and the kernels (or operators) that moved most."""
    faster, slower = result.top_changes(10)
    level = result.change_level
    page.add(
        "Kernel time by category (µs per profiled step)",
        html.category_chart(
            labels, [s.kernels.categories for s in summaries], [_steps(s) for s in summaries]
        )
        + html.table(result.categories, CATEGORY_DIFF_COLUMNS),
    )
    for frame, which in ((faster, "faster"), (slower, "slower")):
        page.add(
            f"Kernel diff: top {level}s {which} in B (µs per profiled step)",
            html.table(
                frame,
                [
                    c
                    for c in (
                        level if level == "operator" else "kernel",
                        "side",
                        "us_a",
                        "us_b",
                        "delta_us",
                        "change_pct",
                    )
                    if c in frame
                ],
            ),
        )


#: the sweep table's columns in the report (those the sweep has), in order
SWEEP_COLUMNS = (
    "backend",
    "bs",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "gpu_compute_ms",
    "bound",
    "throughput_per_s",
    "speedup",
    "interval",
    "verdict",
    "gpu_speedup",
    "gpu_interval",
    "gpu_verdict",
    "processes",
    "cv_pct",
    "noise",
    "tensor_core_pct",
    "gpu_util_pct",
    "rel_l2_error",
    "ttft_ms",
    "token_p50_ms",
    "tokens_per_s",
    "status",
    "reason",
)
#: the latency columns of the sweep table, each to the figures its cell's noise allows
LATENCY_COLUMNS = ("p50_ms", "p90_ms", "p99_ms")
#: each figure's columns named for their figure: a latency figure never reads as GPU time
SWEEP_HEADERS = {
    "p50_ms": "latency p50 ms",
    "gpu_compute_ms": "GPU time ms",
    "speedup": "latency speedup x",
    "interval": "latency 95 % interval",
    "verdict": "latency verdict",
    "gpu_speedup": "GPU-time speedup x",
    "gpu_interval": "GPU-time 95 % interval",
    "gpu_verdict": "GPU-time verdict",
    "bound": "bound",
}


def _interval(lows, highs) -> list[str]:
    return ["-" if pd.isna(low) else fmt.span(low, high) for low, high in zip(lows, highs)]


def sweep_table(frame: pd.DataFrame, axes: list[str]) -> str:
    """The benchmark table as the terminal shows it: each figure's speedup (latency, and GPU
    time where measured) with its 95 % interval and verdict, the classification, the processes
    behind them, the CV with the window's noise warnings; each cell's latencies to the
    figures its window's CV allows, p50 marked with its first flag (as the terminal shows
    them: benchmark_view.latency_cells)."""
    from profiler.report.benchmark_view import has_gpu_time, latency_cells
    from profiler.report.fmt import trimmed

    latencies = [latency_cells(r)[1:] for r in frame.itertuples()]  # p50, p90, p99
    shown = frame.assign(
        **{key: [cells[i] for cells in latencies] for i, key in enumerate(LATENCY_COLUMNS)},
        gpu_compute_ms=[trimmed(v, None) for v in frame["gpu_compute_ms"]],
        interval=_interval(frame["speedup_low"], frame["speedup_high"]),
        gpu_interval=_interval(frame["gpu_speedup_low"], frame["gpu_speedup_high"]),
        noise=[n if isinstance(n, str) and n else "-" for n in frame["noise"]],
        bound=[b if isinstance(b, str) and b else "-" for b in frame["bound"]],
        gpu_verdict=[v if isinstance(v, str) and v else "-" for v in frame["gpu_verdict"]],
    )
    if not has_gpu_time(frame):  # latency's verdicts only: no empty GPU-time columns
        shown = shown.drop(
            columns=["gpu_compute_ms", "bound", "gpu_speedup", "gpu_interval", "gpu_verdict"]
        )
    if not shown["tokens_per_s"].notna().any():  # not a generation sweep
        shown = shown.drop(columns=["ttft_ms", "token_p50_ms", "tokens_per_s"])
    if not (shown["reason"].astype(str) != "").any():
        shown = shown.drop(columns=["reason"])
    columns = [c for c in SWEEP_COLUMNS if c in shown]
    columns[2:2] = axes
    return html.table(
        shown,
        columns,
        headers=SWEEP_HEADERS,
        formats=fmt.SWEEP_PAGE_FORMATS,
        figures=(*LATENCY_COLUMNS, "gpu_compute_ms"),
    )


def sweep_headline(frame: pd.DataFrame, manifest) -> str:
    """What the sweep's numbers are: both speedups' definition, their intervals and verdicts
    (held to a false discovery rate over the cells), the timed window, each cell's verdict
    notes and noise warnings."""
    from profiler.report.benchmark_view import NO_GPU_TIME, has_gpu_time, verdict_notes

    gpu_time = has_gpu_time(frame)
    lines = _speedup_definition(frame, manifest, gpu_time)
    if not gpu_time:
        lines.append(html.note(NO_GPU_TIME))
    lines.extend(
        html.note(f"note ({label}): {note}", "warn")
        for label, note in verdict_notes(frame, manifest)
    )
    lines.append(_sweep_options(manifest))
    noisy = frame[frame["noise"].astype(str) != ""]
    if len(noisy):
        lines.append(
            html.warnings_list(
                [
                    f"{r.backend} bs {r.bs}: {r.noise} (CV {fmt.pct(r.cv_pct)}): its speedup is "
                    "less certain than the others'"
                    for r in noisy.itertuples()
                ]
            )
        )
    return "".join(lines)


def _speedup_definition(frame: pd.DataFrame, manifest, gpu_time: bool) -> list[str]:
    """The sweep's headline line and what its speedups are."""
    from profiler.analysis.benchmark import axis_columns
    from profiler.report.benchmark_view import FDR_WORDS, GPU_TIME_WORDS, LATENCY_WORDS, judged

    devices = sorted({d for d in frame["device"].dropna() if d})
    same = ", ".join(["batch size", *axis_columns(manifest)])
    return [
        f"<p class='big'>{html.escape(manifest.model)} on "
        f"{html.escape(', '.join(devices) or 'no finished cell')}: speedup = "
        f"{html.escape(manifest.baseline)} p50 / p50"
        + (" (latency), and the same on GPU time" if gpu_time else "")
        + "</p>",
        html.note(
            f"speedup: the figure of {manifest.baseline} over the cell's at the same "
            f"{same}, on {LATENCY_WORDS}"
            + (f" and on {GPU_TIME_WORDS}, each with its own verdict" if gpu_time else "")
            + "; with several processes per cell each figure is the geometric mean "
            "of the per-process medians, and the 95 % interval and the verdict "
            "(faster, slower, same within ±2 %, undecided) come from them "
            "(profiler/analysis/verdict.py)"
            + (f"; {FDR_WORDS}" if judged(frame) > 1 else "")
            + "; processes: the timed windows behind the cell, each in its own "
            "process"
        ),
    ]


def _sweep_options(manifest) -> str:
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


def sweep_page(
    folder: Path,
    peaks_dir: Path | None = None,
    flops_table: dict | None = None,
    only_decided: bool = False,
) -> html.Page:
    """The sweep's table (from its manifest and cells' results), plots, and the roofline and
    advice of every finished cell; with ``only_decided`` the table leaves out the cells
    undecided on both figures (a line counts them), as `sweep --only-decided` does."""
    from profiler.analysis.benchmark import axis_columns
    from profiler.report.benchmark_view import undecided_on_both

    sweep = SweepAnalysis(folder, peaks_dir=peaks_dir, flops_table=flops_table)
    frame = sweep.benchmark
    page = html.Page(f"Sweep: {folder.name}")
    hidden = undecided_on_both(frame) if only_decided else pd.Series(False, index=frame.index)
    shown = (
        html.note(
            f"--only-decided: {int(hidden.sum())} of {len(frame)} cells hidden "
            "(undecided on both figures)"
        )
        if only_decided
        else ""
    )
    page.add(
        "Benchmark",
        sweep_headline(frame, sweep.manifest)
        + sweep_table(frame[~hidden], axis_columns(sweep.manifest))
        + shown
        + html.note("note: TC-kernel time %: " + PIPE_BUSY_NOTE),
    )
    page.add(
        "Latency, speedup, throughput and kernel categories (the figures of `plot`)",
        _sweep_figures(frame, sweep.manifest),
    )
    points, advice_rows = [], []
    for cell, run in sweep.finished():
        try:
            advice = run.advice
        except UserError:
            continue
        label = short_label(cell)
        points.append((label, run.roofline))
        r = run.roofline
        advice_rows.append(
            {
                "cell": label,
                "TFLOP/s": r.achieved_tflops if r else None,
                "% of compute": r.pct_of_compute if r else None,
                MIN_GBS: r.achieved_gbs if r else None,
                MIN_PCT_BANDWIDTH: r.pct_of_bandwidth if r else None,
                "advice": advice_words(advice),
            }
        )
    if advice_rows:
        page.add("Roofline and advice per cell", html.table(pd.DataFrame(advice_rows)))
    chart = html.roofline_chart(points)
    if chart:
        page.add("Roofline chart", chart)
    return page


def advice_words(advice: list) -> str:
    """A cell's advice in words: each rule's title and what to try ("-" when none fired)."""
    return "; ".join(f"{a.title}: try {a.action} ({a.rule})" for a in advice) or "-"


def _sweep_figures(frame: pd.DataFrame, manifest) -> str:
    """`plot`'s sweep figures (plots.sweep_figures), inlined; a note without matplotlib or
    without a finished cell, and one where the cells ran no GPU kernels."""
    missing = html.figures_missing()
    if missing:
        return html.note(missing)
    if not (frame["status"] == OK).any():
        return html.note("no cell of this sweep finished: no figure")
    from profiler.report.plots import NO_SWEEP_KERNELS, sweep_figures

    figures = sweep_figures(frame, manifest)
    missing = (
        ""
        if "categories" in figures
        else html.note(
            NO_SWEEP_KERNELS.replace(": categories.png left out", ": no category figure")
        )
    )
    return html.figures(figures) + missing


def read_flops_table(path: Path | None) -> dict | None:
    if path is None:
        return None
    import json

    try:
        return json.loads(read_small(path, 64 << 20, "--flops"))
    except (ValueError, RecursionError) as error:
        raise UserError(f"--flops {path}: not readable JSON ({error})") from None


def run(
    target: str,
    target_b: str | None,
    out: Path | None,
    peaks_dir: Path | None = None,
    flops: Path | None = None,
    *,
    sink=None,
    only_decided: bool = False,
) -> Path:
    """Write the report; returns its path. ``sink`` (profiler.cli.output.Output) takes the
    warning line when figures are left out (a Python warning without one); ``only_decided``: a
    sweep's table without the cells undecided on both figures (a sweep folder only)."""
    if peaks_dir is not None and peaks_dir.exists() and not peaks_dir.is_dir():
        raise UserError(
            f"--peaks-dir {peaks_dir} is not a folder: give the folder `profile.py "
            "peaks` writes its measurements into"
        )
    flops_table = read_flops_table(flops)
    detail = sink.detail if sink is not None else None
    sweep = find_sweep(target) if target_b is None else None
    if only_decided and sweep is None:
        raise UserError(
            "--only-decided goes with a sweep folder (it hides the sweep table's "
            f"undecided cells); {target} is not one"
        )
    if sweep is not None:
        page = sweep_page(sweep, peaks_dir, flops_table, only_decided)
        default = sweep / "report.html"
    elif target_b is not None:
        page = compare_page(target, target_b, peaks_dir, flops_table, detail)
        default = Path(f"report_{Path(target).name}_vs_{Path(target_b).name}.html")
    else:
        page = run_page(target, peaks_dir, flops_table, detail)
        default = Path(f"report_{Path(target).name}.html")
    path = out or default
    try:
        write_text_atomic(path, page.render())
    except OSError as error:
        raise UserError(f"cannot write {path}: {error.strerror}") from None
    if html.figures_missing():  # the tables are all there; say once what is not
        (sink.warn if sink is not None else notices.warn)(f"{path}: {html.figures_missing()}")
    return path

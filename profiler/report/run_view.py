"""Terminal views of a run result and of the backend list (plain data in, text out): what `run`
prints once its result is written is the RUN rows (here, in the registry of
profiler.report.sections), each figure read from
profiler.analysis.result_analysis.ResultAnalysis, which derives what they show, and drawn by a
renderer below. Loads no pandas (a run of an eager model never does)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from profiler.analysis.records import WindowNoise
from profiler.analysis.result_analysis import (
    GenerationFigures,
    HowTimed,
    ResultAnalysis,
    ResultTable,
    Tails,
)
from profiler.analysis.timed_window import window_flags
from profiler.report.console import FitTable, make_console
from profiler.report.fmt import (
    NOT_FINITE,
    count,
    marked,
    number,
    percent,
    phases_line,
    plain,
    safe,
    significant,
    size,
    time,
)
from profiler.report.headline_view import gpu_compute_line, phase_gpu_line
from profiler.report.registry import Context, ReportSection, Rows, print_sections
from profiler.report.sentences import gpu_state_line, tail_rank, tail_value
from profiler.runs.backends import family, generation_words
from profiler.runs.layout import RESULT_FILE
from profiler.runs.result import Numerics, RunResult

#: the run table's columns kept at any width (the others are left out, the last first, where
#: the width cannot show them all)
ESSENTIAL = ("p50 ms", "p90 ms", "p99 ms", "samples/s", "CV", "peak alloc MiB")
#: the generation table's columns kept at any width (the others go first when it is narrow)
GENERATION_ESSENTIAL = ("TTFT p50", "TPOT p50", "ITL p99", "tokens/s", "tokens equal")


#: the run table's columns, every unit in its header, none in the cells (more may follow)
RESULT_COLUMNS = (
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "mean ms",
    "min ms",
    "max ms",
    "samples/s",
    "CV",
    "IQR ms",
    "peak alloc MiB",
    "peak reserved MiB",
    "prepare s",
)


def print_table(figure: ResultTable, console: Console) -> None:
    """The run's one-row table: latencies, throughput, noise, memory, prepare time."""
    console.print(result_table(figure))


def result_table(figure: ResultTable) -> FitTable:
    """The run's one-row table (FitTable: it leaves out its optional columns where narrow)."""
    result, window, memory = figure.result, figure.window, figure.memory
    timing, backend = result.timing, result.backend
    gpu = result.environment.gpu or {}
    # names from result.json (a run's, or one read back) print as text, never as markup
    table = FitTable(
        title=f"{safe(result.model)} · {safe(backend.name)} · bs "
        f"{result.batch_size} · {safe(gpu.get('name', 'CPU'))}"
    )
    columns = list(RESULT_COLUMNS)
    # each latency to the figures its window's noise allows; p50 marked with the window's flags
    cv = window.cv if window else None
    warnings = window.warnings if window else []
    figures = [
        number(getattr(timing, k), None, noise=cv)
        for k in ("p50_ms", "p90_ms", "p99_ms", "mean_ms", "min_ms", "max_ms")
    ]
    figures[0] = marked(figures[0], window_flags(warnings))
    cells = [
        *figures,
        count(timing.throughput_samples_per_s, 1),
        percent(100 * window.cv) if window else "-",
        time(window.iqr_ms, labelled=False) if window else "-",
        size(memory.peak_allocated_mib, "MiB", labelled=False, blank=memory.note or "-"),
        size(memory.peak_reserved_mib, "MiB", labelled=False, blank=memory.note or "-"),
        time(
            timing.prepare_s + timing.first_call_s, "s", decimals=2, thousands=False, labelled=False
        ),
    ]
    if memory.engine_mib is not None:
        columns.append("engine MiB")
        cells.append(size(memory.engine_mib, "MiB", labelled=False))
    # compiled backends: the compile (or cache load) part of prepare, as its own figure
    for value, column in ((backend.compile_s, "compile s"), (backend.cache_load_s, "cache load s")):
        if value is not None:
            columns.append(column)
            cells.append(time(value, "s", decimals=2, thousands=False, labelled=False))
    for column in columns:
        table.add_column(column, number=True, optional=column not in ESSENTIAL)
    table.add_row(*cells)
    return table


def print_tails(tails: Tails, console: Console) -> None:
    console.print(escape(tails_line(tails)), highlight=False, soft_wrap=True)


def tails_line(tails: Tails) -> str:
    """The window's p90 and p99 with their 95 % order-statistic intervals (to the figures the
    window's CV allows), and what a window too small for one lacks."""
    cv = tails.cv
    short = [t for t in tails.figures if t.low_rank is None or t.high_rank is None]
    return (
        "tails, 95 % intervals from order statistics: "
        + ", ".join(f"p{t.percentile} {tail_value(t, cv)}" for t in tails.figures)
        + "".join(
            f"; p{t.percentile} of {t.iterations} iterations is {tail_rank(t)}, too few for "
            f"both ends of its interval ({t.needed} give them)"
            for t in short
        )
    )


def print_how_timed(figure: HowTimed, console: Console) -> None:
    """The phases' seconds, the timed window's iterations, the GPU's state and compute."""
    result = figure.result
    timing, backend = result.timing, result.backend
    if timing.phases_s:
        console.print(
            phases_line(timing.phases_s, timing.wall_s, backend.compile_s, backend.cache_load_s),
            highlight=False,
            soft_wrap=True,
        )
    unit = "generations" if result.generation is not None else "iterations"
    chosen = f" ({timing.iterations_chosen_by})" if timing.iterations_chosen_by else ""
    console.print(
        f"{timing.iters} {unit}{chosen} after {timing.warmup_iters} warm-up, "
        f"{timing.timer}, synchronized every {unit[:-1]}; TF32 "
        f"{'on' if result.precision and result.precision.tf32 else 'off'}",
        highlight=False,
    )
    console.print(escape(gpu_state_line(figure.gpu_state)), highlight=False)
    phase_gpu = result.generation.phase_gpu if result.generation else None
    lines = (
        [phase_gpu_line(phase, gpu) for phase, gpu in phase_gpu.items()]
        if phase_gpu  # a generation's phases, their GPU time measured apart
        else [gpu_compute_line(figure.gpu_compute, timing.p50_ms)]
    )
    for line in filter(None, lines):
        console.print(escape(line), highlight=False, soft_wrap=True)


def print_window(window: WindowNoise, console: Console) -> None:
    """The timed window's warnings, its spread over processes, and --target-noise's outcome."""
    for warning in window.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(warning)}", highlight=False)
    spread = window.repeat_runs
    if spread:
        console.print(
            f"p50 over {spread.runs} processes: {time(spread.min_p50_ms, labelled=False)} to "
            f"{time(spread.max_p50_ms)} ({percent(spread.range_pct_of_median)} of "
            "the median)",
            highlight=False,
        )
    reached = window.target
    if reached:
        width = (
            "no interval" if reached.half_width is None else f"±{percent(100 * reached.half_width)}"
        )
        state = (
            f"[green]reached {width}[/]"
            if reached.reached
            else f"[yellow]not reached[/] ({reached.reason}; {width})"
        )
        console.print(
            f"--target-noise ±{plain(100 * reached.target)} %: {state} with "
            f"{reached.processes} processes of {reached.iterations} iterations "
            f"in {number(reached.spent_s, 0, thousands=False)} of "
            f"{time(reached.budget_s, 's', decimals=0, thousands=False)}",
            highlight=False,
        )


def print_backend_lines(result: RunResult, console: Console) -> None:
    """What the backend noted and warned, a non-finite output, and where the files are."""
    backend = result.backend
    for line in describe_notes(backend.extra):
        console.print(line, highlight=False)
    for warning in backend.warnings:
        console.print(f"[bold yellow]warning:[/] {escape(warning)}", highlight=False)
    if result.output.finite is False:
        console.print("[bold red]warning:[/] the output holds NaN or Inf values")
    if backend.artifacts:
        console.print(f"files:   {safe(', '.join(backend.artifacts))}", highlight=False)
    console.print(f"trace:   {safe(', '.join(result.trace.files))}", highlight=False)
    console.print(f"results: {safe(result.run_dir)}/{RESULT_FILE}", highlight=False)


def print_next_steps(hints: list[str], console: Console) -> None:
    """What to run next, one ``next:`` line each."""
    for hint in hints:
        console.print(f"next: {safe(hint)}", highlight=False, soft_wrap=True)


# backend notes that stay in result.json only (too long for the terminal, or shown elsewhere)
_QUIET_NOTES = {
    "artifacts",
    "warnings",
    "compile_s",
    "load_s",
    "cache",
    "versions",
    "compile_options",
    "distribution",
    "layer_files",
    "layer_timing",
    "profiling_verbosity",
    "engine_memory",
}


def describe_notes(notes: dict[str, Any]) -> list[str]:
    """What the backend did, in a few short lines (everything stays in result.json)."""
    brief = [
        f"{key.replace('_', ' ')} {', '.join(map(str, value)) or 'none'}"
        if isinstance(value, list)
        else f"{key.replace('_', ' ')} {value}"
        for key, value in notes.items()
        if key not in _QUIET_NOTES
    ]
    lines = [f"backend: {escape('; '.join(brief))}"] if brief else []
    if "versions" in notes:
        versions = ", ".join(f"{k} {v}" for k, v in notes["versions"].items())
        lines.append("versions: " + escape(versions))
    cache = notes.get("cache")
    if isinstance(cache, dict) and cache.get("enabled"):
        state = "hit" if cache.get("hit") else f"miss ({cache.get('reason', '?')})"
        stored = ", stored" if cache.get("stored") else ""
        lines.append(f"engine cache: {safe(state)}{stored}: {safe(cache.get('path'))}")
    elif isinstance(cache, dict):
        lines.append("engine cache: off (--no-cache)")
    return lines


def print_numerics(numerics: Numerics, console: Console) -> None:
    """The numeric check against the FP32 eager reference, as a one-row table."""
    if numerics.reason is not None:  # a check that could not run
        console.print(
            f"numerics: skipped ({escape(str(numerics.skipped))}): {escape(numerics.reason)}",
            highlight=False,
        )
    if numerics.skipped is not None:
        return
    table = Table(title="numerics vs FP32 eager reference", title_justify="left")
    for column in ("max abs err", "mean abs err", "rel L2 err", "cosine", "top-1 agree"):
        table.add_column(column, justify="right")
    top1 = numerics.top1_agreement
    table.add_row(
        significant(numerics.max_abs_error, not_finite=NOT_FINITE),
        significant(numerics.mean_abs_error, not_finite=NOT_FINITE),
        significant(numerics.rel_l2_error, not_finite=NOT_FINITE),
        significant(numerics.cosine_similarity, 6, not_finite=NOT_FINITE),
        "-" if top1 is None and numerics.finite else significant(top1, 4, not_finite=NOT_FINITE),
    )
    console.print(table)
    if not numerics.finite:
        console.print(
            "[bold red]warning:[/] NaN or Inf in the output or the reference: the "
            "numeric check fails"
        )


def print_generation(figures: GenerationFigures, console: Console) -> None:
    """--workload generate: time to first token, time per output token (each generation's
    mean decode step), inter-token latency (every decode step), tokens/s, and the token
    agreement with FP32 eager generation (the main table above is whole generations)."""
    generation, numerics = figures.generation, figures.numerics
    table = FitTable(
        title=f"generation ({safe(generation.kind)}, {generation.max_new_tokens} new "
        f"tokens, input {generation.input_len})"
    )
    per_token = generation.per_token_ms
    columns = {
        "TTFT p50": time(generation.ttft_ms.p50, thousands=False, labelled=False),
        "TPOT p50": time(
            generation.tpot_ms.p50 if generation.tpot_ms else None, thousands=False, labelled=False
        ),
        "encode ms": time(
            generation.encode_ms.mean if generation.encode_ms else None,
            thousands=False,
            labelled=False,
        ),
        "ITL p50": time(per_token.p50, thousands=False, labelled=False),
        "ITL p90": time(per_token.p90, thousands=False, labelled=False),
        "ITL p99": time(per_token.p99, thousands=False, labelled=False),
        "tokens/s": count(generation.tokens_per_s, 1),
        "seq p50 ms": time(generation.sequence_ms.p50, thousands=False, labelled=False),
    }
    if numerics is not None and numerics.tokens is not None:
        encoder, logits = numerics.encoder_output, numerics.first_step_logits
        columns["enc rel L2"] = (
            "-" if encoder is None else significant(encoder.rel_l2_error, not_finite=NOT_FINITE)
        )
        columns["logits rel L2"] = (
            "-" if logits is None else significant(logits.rel_l2_error, not_finite=NOT_FINITE)
        )
        columns["tokens equal"] = number(numerics.tokens.positions_equal, 3, thousands=False)
        columns["seqs identical"] = number(numerics.tokens.sequences_identical, 3, thousands=False)
    for column in columns:
        table.add_column(column, number=True, optional=column not in GENERATION_ESSENTIAL)
    table.add_row(*columns.values())
    console.print(table)
    steps = generation.step_ms_by_position
    shown = sorted({0, 1, len(steps) // 2, len(steps) - 1} & set(range(len(steps))))
    console.print(
        "step ms by position: "
        + ", ".join(f"#{k} {time(steps[k], thousands=False, labelled=False)}" for k in shown),
        highlight=False,
    )


#: the generation words of a family that runs every generation loop (said by no row)
EVERY_LOOP = generation_words(family("pytorch"))


def print_backends(rows: list[dict[str, Any]], cuda: bool, console: Console) -> None:
    """The backends' table (rows: name, family, precision, available, why_not, description)."""
    table = Table(
        title=f"backends ({'CUDA GPU found' if cuda else 'no CUDA GPU: CPU only'})",
        title_justify="left",
    )
    for column in ("backend", "precision", "available", "what it is / why not"):
        table.add_column(column)
    for row in rows:
        text = escape(row["description"] if row["available"] else row["why_not"])
        if row["generation"] != EVERY_LOOP:  # a limit to --workload generate, said
            text += f"\n[dim]{escape(row['generation'])}[/]"
        table.add_row(
            row["name"], row["precision"], "yes" if row["available"] else "[red]no[/]", text
        )
    console.print(table)


# ---- the RUN rows: what `run` prints ---------------------------------------------------------


def _run_table(figure: ResultTable, ctx: Context[ResultAnalysis]) -> None:
    print_table(figure, ctx.out)


def _tails(tails: Tails, ctx: Context[ResultAnalysis]) -> None:
    print_tails(tails, ctx.out)


def _generation(figures: GenerationFigures, ctx: Context[ResultAnalysis]) -> None:
    print_generation(figures, ctx.out)


def _numerics(numerics: Numerics, ctx: Context[ResultAnalysis]) -> None:
    print_numerics(numerics, ctx.out)


def _how_timed(figure: HowTimed, ctx: Context[ResultAnalysis]) -> None:
    print_how_timed(figure, ctx.out)


def _window(window: WindowNoise, ctx: Context[ResultAnalysis]) -> None:
    print_window(window, ctx.out)


def _run_files(result: RunResult, ctx: Context[ResultAnalysis]) -> None:
    print_backend_lines(result, ctx.out)


def _next_steps(hints: list[str], ctx: Context[ResultAnalysis]) -> None:
    print_next_steps(hints, ctx.out)


RUN_TABLE = ReportSection(
    "run table", ResultAnalysis, ResultTable, lambda run: run.table, terminal=_run_table
)
RUN_TAILS = ReportSection("tails", ResultAnalysis, Tails, lambda run: run.tails, terminal=_tails)
RUN_GENERATION = ReportSection(
    "generation",
    ResultAnalysis,
    GenerationFigures,
    lambda run: run.generation,
    terminal=_generation,
)
RUN_NUMERICS = ReportSection(
    "numerics", ResultAnalysis, Numerics, lambda run: run.result.numerics, terminal=_numerics
)
HOW_TIMED = ReportSection(
    "how timed", ResultAnalysis, HowTimed, lambda run: run.how_timed, terminal=_how_timed
)
RUN_WINDOW = ReportSection(
    "window", ResultAnalysis, WindowNoise, lambda run: run.window, terminal=_window
)
RUN_FILES = ReportSection(
    "backend and files", ResultAnalysis, RunResult, lambda run: run.result, terminal=_run_files
)
NEXT_STEPS = ReportSection(
    "next steps", ResultAnalysis, list, lambda run: run.next_steps, terminal=_next_steps
)
#: what `run` prints once its result is written (and a sweep's cell into its log)
RUN: Rows[ResultAnalysis] = (
    RUN_TABLE,
    RUN_TAILS,
    RUN_GENERATION,
    RUN_NUMERICS,
    HOW_TIMED,
    RUN_WINDOW,
    RUN_FILES,
    NEXT_STEPS,
)


def print_result(
    result: RunResult,
    console: Console | None = None,
    command: str = "python profile.py",
    hints: bool = True,
) -> None:
    """A run's result as `run` prints it (the RUN rows) on ``console`` (default: a new one on
    stdout); with ``hints``, what to run next, spelled with ``command`` (how the user started
    the program: ``infer-profile`` or ``python profile.py``)."""
    run = ResultAnalysis(result, command, hints)
    print_sections(RUN, Context(run, console or make_console()))

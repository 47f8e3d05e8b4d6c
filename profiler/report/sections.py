"""The registry of report sections: what `summarize`, `compare` and the `report` pages show, one
row per section, and the lists each of them walks.

A row (``ReportSection[Subject, Figure]``) is one figure: the facade it reads (its subject:
profiler.analysis.run_analysis.RunAnalysis, Comparison,
profiler.analysis.sweep_analysis.SweepAnalysis or, for what `run` prints once its result is
written, profiler.analysis.result_analysis.ResultAnalysis), the type of the figure (the typed
record the facade returns), the reader that takes the figure from the subject, one terminal
renderer (rich) and one HTML renderer (html.Section list). mypy holds each row together: the
reader must return the figure's type from the subject's, and the renderers must take that figure
and a Context of that subject; tests/test_sections.py reads every row of the committed fixtures
and checks each figure against the row's type. A medium that shows the figure otherwise reads it
in a row of its own.

A list is rows of one subject in the order they are shown; one loop walks it per medium
(print_sections, page_sections), reading each row's figure from the list's subject and leaving
out a section whose figure is None (a page says so instead where the row has an ``absent``
renderer). A renderer may still show nothing where its medium has nothing to say (a CPU
trace's kernels).

Adding a section: its renderer, one row, and the row in the lists that show it.
"""

from __future__ import annotations

from typing import Any, TypeVar

import pandas as pd

from profiler.analysis.gpu_offsets import GpuOffset
from profiler.analysis.insight import Insight
from profiler.analysis.memory_snapshot import MemorySnapshot
from profiler.analysis.rank_records import RankComparisonFigures, RankRunFigures
from profiler.analysis.rank_run import RankComparison, RankRun
from profiler.analysis.records import (
    BenchmarkCell,
    CompareTimed,
    Explanation,
    Headline,
)
from profiler.analysis.roofline import Roofline
from profiler.analysis.run_analysis import Comparison, RunAnalysis
from profiler.analysis.sweep_analysis import SweepAnalysis
from profiler.report import html, pages
from profiler.report.benchmark_view import print_benchmark, print_gpu_offsets
from profiler.report.compare_view import (
    largest_changes_table,
    print_answer,
    print_diff,
    print_explanation,
    print_timed_headline,
)
from profiler.report.console import print_prose
from profiler.report.fmt import safe
from profiler.report.hardware_view import print_hardware
from profiler.report.headline_view import print_headline
from profiler.report.insight_view import print_insight
from profiler.report.layers_view import print_layers
from profiler.report.memory_view import memory_sections, print_memory, recorded_memory
from profiler.report.modules_view import html_sections, print_modules
from profiler.report.phases_view import (
    phase_categories_table,
    phase_kernels_table,
    phase_roofline_table,
    phases_table,
    positions_table,
)
from profiler.report.ranks_view import (
    compare_ranks_sections,
    print_rank_comparison,
    print_rank_notes,
    print_ranks,
    print_straggler,
    ranks_sections,
)
from profiler.report.registry import (
    Context as Context,
    ReportSection as ReportSection,
    Rows as Rows,
    page_sections as page_sections,
    print_sections as print_sections,
)
from profiler.report.run_view import (
    HOW_TIMED,
    NEXT_STEPS,
    RUN as RUN,
    RUN_FILES,
    RUN_GENERATION,
    RUN_NUMERICS,
    RUN_TABLE,
    RUN_TAILS,
    RUN_WINDOW,
)
from profiler.report.snapshot_view import print_snapshot, snapshot_sections
from profiler.report.tables import (
    categories_table,
    definitions_table,
    kernels_table,
    launch_table,
    operators_table,
    overview_tables,
    trace_header,
)
from profiler.runs.manifest import SweepCell
from profiler.runs.result import RunResult
from profiler.trace.diff import Diff
from profiler.trace.kernels import PIPE_BUSY_NOTE
from profiler.trace.memory_records import MemoryView
from profiler.trace.modules import ModuleView
from profiler.trace.phase_kernels import PhaseSummary
from profiler.trace.summary import Summary
from profiler.trace.trt_layers import Attribution

#: the facade a row reads (RunAnalysis, Comparison, SweepAnalysis)
S = TypeVar("S")

#: what a page's renderer gives: its sections, none when it has nothing to show
Sections = list[html.Section]

# the figures that are more than one record
#: (phase, at, roofline) of a generation's phases (RunAnalysis.phase_rooflines)
PhaseRooflines = list[tuple[str, str, Roofline]]
#: a comparison's runs
Sides = tuple[RunAnalysis, RunAnalysis]
#: each run's roofline
Rooflines = tuple[Roofline | None, Roofline | None]
#: a sweep's cells, one typed record each (SweepAnalysis.rows)
Cells = list[BenchmarkCell]
#: a sweep's finished cells (SweepAnalysis.finished)
Finished = list[tuple[SweepCell, RunAnalysis]]


def page(title: str, rows: Rows[S], ctx: Context[S]) -> html.Page:
    """One HTML page of ``rows`` read from ``ctx.subject``."""
    return html.Page(title, page_sections(rows, ctx))


def _section(title: str, body: str | None) -> Sections:
    """One section, none without a body."""
    return [html.Section(title, body)] if body else []


# ---- a run: terminal renderers ----------------------------------------------------------


def _headline(data: Headline, ctx: Context[RunAnalysis]) -> None:
    print_headline(data, ctx.out)


def _trace(summary: Summary, ctx: Context[RunAnalysis]) -> None:
    ctx.out.print(trace_header(summary))


def _overview(summary: Summary, ctx: Context[RunAnalysis]) -> None:
    overview_tables(summary, ctx.top, ctx.out, ctx.subject.agreement)


def _definitions(summary: Summary, ctx: Context[RunAnalysis]) -> None:
    """The step breakdown's definitions beside the TensorBoard plugin's (--view definitions);
    a trace without GPU work has no GPU roles to define: one line says so."""
    if summary.overview.has_gpu:
        ctx.out.print(definitions_table(summary.overview.definitions))
    else:
        ctx.out.print(
            "no breakdown definitions to compare: the trace has no GPU work (the roles that "
            "differ from the TensorBoard plugin's are the GPU's)",
            highlight=False,
        )


def _categories(summary: Summary, ctx: Context[RunAnalysis]) -> None:
    if len(summary.kernels.table):  # none in a CPU-only trace: its note says so
        ctx.out.print(categories_table(summary))


def _kernels(summary: Summary, ctx: Context[RunAnalysis]) -> None:
    if len(summary.kernels.table):
        ctx.out.print(kernels_table(summary, ctx.top))
        ctx.out.print(launch_table(summary, ctx.top))


def _operators(summary: Summary, ctx: Context[RunAnalysis]) -> None:
    ctx.out.print(operators_table(summary, ctx.top))


def _phases(phases: PhaseSummary, ctx: Context[RunAnalysis]) -> None:
    ctx.out.print(phases_table(phases))
    ctx.out.print(positions_table(phases, top=ctx.top))
    if phases.kernels:
        ctx.out.print(phase_categories_table(phases))
        for phase in phases.kernels:
            ctx.out.print(phase_kernels_table(phases, phase, ctx.top))


def _phase_rooflines(rooflines: PhaseRooflines, ctx: Context[RunAnalysis]) -> None:
    if rooflines:
        ctx.out.print(phase_roofline_table(rooflines))


def _phase_rooflines_page(rooflines: PhaseRooflines, ctx: Context[RunAnalysis]) -> Sections:
    if not rooflines:
        return []
    frame = pd.DataFrame(
        [
            {
                "phase": phase,
                "at": at,
                "time_ms": 1e3 * r.seconds,
                "flops": r.flops,
                "min_bytes": r.min_bytes,
                "intensity": r.intensity,
                "achieved_tflops": r.achieved_tflops,
                "achieved_gbs": r.achieved_gbs,
                "bound": r.bound,
                "pct_of_roof": r.pct_of_roof,
            }
            for phase, at, r in rooflines
        ]
    )
    return [html.Section(f"{ctx.label}: roofline per phase", html.table(frame))]


def _notes(notes: list[str], ctx: Context[RunAnalysis]) -> None:
    for note in notes:
        print_prose(ctx.out, f"[yellow]note:[/yellow] {safe(note)}")


def _pipe_busy(summary: Summary, ctx: Context[RunAnalysis]) -> None:
    """How to read the tensor pipe, where Tensor Core kernel time shows and ncu did not."""
    a = ctx.subject.agreement
    if summary.kernels.total_kernel_us and not (a is not None and a.pipe_measured_us):
        print_prose(ctx.out, f"[yellow]note:[/yellow] {PIPE_BUSY_NOTE}")


def _hardware(joined: pd.DataFrame, ctx: Context[RunAnalysis]) -> None:
    agreement = ctx.subject.agreement
    assert agreement is not None  # read from the same join as the table
    print_hardware(joined, agreement, ctx.top, ctx.out)


def _insight(found: Insight, ctx: Context[RunAnalysis]) -> None:
    print_insight(found, ctx.out, ctx.label)


def _layers(attributions: list[Attribution], ctx: Context[RunAnalysis]) -> None:
    print_layers(attributions, ctx.top, ctx.out)


def _snapshot(figure: MemorySnapshot, ctx: Context[RunAnalysis]) -> None:
    print_snapshot(figure, ctx.out, ctx.top)


def _snapshot_page(figure: MemorySnapshot, ctx: Context[RunAnalysis]) -> Sections:
    return snapshot_sections(figure, ctx.label, ctx.top)


def _recorded_insight(run: RunAnalysis) -> Insight | None:
    """A run's roofline and advice; None for a bare trace (no timed window)."""
    return run.insight if run.result_json is not None else None


def _memory(view: MemoryView, ctx: Context[RunAnalysis]) -> None:
    print_memory(view, ctx.out, ctx.top)


def _memory_page(view: MemoryView, ctx: Context[RunAnalysis]) -> Sections:
    return memory_sections(view, ctx.label, ctx.top)


def _modules(view: ModuleView, ctx: Context[RunAnalysis]) -> None:
    print_modules(view, ctx.top, ctx.out)


def _modules_page(view: ModuleView, ctx: Context[RunAnalysis]) -> Sections:
    return html_sections(view, ctx.label)


# ---- a run: HTML renderers --------------------------------------------------------------


def _result_page(result: RunResult | None, ctx: Context[RunAnalysis]) -> Sections:
    run = ctx.subject
    body = html.headline(result, ctx.label, run.result_json, run.headline if result else None)
    return [html.Section(f"{ctx.label}: headline", body)]


def _no_result_page(ctx: Context[RunAnalysis]) -> Sections:
    """A bare trace's headline: what is missing without a result.json."""
    return _result_page(None, ctx)


def _insight_page(found: Insight, ctx: Context[RunAnalysis]) -> Sections:
    roofline = html.roofline_block(found.roofline, found.ceilings_source, found.roofline_missing)
    return [
        html.Section(f"{ctx.label}: roofline", roofline),
        html.Section(f"{ctx.label}: advice", html.advice_block(found.advice)),
    ]


def _categories_page(summary: Summary, ctx: Context[RunAnalysis]) -> Sections:
    if not summary.overview.has_gpu:
        return []
    body = pages.run_categories(summary, ctx.name or ctx.label, ctx.subject.agreement)
    return [html.Section(f"{ctx.label}: kernel time by category", body)]


def _kernels_page(summary: Summary, ctx: Context[RunAnalysis]) -> Sections:
    if not summary.overview.has_gpu:
        return []
    return [html.Section(f"{ctx.label}: top kernels", pages.top_kernels(summary))]


def _operators_page(summary: Summary, ctx: Context[RunAnalysis]) -> Sections:
    if summary.overview.has_gpu:  # a GPU run's operators are in its kernels' table
        return []
    title = f"{ctx.label}: CPU operators by self CPU time"
    return [html.Section(title, pages.cpu_operators(summary))]


def _gemms(run: RunAnalysis) -> pd.DataFrame | None:
    """The GEMMs by recorded shape of a run recorded with --record-shapes."""
    # ConfigRecord is built from RunConfig's fields when imported: no attribute a checker sees
    if run.result is None or not getattr(run.result.config, "record_shapes", False):
        return None
    return run.gemms()


def _gemms_page(frame: pd.DataFrame, ctx: Context[RunAnalysis]) -> Sections:
    title = f"{ctx.label}: GEMMs by recorded shape (--record-shapes)"
    return [html.Section(title, pages.gemms(frame, ctx.subject.summary.overview.has_gpu))]


def _layer_times_page(frame: pd.DataFrame, ctx: Context[RunAnalysis]) -> Sections:
    return _section(f"{ctx.label}: TensorRT layers (engine_layer_times)", html.layer_view(frame))


def _roofline_page(roofline: Roofline, ctx: Context[RunAnalysis]) -> Sections:
    return _section("Roofline chart", html.roofline_chart([(ctx.label, roofline)]))


# ---- a comparison -------------------------------------------------------------------------


def _names(both: Comparison) -> tuple[str, str]:
    """A comparison's runs as its page names them."""
    return pages.target_label(both.a_label), pages.target_label(both.b_label)


def _timed(t: CompareTimed, ctx: Context[Comparison]) -> None:
    print_timed_headline(t, ctx.out)


def _timed_page(t: CompareTimed | None, ctx: Context[Comparison]) -> Sections:
    both = ctx.subject
    verdicts = "the latency verdict" if both.diff.on_cpu else "the verdicts on latency and GPU time"
    title = f"Timed windows (no profiler attached): {verdicts}, the recorded runs, noise and config"
    return [html.Section(title, html.timed_block(t, *_names(both)))]


def _no_timed_page(ctx: Context[Comparison]) -> Sections:
    """A comparison beside a bare trace: what is missing without a timed window."""
    return _timed_page(None, ctx)


def _explanation_of(both: Comparison) -> Explanation | None:
    """Why B differs at the kernel level (SM clock, kernels): nothing to say of two CPU runs."""
    return None if both.diff.on_cpu else both.explanation


def _explanation(e: Explanation, ctx: Context[Comparison]) -> None:
    print_explanation(e, ctx.out)


def _answer(t: CompareTimed, ctx: Context[Comparison]) -> None:
    print_answer(t, ctx.out)


def _why_line(e: Explanation, ctx: Context[Comparison]) -> None:
    print_explanation(e, ctx.out, states=False)


def _largest_changes(result: Diff, ctx: Context[Comparison]) -> None:
    table = largest_changes_table(result)
    if table is not None:
        ctx.out.print(table)
    print_prose(
        ctx.out,
        "[dim]more: --view timed (processes, recorded runs, config), --view diff (categories, "
        "kernels, operators), --view full or -v (all, with each run's advice)[/]",
    )


def _explanation_page(e: Explanation, ctx: Context[Comparison]) -> Sections:
    return _section("Why B differs from A", html.explanation_block(e))


def _diff(result: Diff, ctx: Context[Comparison]) -> None:
    both = ctx.subject
    print_diff(
        result,
        both.a.summary,
        both.b.summary,
        top=ctx.top,
        console=ctx.out,
        recorded=both.windows is None,
    )


def _diff_page(result: Diff, ctx: Context[Comparison]) -> Sections:
    both = ctx.subject
    found = [
        html.Section(
            "Overview (delta = B - A; times per profiled step)",
            html.overview_block(result.overview),
        )
    ]
    if result.on_cpu:  # two CPU runs: their operators, matched by name
        found += pages.cpu_diff(result)
    else:
        found += pages.kernel_diff(result, list(_names(both)), [both.a.summary, both.b.summary])
    notes = "".join(html.note("note: " + n) for n in result.notes)
    return found + _section("Notes", notes)


def _rooflines_page(rooflines: Rooflines, ctx: Context[Comparison]) -> Sections:
    return _section(
        "Roofline chart", html.roofline_chart(list(zip(_names(ctx.subject), rooflines)))
    )


def _sides(sides: Sides, ctx: Context[Comparison]) -> None:
    """Each run's own sections (its recorded window's, beside fresh processes)."""
    recorded = ctx.subject.windows is None
    for label, side in zip("AB", sides):
        shown = label if recorded else f"{label}, recorded run"
        print_sections(COMPARE_SIDE, ctx.about(side, shown))


def _sides_page(sides: Sides, ctx: Context[Comparison]) -> Sections:
    found: Sections = []
    for label, side, name in zip("AB", sides, _names(ctx.subject)):
        found += page_sections(RUN_SIDE, Context(side, label=label, name=name))
    return found


# ---- a sweep ------------------------------------------------------------------------------


def _benchmark_page(rows: Cells, ctx: Context[SweepAnalysis]) -> Sections:
    body = pages.benchmark(rows, ctx.subject.manifest, ctx.only_decided)
    return [html.Section("Benchmark", body)]


def _geomeans_page(rows: Cells, ctx: Context[SweepAnalysis]) -> Sections:
    return _section("Geometric mean over batch sizes", pages.geomeans(rows))


def _figures_page(frame: pd.DataFrame, ctx: Context[SweepAnalysis]) -> Sections:
    return [
        html.Section(
            "Latency, speedup, throughput and kernel categories (the figures of `plot`)",
            pages.sweep_figures(frame, ctx.subject.manifest),
        )
    ]


def _sweep_table(rows: Cells, ctx: Context[SweepAnalysis]) -> None:
    print_benchmark(rows, ctx.subject.manifest, ctx.out, ctx.only_decided)


def _gpu_offsets(offsets: list[GpuOffset], ctx: Context[SweepAnalysis]) -> None:
    print_gpu_offsets(offsets, ctx.out)


def _cells_page(finished: Finished, ctx: Context[SweepAnalysis]) -> Sections:
    points, rows = pages.cell_insights(finished)
    table = html.table(pd.DataFrame(rows)) if rows else None
    return _section("Roofline and advice per cell", table) + _section(
        "Roofline chart", html.roofline_chart(points)
    )


# ---- a folder of rank traces ---------------------------------------------------------------


def _ranks(figures: RankRunFigures, ctx: Context[RankRun]) -> None:
    print_ranks(figures, ctx.out)


def _ranks_page(figures: RankRunFigures, ctx: Context[RankRun]) -> Sections:
    return ranks_sections(figures)


def _straggler(figures: RankRunFigures, ctx: Context[RankRun]) -> None:
    print_straggler(figures, ctx.out)


def _rank_notes(figures: RankRunFigures, ctx: Context[RankRun]) -> None:
    print_rank_notes(figures, ctx.out)


def _rank_comparison(figures: RankComparisonFigures, ctx: Context[RankComparison]) -> None:
    print_rank_comparison(figures, ctx.out)


def _rank_comparison_page(figures: RankComparisonFigures, ctx: Context[RankComparison]) -> Sections:
    return compare_ranks_sections(figures)


# ---- the registry ---------------------------------------------------------------------------

HEADLINE = ReportSection(
    "headline", RunAnalysis, Headline, lambda run: run.headline, terminal=_headline
)
RESULT = ReportSection(
    "result",
    RunAnalysis,
    RunResult,
    lambda run: run.result,
    html=_result_page,
    absent=_no_result_page,
)
TRACE = ReportSection("trace", RunAnalysis, Summary, lambda run: run.summary, terminal=_trace)
OVERVIEW = ReportSection(
    "overview", RunAnalysis, Summary, lambda run: run.summary, terminal=_overview
)
DEFINITIONS = ReportSection(
    "definitions", RunAnalysis, Summary, lambda run: run.summary, terminal=_definitions
)
CATEGORIES = ReportSection(
    "categories",
    RunAnalysis,
    Summary,
    lambda run: run.summary,
    terminal=_categories,
    html=_categories_page,
)
KERNELS = ReportSection(
    "kernels",
    RunAnalysis,
    Summary,
    lambda run: run.summary,
    terminal=_kernels,
    html=_kernels_page,
)
OPERATORS = ReportSection(
    "operators",
    RunAnalysis,
    Summary,
    lambda run: run.summary,
    terminal=_operators,
    html=_operators_page,
)
PHASES = ReportSection(
    "phases", RunAnalysis, PhaseSummary, lambda run: run.summary.phases, terminal=_phases
)
PHASE_ROOFLINES = ReportSection(
    "phase rooflines",
    RunAnalysis,
    list,
    lambda run: run.phase_rooflines,
    terminal=_phase_rooflines,
    html=_phase_rooflines_page,
)
TRACE_NOTES = ReportSection(
    "trace notes", RunAnalysis, list, lambda run: run.summary.notes, terminal=_notes
)
PIPE_BUSY = ReportSection(
    "tensor pipe", RunAnalysis, Summary, lambda run: run.summary, terminal=_pipe_busy
)
HARDWARE = ReportSection(
    "hardware", RunAnalysis, pd.DataFrame, lambda run: run.hardware, terminal=_hardware
)
INSIGHT = ReportSection("insight", RunAnalysis, Insight, _recorded_insight, terminal=_insight)
ROOFLINE_ADVICE = ReportSection(
    "roofline and advice", RunAnalysis, Insight, lambda run: run.insight, html=_insight_page
)
GEMMS = ReportSection("gemms", RunAnalysis, pd.DataFrame, _gemms, html=_gemms_page)
LAYER_TIMES = ReportSection(
    "layer times", RunAnalysis, pd.DataFrame, lambda run: run.layer_times, html=_layer_times_page
)
LAYERS = ReportSection("layers", RunAnalysis, list, lambda run: run.layers, terminal=_layers)
MODULES = ReportSection(
    "modules",
    RunAnalysis,
    ModuleView,
    lambda run: run.modules,
    terminal=_modules,
    html=_modules_page,
)
MEMORY_SNAPSHOT = ReportSection(
    "memory snapshot",
    RunAnalysis,
    MemorySnapshot,
    lambda run: run.memory_snapshot,
    terminal=_snapshot,
    html=_snapshot_page,
)
ROOFLINE = ReportSection(
    "roofline chart", RunAnalysis, Roofline, lambda run: run.roofline, html=_roofline_page
)
MEMORY = ReportSection(
    "memory", RunAnalysis, MemoryView, recorded_memory, terminal=_memory, html=_memory_page
)

TIMED = ReportSection(
    "timed",
    Comparison,
    CompareTimed,
    lambda both: both.timed,
    terminal=_timed,
    html=_timed_page,
    absent=_no_timed_page,
)
EXPLANATION = ReportSection(
    "explanation",
    Comparison,
    Explanation,
    _explanation_of,
    terminal=_explanation,
    html=_explanation_page,
)
DIFF = ReportSection(
    "diff", Comparison, Diff, lambda both: both.diff, terminal=_diff, html=_diff_page
)
ANSWER = ReportSection(
    "answer", Comparison, CompareTimed, lambda both: both.timed, terminal=_answer
)
WHY_LINE = ReportSection("why line", Comparison, Explanation, _explanation_of, terminal=_why_line)
LARGEST_CHANGES = ReportSection(
    "largest changes", Comparison, Diff, lambda both: both.diff, terminal=_largest_changes
)
ROOFLINES = ReportSection(
    "rooflines",
    Comparison,
    tuple,
    lambda both: (both.a.roofline, both.b.roofline),
    html=_rooflines_page,
)
SIDES = ReportSection(
    "sides",
    Comparison,
    tuple,
    lambda both: (both.a, both.b),
    terminal=_sides,
    html=_sides_page,
)

BENCHMARK = ReportSection(
    "benchmark", SweepAnalysis, list, lambda sweep: sweep.rows, html=_benchmark_page
)
GEOMEANS = ReportSection(
    "geometric means", SweepAnalysis, list, lambda sweep: sweep.rows, html=_geomeans_page
)
FIGURES = ReportSection(
    "figures", SweepAnalysis, pd.DataFrame, lambda sweep: sweep.benchmark, html=_figures_page
)
CELLS = ReportSection(
    "cells", SweepAnalysis, list, lambda sweep: sweep.finished(), html=_cells_page
)
SWEEP_TABLE = ReportSection(
    "sweep table", SweepAnalysis, list, lambda sweep: sweep.rows, terminal=_sweep_table
)
GPU_OFFSETS = ReportSection(
    "GPU offsets", SweepAnalysis, list, lambda sweep: sweep.offsets, terminal=_gpu_offsets
)
RANKS = ReportSection(
    "ranks",
    RankRun,
    RankRunFigures,
    lambda ranks: ranks.figures,
    terminal=_ranks,
    html=_ranks_page,
)
STRAGGLER = ReportSection(
    "straggler", RankRun, RankRunFigures, lambda ranks: ranks.figures, terminal=_straggler
)
RANK_NOTES = ReportSection(
    "rank notes", RankRun, RankRunFigures, lambda ranks: ranks.figures, terminal=_rank_notes
)
RANK_COMPARISON = ReportSection(
    "rank comparison",
    RankComparison,
    RankComparisonFigures,
    lambda both: both.figures,
    terminal=_rank_comparison,
    html=_rank_comparison_page,
)

#: every row
REGISTRY: tuple[ReportSection[Any, Any], ...] = (
    HEADLINE,
    RESULT,
    TRACE,
    OVERVIEW,
    DEFINITIONS,
    CATEGORIES,
    KERNELS,
    OPERATORS,
    PHASES,
    PHASE_ROOFLINES,
    TRACE_NOTES,
    PIPE_BUSY,
    HARDWARE,
    INSIGHT,
    ROOFLINE_ADVICE,
    GEMMS,
    LAYER_TIMES,
    LAYERS,
    MODULES,
    MEMORY_SNAPSHOT,
    ROOFLINE,
    MEMORY,
    TIMED,
    EXPLANATION,
    DIFF,
    ANSWER,
    WHY_LINE,
    LARGEST_CHANGES,
    ROOFLINES,
    SIDES,
    RUN_TABLE,
    RUN_TAILS,
    RUN_GENERATION,
    RUN_NUMERICS,
    HOW_TIMED,
    RUN_WINDOW,
    RUN_FILES,
    NEXT_STEPS,
    BENCHMARK,
    GEOMEANS,
    FIGURES,
    CELLS,
    RANKS,
    STRAGGLER,
    RANK_NOTES,
    RANK_COMPARISON,
    SWEEP_TABLE,
    GPU_OFFSETS,
)

# ---- the lists --------------------------------------------------------------------------------

#: `summarize`'s sections with the --view choices that show each (its VIEWS); the breakdown's
#: definitions only when asked for
RUN_VIEWS = (
    "all",
    "overview",
    "kernels",
    "categories",
    "operators",
    "phases",
    "definitions",
    "modules",
)
SUMMARIZE: tuple[tuple[ReportSection[RunAnalysis, Any], tuple[str, ...]], ...] = (
    (HEADLINE, RUN_VIEWS),
    (TRACE, RUN_VIEWS),
    (OVERVIEW, ("all", "overview")),
    (DEFINITIONS, ("definitions",)),
    (CATEGORIES, ("all", "categories")),
    (KERNELS, ("all", "kernels")),
    (OPERATORS, ("all", "operators")),
    (PHASES, ("all", "phases")),
    (PHASE_ROOFLINES, ("all", "phases")),
    (TRACE_NOTES, RUN_VIEWS),
    (PIPE_BUSY, ("all", "overview", "categories")),
    (HARDWARE, ("all", "kernels")),
    (INSIGHT, ("all", "overview")),
    (LAYERS, ("layers",)),
    (MODULES, ("modules",)),
    (MEMORY, ("memory",)),
    (MEMORY_SNAPSHOT, ("all", "snapshot")),
)
#: `compare --view full`: the timed windows, why B differs, the diff, then each run's own
#: (COMPARE_SIDE)
COMPARE: Rows[Comparison] = (TIMED, EXPLANATION, DIFF, SIDES)
#: `compare`'s views: the answer on one screen (the verdicts, why, the largest changes) by
#: default, the rest behind --view
COMPARE_VIEWS: dict[str, Rows[Comparison]] = {
    "answer": (ANSWER, WHY_LINE, LARGEST_CHANGES),
    "timed": (TIMED,),
    "diff": (EXPLANATION, DIFF),
    "full": COMPARE,
}
COMPARE_SIDE: Rows[RunAnalysis] = (INSIGHT,)
#: a run's sections on a page (its own, or as A or B of a comparison's)
RUN_SIDE: Rows[RunAnalysis] = (
    RESULT,
    ROOFLINE_ADVICE,
    CATEGORIES,
    KERNELS,
    OPERATORS,
    GEMMS,
    LAYER_TIMES,
)
RUN_PAGE: Rows[RunAnalysis] = (
    *RUN_SIDE,
    PHASE_ROOFLINES,
    ROOFLINE,
    MODULES,
    MEMORY,
    MEMORY_SNAPSHOT,
)
COMPARE_PAGE: Rows[Comparison] = (TIMED, EXPLANATION, DIFF, ROOFLINES, SIDES)
SWEEP_PAGE: Rows[SweepAnalysis] = (BENCHMARK, GEOMEANS, FIGURES, CELLS)
#: `sweep`'s output on the terminal: the benchmark table (its geometric means and notes under
#: it), then the GPUs' offsets from each other
SWEEP: Rows[SweepAnalysis] = (SWEEP_TABLE, GPU_OFFSETS)

#: a folder of rank traces: `summarize` and the `report` page; two of them: `compare` and its page
SUMMARIZE_RANKS: Rows[RankRun] = (RANKS, STRAGGLER, RANK_NOTES)
RANKS_PAGE: Rows[RankRun] = (RANKS,)
COMPARE_RANKS: Rows[RankComparison] = (RANK_COMPARISON,)
COMPARE_RANKS_PAGE: Rows[RankComparison] = (RANK_COMPARISON,)


def summarize_rows(view: str) -> Rows[RunAnalysis]:
    """The rows `summarize --view VIEW` prints, in order."""
    return tuple(row for row, views in SUMMARIZE if view in views)

"""The registry of report sections: what `summarize`, `compare` and the `report` pages show, one
row per section, and the lists each of them walks.

A row (ReportSection) is one figure: its type (the typed record the facade returns), the
facade's property it reads (of profiler.analysis.run.RunAnalysis, Comparison or
profiler.analysis.sweep.SweepAnalysis), one terminal renderer (rich) and one HTML renderer
(html.Section list). A medium that shows the figure otherwise reads it in a row of its own.
A list is rows in the order they are shown; one loop walks it per medium
(print_sections, page_sections), reading each row's figure from the list's subject and leaving
out a section whose figure is None (a page says so instead where the row ``says_absent``).
A renderer may still show nothing where its medium has nothing to say (a CPU trace's kernels).

Adding a section: its renderer, one row, and the row in the lists that show it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import pandas as pd
from rich.console import Console

from profiler.analysis.insight import Insight
from profiler.analysis.records import CompareTimed, Explanation, Headline
from profiler.analysis.roofline import Roofline
from profiler.report import html, pages
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
from profiler.report.phases_view import (
    phase_categories_table,
    phase_kernels_table,
    phase_roofline_table,
    phases_table,
    positions_table,
)
from profiler.report.tables import (
    categories_table,
    definitions_table,
    kernels_table,
    launch_table,
    operators_table,
    overview_tables,
    trace_header,
)
from profiler.runs.result import RunResult
from profiler.trace.diff import Diff
from profiler.trace.kernels import PIPE_BUSY_NOTE
from profiler.trace.phases import PhaseSummary
from profiler.trace.summary import Summary


@dataclass
class Context:
    """What a walk renders with: the ``subject`` its rows read (a RunAnalysis, Comparison or
    SweepAnalysis), the terminal's ``console``, ``top`` rows of a long table, the run's
    ``label`` in titles and lines (its name on a run page, A or B beside another run), its
    ``name`` on figures, and a sweep page's ``only_decided``."""

    subject: Any
    console: Console | None = None
    top: int = 20
    label: str = ""
    name: str | None = None
    only_decided: bool = False

    @property
    def out(self) -> Console:
        if self.console is None:
            raise ValueError("a terminal walk needs a console")
        return self.console


Terminal = Callable[[Any, Context], None]
Html = Callable[[Any, Context], list[html.Section]]


@dataclass(frozen=True)
class ReportSection:
    """One section: ``figure`` (the type of what it shows), ``reads`` (the facade's property,
    ``Class.attribute``), its ``terminal`` and ``html`` renderers (None: not shown there).
    ``read``: how the figure is read when it is more than the attribute (a condition, a call);
    ``says_absent``: a page calls the HTML renderer with None too, to say what is missing (the
    terminal leaves the section out)."""

    name: str
    figure: type | tuple[type, ...]
    reads: str
    terminal: Terminal | None = None
    html: Html | None = None
    read: Callable[[Any], Any] | None = None
    says_absent: bool = False

    def figure_of(self, subject: Any) -> Any:
        if self.read is not None:
            return self.read(subject)
        return attrgetter(self.reads.split(".", 1)[1])(subject)


def print_sections(rows: Sequence[ReportSection], ctx: Context) -> None:
    """The terminal: each row's figure read from the subject and printed; None left out."""
    for row in rows:
        assert row.terminal is not None, f"{row.name}: no terminal renderer"
        figure = row.figure_of(ctx.subject)
        if figure is not None:
            row.terminal(figure, ctx)


def page_sections(rows: Sequence[ReportSection], ctx: Context) -> list[html.Section]:
    """A page's sections: each row's figure read from the subject and rendered; None left
    out, or said where the row ``says_absent``."""
    found: list[html.Section] = []
    for row in rows:
        assert row.html is not None, f"{row.name}: no HTML renderer"
        figure = row.figure_of(ctx.subject)
        if figure is not None or row.says_absent:
            found += row.html(figure, ctx)
    return found


def page(title: str, rows: Sequence[ReportSection], ctx: Context) -> html.Page:
    """One HTML page of ``rows`` read from ``ctx.subject``."""
    return html.Page(title, page_sections(rows, ctx))


def _section(title: str, body: str | None) -> list[html.Section]:
    """One section, none without a body."""
    return [html.Section(title, body)] if body else []


# ---- a run: terminal renderers ----------------------------------------------------------


def _headline(data: Headline, ctx: Context) -> None:
    print_headline(data, ctx.out)


def _trace(summary: Summary, ctx: Context) -> None:
    ctx.out.print(trace_header(summary))


def _overview(summary: Summary, ctx: Context) -> None:
    overview_tables(summary, ctx.top, ctx.out, ctx.subject.agreement)


def _definitions(summary: Summary, ctx: Context) -> None:
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


def _categories(summary: Summary, ctx: Context) -> None:
    if len(summary.kernels.table):  # none in a CPU-only trace: its note says so
        ctx.out.print(categories_table(summary))


def _kernels(summary: Summary, ctx: Context) -> None:
    if len(summary.kernels.table):
        ctx.out.print(kernels_table(summary, ctx.top))
        ctx.out.print(launch_table(summary, ctx.top))


def _operators(summary: Summary, ctx: Context) -> None:
    ctx.out.print(operators_table(summary, ctx.top))


def _phases(phases: PhaseSummary, ctx: Context) -> None:
    ctx.out.print(phases_table(phases))
    ctx.out.print(positions_table(phases, top=ctx.top))
    if phases.kernels:
        ctx.out.print(phase_categories_table(phases))
        for phase in phases.kernels:
            ctx.out.print(phase_kernels_table(phases, phase, ctx.top))


def _phase_rooflines(rooflines: list, ctx: Context) -> None:
    if rooflines:
        ctx.out.print(phase_roofline_table(rooflines))


def _phase_rooflines_page(rooflines: list, ctx: Context) -> list[html.Section]:
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


def _notes(notes: list[str], ctx: Context) -> None:
    for note in notes:
        print_prose(ctx.out, f"[yellow]note:[/yellow] {safe(note)}")


def _pipe_busy(summary: Summary, ctx: Context) -> None:
    """How to read the tensor pipe, where Tensor Core kernel time shows and ncu did not."""
    a = ctx.subject.agreement
    if summary.kernels.total_kernel_us and not (a is not None and a.pipe_measured_us):
        print_prose(ctx.out, f"[yellow]note:[/yellow] {PIPE_BUSY_NOTE}")


def _hardware(joined: pd.DataFrame, ctx: Context) -> None:
    print_hardware(joined, ctx.subject.agreement, ctx.top, ctx.out)


def _insight(found: Insight, ctx: Context) -> None:
    print_insight(found, ctx.out, ctx.label)


def _layers(attributions: list, ctx: Context) -> None:
    print_layers(attributions, ctx.top, ctx.out)


def _recorded_insight(run) -> Insight | None:
    """A run's roofline and advice; None for a bare trace (no timed window)."""
    return run.insight if run.result_json is not None else None


# ---- a run: HTML renderers --------------------------------------------------------------


def _result_page(result: RunResult | None, ctx: Context) -> list[html.Section]:
    body = html.headline(result, ctx.label, ctx.subject.result_json)
    return [html.Section(f"{ctx.label}: headline", body)]


def _insight_page(found: Insight, ctx: Context) -> list[html.Section]:
    roofline = html.roofline_block(found.roofline, found.ceilings_source, found.roofline_missing)
    return [
        html.Section(f"{ctx.label}: roofline", roofline),
        html.Section(f"{ctx.label}: advice", html.advice_block(found.advice)),
    ]


def _categories_page(summary: Summary, ctx: Context) -> list[html.Section]:
    if not summary.overview.has_gpu:
        return []
    body = pages.run_categories(summary, ctx.name or ctx.label, ctx.subject.agreement)
    return [html.Section(f"{ctx.label}: kernel time by category", body)]


def _kernels_page(summary: Summary, ctx: Context) -> list[html.Section]:
    if not summary.overview.has_gpu:
        return []
    return [html.Section(f"{ctx.label}: top kernels", pages.top_kernels(summary))]


def _operators_page(summary: Summary, ctx: Context) -> list[html.Section]:
    if summary.overview.has_gpu:  # a GPU run's operators are in its kernels' table
        return []
    title = f"{ctx.label}: CPU operators by self CPU time"
    return [html.Section(title, pages.cpu_operators(summary))]


def _gemms(run) -> pd.DataFrame | None:
    """The GEMMs by recorded shape of a run recorded with --record-shapes."""
    # ConfigRecord is built from RunConfig's fields when imported: no attribute a checker sees
    if run.result is None or not getattr(run.result.config, "record_shapes", False):
        return None
    return run.gemms()


def _gemms_page(frame: pd.DataFrame, ctx: Context) -> list[html.Section]:
    title = f"{ctx.label}: GEMMs by recorded shape (--record-shapes)"
    return [html.Section(title, pages.gemms(frame, ctx.subject.summary.overview.has_gpu))]


def _layer_times_page(frame: pd.DataFrame, ctx: Context) -> list[html.Section]:
    return _section(f"{ctx.label}: TensorRT layers (engine_layer_times)", html.layer_view(frame))


def _roofline_page(roofline: Roofline, ctx: Context) -> list[html.Section]:
    return _section("Roofline chart", html.roofline_chart([(ctx.label, roofline)]))


# ---- a comparison -------------------------------------------------------------------------


def _names(both) -> tuple[str, str]:
    """A comparison's runs as its page names them."""
    return pages.target_label(both.a_label), pages.target_label(both.b_label)


def _timed(t: CompareTimed, ctx: Context) -> None:
    print_timed_headline(t, ctx.out)


def _timed_page(t: CompareTimed | None, ctx: Context) -> list[html.Section]:
    both = ctx.subject
    verdicts = "the latency verdict" if both.diff.on_cpu else "the verdicts on latency and GPU time"
    title = f"Timed windows (no profiler attached): {verdicts}, the recorded runs, noise and config"
    return [html.Section(title, html.timed_block(t, *_names(both)))]


def _explanation_of(both) -> Explanation | None:
    """Why B differs at the kernel level (SM clock, kernels): nothing to say of two CPU runs."""
    return None if both.diff.on_cpu else both.explanation


def _explanation(e: Explanation, ctx: Context) -> None:
    print_explanation(e, ctx.out)


def _answer(t: CompareTimed, ctx: Context) -> None:
    print_answer(t, ctx.out)


def _why_line(e: Explanation, ctx: Context) -> None:
    print_explanation(e, ctx.out, states=False)


def _largest_changes(result: Diff, ctx: Context) -> None:
    table = largest_changes_table(result)
    if table is not None:
        ctx.out.print(table)
    print_prose(
        ctx.out,
        "[dim]more: --view timed (processes, recorded runs, config), --view diff (categories, "
        "kernels, operators), --view full or -v (all, with each run's advice)[/]",
    )


def _explanation_page(e: Explanation, ctx: Context) -> list[html.Section]:
    return _section("Why B differs from A", html.explanation_block(e))


def _diff(result: Diff, ctx: Context) -> None:
    both = ctx.subject
    print_diff(
        result,
        both.a.summary,
        both.b.summary,
        top=ctx.top,
        console=ctx.out,
        recorded=both.windows is None,
    )


def _diff_page(result: Diff, ctx: Context) -> list[html.Section]:
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


def _rooflines_page(rooflines: tuple, ctx: Context) -> list[html.Section]:
    return _section(
        "Roofline chart", html.roofline_chart(list(zip(_names(ctx.subject), rooflines)))
    )


def _sides(sides: tuple, ctx: Context) -> None:
    """Each run's own sections (its recorded window's, beside fresh processes)."""
    recorded = ctx.subject.windows is None
    for label, side in zip("AB", sides):
        shown = label if recorded else f"{label}, recorded run"
        print_sections(COMPARE_SIDE, dataclasses.replace(ctx, subject=side, label=shown))


def _sides_page(sides: tuple, ctx: Context) -> list[html.Section]:
    found = []
    for label, side, name in zip("AB", sides, _names(ctx.subject)):
        found += page_sections(RUN_SIDE, Context(side, label=label, name=name))
    return found


# ---- a sweep ------------------------------------------------------------------------------


def _benchmark_page(frame: pd.DataFrame, ctx: Context) -> list[html.Section]:
    body = pages.benchmark(frame, ctx.subject.manifest, ctx.only_decided)
    return [html.Section("Benchmark", body)]


def _geomeans_page(frame: pd.DataFrame, ctx: Context) -> list[html.Section]:
    return _section("Geometric mean over batch sizes", pages.geomeans(frame))


def _figures_page(frame: pd.DataFrame, ctx: Context) -> list[html.Section]:
    return [
        html.Section(
            "Latency, speedup, throughput and kernel categories (the figures of `plot`)",
            pages.sweep_figures(frame, ctx.subject.manifest),
        )
    ]


def _cells_page(finished: list, ctx: Context) -> list[html.Section]:
    points, rows = pages.cell_insights(finished)
    table = html.table(pd.DataFrame(rows)) if rows else None
    return _section("Roofline and advice per cell", table) + _section(
        "Roofline chart", html.roofline_chart(points)
    )


# ---- the registry ---------------------------------------------------------------------------

HEADLINE = ReportSection("headline", Headline, "RunAnalysis.headline", terminal=_headline)
RESULT = ReportSection(
    "result", RunResult, "RunAnalysis.result", html=_result_page, says_absent=True
)
TRACE = ReportSection("trace", Summary, "RunAnalysis.summary", terminal=_trace)
OVERVIEW = ReportSection("overview", Summary, "RunAnalysis.summary", terminal=_overview)
DEFINITIONS = ReportSection("definitions", Summary, "RunAnalysis.summary", terminal=_definitions)
CATEGORIES = ReportSection(
    "categories", Summary, "RunAnalysis.summary", terminal=_categories, html=_categories_page
)
KERNELS = ReportSection(
    "kernels", Summary, "RunAnalysis.summary", terminal=_kernels, html=_kernels_page
)
OPERATORS = ReportSection(
    "operators", Summary, "RunAnalysis.summary", terminal=_operators, html=_operators_page
)
PHASES = ReportSection("phases", PhaseSummary, "RunAnalysis.summary.phases", terminal=_phases)
PHASE_ROOFLINES = ReportSection(
    "phase rooflines",
    list,
    "RunAnalysis.phase_rooflines",
    terminal=_phase_rooflines,
    html=_phase_rooflines_page,
)
TRACE_NOTES = ReportSection("trace notes", list, "RunAnalysis.summary.notes", terminal=_notes)
PIPE_BUSY = ReportSection("tensor pipe", Summary, "RunAnalysis.summary", terminal=_pipe_busy)
HARDWARE = ReportSection("hardware", pd.DataFrame, "RunAnalysis.hardware", terminal=_hardware)
INSIGHT = ReportSection(
    "insight", Insight, "RunAnalysis.insight", terminal=_insight, read=_recorded_insight
)
ROOFLINE_ADVICE = ReportSection(
    "roofline and advice", Insight, "RunAnalysis.insight", html=_insight_page
)
GEMMS = ReportSection("gemms", pd.DataFrame, "RunAnalysis.gemms", html=_gemms_page, read=_gemms)
LAYER_TIMES = ReportSection(
    "layer times", pd.DataFrame, "RunAnalysis.layer_times", html=_layer_times_page
)
LAYERS = ReportSection("layers", list, "RunAnalysis.layers", terminal=_layers)
ROOFLINE = ReportSection("roofline chart", Roofline, "RunAnalysis.roofline", html=_roofline_page)

TIMED = ReportSection(
    "timed",
    CompareTimed,
    "Comparison.timed",
    terminal=_timed,
    html=_timed_page,
    says_absent=True,
)
EXPLANATION = ReportSection(
    "explanation",
    Explanation,
    "Comparison.explanation",
    terminal=_explanation,
    html=_explanation_page,
    read=_explanation_of,
)
DIFF = ReportSection("diff", Diff, "Comparison.diff", terminal=_diff, html=_diff_page)
ANSWER = ReportSection("answer", CompareTimed, "Comparison.timed", terminal=_answer)
WHY_LINE = ReportSection(
    "why line", Explanation, "Comparison.explanation", terminal=_why_line, read=_explanation_of
)
LARGEST_CHANGES = ReportSection(
    "largest changes", Diff, "Comparison.diff", terminal=_largest_changes
)
ROOFLINES = ReportSection(
    "rooflines",
    tuple,
    "Comparison.a.roofline",
    html=_rooflines_page,
    read=lambda both: (both.a.roofline, both.b.roofline),
)
SIDES = ReportSection(
    "sides",
    tuple,
    "Comparison.a",
    terminal=_sides,
    html=_sides_page,
    read=lambda both: (both.a, both.b),
)

BENCHMARK = ReportSection(
    "benchmark", pd.DataFrame, "SweepAnalysis.benchmark", html=_benchmark_page
)
GEOMEANS = ReportSection(
    "geometric means", pd.DataFrame, "SweepAnalysis.benchmark", html=_geomeans_page
)
FIGURES = ReportSection("figures", pd.DataFrame, "SweepAnalysis.benchmark", html=_figures_page)
CELLS = ReportSection(
    "cells", list, "SweepAnalysis.finished", html=_cells_page, read=lambda s: s.finished()
)

#: every row
REGISTRY = (
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
    ROOFLINE,
    TIMED,
    EXPLANATION,
    DIFF,
    ANSWER,
    WHY_LINE,
    LARGEST_CHANGES,
    ROOFLINES,
    SIDES,
    BENCHMARK,
    GEOMEANS,
    FIGURES,
    CELLS,
)

# ---- the lists --------------------------------------------------------------------------------

#: `summarize`'s sections with the --view choices that show each (its VIEWS); the breakdown's
#: definitions only when asked for
RUN_VIEWS = ("all", "overview", "kernels", "categories", "operators", "phases", "definitions")
SUMMARIZE: tuple[tuple[ReportSection, tuple[str, ...]], ...] = (
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
)
#: `compare --view full`: the timed windows, why B differs, the diff, then each run's own
#: (COMPARE_SIDE)
COMPARE = (TIMED, EXPLANATION, DIFF, SIDES)
#: `compare`'s views: the answer on one screen (the verdicts, why, the largest changes) by
#: default, the rest behind --view
COMPARE_VIEWS: dict[str, tuple[ReportSection, ...]] = {
    "answer": (ANSWER, WHY_LINE, LARGEST_CHANGES),
    "timed": (TIMED,),
    "diff": (EXPLANATION, DIFF),
    "full": COMPARE,
}
COMPARE_SIDE = (INSIGHT,)
#: a run's sections on a page (its own, or as A or B of a comparison's)
RUN_SIDE = (RESULT, ROOFLINE_ADVICE, CATEGORIES, KERNELS, OPERATORS, GEMMS, LAYER_TIMES)
RUN_PAGE = (*RUN_SIDE, PHASE_ROOFLINES, ROOFLINE)
COMPARE_PAGE = (TIMED, EXPLANATION, DIFF, ROOFLINES, SIDES)
SWEEP_PAGE = (BENCHMARK, GEOMEANS, FIGURES, CELLS)


def summarize_rows(view: str) -> tuple[ReportSection, ...]:
    """The rows `summarize --view VIEW` prints, in order."""
    return tuple(row for row, views in SUMMARIZE if view in views)

"""The registry of report sections (profiler/report/sections.py): every row is complete (a
renderer for each medium its lists use, a facade it reads), every row is in a list of rows of
one facade, `summarize`, `compare` and `report` walk the registry's lists, and each figure a row
reads from the committed fixtures is of the type the row declares (mypy holds the rest: the
module is strict, so a reader that returns another type, or reads a property the facade lacks,
fails `mypy`)."""

import json

import pandas as pd
import pytest

from profiler.analysis.rank_run import RankComparison, RankRun
from profiler.analysis.result_analysis import ResultAnalysis
from profiler.analysis.run_analysis import Comparison, RunAnalysis
from profiler.analysis.sweep_analysis import SweepAnalysis
from profiler.commands.summarize import VIEWS
from profiler.report import sections
from profiler.runs.result import read_result
from tests.conftest import FIXTURES

H200 = FIXTURES / "h200" / "runs"
GENERATE = FIXTURES / "h100_generate" / "runs"
SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"
GENERATION = FIXTURES / "llm_h200" / "runs" / "pytorch_fp16_bs1_cg_bs1"
FLOPS = FIXTURES / "roofline" / "resnet50_roofline_inputs.json"
TERMINAL_LISTS = {
    "summarize": tuple(row for row, _ in sections.SUMMARIZE),
    **{f"compare --view {view}": rows for view, rows in sections.COMPARE_VIEWS.items()},
    "compare side": sections.COMPARE_SIDE,
    "sweep": sections.SWEEP,
    "run": sections.RUN,
    "summarize ranks": sections.SUMMARIZE_RANKS,
    "compare ranks": sections.COMPARE_RANKS,
}
PAGE_LISTS = {
    "run page": sections.RUN_PAGE,
    "run side": sections.RUN_SIDE,
    "compare page": sections.COMPARE_PAGE,
    "sweep page": sections.SWEEP_PAGE,
    "ranks page": sections.RANKS_PAGE,
    "compare ranks page": sections.COMPARE_RANKS_PAGE,
}


def test_every_row_has_a_renderer_for_each_medium_its_lists_use():
    for name, rows in TERMINAL_LISTS.items():
        assert all(row.terminal is not None for row in rows), name
    for name, rows in PAGE_LISTS.items():
        assert all(row.html is not None for row in rows), name


def test_every_row_reads_a_facade_and_is_in_a_list_of_that_facades_rows():
    lists = {**TERMINAL_LISTS, **PAGE_LISTS}
    listed = {row.name for rows in lists.values() for row in rows}
    names = [row.name for row in sections.REGISTRY]
    assert len(names) == len(set(names)) and set(names) == listed
    for row in sections.REGISTRY:
        assert row.subject in (
            RunAnalysis,
            Comparison,
            SweepAnalysis,
            RankRun,
            RankComparison,
            ResultAnalysis,
        ), row.name
        assert row.terminal is not None or row.html is not None, row.name
    for name, rows in lists.items():  # a walk reads every row from one subject
        assert len({row.subject for row in rows}) == 1, name


def test_summarize_views_are_the_registrys():
    shown = {view for _, views in sections.SUMMARIZE for view in views}
    assert shown == set(VIEWS)
    assert all(sections.summarize_rows(view) for view in VIEWS)


@pytest.fixture
def walked(monkeypatch):
    """The lists print_sections and page_sections are given, in order."""
    found = []
    real_print, real_page = sections.print_sections, sections.page_sections

    def print_spy(rows, ctx):
        found.append(tuple(rows))
        return real_print(rows, ctx)

    def page_spy(rows, ctx):
        found.append(tuple(rows))
        return real_page(rows, ctx)

    monkeypatch.setattr(sections, "print_sections", print_spy)
    monkeypatch.setattr(sections, "page_sections", page_spy)
    monkeypatch.setattr("profiler.commands.compare.print_sections", print_spy)
    monkeypatch.setattr("profiler.report.run_view.print_sections", print_spy)
    return found


# (a snapshot is a run's of --memory-history: tests/test_memory_snapshot.py walks its rows)
# (memory: a run's of --profile-memory, tests/test_memory_view.py walks its rows)
# (modules: a trace's recorded --with-stack, tests/test_modules_view.py walks its rows)
@pytest.mark.parametrize(
    "view", [v for v in VIEWS if v not in ("layers", "phases", "snapshot", "memory", "modules")]
)
def test_summarize_walks_the_views_rows(cli, walked, view):
    done = cli("summarize", str(H200 / "pytorch_fp16_bs8"), "--view", view)
    assert done.code == 0, done.stderr
    assert walked == [sections.summarize_rows(view)]


def test_summarize_layers_and_phases_walk_their_rows(cli, walked):
    layers = cli("summarize", str(H200 / "ttrt_fp16_bs8"), "--view", "layers")
    phases = cli("summarize", str(GENERATE / "inductor_fp16_bs1_fixture"), "--view", "phases")
    assert layers.code == 0 and phases.code == 0, (layers.stderr, phases.stderr)
    assert walked == [sections.summarize_rows("layers"), sections.summarize_rows("phases")]
    assert layers.stdout.startswith("TensorRT engine 0") and "Timed window" not in layers.stdout
    assert "Phases" in phases.stdout and "Overview" not in phases.stdout


def test_compare_walks_its_list_then_each_sides(cli, walked):
    done = cli("compare", str(H200 / "pytorch_fp16_bs8"), str(H200 / "ttrt_fp16_bs8"), "-v")
    assert done.code == 0, done.stderr
    assert walked == [sections.COMPARE, sections.COMPARE_SIDE, sections.COMPARE_SIDE]
    assert "A: Roofline" in done.stdout and "B: Roofline" in done.stdout


@pytest.mark.parametrize("view", ["answer", "timed", "diff", "full"])
def test_compare_walks_the_views_rows(cli, walked, view):
    done = cli(
        "compare", str(H200 / "pytorch_fp16_bs8"), str(H200 / "ttrt_fp16_bs8"), "--view", view
    )
    assert done.code == 0, done.stderr
    assert walked[0] == sections.COMPARE_VIEWS[view]


def test_report_pages_walk_their_lists(tmp_path, walked):
    from profiler.commands.report import run

    none = tmp_path / "no-peaks"
    run(str(H200 / "pytorch_fp16_bs8"), None, tmp_path / "one.html", peaks_dir=none)
    assert walked == [sections.RUN_PAGE]
    walked.clear()
    a, b = str(H200 / "pytorch_fp16_bs8"), str(H200 / "ttrt_fp16_bs8")
    run(a, b, tmp_path / "two.html", peaks_dir=none)
    assert walked == [sections.COMPARE_PAGE, sections.RUN_SIDE, sections.RUN_SIDE]
    walked.clear()
    run(str(SWEEP), None, tmp_path / "sweep.html", peaks_dir=none)
    assert walked == [sections.SWEEP_PAGE]


def test_run_walks_its_rows(walked, capsys):
    """`run`'s ending (what it prints once the result is written) walks the RUN rows; -q leaves
    out the hints, --json prints the document instead."""
    from profiler.cli.output import Output
    from profiler.commands.run import show

    result = read_result(H200 / "ttrt_fp16_bs8")
    show(result, Output(verbosity=0))
    assert walked == [sections.RUN]
    out = capsys.readouterr().out
    assert out.index("ttrt_fp16") < out.index("iterations after") < out.index("next: ")
    show(result, Output(verbosity=-1))
    assert "next: " not in capsys.readouterr().out
    walked.clear()
    show(result, Output(json=True))
    assert walked == [] and json.loads(capsys.readouterr().out)["run_name"] == "ttrt_fp16_bs8"


@pytest.fixture(scope="module")
def subjects(tmp_path_factory):
    """The committed fixtures as each facade: two runs, their comparison, a sweep."""
    none, flops = tmp_path_factory.mktemp("no-peaks"), json.loads(FLOPS.read_text())
    runs = [
        RunAnalysis(H200 / name, peaks_dir=none, flops_table=flops)
        for name in ("pytorch_fp16_bs8", "ttrt_fp16_bs8")
    ]
    both = Comparison(*runs, "pytorch_fp16_bs8", "ttrt_fp16_bs8")
    results = [  # what `run` prints of a forward run and of a generation
        ResultAnalysis(read_result(path), result_json=path)
        for path in (H200 / "pytorch_fp16_bs8" / "result.json", GENERATION / "result.json")
    ]
    ranks = RankRun(str(FIXTURES / "hta_ranks"))
    return {
        RunAnalysis: runs,
        Comparison: [both],
        SweepAnalysis: [SweepAnalysis(SWEEP, peaks_dir=none)],
        ResultAnalysis: results,
        RankRun: [ranks],
        RankComparison: [RankComparison(ranks, ranks)],
    }


def misread(rows, subjects) -> tuple[list[str], set[str]]:
    """(rows whose reader gives something other than the row's figure type, rows that read
    None from every subject)."""
    wrong, unread = [], set()
    for row in rows:
        figures = [row.read(subject) for subject in subjects[row.subject]]
        wrong += [
            f"{row.name}: {type(f).__name__}, not {row.figure.__name__}"
            for f in figures
            if f is not None and not isinstance(f, row.figure)
        ]
        if all(f is None for f in figures):
            unread.add(row.name)
    return wrong, unread


def test_each_figure_a_row_reads_is_of_its_declared_type(subjects):
    wrong, unread = misread(sections.REGISTRY, subjects)
    assert wrong == []
    # no generation phases, no ncu.csv, no --record-shapes, no --memory-history, no
    # --profile-memory in these runs
    # (tests/test_memory_snapshot.py reads the memory snapshot's row of runs recorded with it)
    assert unread == {"phases", "hardware", "gemms", "modules", "memory snapshot", "memory"}


def test_a_mistyped_reader_is_found(subjects):
    """A row whose reader returns another figure than it declares (what mypy names at the
    row; a figure mypy sees as Any, a DataFrame, only this check finds)."""
    from profiler.analysis.records import Headline

    rows = (
        sections.ReportSection("bad", RunAnalysis, Headline, lambda run: run.summary),
        sections.ReportSection("frame", SweepAnalysis, pd.DataFrame, lambda s: s.rows),
    )
    wrong, _ = misread(rows, subjects)
    assert wrong == [
        "bad: Summary, not Headline",
        "bad: Summary, not Headline",
        "frame: list, not DataFrame",
    ]


def test_a_page_says_a_missing_timed_window_where_the_terminal_leaves_it_out(tmp_path):
    """A bare trace beside a run: no timed window, said on the page, absent on the terminal."""
    trace = next((FIXTURES / "h200" / "tb_logs" / "pytorch_fp16_bs8").glob("*.pt.trace.json*"))
    none = tmp_path / "no-peaks"
    both = Comparison(
        RunAnalysis(trace, peaks_dir=none),
        RunAnalysis(H200 / "ttrt_fp16_bs8", peaks_dir=none),
        str(trace),
        "ttrt_fp16_bs8",
    )
    assert sections.TIMED.read(both) is None
    (timed,) = sections.TIMED.sections(sections.Context(both))
    assert "no timed window" in timed.body
    from rich.console import Console

    console = Console(record=True, width=120)
    sections.print_sections((sections.TIMED,), sections.Context(both, console))
    assert console.export_text() == ""


def test_the_sweep_page_shows_each_backends_geometric_mean(tmp_path):
    """The geometric-mean rows `sweep` prints under its table, on the page under its own."""
    from profiler.analysis.benchmark import geomeans
    from profiler.commands.report import run
    from profiler.report.benchmark_view import geomean_columns, has_gpu_time

    text = run(str(SWEEP), None, tmp_path / "sweep.html", peaks_dir=tmp_path / "none").read_text()
    assert text.index("Benchmark</h2>") < text.index("Geometric mean over batch sizes</h2>")
    section = text.split("Geometric mean over batch sizes</h2>")[1].split("<h2")[0]
    rows = SweepAnalysis(SWEEP).rows
    columns = geomean_columns(rows, has_gpu_time(rows))
    shown = [[c.cell(g) for c in columns] for g in geomeans(rows)]
    assert [row[0] for row in shown] == ["pytorch_fp16", "ttrt_fp16"]
    for row in shown:
        assert (
            "<tr>"
            + "".join(f"<td{'' if i else ' class=text'}>{v}</td>" for i, v in enumerate(row))
            + "</tr>"
            in section
        )

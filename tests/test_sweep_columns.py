"""A sweep's table is drawn from its typed rows (list[BenchmarkCell]) through column specs
(profiler/report/columns.py): each column names its quantity's formatter and the noise its
figures follow; the terminal, benchmark.md, benchmark.csv and the HTML page read the same
records."""

import csv
import io

from rich.console import Console

from profiler.analysis.records import BenchmarkCell
from profiler.report.benchmark_view import csv_columns, csv_text, markdown, print_benchmark
from profiler.report.columns import Column
from profiler.runs.manifest import SweepCell, SweepManifest
from profiler.units import number

MANIFEST = SweepManifest(
    options={},
    model="resnet50",
    baseline="pytorch_fp32",
    backends=["pytorch_fp32", "ttrt_fp16", "ttrt_fp32"],
    batch_sizes=[8],
    cells={
        "pytorch_fp32_bs8": SweepCell(backend="pytorch_fp32", batch_size=8, status="ok"),
        "ttrt_fp16_bs8": SweepCell(backend="ttrt_fp16", batch_size=8, status="ok"),
        "ttrt_fp32_bs8": SweepCell(backend="ttrt_fp32", batch_size=8, status="failed"),
    },
)


def _cell(backend: str, **figures: object) -> BenchmarkCell:
    return BenchmarkCell(
        model="resnet50",
        device="NVIDIA H200" if figures else "",
        backend=backend,
        bs=8,
        baseline="pytorch_fp32",
        status="ok" if figures else "failed",
        reason="" if figures else "engine build failed",
        gpu="",
        node="",
        **figures,
    )


ROWS = [
    _cell("pytorch_fp32", mean_ms=4.8865, p50_ms=4.88776, p90_ms=5.07, p99_ms=5.19, cv_pct=0.05,
          speedup=1.0, verdict="baseline", processes=1, throughput_per_s=1637.16),
    _cell("ttrt_fp16", mean_ms=1.21924, p50_ms=1.21259, p90_ms=1.23, p99_ms=1.31, cv_pct=12.0,
          noise="noisy: CV 12.0 %", speedup=4.03084, processes=1, throughput_per_s=6561.46),
    _cell("ttrt_fp32"),
]  # fmt: skip


def test_each_latency_is_printed_to_the_figures_its_own_cells_noise_allows():
    console = Console(width=400, record=True)
    print_benchmark(ROWS, MANIFEST, console)
    text = console.export_text()
    assert "4.888" in text  # CV 0.05 %: four figures
    assert "1.2 (! noisy)" in text and "1.213" not in text  # CV 12 %: two, flagged
    assert "6,561.5" in text and "engine build failed" not in text
    md = markdown(ROWS, MANIFEST)
    line = next(ln for ln in md.splitlines() if ln.startswith("| ttrt_fp16 |"))
    assert "| 1.2 (! noisy) |" in line and "| 6561.5 |" in line
    assert "- `ttrt_fp32` bs 8: failed: engine build failed" in md


def test_benchmark_csv_is_every_field_of_the_records_at_full_precision():
    found = list(csv.reader(io.StringIO(csv_text(ROWS, MANIFEST))))
    assert found[0] == csv_columns(MANIFEST) and len(found) == 4
    cells = [dict(zip(found[0], row)) for row in found[1:]]
    assert cells[1]["p50_ms"] == "1.21259" and cells[1]["bs"] == "8"
    assert cells[0]["speedup"] == "1" and cells[1]["processes"] == "1"
    assert cells[2]["p50_ms"] == "" and cells[2]["reason"] == "engine build failed"
    assert "verdicts" not in found[0] and "verdict_note" in found[0]


def test_a_column_spec_spells_its_quantity_to_the_noise_it_reads():
    p50 = Column(
        "p50 ms",
        lambda r: r.p50_ms,
        lambda value, noise: number(value, None, noise=noise),
        noise=lambda r: None if r.cv_pct is None else r.cv_pct / 100,
    )
    assert [p50.cell(r) for r in ROWS] == ["4.888", "1.2", "-"]


def test_the_sweep_page_warns_of_noisy_cells_only_not_of_a_cell_that_did_not_finish():
    from profiler.report.pages import sweep_headline

    page = sweep_headline(ROWS, MANIFEST)
    assert "ttrt_fp16 bs 8: noisy: CV 12.0 %" in page
    assert "nan" not in page and "ttrt_fp32 bs 8:" not in page


def test_the_sweep_page_shows_the_terminals_columns_and_cells(tmp_path):
    """The page's sweep table is the terminal's (sweep_columns): the same headers, in order,
    and each row the terminal's cells with their colours dropped, so the two cannot drift."""
    from rich.text import Text

    from profiler.analysis.sweep_analysis import SweepAnalysis
    from profiler.commands import report
    from profiler.report.benchmark_view import has_gpu_time, sweep_columns
    from profiler.report.columns import cells

    from .conftest import FIXTURES
    from .test_report_html import sweep_grid_table

    folder = FIXTURES / "h100x4_sweep" / "runs" / "g4"
    sweep = SweepAnalysis(folder)
    columns = sweep_columns(sweep.rows, sweep.manifest, has_gpu_time(sweep.rows))
    terminal = [[Text.from_markup(c).plain for c in row] for row in cells(columns, sweep.rows)]
    page = report.run(str(folder), None, tmp_path / "s.html", peaks_dir=tmp_path / "none")
    grid = sweep_grid_table(page.read_text())
    assert grid["head"] == [c.header for c in columns]
    assert grid["rows"] == terminal and len(terminal) == len(sweep.rows)
    # the verdicts' colours are markup on the terminal, words on the page
    assert not any("[green]" in cell or "[/]" in cell for row in grid["rows"] for cell in row)
    assert any(cell.endswith("] faster") for row in grid["rows"] for cell in row)


def test_the_sweep_pages_cells_are_text_escaped_and_aligned():
    from profiler.report import html
    from profiler.report.pages import benchmark, sweep_table

    from .test_report_html import tables_of

    table = sweep_table(ROWS, MANIFEST)
    grid = tables_of(table)[0]
    rows = {row[0]: dict(zip(grid["head"], row)) for row in grid["rows"]}
    assert rows["ttrt_fp32"]["status"] == "failed"  # red on the terminal
    # why it failed: under the table, as benchmark.md says it
    assert "ttrt_fp32 bs 8: failed: engine build failed" in benchmark(ROWS, MANIFEST)
    assert rows["ttrt_fp16"]["p50 ms"] == "1.2 (! noisy)"
    # a column of numbers is aligned right; one of words is marked text
    first = table.split("<tr>")[2]
    aligned = dict(zip(grid["head"], ("class=text" in td for td in first.split("<td")[1:])))
    assert aligned["backend"] and aligned["status"]
    assert not aligned["p50 ms"] and not aligned["samples/s"] and not aligned["bs"]
    written = html.text_table(["name", "ms"], [["<a & b>", "-"], ["x" * 500, "1.5"]])
    assert "&lt;a &amp; b&gt;" in written and "<a & b>" not in written
    assert "<td>1.5</td>" in written and "<td class=text>-</td>" not in written
    assert "x" * html.CELL_CHARS + "…" in written and "x" * (html.CELL_CHARS + 1) not in written
    assert html.text_table(["name"], []) == html.note("(none)")

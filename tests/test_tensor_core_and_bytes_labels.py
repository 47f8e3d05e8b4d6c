"""Issue 32, points 2 and 4: every label claims no more than its number.

- The trace's Tensor Core figure is the time in kernels that use Tensor Cores at all: it is
  labelled "time in Tensor Core kernels" everywhere; ncu's tensor-pipe busy share sits beside it
  when an ncu CSV was joined, else one note per view says how to get it.
- The roofline counts the minimum bytes (weights + inputs + outputs): the bandwidth figures are
  lower bounds ("at least", "≥"), and the chart says which bytes it plotted. No committed ncu CSV
  carries DRAM bytes, so no figure here is a measured traffic.
"""

import gzip
import json

import pytest

from .conftest import FIXTURES

H100 = FIXTURES / "h100_session" / "runs"
H200 = FIXTURES / "h200" / "runs"
NCU = FIXTURES / "h200_ncu" / "runs"
SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"
HOW = "`profile.py ncu` with the run's options"
HOW_HTML = "`profile.py ncu` with the run"  # the apostrophe is escaped in HTML
MIN_BYTES = "minimum bytes (weights + inputs + outputs)"


def flat(text: str) -> str:
    """Terminal output with rich's wrapping undone."""
    return " ".join(text.split())


def test_summarize_with_ncu_puts_tensor_pipe_busy_beside_the_time_in_tc_kernels(cli):
    from profiler.analysis.run_analysis import RunAnalysis

    a = RunAnalysis(str(NCU / "ttrt_fp16_bs8")).agreement
    out = flat(cli("summarize", str(NCU / "ttrt_fp16_bs8"), "--view", "overview").stdout)
    busy = f"tensor pipe busy (ncu) │ {100 * a.tensor_pipe_busy_share:.1f} %"
    assert "time in Tensor Core kernels │" in out and busy in out
    assert f"over the {a.profiled_kernels} profiled kernels" in out
    assert HOW not in out  # measured here: no note on how to measure it
    assert "on Tensor Cores" not in out


def test_summarize_without_ncu_says_once_how_to_get_tensor_pipe_busy(cli):
    out = flat(cli("summarize", str(H200 / "pytorch_fp16_bs8")).stdout)
    assert "time in Tensor Core kernels │" in out and "TC-kernel time" in out
    assert "tensor pipe busy (ncu) │" not in out
    assert out.count(HOW) == 1


def test_compare_names_the_figure_and_notes_once(cli):
    from profiler.analysis.run_analysis import Comparison, RunAnalysis

    d = Comparison(
        RunAnalysis(str(H200 / "pytorch_fp16_bs8")),
        RunAnalysis(str(H200 / "ttrt_fp16_bs8")),
        "A",
        "B",
    ).diff
    metrics = list(d.overview["metric"])
    assert "time in Tensor Core kernels" in metrics
    assert "GEMM + conv time in Tensor Core kernels" in metrics
    assert not any("on Tensor Cores" in m for m in metrics)
    assert sum(HOW in n for n in d.notes) == 1
    out = flat(
        cli(
            "compare", str(H200 / "pytorch_fp16_bs8"), str(H200 / "ttrt_fp16_bs8"), "--view", "full"
        ).stdout
    )
    assert "time in Tensor Core kernels" in out and out.count(HOW) == 1


def test_summary_markdown_heads_the_figure_by_what_it_counts(tmp_path, cli):
    out = tmp_path / "out"
    assert cli("summarize", str(H100 / "ttrt_fp16_bs8"), "--out", str(out)).code == 0
    md = (out / "summary.md").read_text()
    assert "- time in Tensor Core kernels: 91.4 % of all kernel time" in md
    assert "| TC-kernel time % |" in md and md.count(HOW) == 1
    # the CSV keeps its field names (the JSON's): a rename would break readers
    assert "tensor_core_pct" in (out / "categories.csv").read_text().splitlines()[0]
    # the roofline line (this run has roofline_inputs) says which bytes, and "at least"
    assert f"MB {MIN_BYTES} per batch" in md and "at least" in md


def test_roofline_line_bounds_the_bandwidth(cli):
    from profiler.analysis.run_analysis import RunAnalysis

    r = RunAnalysis(str(H100 / "ttrt_fp16_bs8")).roofline
    out = flat(cli("summarize", str(H100 / "ttrt_fp16_bs8"), "--view", "overview").stdout)
    assert f"{r.min_bytes / 1e6:,.1f} MB {MIN_BYTES} per batch" in out
    assert (
        f"at least {r.achieved_gbs:,.1f} GB/s = at least {r.pct_of_bandwidth:.1f} % of bandwidth"
    ) in out
    assert "FLOP per minimum byte" in out


def test_html_report_labels_bytes_bandwidth_and_tc_kernel_time(tmp_path, cli):
    out = tmp_path / "r.html"
    assert cli("report", str(H100 / "ttrt_fp16_bs8"), "--out", str(out)).code == 0
    page = out.read_text()
    assert f"{MIN_BYTES} per batch" in page
    assert "at least" in page and "GB/s = at least" in page
    assert "TC-kernel time %" in page and "on Tensor Cores %" not in page
    assert page.count(HOW_HTML) == 1


def test_html_report_with_ncu_gives_tensor_pipe_busy(tmp_path, cli):
    out = tmp_path / "r.html"
    assert cli("report", str(NCU / "ttrt_fp16_bs8"), "--out", str(out)).code == 0
    page = out.read_text()
    assert "tensor pipe busy (ncu): 32.5 %" in page and HOW_HTML not in page


def test_roofline_chart_says_which_bytes():
    from profiler.analysis.roofline import chart_data, roofline_of
    from profiler.runs.result import read_result

    result = read_result(H100 / "ttrt_fp16_bs8" / "result.json")
    chart = chart_data([("ttrt", roofline_of(result, None))])
    from profiler.report.sentences import roofline_title

    assert MIN_BYTES in roofline_title(chart)
    pytest.importorskip("matplotlib")
    from profiler.report.plots import roofline_figure

    fig = roofline_figure([("ttrt", roofline_of(result, None))])
    assert MIN_BYTES in fig.axes[0].get_xlabel() and MIN_BYTES in fig.axes[0].get_title()
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_sweep_tables_label_tc_kernel_time_and_lower_bound_bandwidth():
    from rich.console import Console

    from profiler.analysis.benchmark import benchmark_rows
    from profiler.report.benchmark_view import markdown, print_benchmark
    from profiler.runs.manifest import read_manifest

    manifest = read_manifest(SWEEP)
    rows = benchmark_rows(SWEEP, manifest)
    md = markdown(rows, manifest)
    header = next(line for line in md.splitlines() if line.startswith("| backend"))
    assert "| TC-kernel time % |" in header and "| ≥ GB/s (minimum bytes) |" in header
    assert "| ≥ % of bandwidth |" in header and "tensor_core_pct" not in header
    assert "| gbs |" not in header and md.count(HOW) == 1
    console = Console(width=300, record=True)
    print_benchmark(rows, manifest, console)
    text = flat(console.export_text())
    assert "TC-kernel time" in text and "Tensor Cores" not in text.split("TC-kernel time:")[0]
    assert text.count(HOW) == 1


def test_no_committed_ncu_csv_carries_dram_bytes():
    """Why the bandwidth stays a lower bound here: the committed ncu CSVs hold no dram__bytes
    metric to measure the traffic with."""
    for csv in NCU.glob("*/ncu.csv.gz"):
        header = gzip.decompress(csv.read_bytes()).decode().splitlines()[0]
        assert "dram__bytes" not in header
    assert json.loads((NCU / "pytorch_fp16_bs8" / "ncu.json").read_text())["metrics_collected"]


def test_readme_quotes_the_two_figures_as_summarize_prints_them(cli, monkeypatch):
    """The README's H200 figures for the two Tensor Core readings (eager FP16, the fixture)."""
    from .conftest import ROOT

    monkeypatch.setenv("COLUMNS", "250")  # each row on one line
    out = flat(cli("summarize", str(NCU / "pytorch_fp16_bs8"), "--view", "overview").stdout)
    assert "time in Tensor Core kernels │ 41.1 %" in out
    assert "tensor pipe busy (ncu) │ 5.6 %" in out
    assert (
        "over the 11 profiled kernels (75.4 % of kernel time; time in Tensor Core kernels "
        "there: 26.4 %)" in out
    )
    readme = flat((ROOT / "docs" / "guide" / "tensor-core-figures.md").read_text())
    assert (
        "prints 41.1 % over all kernels and, over the 11 profiled kernels (75.4 % of kernel "
        "time), 26.4 % against 5.6 %"
    ) in readme
    log = (ROOT / "docs" / "gpu" / "h100" / "truth" / "1_ncu_pytorch_fp16.log").read_text()
    assert "time in Tensor Core kernels (name rules): 37.1 %" in log
    assert "tensor pipe busy (ncu, kernel-time weighted): 10.6 %" in log
    assert "37.1 % time in Tensor Core kernels against 10.6 % tensor pipe busy" in readme


def test_sweep_html_report_heads_both_figures_honestly(tmp_path, cli):
    out = tmp_path / "s.html"
    assert cli("report", str(SWEEP), "--out", str(out)).code == 0
    page = out.read_text()
    # the table's column as the terminal heads it, and the note under it naming that column
    assert "<th>TC-kernel time</th>" in page and "note: TC-kernel time: time in" in page
    assert "Tensor Cores" not in page.split("note: TC-kernel time:")[0]
    assert page.count(HOW_HTML) == 1
    assert "≥ GB/s (minimum bytes)" in page and "≥ % of bandwidth" in page
    assert "<th>GB/s</th>" not in page

"""`report` draws its figures with `plot`'s functions (profiler/report/plots.py): batch sizes
as plain ticks, a legend of every category, run names on the bars; the sweep page carries
`plot`'s speedup and category figures and its advice in words; a run's noise cell reads the
noise from its latency.csv when result.json predates it."""

import re

import pytest

from tests.conftest import FIXTURES

pytest.importorskip("matplotlib")

H200 = FIXTURES / "h200"
SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"


def _spy(monkeypatch, name):
    """Record every figure plots.<name> returns (the report must call it)."""
    from profiler.report import plots

    made, real = [], getattr(plots, name)

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(plots, name, spy)
    return made


def test_the_sweep_page_draws_plots_figures(tmp_path, monkeypatch):
    from profiler.commands.report import run

    made = _spy(monkeypatch, "sweep_figures")
    page = run(str(SWEEP), None, tmp_path / "sweep.html", peaks_dir=tmp_path / "none")
    assert len(made) == 1 and {"latency", "speedup", "throughput", "categories"} <= set(made[0])
    # batch sizes as plain numbers (never 10^0, 2x10^0), as `plot` draws them
    for name in ("latency", "throughput"):
        ticks = [t.get_text() for t in made[0][name].axes[0].get_xticklabels()]
        assert ticks and all(re.fullmatch(r"\d+", t) for t in ticks), ticks
    text = page.read_text()
    assert "the figures of `plot`" in text
    assert text.count("data:image/png;base64,") >= 4  # latency, speedup, throughput, categories


def test_the_category_figure_names_runs_and_every_category(tmp_path, monkeypatch):
    from profiler.commands.report import run

    made = _spy(monkeypatch, "category_figure")
    run(
        str(H200 / "runs" / "ttrt_fp16_bs8"),
        None,
        tmp_path / "one.html",
        peaks_dir=tmp_path / "none",
    )
    (fig,) = made
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["ttrt_fp16_bs8"]  # not "A"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    from profiler.trace.summary import summarize

    trace = next((H200 / "tb_logs" / "ttrt_fp16_bs8").rglob("*.pt.trace.json*"))
    categories = set(summarize(trace).kernels.categories["category"])
    assert set(legend) == categories and "other" in legend


def test_a_compare_reports_bars_carry_the_run_names(tmp_path, monkeypatch):
    from profiler.commands.report import run

    made = _spy(monkeypatch, "category_figure")
    run(
        str(H200 / "runs" / "pytorch_fp16_bs8"),
        str(H200 / "runs" / "ttrt_fp16_bs8"),
        tmp_path / "cmp.html",
        peaks_dir=tmp_path / "none",
    )
    labels = [[t.get_text() for t in fig.axes[0].get_yticklabels()] for fig in made]
    assert ["pytorch_fp16_bs8", "ttrt_fp16_bs8"] in labels
    assert ["pytorch_fp16_bs8"] in labels and ["A"] not in labels and ["B"] not in labels


def test_the_noise_cell_reads_latency_csv_when_result_json_predates_noise(tmp_path):
    """The committed H200 runs recorded no timing.noise: the headline's noise row was '-'
    beside the compare's CV 16.9 % of the same window."""
    from profiler.commands.report import run
    from profiler.runs.result import read_result

    assert read_result(H200 / "runs" / "pytorch_fp16_bs8").timing.noise is None
    page = run(
        str(H200 / "runs" / "pytorch_fp16_bs8"),
        str(H200 / "runs" / "ttrt_fp16_bs8"),
        tmp_path / "cmp.html",
        peaks_dir=tmp_path / "none",
    )
    text = page.read_text()
    assert "CV 16.9 %" in text
    assert "<th>noise (std / mean)</th><td>16.9 %</td>" in text
    assert "<th>noise (std / mean)</th><td>-</td>" not in text

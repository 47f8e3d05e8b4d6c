"""The four-cell CPU sweep of the round-5 report (`sweep --backends pytorch_fp32,torchscript_fp32
--bs 1,2 --model resnet18 --image-size 32`), recorded four times on the project's busy 2-core
machine with one process a cell (tests/fixtures/cpu_sweeps/README.md): the rule of the time
called three of its eight comparisons faster or slower from windows with CVs of 10-311 %, in
opposite directions (0.19x slower in one recording, 3.65x faster in another). On a CPU whose
floor `noise` has not measured, one process a side gives no faster/slower: every comparison is
undecided, and says why; `plot` draws each speedup with its interval and hatches the noisy
cells."""

from __future__ import annotations

import pandas as pd
import pytest
from rich.console import Console

from profiler.analysis.sweep_analysis import SweepAnalysis
from profiler.report.benchmark_view import print_benchmark
from profiler.report.sentences import WITHHELD_WORDS

from .conftest import FIXTURES

SWEEPS = FIXTURES / "cpu_sweeps" / "runs"
NAMES = ("cpu_sweep", "cpu_sweep2", "cpu_sweep3", "cpu_sweep4")


def test_the_rule_of_the_time_called_noise_faster_and_slower():
    """What the committed benchmark.csv files say (written when the sweeps ran): 3 of the 8
    comparisons decided, in both directions, every window flagged noisy."""
    tables = [pd.read_csv(SWEEPS / name / "benchmark.csv", keep_default_na=False) for name in NAMES]
    judged = pd.concat([t[t["verdict"] != "baseline"] for t in tables])
    assert len(judged) == 8 and set(judged["device"]) == {"CPU"}
    assert sorted(judged["verdict"]) == ["faster"] + ["slower"] * 2 + ["undecided"] * 5
    assert all("noisy" in flags for t in tables for flags in t["noise"])


@pytest.mark.parametrize("name", NAMES)
def test_one_process_a_side_on_a_cpu_without_its_floor_decides_nothing(name):
    sweep = SweepAnalysis(SWEEPS / name)  # the test's own cache: no floor kept for this CPU
    judged = [row for row in sweep.rows if row.verdict != "baseline"]
    assert len(judged) == 2
    for row in judged:
        assert row.verdict == "undecided" and row.verdicts is not None
        latency = row.verdicts.latency
        assert latency.design == "floor" and latency.floor_source == "default"
        assert latency.withheld == "cpu-one-process"
        assert row.gpu_verdict in (None, "")  # no GPU time on a CPU
    console = Console(record=True, width=200)
    print_benchmark(sweep.rows, sweep.manifest, console)
    text = console.export_text()
    assert f"note: {WITHHELD_WORDS}: torchscript_fp32 bs 1, torchscript_fp32 bs 2" in text
    assert "faster" not in text.replace("faster/slower", "") and "slower" not in text.replace(
        "faster/slower", ""
    )


def test_the_speedup_plot_draws_intervals_and_marks_the_noisy_cells():
    pytest.importorskip("matplotlib")
    from matplotlib.container import ErrorbarContainer

    from profiler.report.plots import NOISY_LABEL, speedup_figure

    sweep = SweepAnalysis(SWEEPS / "cpu_sweep4")
    frame = sweep.benchmark
    fig = speedup_figure(frame, "resnet18", "pytorch_fp32")
    try:
        ax = fig.axes[0]
        bars = [p for c in ax.containers if not isinstance(c, ErrorbarContainer) for p in c]
        assert len(bars) == 4 and all(bar.get_hatch() == "//" for bar in bars)  # all noisy
        errorbars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        segments = [s for c in errorbars for s in c.lines[2][0].get_segments()]
        cell = frame[(frame["backend"] == "torchscript_fp32") & (frame["bs"] == 2)].iloc[0]
        spans = {(round(s[0][1], 6), round(s[1][1], 6)) for s in segments}
        assert (round(cell["speedup_low"], 6), round(cell["speedup_high"], 6)) in spans
        words = [t.get_text() for t in ax.texts]
        assert any(w.startswith("3.65x undecided") and "! noisy" in w for w in words), words
        assert NOISY_LABEL in [t.get_text() for t in ax.get_legend().get_texts()]
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)

"""Latency figures printed to the significant figures their noise allows, flagged windows
marked inline, a sweep's geometric-mean rows and --only-decided (on the committed H100 x4 sweep
fixture)."""

import math

import msgspec
import pandas as pd
import pytest
from rich.console import Console

from profiler.analysis.benchmark import benchmark_rows, geomeans
from profiler.report import fmt
from profiler.report.benchmark_view import (
    interval_processes,
    markdown,
    print_benchmark,
    undecided_on_both,
)
from profiler.runs.manifest import read_manifest
from tests.conftest import ROOT

SWEEP = ROOT / "tests" / "fixtures" / "h100x4_sweep" / "runs" / "g4"


@pytest.mark.parametrize(
    "value, noise, text",
    [
        (7.231, 1.8, "7.2"),  # CV 180 %: two figures
        (7.231, 0.10, "7.2"),
        (7.231, 0.01, "7.23"),  # CV 1 %: three
        (7.231, 0.001, "7.231"),  # CV 0.1 %: four, the most
        (7.231, None, "7.231"),  # no noise known: four
        (1150.053, 0.01, "1,150"),  # never fewer than the whole digits, thousands separated
        (0.012345, 0.05, "0.012"),
        (float("nan"), 0.1, "-"),
    ],
)
def test_a_figure_is_trimmed_to_its_noise(value, noise, text):
    assert fmt.number(value, None, noise=noise) == text


def test_flags_are_marked_inline():
    flags = fmt.window_flags(["noisy: CV 180.0 %", "bimodal: two clusters", "other"])
    assert flags == ["noisy", "bimodal"]
    assert fmt.window_flags("noisy; drifting") == ["noisy", "drifting"]
    flagged = fmt.marked(fmt.time(7.231, decimals=None, noise=1.8), flags)
    assert flagged == "7.2 ms (! noisy, bimodal)"
    assert fmt.marked("7.2", []) == "7.2"


@pytest.fixture(scope="module")
def sweep():
    manifest = read_manifest(SWEEP)
    return benchmark_rows(SWEEP, manifest), manifest


def test_geometric_mean_rows_match_benchmark_csv(sweep):
    found, _ = sweep
    csv = pd.read_csv(SWEEP / "benchmark.csv")
    rows = {g.backend: g for g in geomeans(found)}
    for backend, cells in csv.groupby("backend"):
        for column in ("p50_ms", "gpu_compute_ms", "speedup", "gpu_speedup"):
            expected = math.exp(sum(math.log(v) for v in cells[column]) / len(cells))
            assert getattr(rows[backend], column) == pytest.approx(expected, rel=1e-5)
        assert rows[backend].cells == len(cells) == 4


def test_sweep_table_marks_noisy_cells_and_trims_them(sweep):
    rows, manifest = sweep
    console = Console(width=400, record=True)  # headers whole
    print_benchmark(rows, manifest, console)
    text = console.export_text()
    # pytorch_fp32 bs 1: p50 4.31841 ms, window CV 24.4 %, flagged noisy
    assert "4.3 (! noisy)" in text and "4.318" not in text
    assert "cells' timed windows are flagged" in text
    assert "geometric mean over batch sizes" in text and "2.24x" in text
    # every interval spans 6 processes a side: said once, in the header
    assert "latency speedup [95 %, 6 proc.] verdict" in text
    assert "faster, 6 proc." not in text
    # the GPU-time verdicts paired the 5 rounds (the cell's own window is in no round): their
    # speedups are the rounds', and the header says so rather than the 6 processes
    assert "GPU-time speedup [95 %, paired over 5 rounds] verdict" in text
    md = markdown(rows, manifest)
    assert "4.3 (! noisy)" in md and "## Geometric mean over batch sizes" in md
    assert "[95 %, 6 proc.]" in md and "[95 %, paired over 5 rounds]" in md


def test_interval_processes_per_cell_when_they_differ(sweep):
    rows, _ = sweep
    changed = list(rows)
    changed[4] = msgspec.structs.replace(changed[4], processes=3)  # pytorch_fp16 bs 1
    spans = interval_processes(changed)
    assert spans[0] == "" and spans[4] == "6+3 proc." and spans[5] == "6 proc."


def test_only_decided_hides_and_counts(sweep):
    rows, manifest = sweep
    assert not any(map(undecided_on_both, rows))  # the GPU-time verdicts decide every cell
    both = list(rows)
    for i in (4, 5):  # pytorch_fp16 bs 1 and 8
        both[i] = msgspec.structs.replace(both[i], gpu_verdict="undecided")
    assert list(map(undecided_on_both, both)) == [False] * 4 + [True] * 2 + [False] * 6
    console = Console(width=200, record=True)
    print_benchmark(both, manifest, console, only_decided=True)
    text = console.export_text()
    assert "--only-decided: 2 of 12 cells hidden (undecided on both figures)" in text
    assert "0.78x" not in text and "0.84x" not in text and "1.12x" in text


def test_only_decided_is_a_sweep_flag(cli):
    out = cli("sweep", "--help")
    assert "--only-decided" in out.stdout


def test_run_view_marks_a_noisy_window_and_trims_its_figures():
    from profiler.analysis.headline import headline_data
    from profiler.report.headline_view import print_headline
    from profiler.report.run_view import print_result
    from profiler.runs.result import read_result

    result = read_result(SWEEP / "pytorch_fp32_bs1")  # window CV 24.4 %, flagged noisy
    console = Console(width=200, record=True)
    print_result(result, console, hints=False)
    text = console.export_text()
    assert f"{result.timing.p50_ms:.1f} (! noisy)" in text
    row = next(line for line in text.splitlines() if "(! noisy)" in line)
    assert f"{result.timing.p50_ms:.3f}" not in row
    console = Console(width=200, record=True)
    print_headline(headline_data(result, None, None), console)
    assert f"{result.timing.p50_ms:.1f} ms (! noisy)" in console.export_text()


def test_compare_table_trims_each_side_by_its_noise():
    from types import SimpleNamespace

    from profiler.analysis.headline import FigureOverProcesses, ProcessFigures
    from profiler.report.compare_view import process_rows

    def side(cv):
        figure = FigureOverProcesses(geomean_ms=7.231, min_ms=6.1, max_ms=8.4, processes=6, cv=cv)
        return ProcessFigures(
            processes=6,
            pilot_processes=0,
            latency=figure,
            gpu_time=None,
            enqueue=None,
            bound=None,
            launch_bound_processes=0,
            classified_processes=0,
        )

    # A's processes spread 20 % (noisy: two figures, marked), B's 0.1 % (four figures)
    t = SimpleNamespace(
        processes_a=side(0.20),
        processes_b=side(0.001),
        noise_a=None,
        noise_b=None,
        verdict=None,
        gpu_speedup_x=None,
    )
    rows = {row[0]: row[1:3] for row in process_rows(t)}
    assert rows["latency (what a caller waits)"] == ("7.2 ms (! noisy)", "7.231 ms")
    assert rows["latency: min-max over processes"] == ("6.1-8.4 ms", "6.100-8.400 ms")


def test_compare_recorded_rows_and_overview_trim_each_side_by_its_window(
    tmp_path, cli, monkeypatch
):
    """A compare of the H200 fixtures (A's window CV 16.9 %, B's 2.4 %): each run's recorded
    p50/p90/p99 and the overview's timed p50 to the figures its window allows; the overview
    CSV carries the windows' CVs."""
    runs = ROOT / "tests" / "fixtures" / "h200" / "runs"
    monkeypatch.setenv("COLUMNS", "200")
    done = cli(
        "compare",
        str(runs / "pytorch_fp16_bs8"),
        str(runs / "ttrt_fp16_bs8"),
        "--out",
        str(tmp_path / "out"),
        "--view",
        "full",
    )
    assert done.code == 0, done.stderr
    lines = [" ".join(line.replace("│", " ").split()) for line in done.stdout.splitlines()]
    assert "p50 latency 5.8 ms 0.80 ms -86.2 %" in lines
    assert any(line.startswith("timed p50 latency (result.json) 5.8 ms 0.80 ms") for line in lines)
    overview = pd.read_csv(tmp_path / "out" / "overview.csv")
    row = overview[overview["metric"] == "timed p50 latency (result.json)"].iloc[0]
    assert row["cv_a"] == pytest.approx(0.169, abs=0.001)
    assert row["a"] == pytest.approx(5.7907, abs=1e-4)

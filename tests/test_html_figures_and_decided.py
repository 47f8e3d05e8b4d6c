"""The HTML pages print every latency to the significant figures its noise allows, a flagged
window marked inline (a run's headline, a sweep's table, advise --try's page), as the terminal
does; `report --only-decided` leaves a sweep page's undecided cells out of its table, as
`sweep --only-decided` does. Committed fixtures only; nothing is timed."""

import msgspec

from profiler.analysis.sweep_analysis import SweepAnalysis
from profiler.analysis.trial import baseline_row, trial_rows
from profiler.commands import report
from profiler.report.trial_view import trial_html
from profiler.runs.result import read_result

from .conftest import FIXTURES
from .test_advise_baseline_noise import trial
from .test_report_html import sweep_grid
from .test_two_verdict_views import TRIAL, _Plan

#: one window, CV 62.0 %, flagged noisy
NOISY_RUN = FIXTURES / "h100_ncu_fp16" / "runs" / "pytorch_fp16_bs8"
#: pytorch_fp16 bs 8: CV 57.8 % (noisy); ttrt_fp16 bs 1: CV 3.8 % (no flag)
SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"
#: twelve cells, every one decided on GPU time
SWEEP_X4 = FIXTURES / "h100x4_sweep" / "runs" / "g4"


def test_a_noisy_runs_page_trims_its_latencies_and_marks_the_window(tmp_path):
    timing = read_result(NOISY_RUN / "result.json").timing
    text = report.run(
        str(NOISY_RUN), None, tmp_path / "r.html", peaks_dir=tmp_path / "none"
    ).read_text()
    # CV 62 %: two significant figures, the window's flag beside p50
    assert f"p50 {timing.p50_ms:.1f} ms (! noisy)" in text
    # p90 and p99 with their intervals, as trimmed (p99 of 100 values: no upper end)
    assert f"{timing.p90_ms:.1f} ms [" in text and f"{timing.p99_ms:.0f} ms [" in text
    assert "-?]: p99 of 100 iterations" in text
    assert f"p50 {timing.p50_ms:.3f}" not in text


def test_a_sweep_page_trims_each_cell_by_its_own_noise(tmp_path):
    text = report.run(
        str(SWEEP), None, tmp_path / "s.html", peaks_dir=tmp_path / "none"
    ).read_text()
    rows = sweep_grid(text)
    cells = SweepAnalysis(SWEEP).benchmark.set_index(["backend", "bs"])
    noisy, quiet = cells.loc[("pytorch_fp16", 8)], cells.loc[("ttrt_fp16", 1)]
    assert rows[("pytorch_fp16", "8")]["p50 ms"] == f"{noisy['p50_ms']:.1f} (! noisy)"
    assert rows[("pytorch_fp16", "8")]["p90 ms"] == f"{noisy['p90_ms']:.0f}"  # 2 figures
    # CV 3.8 %: two figures too, and no mark
    assert rows[("ttrt_fp16", "1")]["p50 ms"] == f"{quiet['p50_ms']:.1f}"


def test_advise_try_page_trims_the_baseline_and_each_experiment():
    # CV 57.8 % and 16.9 %: two figures each
    data = msgspec.structs.replace(TRIAL, cells=trial("pytorch_fp16_bs8", "ttrt_fp16_bs8").cells)
    rows = trial_rows(data, SWEEP, {"launch-bound": 2.0})
    base = baseline_row(data, SWEEP)
    page = trial_html("runs/x", [], _Plan(), rows, base, data)
    assert f"<td>{base.p50_ms:.1f}</td>" in page
    assert f"<td>{rows[0].p50_ms:.1f}</td>" in page
    assert f"{base.p50_ms:.3f}" not in page and f"{rows[0].p50_ms:.3f}" not in page


def test_report_only_decided_hides_and_counts_a_sweeps_undecided_cells(tmp_path, monkeypatch):
    class TwoUndecided(SweepAnalysis):
        @property
        def rows(self):
            rows = list(super().rows)
            for i in (4, 5):  # pytorch_fp16 bs 1, 8
                rows[i] = msgspec.structs.replace(rows[i], gpu_verdict="undecided")
            return rows

    monkeypatch.setattr(report, "SweepAnalysis", TwoUndecided)
    whole = sweep_grid(
        report.run(
            str(SWEEP_X4), None, tmp_path / "a.html", peaks_dir=tmp_path / "none"
        ).read_text()
    )
    text = report.run(
        str(SWEEP_X4), None, tmp_path / "b.html", peaks_dir=tmp_path / "none", only_decided=True
    ).read_text()
    decided = sweep_grid(text)
    assert set(whole) - set(decided) == {("pytorch_fp16", "1"), ("pytorch_fp16", "8")}
    assert len(decided) == 10
    assert "--only-decided: 2 of 12 cells hidden (undecided on both figures)" in text


def test_only_decided_is_a_report_flag_for_sweep_folders_only(cli):
    assert "--only-decided" in cli("report", "--help").stdout
    done = cli("report", str(NOISY_RUN), "--only-decided")
    assert done.code == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --only-decided goes with a sweep folder")

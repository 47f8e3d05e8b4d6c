"""advise --try: a baseline whose verdicts would rest on one timed window flagged noisy, bimodal
or drifting is timed once more in a fresh process before any verdict, said in one line, and the
verdicts rest on both windows; a quiet baseline is not. The cells are committed runs copied in
by a stand-in executor, the fresh process a stand-in that returns a committed window: nothing
is timed."""

import shutil
from html import escape

from profiler.analysis.experiments import Experiment
from profiler.analysis.trial import baseline_row, trial_rows
from profiler.report.trial_view import judgement_text, print_trial, trial_html
from profiler.runs.config import RunConfig
from profiler.runs.result import read_result
from profiler.runs.samples import config_samples
from profiler.sweep import trial_cells
from profiler.sweep.cell import CellOutcome

from .conftest import FIXTURES
from .test_two_verdict_views import _Plan, one_line, rendered

SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"
#: one window, CV 57.8 % (! noisy)
NOISY = SWEEP / "pytorch_fp16_bs8"
#: one window, CV 8.9 %, no flag
QUIET = FIXTURES / "h100_session" / "runs" / "pytorch_fp32_bs8"
EXPERIMENT = SWEEP / "ttrt_fp16_bs8"
AGAIN = (
    "the baseline's one window is noisy (CV 57.8 %): timed once more in a fresh process; "
    "the verdicts rest on both windows"
)


def run(tmp_path, monkeypatch, baseline):
    """run_trial with the baseline and one experiment as committed runs; returns the trial,
    what it said and the fresh processes it asked for."""
    sources = iter([baseline, EXPERIMENT])

    class Copies:
        def __init__(self, settings):
            pass

        def run(self, jobs, on_start, on_done):
            for job in jobs:
                on_start(job, {})
                shutil.copytree(next(sources), tmp_path / "t" / job.name)
                on_done(job, CellOutcome(status="ok", reason=None, exit_code=0, elapsed_s=1.0))

    asked = []

    def one_round(cells, gpu=None, timeout_s=None, started=None):
        asked.append([key for key, _ in cells])
        path = baseline / "result.json"
        [window] = config_samples(read_result(path), path).windows  # its recorded window
        return {key: {"latencies_ms": list(window.latency_ms)} for key, _ in cells}

    monkeypatch.setattr(trial_cells.executors, "get", lambda name: Copies)
    monkeypatch.setattr(trial_cells.rounds, "run_round", one_round)
    said = []
    base = RunConfig(model="tests.tiny_models:conv_net", batch_size=8)
    tried = [Experiment("backend ttrt_fp16", {"backend": "ttrt_fp16"}, ("launch-bound",), "")]
    trial = trial_cells.run_trial(
        base, tried, tmp_path / "t", tmp_path / "tt", processes=1, say=said.append
    )
    return trial, said, asked


def test_a_noisy_baseline_gets_one_more_window_and_the_verdict_rests_on_both(tmp_path, monkeypatch):
    trial, said, asked = run(tmp_path, monkeypatch, NOISY)
    baseline = trial.cells[0].folder
    assert asked == [[baseline]]  # exactly one more window, of the baseline alone
    assert (
        said.count(
            "the baseline's one window is noisy (CV 57.8 %): timing it once more "
            "in a fresh process before any verdict"
        )
        == 1
    )
    assert trial.baseline_again == AGAIN
    data = trial.record()
    assert data.baseline_again == AGAIN
    assert trial.to_dict()["baseline_again"] == AGAIN  # trial.json
    assert (tmp_path / "t" / baseline / "processes.csv").is_file()
    assert baseline_row(data, tmp_path / "t").processes == 2
    [row] = trial_rows(data, tmp_path / "t", {"launch-bound": 2.0})
    assert row.interval_processes == [2, 1]  # both baseline windows against the experiment's
    assert row.judgement.processes == (2, 1) and row.judgement.unjudged is None
    assert "over 2 vs 1 processes" in judgement_text(row.judgement)
    assert row.verdict in ("faster", "slower", "same", "undecided")
    base = baseline_row(data, tmp_path / "t")
    text = one_line(rendered(lambda c: print_trial([row], base, data, _Plan(), c), 200))
    assert AGAIN in text
    assert escape(AGAIN) in trial_html("runs/x", [], _Plan(), [row], base, data)


def test_a_quiet_baseline_is_not_timed_again(tmp_path, monkeypatch):
    trial, said, asked = run(tmp_path, monkeypatch, QUIET)
    assert asked == [] and trial.baseline_again is None
    assert not any("once more" in line for line in said)
    assert not (tmp_path / "t" / trial.cells[0].folder / "processes.csv").exists()
    [row] = trial_rows(trial.record(), tmp_path / "t", {"launch-bound": 2.0})
    assert row.interval_processes == [1, 1]

"""`advise` shows the baseline's noise (its timed window's CV and flags, the CV between its
processes) in the terminal, the HTML page and `advise --try`; a one-window baseline flagged
noisy or bimodal gives no faster/slower verdict, only the measured speedup and why. Committed
runs only; nothing is timed."""

from pathlib import Path

import msgspec

from profiler.analysis.records import TrialRecord
from profiler.analysis.trial import BaselineNoise, baseline_noise, baseline_row, trial_rows
from profiler.report.trial_view import judgement_text, trial_html
from profiler.runs.result import read_result

from .conftest import FIXTURES
from .test_two_verdict_views import BASE, TRIAL, _Plan, _trial_rows, one_line, rendered

#: one window, CV 62.0 % (! noisy) as recorded in its result.json
NOISY_RUN = FIXTURES / "h100_ncu_fp16" / "runs" / "pytorch_fp16_bs8"
#: six processes (processes.csv)
PROCESSES_RUN = FIXTURES / "h100x4_sweep" / "runs" / "g4" / "pytorch_fp16_bs8"
NOISY_LINE = "timed window CV 62.0 % (! noisy); one process"


def noise_of(run: Path) -> BaselineNoise:
    return baseline_noise(read_result(run / "result.json"), run / "result.json")


def test_advise_prints_the_runs_noise(cli):
    done = cli("advise", str(NOISY_RUN))
    assert done.code == 0, done.stderr
    assert f"noise of the run: {NOISY_LINE}" in one_line(done.stdout)


def test_several_processes_show_the_cv_between_them():
    from profiler.report.advice_view import noise_line

    noise = noise_of(PROCESSES_RUN)
    assert noise.processes == 6 and noise.between_cv > 0
    assert "between its 6 processes CV " in noise_line(noise)


def test_advise_try_terminal_and_page_show_the_baselines_noise():
    from profiler.report.trial_view import print_trial

    base = msgspec.structs.replace(BASE, noise=noise_of(NOISY_RUN))
    text = one_line(rendered(lambda c: print_trial(_trial_rows(), base, TRIAL, _Plan(), c), 200))
    assert f"noise of the baseline: {NOISY_LINE}" in text
    page = trial_html("runs/x", [], _Plan(), _trial_rows(), base, TRIAL, noise_of(NOISY_RUN))
    assert f"noise of the baseline: {NOISY_LINE}" in page  # the baseline's section
    assert f"noise of the run: {NOISY_LINE}" in page  # above the advice


def trial(base: str, experiment: str) -> TrialRecord:
    """A trial.json of two cells: the baseline and one experiment, both finished."""
    cell = {
        "changes": {"backend": "ttrt_fp16"},
        "rules": ["launch-bound"],
        "status": "ok",
        "reason": None,
    }
    return msgspec.convert(
        {
            "folder": "runs/advise_x",
            "cells": [
                {**cell, "label": "baseline", "changes": {}, "rules": [], "folder": base},
                {**cell, "label": "backend ttrt_fp16", "folder": experiment},
            ],
        },
        TrialRecord,
    )


def test_a_noisy_one_window_baseline_gives_no_verdict_but_keeps_the_speedup():
    folder = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"  # its fp16 bs8: CV 57.8 %, noisy
    data = trial("pytorch_fp16_bs8", "ttrt_fp16_bs8")
    [row] = trial_rows(data, folder, {"launch-bound": 2.0})
    assert row.speedup > 1 and row.low is not None  # measured, kept
    assert row.verdict == "undecided"
    assert row.judgement.outcome == "unjudged"
    assert row.judgement.unjudged.flags == ["noisy"]
    words = judgement_text(row.judgement)
    assert (
        "the baseline's one window is noisy (CV 57.8 %): no verdict drawn from it; "
        "--processes 3 gives it fresh windows" in words
    )
    assert "faster" not in words and "slower" not in words
    assert baseline_row(data, folder).noise.processes == 1


def test_a_quiet_one_window_baseline_still_gets_its_verdict():
    folder = FIXTURES / "h100_session" / "runs"  # its fp32 bs8: CV 8.9 %, no flag
    [row] = trial_rows(trial("pytorch_fp32_bs8", "ttrt_fp16_bs8"), folder, {"launch-bound": 2.0})
    assert row.verdict == "faster" and row.judgement.unjudged is None
    assert "no verdict drawn" not in judgement_text(row.judgement)

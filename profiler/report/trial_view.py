"""`advise`'s terminal output: the advice and the experiments planned for it; with --try, the
ranked table of what each experiment measured against the re-run baseline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from profiler.analysis.advice import Advice
from profiler.analysis.experiments import Plan
from profiler.analysis.records import (
    BaselineNoise,
    BaselineRow,
    Judgement,
    ProjectionKind,
    TrialRecord,
    TrialRow,
    Unjudged,
    Word,
)
from profiler.report.advice_view import line as advice_line, noise_line
from profiler.report.benchmark_view import (
    GPU_TIME_COLUMN,
    LATENCY_COLUMN,
    VERDICT_COLOURS,
    fdr_words,
)
from profiler.report.compare_view import GEOMEAN
from profiler.report.console import FitTable, print_prose
from profiler.report.fmt import (
    interval,
    number,
    percent,
    plain,
    ratio,
    relative_error,
    time,
)
from profiler.report.sentences import note_lines

#: no experiment measured GPU time
NO_GPU_TIME = (
    "GPU time: not measured (a CPU, a generation, or a call that synchronizes "
    "inside): the verdicts are latency's only"
)


def projected_cell(value: float | None, kind: ProjectionKind | None) -> str:
    """A projection with what it is: "6.37x estimate", "20.8x bound", "-"."""
    if not value or value <= 1:
        return "-"
    return f"{ratio(value)} {'bound' if kind == 'bound' else 'estimate'}"


def _changes(changes: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in changes.items()) or "-"


def print_plan(
    advice: list[Advice],
    promises: dict[str, float],
    plan: Plan,
    run_folder: Path | None,
    console: Console,
    asked_to_try: bool,
    noise: BaselineNoise | None = None,
) -> None:
    """The advice and its experiments; ``noise``: the run's (trial.baseline_noise)."""
    if noise_line(noise):
        print_prose(console, escape(noise_line(noise)))
    if not advice:
        console.print("no advice fired on this run: nothing to try", highlight=False)
        return
    console.print("[b]Advice[/b]")
    for a in advice:
        print_prose(console, f"- {escape(advice_line(a))}")
    table = FitTable(title="Experiments that test it, most promising per cost first")
    for col in ("#", "change", "tests", "projected", "cost", "why"):
        table.add_column(col, number=col in ("#", "projected", "cost"))
    for i, e in enumerate(plan.experiments, start=1):
        table.add_row(
            str(i),
            escape(e.label),
            ", ".join(e.rules),
            projected_cell(e.promise, e.promise_kind),
            plain(e.cost),
            escape(e.source),
        )
    if plan.experiments:
        console.print(table)
    for rule, why in plan.without.items():
        console.print(f"{rule}: no experiment ({escape(why)})", highlight=False)
    if plan.experiments and not asked_to_try:
        target = run_folder or "the run"
        console.print(
            f"next: advise {escape(str(target))} --try   (runs them as cells beside "
            "the re-run baseline and measures each)",
            highlight=False,
            soft_wrap=True,
        )


def _figure_cell(
    speedup: float | None,
    low: float | None,
    high: float | None,
    verdict: Word | None,
    per: str,
    paired: str = "",
) -> str:
    """One figure's speedup (``per``: " /sample" when the batch changed), its 95 % interval and
    its verdict (rich markup): "4.10x [3.20-5.30] faster"; ``paired``: "paired over 5 rounds"
    where the verdict paired the rounds (the speedup is then theirs)."""
    if speedup is None:
        return "-"
    text = ratio(speedup) + per
    if verdict is None:
        return text
    colour = VERDICT_COLOURS.get(verdict, "white")
    return f"{text} {interval(low, high)} [{colour}]{verdict}[/]" + (
        f", {paired}" if paired else ""
    )


def _paired(r: TrialRow, figure: str) -> str:
    """ "paired over N rounds" where the row's verdict on ``figure`` paired the rounds."""
    verdict = getattr(r.verdicts, figure, None) if r.verdicts is not None else None
    if verdict is None or verdict.design != "paired":
        return ""
    return f"paired over {verdict.pairs} rounds"


def baseline_line(base: BaselineRow) -> str:
    """The re-run baseline in one line: latency and GPU time (geometric means of per-process
    medians), the processes, the classification, the status."""
    status = "ok" if base.status == "ok" else f"[red]{escape(str(base.status))}[/]"
    gpu = base.gpu_ms
    gpu_text = "" if gpu is None else f", GPU time {time(gpu, thousands=False)}"
    bound = f", {base.bound}" if base.bound else ""
    p50 = number(base.p50_ms, None, noise=base.cv)  # to the figures its noise allows
    return (
        f"baseline (the run re-run): latency p50 {p50} ms{gpu_text} "
        f"({GEOMEAN} over {base.processes} process(es)){bound}, {status}"
    )


def has_gpu_time(rows: Sequence[TrialRow]) -> bool:
    """Any experiment has a GPU-time verdict (its columns are shown)."""
    return any(r.gpu_verdict is not None for r in rows)


def has_kernels(rows: Sequence[TrialRow]) -> bool:
    """Any side of any experiment launched GPU kernels (the kernel columns are shown; a CPU
    run has none)."""
    return any(
        r.kernels is not None
        and (r.kernels.gone or r.kernels.added or any(n for n in r.kernels.launches_per_step if n))
        for r in rows
    )


#: the columns of kernels and launches, left out where no experiment ran a kernel
KERNEL_COLUMNS = ("kernels gone/added", "launches/step", "idle µs/step")


#: the trial table's columns left out, where the width cannot show them all
TRIAL_OPTIONAL = ("bound", "rel L2 err", "projected", *KERNEL_COLUMNS)
#: why advise --try stopped before every cell ran (sweep.trial_cells' stopped_by)
STOPPED = {
    "budget": "the time budget ran out",
    "cells": "--max-cells was reached",
    "baseline": "the baseline failed",
}


def print_trial(
    rows: list[TrialRow], base: BaselineRow, trial: TrialRecord, plan: Plan, console: Console
) -> None:
    _print_baseline(base, trial, console)
    gpu_time = has_gpu_time(rows)
    kernels = has_kernels(rows)
    console.print(_trial_table(rows, gpu_time, kernels))
    if not gpu_time and kernels and any(r.verdict is not None for r in rows):
        console.print(f"[dim]{NO_GPU_TIME}[/]", highlight=False)
    for r in rows:
        _print_row_notes(r, console)
    if sum(r.verdict is not None for r in rows) > 1:
        console.print(f"[dim]verdicts: {fdr_words('the experiments')}[/]", highlight=False)
    for rule, why in plan.without.items():
        console.print(f"{rule}: no experiment ({escape(why)})", highlight=False)
    _print_how_it_ran(trial, console)


def _print_baseline(base: BaselineRow, trial: TrialRecord, console: Console) -> None:
    """The re-run baseline's line, its noise, and whether it was timed again."""
    console.print(baseline_line(base), highlight=False)
    if noise_line(base.noise):
        console.print(
            escape(noise_line(base.noise, "the baseline")), highlight=False, soft_wrap=True
        )
    if trial.baseline_again:  # sweep.trial_cells.baseline_again
        console.print(escape(trial.baseline_again), highlight=False, soft_wrap=True)


def _trial_table(rows: list[TrialRow], gpu_time: bool, kernels: bool) -> FitTable:
    """The ranked table; the GPU-time and kernel columns only where something measured them."""
    table = FitTable(
        title="What each experiment measured against the baseline (ranked by the "
        "latency verdict; the processes each interval spans are below)"
    )
    figures = (LATENCY_COLUMN, GPU_TIME_COLUMN) if gpu_time else (LATENCY_COLUMN,)
    columns = (
        "change",
        "latency p50 ms",
        *figures,
        *(("bound",) if gpu_time else ()),
        "rel L2 err",
        "projected",
        *(KERNEL_COLUMNS if kernels else ()),
        "status",
    )
    numbers = ("latency p50 ms", "rel L2 err", "launches/step", "idle µs/step")
    for col in columns:
        table.add_column(
            col, number=col in numbers, whole=col in figures, optional=col in TRIAL_OPTIONAL
        )
    for r in rows:
        table.add_row(*_trial_row(r, gpu_time, kernels))
    return table


def _trial_row(r: TrialRow, gpu_time: bool, kernels: bool) -> list[str]:
    """One experiment's cells, in the columns of _trial_table."""
    k = r.kernels
    per = " /sample" if r.figure == "per sample" else ""
    cells = [
        escape(r.label),
        number(r.p50_ms, None, noise=r.cv),
        _figure_cell(r.speedup, r.low, r.high, r.verdict, per, _paired(r, "latency")),
    ]
    if gpu_time:
        cells += [
            _figure_cell(
                r.gpu_speedup, r.gpu_low, r.gpu_high, r.gpu_verdict, per, _paired(r, "gpu_time")
            ),
            r.bound or "-",
        ]
    cells += [
        relative_error(r.rel_l2_error),
        projected_cell(r.projected, r.projected_kind),
    ]
    if kernels:
        cells += [
            "-" if k is None else f"{k.gone}/{k.added}",
            "-" if k is None else _pair(k.launches_per_step),
            "-" if k is None else _pair(k.idle_us_per_step),
        ]
    cells.append(r.status if r.status == "ok" else f"[red]{escape(r.status)}[/]")
    return cells


def _print_row_notes(r: TrialRow, console: Console) -> None:
    """Under the table, one experiment's judgement, notes, kernel changes and failure."""
    if r.judgement:
        console.print(
            f"- {escape(r.label)}: {escape(judgement_text(r.judgement))}",
            highlight=False,
            soft_wrap=True,
        )
    for line in note_lines(r.verdicts) if r.verdicts else []:
        console.print(f"  [yellow]note[/] ({escape(r.label)}): {escape(line)}", highlight=False)
    if r.kernels and (r.kernels.top_gone or r.kernels.top_added):
        console.print(
            f"  kernels gone: {escape(', '.join(r.kernels.top_gone) or '-')}; "
            f"added: {escape(', '.join(r.kernels.top_added) or '-')}",
            highlight=False,
            soft_wrap=True,
        )
    if r.status != "ok":
        console.print(
            f"- {escape(r.label)}: {escape(r.status)}"
            + (f" ({escape(r.reason)})" if r.reason else ""),
            highlight=False,
            soft_wrap=True,
        )


def _print_how_it_ran(trial: TrialRecord, console: Console) -> None:
    """Why it stopped early, where its page and cells are, and how long it took."""
    if trial.stopped_by:
        console.print(
            f"[yellow]note:[/] {STOPPED[trial.stopped_by]}: the cells marked "
            "'not run' were not tried (continue with --resume)",
            highlight=False,
        )
    console.print(f"page: {escape(trial.folder)}/report.html", highlight=False)
    console.print(
        f"advise --try took {time(trial.wall_s, 's', decimals=0, thousands=False)} "
        f"({time(trial.rounds_s, 's', decimals=0, thousands=False)} of it "
        f"re-timing in {trial.processes} processes); cells in "
        f"{escape(trial.folder)}/",
        highlight=False,
        soft_wrap=True,
    )


def _pair(values: tuple[float | None, float | None]) -> str:
    a, b = values
    return f"{number(a, 0, thousands=False)} → {number(b, 0, thousands=False)}"


#: the headers of the experiments' HTML table
EXPERIMENT_HEADERS = {
    "projected": "projected speedup (x)",
    "projection": "projection (bound or estimate)",
    "cost": "setup cost",
}
#: the headers of the measurements' HTML table
MEASURED_HEADERS = {
    "p50_ms": "latency p50 ms",
    "speedup": "latency speedup (x)",
    "low": "latency 95 % low",
    "high": "latency 95 % high",
    "verdict": "latency verdict",
    "interval_processes": "intervals over processes (baseline vs change)",
    "gpu_speedup": "GPU-time speedup (x)",
    "gpu_low": "GPU-time 95 % low",
    "gpu_high": "GPU-time 95 % high",
    "gpu_verdict": "GPU-time verdict",
    "figure": "speedup of",
    "projected": "projected (x)",
    "projection": "projection (bound or estimate)",
    "kernels_gone": "kernels gone",
    "kernels_added": "kernels added",
}


def trial_html(
    run: str,
    advice: list[Advice],
    plan: Plan,
    rows: list[TrialRow],
    base: BaselineRow,
    trial: TrialRecord,
    run_noise: BaselineNoise | None = None,
) -> str:
    """advise --try as one self-contained HTML page (profiler.report.html): the advice (with
    ``run_noise``, the run's noise), the plan, the ranked measurements with their judgements
    and kernel changes."""
    import pandas as pd

    from profiler.report import html

    page = html.Page(f"advise --try: {run}")
    page.add("Advice", html.advice_block(advice, noise_line(run_noise)))
    page.add(
        "Experiments that test it",
        html.table(pd.DataFrame(_experiment_records(plan)), headers=EXPERIMENT_HEADERS),
    )
    page.add("Baseline (the run re-run)", html.key_values(_baseline_values(base, rows, trial)))
    frame = pd.DataFrame(_measured_records(rows))
    unmeasured = _unmeasured_columns(rows)
    if unmeasured and len(frame):
        frame = frame.drop(columns=unmeasured)
    page.add(
        "What each experiment measured (ranked)",
        html.table(frame, headers=MEASURED_HEADERS, figures=("p50_ms",)),
    )
    notes = _verdict_notes(rows)
    if notes:
        page.add("How to read the verdicts", "".join(html.note(line) for line in notes))
    judged = [f"{r.label}: {judgement_text(r.judgement)}" for r in rows if r.judgement]
    page.add(
        "Projection against measurement",
        "".join(html.note(line) for line in judged) or html.note("(none measured)"),
    )
    page.add("How it ran", html.key_values(_how_it_ran(trial)))
    return page.render()


def _experiment_records(plan: Plan) -> list[dict[str, object]]:
    """The plan's experiments, one record each, for the page's table."""
    return [
        {
            "change": e.label,
            "tests": ", ".join(e.rules),
            "projected": e.promise if e.promise > 1 else None,
            "projection": e.promise_kind if e.promise > 1 else None,
            "cost": e.cost,
            "why": e.source,
        }
        for e in plan.experiments
    ]


def _baseline_values(
    base: BaselineRow, rows: list[TrialRow], trial: TrialRecord
) -> list[tuple[str, object]]:
    """The re-run baseline's figures, its noise and its status, as the page's key-values."""
    gpu = [(f"GPU time (ms, {GEOMEAN})", base.gpu_ms), ("bound", base.bound)]
    return [
        (f"latency p50 (ms, {GEOMEAN})", number(base.p50_ms, None, noise=base.cv)),
        *(gpu if base.gpu_ms is not None or has_kernels(rows) else []),
        ("processes", base.processes),
        *([("noise", noise_line(base.noise, "the baseline"))] if noise_line(base.noise) else []),
        *([("timed again", trial.baseline_again)] if trial.baseline_again else []),
        ("status", base.status),
    ]


def _measured_records(rows: list[TrialRow]) -> list[dict[str, object]]:
    """What each experiment measured, one record each, for the page's ranked table."""
    return [
        {
            "change": r.label,
            "p50_ms": number(r.p50_ms, None, noise=r.cv),
            "speedup": r.speedup,
            "low": r.low,
            "high": r.high,
            "verdict": r.verdict or "-",
            "interval_processes": " vs ".join(map(str, r.interval_processes or [])) or None,
            "gpu_speedup": r.gpu_speedup,
            "gpu_low": r.gpu_low,
            "gpu_high": r.gpu_high,
            "gpu_verdict": r.gpu_verdict or "-",
            "bound": r.bound or "-",
            "figure": r.figure,
            "rel_l2_error": r.rel_l2_error,
            "projected": r.projected,
            "projection": r.projected_kind if r.projected else None,
            "kernels_gone": r.kernels.gone if r.kernels else None,
            "kernels_added": r.kernels.added if r.kernels else None,
            "status": r.status if r.status == "ok" else f"{r.status}: {r.reason or ''}",
        }
        for r in rows
    ]


def _unmeasured_columns(rows: list[TrialRow]) -> list[str]:
    """The ranked table's columns nothing measured: GPU time's, and a CPU run's kernels."""
    columns: list[str] = []
    if not has_gpu_time(rows):
        columns += ["gpu_speedup", "gpu_low", "gpu_high", "gpu_verdict", "bound"]
    if not has_kernels(rows):  # a CPU run: no kernel to count
        columns += ["kernels_gone", "kernels_added"]
    return columns


def _verdict_notes(rows: list[TrialRow]) -> list[str]:
    """How to read the verdicts: what was not measured, each experiment's notes, the FDR."""
    notes = [f"{r.label}: {line}" for r in rows if r.verdicts for line in note_lines(r.verdicts)]
    if not has_gpu_time(rows) and has_kernels(rows) and any(r.verdict is not None for r in rows):
        notes.insert(0, NO_GPU_TIME)
    if sum(r.verdict is not None for r in rows) > 1:
        notes.append("verdicts: " + fdr_words("the experiments"))
    return notes


def _how_it_ran(trial: TrialRecord) -> list[tuple[str, object]]:
    return [
        ("wall time (s)", trial.wall_s),
        ("re-timing (s)", trial.rounds_s),
        ("processes per cell", trial.processes),
        ("stopped by", trial.stopped_by or "every cell ran"),
        ("cells in", trial.folder),
    ]


def unjudged_text(why: Unjudged) -> str:
    """Why no verdict is drawn from the baseline, in words."""
    return (
        f"the baseline's one window is {' and '.join(why.flags)} (CV {percent(100 * why.cv)}): "
        "no verdict drawn from it; --processes 3 gives it fresh windows"
    )


#: what follows the measurement, per outcome ({word}: "bound" or "estimate")
OUTCOME_WORDS = {
    "undecided": "undecided at this noise (more --processes would tell)",
    "same": "the same within ±2 %",
    "not borne out": "the same within ±2 %; the advice is not borne out here",
    "slower": "slower; the advice is contradicted",
    "faster": "faster",
    "above": "faster; the measured speedup exceeded the {word} (its interval is above it too)",
    "exceeded": "faster; the measured speedup exceeded the {word} (its interval reaches below it)",
    "far short": "faster, far short of the {word}",
}
#: a speedup no more than its projection
WITHIN = {"bound": "faster, within the bound", "estimate": "faster, below the estimate"}


def judgement_text(j: Judgement) -> str:
    """An experiment's projection against its measurement, one phrase (profiler.analysis.trial
    .judge): "projected estimate 6.37x, measured 6.40x [4.65-8.81] over 3 vs 3 processes:
    faster, below the estimate"."""
    head = f"projected {j.projection} {ratio(j.projected)}" if j.projected else "no projection"
    measured = f"measured {ratio(j.speedup)} {interval(j.low, j.high)}"
    if j.processes:
        a, b = j.processes
        one = ", within one window a side" if max(a, b) == 1 else ""
        measured += f" over {a} vs {b} processes{one}"
    if j.unjudged is not None:
        return f"{head}, {measured}: {unjudged_text(j.unjudged)}"
    if j.outcome == "within":
        said = WITHIN[j.projection]
    else:
        said = OUTCOME_WORDS[j.outcome].format(word=j.projection)
    if j.outcome in ("above", "exceeded") and j.projection == "bound":
        said += "; the bound did not hold"
    return f"{head}, {measured}: {said}"

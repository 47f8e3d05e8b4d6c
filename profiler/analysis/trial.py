"""What `advise --try` measured: one row per experiment against the re-run baseline, ranked.

Each row: the change, the figure quoted (the geometric mean of the per-process p50s), the
speedup (per call; per sample, i.e. in throughput, when the experiment changes the batch size)
with its verdict and 95 % interval over processes on latency and on GPU time
(profiler.analysis.timed_verdict; the experiments held to a false discovery rate), the
numeric error against the FP32 eager reference, the rule's projection (a bound or an estimate,
profiler.analysis.advice) beside the measured gain and whether the measurement bears it out,
and what changed at the kernel level (kernels gone and added by name, launches and GPU idle
time per profiled step). Torch-free; reads the
cells' result.json, processes.csv and traces.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from profiler.analysis.advice import Advice
from profiler.analysis.experiments import Experiment, projection
from profiler.analysis.headline import verdicts_between, window_noise
from profiler.analysis.records import (
    BaselineNoise,
    BaselineRow,
    Judgement,
    KernelChange,
    Outcome,
    ProjectionKind,
    TimedVerdicts,
    TrialCellRecord,
    TrialRecord,
    TrialRow,
    Unjudged,
)
from profiler.analysis.run_analysis import RunAnalysis
from profiler.analysis.sampling import cv_of
from profiler.analysis.timed_verdict import control_family
from profiler.analysis.timed_window import window_flags
from profiler.errors import UserError
from profiler.runs.layout import RESULT_FILE
from profiler.runs.result import RunResult, try_read_result
from profiler.runs.samples import ConfigSamples, config_samples

#: kernel names listed per side of a row
LISTED = 3
ORDER = {"faster": 0, "same": 1, "undecided": 2, "slower": 3}
#: the flags of a one-window baseline no latency verdict is drawn from: its one window, not the
#: change, may make the difference (the interval assumes the machine's between-process spread)
UNJUDGED = ("noisy", "bimodal")


def _step_figures(run: RunAnalysis) -> tuple[float | None, float | None, set[str], dict[str, str]]:
    try:
        steps, kernels = run.steps, run.kernels
    except UserError:
        return None, None, set(), {}
    launches = float(steps["kernels"].mean()) if len(steps) else None
    idle = float((steps["step_us"] - steps["gpu_busy_us"]).mean()) if len(steps) else None
    return launches, idle, set(kernels["name"]), dict(zip(kernels["name"], kernels["kernel"]))


def kernel_change(base: Path, cell: Path) -> KernelChange | None:
    """Kernels gone and added (by full name; the biggest few by short name), and launches and
    idle time per profiled step, of a cell against the baseline; None without traces."""
    try:
        a, b = RunAnalysis(base), RunAnalysis(cell)
        la, ia, names_a, short_a = _step_figures(a)
        lb, ib, names_b, short_b = _step_figures(b)
    except UserError:
        return None
    gone, added = names_a - names_b, names_b - names_a

    def biggest(run: RunAnalysis, names: set[str], short: dict[str, str]) -> list[str]:
        k = run.kernels
        rows = k[k["name"].isin(names)].sort_values("total_us", ascending=False)
        return [short.get(n, n) for n in rows["name"].head(LISTED)]

    return KernelChange(
        gone=len(gone),
        added=len(added),
        top_gone=biggest(a, gone, short_a),
        top_added=biggest(b, added, short_b),
        launches_per_step=(la, lb),
        idle_us_per_step=(ia, ib),
    )


def baseline_noise(result: RunResult, result_json: Path | None) -> BaselineNoise:
    """A baseline's noise (BaselineNoise)."""
    window = window_noise(result, result_json)
    medians = config_samples(result, result_json).for_verdict().medians()
    return BaselineNoise(
        cv=window.cv if window else None,
        warnings=list(window.warnings) if window else [],
        processes=len(medians),
        between_cv=cv_of(medians) if len(medians) > 1 else None,
    )


def latency_noise(used: ConfigSamples, result: RunResult, result_json: Path | None) -> float | None:
    """The relative noise of a geometric mean of per-process medians: the CV between the
    processes with several, else the one timed window's CV (as compare trims its figures)."""
    medians = used.medians()
    if len(medians) > 1:
        return cv_of(medians)
    return baseline_noise(result, result_json).cv


def unjudged_why(noise: BaselineNoise | None) -> Unjudged | None:
    """Why no latency verdict is drawn from a baseline: its one window flagged noisy or
    bimodal (the flags and the window's CV); None otherwise."""
    if not noise or noise.processes != 1:
        return None
    flags = [f for f in window_flags(noise.warnings) if f in UNJUDGED]
    if not flags or noise.cv is None:
        return None
    return Unjudged(flags=flags, cv=noise.cv)


def judge(
    projected: float | None,
    verdict: str | None,
    speedup: float | None,
    low: float | None,
    high: float | None,
    kind: str | None = None,
    processes: tuple[int, int] | None = None,
    unjudged: Unjudged | None = None,
) -> Judgement | None:
    """The projection against the measurement (Judgement; None without a verdict). ``kind``
    "bound" names it a bound ("within" only when the measured speedup is no more than it);
    anything else names it an estimate. ``unjudged`` (unjudged_why): why no verdict is
    drawn, the outcome instead of one."""
    if verdict is None or speedup is None:
        return None
    shown = projected if projected and projected > 1 else None  # the projection held to
    return Judgement(
        outcome=_outcome(shown, verdict, speedup, low, high, unjudged),
        projected=shown,
        projection="bound" if kind == "bound" else "estimate",
        speedup=speedup,
        low=low,
        high=high,
        processes=processes,
        unjudged=unjudged,
    )


def _outcome(
    shown: float | None,
    verdict: str,
    speedup: float,
    low: float | None,
    high: float | None,
    unjudged: Unjudged | None,
) -> Outcome:
    """What the measurement says of the projection ``shown`` (records.Outcome)."""
    if unjudged:
        return "unjudged"
    if verdict == "undecided":
        return "undecided"
    if verdict == "slower":
        return "slower"
    if verdict == "same":
        return "not borne out" if shown is not None and shown > 1.05 else "same"
    if shown is None:
        return "faster"
    if speedup > shown:
        return "above" if low is not None and low > shown else "exceeded"
    if high is not None and high < 1 + (shown - 1) / 4:
        return "far short"
    return "within"


def trial_rows(
    trial: TrialRecord,
    folder: Path,
    promises: dict[str, float],
    advice: list[Advice] | None = None,
    config: dict[str, Any] | None = None,
) -> list[TrialRow]:
    """One row per experiment of ``trial`` (trial.json's record), ranked: verdict first
    (faster, same, undecided, slower), then by speedup; cells that did not finish last.
    ``promises``: rule id -> its projected speedup; with ``advice`` (the rules that fired) and
    the run's ``config``, each experiment's own projection and its kind instead
    (profiler.analysis.experiments.projection). Each row's measurement is taken once
    (_measured), then its verdicts are the family's (the experiments are one family)."""
    base_cell = trial.cells[0]
    base_json = folder / base_cell.folder / RESULT_FILE
    base = try_read_result(base_json) if base_cell.status == "ok" else None
    base_windows = config_samples(base, base_json) if base is not None else ConfigSamples()
    unjudged = unjudged_why(baseline_noise(base, base_json)) if base is not None else None
    graphs_ms = cuda_graphs_latency(trial.cells[1:], folder)
    found = [
        _measured(
            cell, folder, base_cell, base, base_windows, graphs_ms, (promises, advice, config)
        )
        for cell in trial.cells[1:]
    ]
    verdicts = control_family([v for _, v in found])
    rows = [_judged(row, v, unjudged) for (row, _), v in zip(found, verdicts)]
    return sorted(
        rows, key=lambda r: (r.status != "ok", ORDER.get(r.verdict or "", 4), -(r.speedup or 0))
    )


#: how an experiment's projection is found: the rules' promises, and the advice and the run's
#: config when given (trial_rows)
_Projections = tuple[dict[str, float], list[Advice] | None, dict[str, Any] | None]


def _projected(
    cell: TrialCellRecord, projections: _Projections
) -> tuple[float | None, ProjectionKind | None]:
    """An experiment's projected speedup and its kind (trial_rows' ``promises``, ``advice``)."""
    promises, advice, config = projections
    if advice is not None:
        value, kind = projection(advice, cell.rules, cell.changes, config)
        return value, "bound" if kind == "bound" else "estimate" if kind else None
    bound = max((promises.get(r, 1.0) for r in cell.rules), default=1.0)
    return (bound if bound > 1 else None), None


def _measured(
    cell: TrialCellRecord,
    folder: Path,
    base_cell: TrialCellRecord,
    base: RunResult | None,
    base_windows: ConfigSamples,
    graphs_ms: float | None,
    projections: _Projections,
) -> tuple[TrialRow, TimedVerdicts | None]:
    """An experiment's row, before the family's verdicts; its verdicts against the baseline."""
    projected, kind = _projected(cell, projections)
    row = TrialRow(
        cell.label,
        cell.changes,
        cell.rules,
        cell.status,
        cell.reason,
        projected=projected,
        projected_kind=kind,
    )
    path = folder / cell.folder / RESULT_FILE
    result: RunResult | None = try_read_result(path) if cell.status == "ok" else None
    if result is None:
        return row, None
    windows = config_samples(result, path)
    used = windows.for_verdict()
    row = msgspec.structs.replace(
        row,
        processes=len(used),
        p50_ms=used.geometric_mean("latency") or result.timing.p50_ms,
        cv=latency_noise(used, result, path),
        rel_l2_error=result.numerics.rel_l2_error if result.numerics else None,
        bound=used.bound(),
    )
    if base is None:
        return row, None
    ours, theirs = base_windows, windows
    if result.batch_size != base.batch_size:  # compare per sample (throughput)
        row = msgspec.structs.replace(row, figure="per sample")
        ours = base_windows.per_sample(base.batch_size)
        theirs = windows.per_sample(result.batch_size)
    verdicts = verdicts_between(base, result, ours, theirs, cuda_graphs_ms=graphs_ms)
    kernels = kernel_change(folder / base_cell.folder, folder / cell.folder)
    return msgspec.structs.replace(row, kernels=kernels), verdicts


def _judged(row: TrialRow, v: TimedVerdicts | None, unjudged: Unjudged | None) -> TrialRow:
    """The row with its speedups and verdicts (the family's), then its judgement."""
    spans = None
    if v is not None and v.latency is not None:  # a judged row has a latency verdict
        spans = (v.latency.processes_a, v.latency.processes_b)
        lat, gpu = v.latency, v.gpu_time
        row = msgspec.structs.replace(
            row,
            interval_processes=list(spans),
            speedup=lat.speedup,
            low=1 / lat.high,
            high=1 / lat.low,
            # unjudged: the measured speedup kept, no verdict drawn from it
            verdict="undecided" if unjudged else lat.verdict,
            gpu_speedup=gpu.speedup if gpu else None,
            gpu_low=1 / gpu.high if gpu else None,
            gpu_high=1 / gpu.low if gpu else None,
            gpu_verdict=gpu.verdict if gpu else None,
            verdicts=v,
        )
    if row.status != "ok":
        return row
    judged = judge(
        row.projected,
        row.verdict,
        row.speedup,
        row.low,
        row.high,
        row.projected_kind,
        spans,
        unjudged,
    )
    return msgspec.structs.replace(row, judgement=judged)


def cuda_graphs_latency(cells: list[TrialCellRecord], folder: Path) -> float | None:
    """The latency (geometric mean of per-process medians, ms) the --cuda-graphs experiment
    measured, when it finished at the baseline's batch size: the figure the launch-bound lever
    is quoted with."""
    for cell in cells:
        if cell.status != "ok" or not cell.changes.get("cuda_graphs") or len(cell.changes) != 1:
            continue
        path = folder / cell.folder / RESULT_FILE
        result = try_read_result(path)
        if result is not None:
            return config_samples(result, path).for_verdict().geometric_mean("latency")
    return None


def baseline_row(trial: TrialRecord, folder: Path) -> BaselineRow:
    """The re-run baseline's figures (BaselineRow)."""
    cell = trial.cells[0]
    path = folder / cell.folder / RESULT_FILE
    result = try_read_result(path) if cell.status == "ok" else None
    if result is None:
        return BaselineRow(status=cell.status, reason=cell.reason, processes=0, p50_ms=None)
    used = config_samples(result, path).for_verdict()
    return BaselineRow(
        status="ok",
        reason=None,
        processes=len(used),
        p50_ms=used.geometric_mean("latency") or result.timing.p50_ms,
        cv=latency_noise(used, result, path),
        gpu_ms=used.geometric_mean("gpu_time"),
        bound=used.bound(),
        noise=baseline_noise(result, path),
    )


def experiments_of(trial: TrialRecord) -> list[Experiment]:
    """The experiments trial.json names, baseline left out."""
    return [Experiment(c.label, c.changes, tuple(c.rules), "") for c in trial.cells[1:]]

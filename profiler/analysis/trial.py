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

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from profiler.analysis.advice import Advice
from profiler.analysis.experiments import Experiment, projection
from profiler.analysis.headline import verdicts_between, window_noise
from profiler.analysis.noise import window_flags
from profiler.analysis.records import BaselineNoise, BaselineRow, TimedVerdicts
from profiler.analysis.run import RunAnalysis
from profiler.analysis.sampling import cv_of
from profiler.analysis.timed_verdict import control_family
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


@dataclass
class KernelChange:
    gone: int = 0  # kernel names in the baseline only
    added: int = 0  # in the experiment only
    top_gone: list[str] = field(default_factory=list)
    top_added: list[str] = field(default_factory=list)
    launches_per_step: tuple[float | None, float | None] = (None, None)
    idle_us_per_step: tuple[float | None, float | None] = (None, None)


@dataclass
class TrialRow:
    label: str
    changes: dict[str, Any]
    rules: list[str]
    status: str
    reason: str | None = None
    p50_ms: float | None = None
    #: the relative noise of p50_ms (latency_noise): the figures it is printed to
    cv: float | None = None
    processes: int = 0
    speedup: float | None = None
    low: float | None = None
    high: float | None = None
    verdict: str | None = None
    #: the same on GPU time (the device's work, launch gaps excluded), where measured
    gpu_speedup: float | None = None
    gpu_low: float | None = None
    gpu_high: float | None = None
    gpu_verdict: str | None = None
    #: the experiment's classification (launch-bound, GPU-bound) and why the verdicts read
    #: as they do (profiler.analysis.timed_verdict)
    bound: str | None = None
    verdict_lines: list[str] = field(default_factory=list)
    rel_l2_error: float | None = None
    projected: float | None = None  # the rule's projection as a speedup factor, if any
    projected_kind: str | None = None  # "bound" or "estimate" (profiler.analysis.advice)
    #: the processes the latency interval spans: [baseline's, experiment's]
    interval_processes: list[int] | None = None
    judgement: str | None = None  # the projection against the measurement, in words
    kernels: KernelChange | None = None
    #: "per call", or "per sample" when the experiment changes the batch size (its latency is
    #: then divided by its batch, the baseline's by its own: a throughput comparison)
    figure: str = "per call"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
        len(gone),
        len(added),
        biggest(a, gone, short_a),
        biggest(b, added, short_b),
        (la, lb),
        (ia, ib),
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


def unjudged_why(noise: BaselineNoise | None) -> str | None:
    """Why no latency verdict is drawn from a baseline: its one window flagged noisy or
    bimodal; None otherwise."""
    if not noise or noise.processes != 1:
        return None
    flags = [f for f in window_flags(noise.warnings) if f in UNJUDGED]
    if not flags or noise.cv is None:
        return None
    return (
        f"the baseline's one window is {' and '.join(flags)} (CV {100 * noise.cv:.1f} %): "
        "no verdict drawn from it; --processes 3 gives it fresh windows"
    )


def judge(
    projected: float | None,
    verdict: str | None,
    speedup: float | None,
    low: float | None,
    high: float | None,
    kind: str | None = None,
    processes: tuple[int, int] | None = None,
    unjudged: str | None = None,
) -> str | None:
    """The projection against the measurement, one phrase. ``kind`` "bound" names it a bound
    ("within the bound" only when the measured speedup is no more than it); anything else
    names it an estimate. ``unjudged`` (unjudged_why): why no verdict is drawn, said instead
    of one."""
    if verdict is None or speedup is None:
        return None
    word = "bound" if kind == "bound" else "estimate"
    has = bool(projected and projected > 1)
    shown = projected if has else None  # the projection the measurement is held to
    head = f"projected {word} {projected:.2f}x" if has else "no projection"
    measured = f"measured {speedup:.2f}x [{low:.2f}-{high:.2f}]"
    if processes:
        measured += f" over {processes[0]} vs {processes[1]} processes" + (
            ", within one window a side" if max(processes) == 1 else ""
        )
    if unjudged:
        return f"{head}, {measured}: {unjudged}"
    if verdict == "undecided":
        return f"{head}, {measured}: undecided at this noise (more --processes would tell)"
    if verdict == "same":
        return f"{head}, {measured}: the same within ±2 %" + (
            "; the advice is not borne out here" if shown is not None and shown > 1.05 else ""
        )
    if verdict == "slower":
        return f"{head}, {measured}: slower; the advice is contradicted"
    if shown is None:
        return f"{head}, {measured}: faster"
    if speedup > shown:
        beyond = (
            "its interval is above it too"
            if low is not None and low > shown
            else "its interval reaches below it"
        )
        return (
            f"{head}, {measured}: faster; the measured speedup exceeded the {word} "
            f"({beyond})" + ("; the bound did not hold" if word == "bound" else "")
        )
    if high is not None and high < 1 + (shown - 1) / 4:
        return f"{head}, {measured}: faster, far short of the {word}"
    return f"{head}, {measured}: faster, " + (
        "within the bound" if word == "bound" else "below the estimate"
    )


def trial_rows(
    trial: dict[str, Any],
    folder: Path,
    promises: dict[str, float],
    advice: list[Advice] | None = None,
    config: dict[str, Any] | None = None,
) -> list[TrialRow]:
    """One row per experiment of ``trial`` (trial.json's data), ranked: verdict first (faster,
    same, undecided, slower), then by speedup; cells that did not finish last.
    ``promises``: rule id -> its projected speedup; with ``advice`` (the rules that fired) and
    the run's ``config``, each experiment's own projection and its kind instead
    (profiler.analysis.experiments.projection)."""
    cells = trial["cells"]
    base_cell = cells[0]
    base_json = folder / base_cell["folder"] / RESULT_FILE
    base = try_read_result(base_json) if base_cell["status"] == "ok" else None
    base_windows = config_samples(base, base_json) if base is not None else ConfigSamples()
    unjudged = unjudged_why(baseline_noise(base, base_json)) if base is not None else None
    graphs_ms = cuda_graphs_latency(cells[1:], folder)
    rows: list[TrialRow] = []
    found: list[TimedVerdicts | None] = []
    for cell in cells[1:]:
        row, verdicts = _cell_row(
            cell, folder, base_cell, base, base_windows, graphs_ms, promises, advice, config
        )
        rows.append(row)
        found.append(verdicts)
    for row, v in zip(rows, control_family(found)):  # the experiments are one family
        _judge_row(row, v, unjudged)
    return sorted(
        rows, key=lambda r: (r.status != "ok", ORDER.get(r.verdict or "", 4), -(r.speedup or 0))
    )


def _cell_row(
    cell: dict[str, Any],
    folder: Path,
    base_cell: dict[str, Any],
    base: RunResult | None,
    base_windows: ConfigSamples,
    graphs_ms: float | None,
    promises: dict[str, float],
    advice: list[Advice] | None,
    config: dict[str, Any] | None,
) -> tuple[TrialRow, TimedVerdicts | None]:
    """An experiment's row, before the family's verdicts; its verdicts against the baseline."""
    row = TrialRow(cell["label"], cell["changes"], cell["rules"], cell["status"], cell["reason"])
    if advice is not None:
        row.projected, row.projected_kind = projection(
            advice, cell["rules"], cell["changes"], config
        )
    else:
        bound = max((promises.get(r, 1.0) for r in cell["rules"]), default=1.0)
        row.projected = bound if bound > 1 else None
    path = folder / cell["folder"] / RESULT_FILE
    result: RunResult | None = try_read_result(path) if cell["status"] == "ok" else None
    verdicts = None
    if result is not None:
        windows = config_samples(result, path)
        used = windows.for_verdict()
        row.processes = len(used)
        row.p50_ms = used.geometric_mean("latency") or result.timing.p50_ms
        row.cv = latency_noise(used, result, path)
        row.rel_l2_error = result.numerics.rel_l2_error if result.numerics else None
        row.bound = used.bound()
        if base is not None:
            ours, theirs = base_windows, windows
            if result.batch_size != base.batch_size:  # compare per sample (throughput)
                row.figure = "per sample"
                ours = base_windows.per_sample(base.batch_size)
                theirs = windows.per_sample(result.batch_size)
            verdicts = verdicts_between(base, result, ours, theirs, cuda_graphs_ms=graphs_ms)
            row.kernels = kernel_change(folder / base_cell["folder"], folder / cell["folder"])
    return row, verdicts


def _judge_row(row: TrialRow, v: TimedVerdicts | None, unjudged: str | None) -> None:
    """Set the row's speedups and verdicts (the family's), then its judgement."""
    spans = None
    if v is not None and v.latency is not None:  # a judged row has a latency verdict
        spans = (v.latency.processes_a, v.latency.processes_b)
        row.interval_processes = list(spans)
        lat, gpu = v.latency, v.gpu_time
        row.speedup, row.low, row.high, row.verdict = (
            lat.speedup,
            1 / lat.high,
            1 / lat.low,
            lat.verdict,
        )
        if gpu is not None:
            row.gpu_speedup, row.gpu_low, row.gpu_high, row.gpu_verdict = (
                gpu.speedup,
                1 / gpu.high,
                1 / gpu.low,
                gpu.verdict,
            )
        row.verdict_lines = list(v.lines)
        if unjudged:  # the measured speedup kept, no verdict drawn from it
            row.verdict = "undecided"
    if row.status == "ok":
        row.judgement = judge(
            row.projected,
            row.verdict,
            row.speedup,
            row.low,
            row.high,
            row.projected_kind,
            spans,
            unjudged,
        )


def cuda_graphs_latency(cells: list[dict[str, Any]], folder: Path) -> float | None:
    """The latency (geometric mean of per-process medians, ms) the --cuda-graphs experiment
    measured, when it finished at the baseline's batch size: the figure the launch-bound lever
    is quoted with."""
    for cell in cells:
        if (
            cell["status"] != "ok"
            or not cell["changes"].get("cuda_graphs")
            or len(cell["changes"]) != 1
        ):
            continue
        path = folder / cell["folder"] / RESULT_FILE
        result = try_read_result(path)
        if result is not None:
            return config_samples(result, path).for_verdict().geometric_mean("latency")
    return None


def baseline_row(trial: dict[str, Any], folder: Path) -> BaselineRow:
    """The re-run baseline's figures (BaselineRow)."""
    cell = trial["cells"][0]
    path = folder / cell["folder"] / RESULT_FILE
    result = try_read_result(path) if cell["status"] == "ok" else None
    if result is None:
        return BaselineRow(status=cell["status"], reason=cell["reason"], processes=0, p50_ms=None)
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


def experiments_of(trial: dict[str, Any]) -> list[Experiment]:
    """The experiments trial.json names, baseline left out."""
    return [Experiment(c["label"], c["changes"], tuple(c["rules"]), "") for c in trial["cells"][1:]]

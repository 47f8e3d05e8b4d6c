"""`advise`: a run's advice, the experiments that test it (profiler.analysis.experiments), and
with --try those experiments run as cells beside the re-run baseline (profiler.sweep.trial_cells),
ranked by what they measured (profiler.analysis.trial)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler import units
from profiler.commands import parse_budget
from profiler.commands.sink import Sink
from profiler.errors import UserError

if TYPE_CHECKING:
    from profiler.analysis.advice import Advice
    from profiler.analysis.experiments import Experiment, Plan
    from profiler.analysis.records import BaselineRow, PlannedExperiment, TrialRecord, TrialRow
    from profiler.analysis.run_analysis import RunAnalysis
    from profiler.runs.config import RunConfig
    from profiler.sweep.trial_cells import Trial


def run(
    target: str,
    try_them: bool = False,
    budget: str | None = None,
    max_cells: int | None = None,
    processes: int | None = None,
    resume: bool = False,
    runs_dir: Path = Path("runs"),
    tb_dir: Path = Path("tb_logs"),
    *,
    sink: Sink,
    trust_model: bool = False,
) -> int:
    from profiler.analysis.experiments import plan as make_plan, promise
    from profiler.analysis.run_analysis import RunAnalysis
    from profiler.runs.samples import config_of

    budget_s = _check_options(try_them, budget, max_cells, processes, resume)
    side = RunAnalysis(target)
    if side.result is None:
        raise UserError(
            f"{target}: advise needs a run (a folder with result.json), not a "
            "trace alone: it re-runs the run's config"
        )
    result = side.result
    config = config_of(result)
    advice = advice_of(side)
    plan = make_plan(advice, config.to_dict())
    promises = {a.rule: promise(a) for a in advice}
    document = _plan_document(side, config, advice, plan, promises)
    if not try_them or not plan.experiments:
        _show_plan(side, advice, promises, plan, document, try_them, sink)
        return 0
    from profiler.analysis.records import plain
    from profiler.analysis.trial import baseline_row, trial_rows

    folder = runs_dir / f"advise_{config.run_name}"
    trial = _run_trial(
        side,
        config,
        plan,
        folder,
        tb_dir / f"advise_{config.run_name}",
        budget_s=budget_s,
        max_cells=max_cells,
        processes=processes,
        resume=resume,
        sink=sink,
        trust_model=trust_model,
    )
    record = trial.record()
    rows = trial_rows(record, folder, promises, advice, config.to_dict())
    base = baseline_row(record, folder)
    document.update(trial=plain(record), baseline=plain(base), rows=plain(rows))
    document["report"] = str(_write_trial_page(side, folder, advice, plan, rows, base, record))
    _show_trial(document, rows, base, record, plan, sink)
    return trial_exit(trial, folder, sink)


def _show_trial(
    document: dict[str, Any],
    rows: list[TrialRow],
    base: BaselineRow,
    record: TrialRecord,
    plan: Plan,
    sink: Sink,
) -> None:
    """The trial's rows, as the --json document or on the console."""
    if sink.json:
        sink.document("advise", document)
    else:
        from profiler.report.trial_view import print_trial

        print_trial(rows, base, record, plan, sink.console)


def _plan_document(
    side: RunAnalysis,
    config: RunConfig,
    advice: list[Advice],
    plan: Plan,
    promises: dict[str, float],
) -> dict[str, Any]:
    """The --json document of advise, before any trial (profiler.cli.documents.Advise)."""
    from profiler.analysis.records import plain
    from profiler.report.advice_view import planned_advice

    return {
        "run": str(side.run_folder),
        "config": config.run_name,
        "advice": plain([planned_advice(a, promises[a.rule]) for a in advice]),
        "plan": plain([experiment_record(e) for e in plan.experiments]),
        "without_experiments": plan.without,
        "trial": None,
        "baseline": None,
        "rows": None,
        "report": None,
    }


def _check_options(
    try_them: bool,
    budget: str | None,
    max_cells: int | None,
    processes: int | None,
    resume: bool,
) -> float | None:
    """The budget in seconds, after refusing options that do not go together."""
    from profiler.runs.config import check_processes

    budget_s = parse_budget(budget)
    if max_cells is not None and max_cells < 1:
        raise UserError(f"--max-cells must be 1 or more (got {max_cells})")
    if processes is not None:
        check_processes(processes)
    if not try_them and (budget or max_cells or processes or resume):
        raise UserError("--budget, --max-cells, --processes and --resume go with --try")
    return budget_s


def _show_plan(
    side: RunAnalysis,
    advice: list[Advice],
    promises: dict[str, float],
    plan: Plan,
    document: dict[str, Any],
    try_them: bool,
    sink: Sink,
) -> None:
    """The advice and its plan, without running it."""
    result = side.result
    assert result is not None  # advise refuses a trace without its run (run)
    from profiler.analysis.trial import baseline_noise

    if sink.json:
        sink.document("advise", document)
    else:
        from profiler.report.trial_view import print_plan

        print_plan(
            advice,
            promises,
            plan,
            side.run_folder,
            sink.console,
            try_them,
            baseline_noise(result, side.result_json),
        )


def _run_trial(
    side: RunAnalysis,
    config: RunConfig,
    plan: Plan,
    folder: Path,
    trace_dir: Path,
    *,
    budget_s: float | None,
    max_cells: int | None,
    processes: int | None,
    resume: bool,
    sink: Sink,
    trust_model: bool,
) -> Trial:
    """Run the plan's experiments beside a re-run of the run's config."""
    result = side.result
    assert result is not None  # advise refuses a trace without its run (run)
    from profiler.sweep.executors.local import visible_gpus
    from profiler.sweep.trial_cells import check_folders, run_trial

    gpus = visible_gpus()
    count = processes if processes is not None else (3 if gpus else 1)
    say = sink.note  # the trial's progress: none with -q
    check_runs_here(config, gpus)
    check_folders(config, plan.experiments, folder, trace_dir, resume)
    from profiler.runs import model_source

    # the cells import the model result.json names: only the file the run recorded, compiled
    # from the bytes checked here
    checked = model_source.check(
        "the run", config.model, result.model_source, trust_model, sink.note, sink.warn
    )
    say(
        f"advise --try: {len(plan.experiments)} experiment(s) for {config.run_name} beside its "
        f"re-run baseline, {count} process(es) each"
        + (f", within {units.plain(budget_s)} s" if budget_s else "")
        + (f", at most {max_cells} cells" if max_cells else "")
        + f"; cells in {folder}/"
    )
    from profiler import signals

    with signals.as_interrupts(), model_source.handed_on([checked]):
        # (SIGTERM, SIGHUP: like Ctrl-C; finished cells kept)
        return run_trial(
            config,
            plan.experiments,
            folder,
            trace_dir,
            budget_s=budget_s,
            max_cells=max_cells,
            processes=count,
            resume=resume,
            gpus=gpus[:1] or None,
            say=say,
        )


def _write_trial_page(
    side: RunAnalysis,
    folder: Path,
    advice: list[Advice],
    plan: Plan,
    rows: list[TrialRow],
    base: BaselineRow,
    record: TrialRecord,
) -> Path:
    """Write the trial's HTML page into its folder; its path."""
    result = side.result
    assert result is not None  # advise refuses a trace without its run (run)
    from profiler.analysis.trial import baseline_noise
    from profiler.fsutil import write_text_atomic
    from profiler.report.trial_view import trial_html

    page = folder / "report.html"
    write_text_atomic(
        page,
        trial_html(
            str(side.run_folder),
            advice,
            plan,
            rows,
            base,
            record,
            baseline_noise(result, side.result_json),
        ),
    )
    return page


def check_runs_here(config: RunConfig, gpus: list[str]) -> None:
    """Refuse up front, in one line, a baseline this machine cannot run (the run's own config:
    without it no experiment has anything to be measured against)."""
    from profiler.collect.backends import get

    why = get(config.backend).unavailable_reason(bool(gpus))
    if why:
        raise UserError(
            f"advise --try re-runs the run's config, and its backend {config.backend} "
            f"cannot run here: {why}"
        )
    if config.cuda_graphs and not gpus:
        raise UserError(
            "advise --try re-runs the run's config, which was recorded with "
            "--cuda-graphs: that needs a CUDA GPU, and this machine has none"
        )


def trial_exit(trial: Trial, folder: Path, sink: Sink) -> int:
    """The exit status of a trial: 0 when the baseline and at least one experiment that ran
    finished; else an ``error:`` line and 1 (2 when the baseline failed on a user error, as
    `run` exits on one)."""
    baseline, tried = trial.cells[0], [c for c in trial.cells[1:] if c.status != "not run"]
    if baseline.status != "ok":
        sink.error(
            f"the baseline (the run as it is) {baseline.status}"
            + (f": {baseline.reason}" if baseline.reason else "")
            + f"; the experiments have nothing to be measured against, the rest were not "
            f"run (trial.json and logs in {folder})"
        )
        return 2 if baseline.kind == "user-error" else 1
    if tried and not any(c.status == "ok" for c in tried):
        sink.error(
            f"every experiment that ran failed (first: {tried[0].experiment.label}: "
            f"{tried[0].reason or tried[0].status}); trial.json and logs in {folder}"
        )
        return 1
    return 0


def advice_of(side: RunAnalysis) -> list[Advice]:
    """The advice rules that fired on the run (a seam for tests)."""
    return side.advice


def experiment_record(e: Experiment) -> PlannedExperiment:
    """An experiment of the plan as --json prints it (PlannedExperiment)."""
    from profiler.analysis.records import PlannedExperiment

    return PlannedExperiment(
        label=e.label,
        changes=e.changes,
        rules=list(e.rules),
        source=e.source,
        projected_speedup=e.promise if e.promise > 1 else None,
        projection=e.promise_kind if e.promise > 1 else None,
        cost=e.cost,
    )

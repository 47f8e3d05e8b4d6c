"""`advise --try`: the experiments of a run's advice run as cells, with the sweep's guarantees.

The run's own config is re-run as the cell ``baseline`` beside the experiments (so both are
measured the same way, the same hour), then each experiment in the plan's order
(profiler.analysis.experiments: most promising per cost first), one cell each through the local
executor: a worker process per GPU, a crash or out-of-memory recorded as that cell's failure and
the rest go on. Cells stop being handed out once ``budget_s`` seconds or ``max_cells`` cells are
spent; the cells not run are listed as such. Then the finished forward cells are timed again in
``processes`` - 1 interleaved rounds of fresh processes (profiler.sweep.rounds), so every
speedup has a verdict over processes. A cell's numerics are checked by its run against the FP32
eager reference, as every run's are.

Layout: ``<runs-dir>/advise_<run>/`` holds each cell's run folder (``<backend>_bs<N>_<change>``),
``logs/`` (the cells' and the workers' logs) and ``trial.json`` (what ran, how it ended, how
long); traces go to ``<tb-dir>/advise_<run>/``. ``resume``: cells with a result.json are kept,
the others run. A baseline that fails stops the trial: the experiments would have nothing to be
measured against.

Ownership (check_trial_folders): both trial folders are this tool's, as a run's folders are: a
real folder (never a symlink) holding the marker file (profiler.fsutil.MARKER), made by the
trial; an empty folder is taken and marked. A trial folder of an older version (trial.json, no
marker) is taken back on --resume. Anything else there (a folder of the user's, a sweep, a run,
a symlink, a cell's folder without the marker) is refused in one line before anything is
written. Never imports torch."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from profiler import signals, units
from profiler.analysis.experiments import Experiment
from profiler.analysis.records import StoppedBy, TrialCellRecord, TrialRecord, plain
from profiler.errors import Interrupted, UserError
from profiler.fsutil import (
    MARKER,
    clean_leftovers,
    folder_lock,
    is_ours,
    read_small,
    write_json_atomic,
    write_text_atomic,
)
from profiler.notices import Say
from profiler.runs.config import RunConfig, config_to_json
from profiler.runs.layout import MANIFEST, RESULT_FILE, check_separate_roots
from profiler.runs.result import try_read_result
from profiler.runs.samples import (
    ConfigSamples,
    config_of,
    config_samples,
    record_processes,
    window_of,
)
from profiler.runs.workloads import workload
from profiler.sweep import executors, rounds
from profiler.sweep.cell import CellJob, CellOutcome
from profiler.sweep.plan import DEFAULT_PROCESSES

TRIAL_FILE = "trial.json"
BASELINE = Experiment(
    "the run as it is", {}, (), "the run's own config, re-run beside the experiments"
)


@dataclass
class TrialCell:
    """One experiment's cell and how it ended."""

    experiment: Experiment
    folder: str  # the cell's run folder name
    status: str = "not run"  # ok, failed, oom, timeout, interrupted, not run
    reason: str | None = None
    elapsed_s: float | None = None
    kind: str | None = None  # how it ended, typed (profiler.sweep.cell.KINDS)


@dataclass
class Trial:
    folder: Path
    trace_dir: Path
    cells: list[TrialCell]
    wall_s: float = 0.0
    processes: int = 1
    #: "budget", "cells", "baseline" (it failed), or None when every cell ran
    stopped_by: StoppedBy | None = None
    rounds_s: float = 0.0
    #: why the baseline was timed once more before any verdict (baseline_again), in one line
    baseline_again: str | None = None

    def record(self) -> TrialRecord:
        """trial.json's record (what ran, how it ended, how long)."""
        return TrialRecord(
            folder=str(self.folder),
            wall_s=round(self.wall_s, 3),
            rounds_s=round(self.rounds_s, 3),
            processes=self.processes,
            stopped_by=self.stopped_by,
            baseline_again=self.baseline_again,
            cells=[
                TrialCellRecord(
                    label=c.experiment.label,
                    changes=c.experiment.changes,
                    rules=list(c.experiment.rules),
                    folder=c.folder,
                    status=c.status,
                    reason=c.reason,
                    elapsed_s=c.elapsed_s,
                    kind=c.kind,
                )
                for c in self.cells
            ],
        )

    def to_dict(self) -> dict[str, Any]:
        """trial.json's data (record, as JSON values)."""
        data: dict[str, Any] = plain(self.record())
        return data


class _Spent(Exception):
    """The budget of time or cells ran out: no more cells are handed out."""


def cell_config(
    base: RunConfig,
    experiment: Experiment,
    runs_dir: Path,
    tb_dir: Path,
    slug: str,
    replace: bool = False,
) -> RunConfig:
    """The experiment's RunConfig: the run's, changed, written under the trial's folders;
    ``replace``: the cell's folders are there, and this trial's (check_trial_folders)."""
    changes = {
        **experiment.changes,
        "runs_dir": runs_dir,
        "tb_dir": tb_dir,
        "name": slug,
        "repeat_runs": 1,
        "target_noise": None,
        "budget": None,
        "replace": replace,
    }
    try:
        return dataclasses.replace(base, **changes)
    except UserError as error:
        raise UserError(f"{experiment.label}: {error}") from None


def run_trial(
    base: RunConfig,
    experiments: list[Experiment],
    folder: Path,
    trace_dir: Path,
    *,
    budget_s: float | None = None,
    max_cells: int | None = None,
    processes: int = DEFAULT_PROCESSES,
    resume: bool = False,
    gpus: list[str] | None = None,
    say: Say = print,
) -> Trial:
    """Baseline and experiments as cells, then the rounds; see the module doc."""
    names = check_folders(base, experiments, folder, trace_dir, resume)
    with folder_lock(folder, trace_dir, what="trial"):
        check_trial_folders(folder, trace_dir, names, resume)  # again: the lock is ours now
        for f in (folder, trace_dir):
            _make_ours(f)
            clean_leftovers(f)
        return _run(base, experiments, folder, trace_dir, budget_s, max_cells, processes, gpus, say)


# ---- which folders a trial writes: only its own ---------------------------------------------


def check_folders(
    base: RunConfig, experiments: list[Experiment], folder: Path, trace_dir: Path, resume: bool
) -> list[str]:
    """Refuse, in one line and before anything is written, folders the trial may not write:
    results and traces in one folder (or one inside the other, as `run` refuses), and folders
    that are not this trial's (check_trial_folders). Returns the cells' folder names."""
    check_separate_roots(folder, trace_dir)
    names = [
        cell_config(
            base, experiment, folder, trace_dir, "baseline" if index == 0 else experiment.slug
        ).run_name
        for index, experiment in enumerate([BASELINE, *experiments])
    ]
    check_trial_folders(folder, trace_dir, names, resume)
    return names


def _kind(path: Path) -> str | None:
    """None when nothing is there, else "folder", "symlink" or "file"."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror}") from None
    return "folder" if stat.S_ISDIR(mode) else "symlink" if stat.S_ISLNK(mode) else "file"


def _entries(folder: Path) -> list[Path]:
    """What a folder holds besides the marker (a regular file: a symlink of that name counts)."""
    try:
        return [e for e in folder.iterdir() if e.name != MARKER or _kind(e) != "file"]
    except OSError as error:
        raise UserError(f"cannot read {folder}: {error.strerror}") from None


def is_trial_file(path: Path) -> bool:
    """A trial.json this tool wrote: a JSON object with its folder and a list of cells."""
    try:
        data = json.loads(read_small(path, 16 << 20, "trial file"))
    except (UserError, ValueError, RecursionError):
        return False
    return (
        isinstance(data, dict)
        and isinstance(data.get("cells"), list)
        and isinstance(data.get("folder"), str)
    )


def _is_trial(folder: Path) -> bool:
    """A trial folder: marked, or (made by a version before the marker) holding trial.json;
    never a sweep's or a run's folder."""
    if (folder / MANIFEST).exists() or (folder / RESULT_FILE).exists():
        return False
    return is_ours(folder) or is_trial_file(folder / TRIAL_FILE)


def check_trial_folders(folder: Path, trace_dir: Path, cells: list[str], resume: bool) -> None:
    """Refuse, in one line and before anything is written, trial folders this tool did not
    make (see the module doc). ``cells``: the cells' folder names, in both folders."""
    how = "advise --try writes only into a trial folder it made"
    for path, flag in ((folder, "--runs-dir"), (trace_dir, "--tb-dir")):
        kind = _kind(path)
        if kind in ("symlink", "file"):
            raise UserError(
                f"{path} exists and is a {'symlink' if kind == 'symlink' else 'file'}"
                f", not a folder: {how}; move it away, or pass {flag} for another "
                "place"
            )
    mine = _kind(folder) is None or not _entries(folder)
    if not mine:
        if (folder / MANIFEST).exists():
            raise UserError(
                f"{folder} is a sweep ({MANIFEST}): {how}; move it away, or pass "
                "--runs-dir for another place"
            )
        if (folder / RESULT_FILE).exists():
            raise UserError(
                f"{folder} is a run's folder ({RESULT_FILE}): {how}; move it away, "
                "or pass --runs-dir for another place"
            )
        if not _is_trial(folder):
            raise UserError(
                f"{folder} exists and is not a trial folder of this tool (no "
                f"{MARKER} marker, no {TRIAL_FILE}): {how}; move it away, or pass "
                "--runs-dir for another place"
            )
        if not resume:
            raise UserError(
                f"{folder} already exists: pass --resume to continue that trial, or remove it"
            )
    if _kind(trace_dir) == "folder" and _entries(trace_dir) and not is_ours(trace_dir):
        # a trial of a version before the marker: its cells' trace folders, each a run's (and
        # what its runs' clean-up leaves: hidden locks)
        legacy = (
            not mine
            and not is_ours(folder)
            and all(is_ours(e) or e.name.startswith(".") for e in _entries(trace_dir))
        )
        if not legacy:
            first = sorted(e.name for e in _entries(trace_dir))[0]
            raise UserError(
                f"{trace_dir} holds {first!r} and is not a trial folder of this "
                f"tool (no {MARKER} marker): {how}; move it away, or pass --tb-dir "
                "for another place"
            )
    for parent in (folder, trace_dir):
        for name in cells:
            path = parent / name
            kind = _kind(path)
            if kind is not None and (kind != "folder" or not is_ours(path)):
                raise UserError(
                    f"{path} was not made by this tool (no {MARKER} marker): "
                    f"advise --try never replaces it; move it away"
                )
    _check_trial_paths(folder, how)


#: the files a trial writes in its folder besides its cells' (trial.json, the page of
#: advise.py) and the folders of its logs (the cells', the workers': executors.local)
TRIAL_PAGE = "report.html"
LOG_FOLDERS = ("logs", "logs/workers")


def _check_trial_paths(folder: Path, how: str) -> None:
    """The trial's own paths, before the first cell: its log folders are real folders (never a
    symlink, which the logs would be written through) holding no symlink, and its files
    (trial.json, report.html) are regular files or nothing."""
    for relative in LOG_FOLDERS:
        path = folder / relative
        kind = _kind(path)
        if kind not in (None, "folder"):
            raise UserError(f"{path} is a {kind}, not a folder: {how}; move it away")
        if kind == "folder":
            linked = sorted(e.name for e in _entries(path) if _kind(e) == "symlink")
            if linked:
                raise UserError(
                    f"{path / linked[0]} is a symlink: {how}, and never writes a log "
                    "through a link; move it away"
                )
    for name in (TRIAL_FILE, TRIAL_PAGE):
        path = folder / name
        kind = _kind(path)
        if kind is not None and (kind != "file" or not stat.S_ISREG(os.lstat(path).st_mode)):
            shown = "special file" if kind == "file" else kind
            raise UserError(f"{path} is a {shown}, not a regular file: {how}; move it away")


def _make_ours(folder: Path) -> None:
    """The trial folder, made (or taken, when empty or a trial's) with the marker."""
    folder.mkdir(parents=True, exist_ok=True)
    if not is_ours(folder):  # (never through a symlink of the marker's name)
        write_text_atomic(folder / MARKER, f"{os.getpid()} {time.strftime('%Y-%m-%d %H:%M:%S')}\n")


def _run(
    base: RunConfig,
    experiments: list[Experiment],
    folder: Path,
    trace_dir: Path,
    budget_s: float | None,
    max_cells: int | None,
    processes: int,
    gpus: list[str] | None,
    say: Say,
) -> Trial:
    began = time.perf_counter()
    (folder / "logs").mkdir(exist_ok=True)
    cells, jobs = _cells_and_jobs(base, experiments, folder, trace_dir, budget_s)
    trial = Trial(folder, trace_dir, cells, processes=processes)
    by_name = {job.name: cell for cell, job in jobs}
    limit = None if max_cells is None else max(0, max_cells - (len(cells) - len(jobs)))
    ran = 0

    def on_start(job: CellJob, where: dict[str, Any]) -> None:
        cell = by_name[job.name]
        cell.status, cell.reason = "running", None
        write_json_atomic(folder / TRIAL_FILE, trial.to_dict())
        say(f"[{cells.index(cell) + 1}/{len(cells)}] {cell.experiment.label}: running")

    def on_done(job: CellJob, outcome: CellOutcome) -> None:
        nonlocal ran
        cell = by_name[job.name]
        cell.status, cell.reason = outcome.status, outcome.reason
        cell.elapsed_s, cell.kind = round(outcome.elapsed_s, 3), outcome.kind
        ran += 1
        say(
            f"    {cell.experiment.label}: {outcome.status}"
            + (f" ({outcome.reason})" if outcome.reason else "")
            + f" in {units.time(outcome.elapsed_s, 's', decimals=1, thousands=False)}"
        )
        write_json_atomic(folder / TRIAL_FILE, trial.to_dict())
        # nothing to measure against (a stopped baseline is the stop's: it goes on)
        if cell is cells[0] and outcome.status not in ("ok", "interrupted"):
            trial.stopped_by = "baseline"
            raise _Spent()
        if budget_s is not None and time.perf_counter() - began >= budget_s:
            trial.stopped_by = "budget"
            raise _Spent()
        if limit is not None and ran >= limit:
            trial.stopped_by = "cells"
            raise _Spent()

    executor = executors.get("local")(
        executors.ExecutorSettings(gpus=gpus, isolate=False, log_dir=folder / "logs")
    )  # never the current folder
    try:
        if jobs and (limit is None or limit > 0):
            executor.run([job for _, job in jobs], on_start, on_done)
        elif jobs:
            trial.stopped_by = "cells"
    except _Spent:
        pass
    except KeyboardInterrupt as stop:  # Ctrl-C; SIGTERM and SIGHUP through signals
        _stopped(trial, began, stop)
    _retime(trial, processes, say)
    trial.wall_s = time.perf_counter() - began
    write_json_atomic(folder / TRIAL_FILE, trial.to_dict())
    return trial


def _cells_and_jobs(
    base: RunConfig,
    experiments: list[Experiment],
    folder: Path,
    trace_dir: Path,
    budget_s: float | None,
) -> tuple[list[TrialCell], list[tuple[TrialCell, CellJob]]]:
    """The trial's cells, the baseline first, and the jobs of those not kept from before."""
    cells, jobs = [], []
    for index, experiment in enumerate([BASELINE, *experiments]):
        slug = "baseline" if index == 0 else experiment.slug
        config = cell_config(base, experiment, folder, trace_dir, slug)
        # a cell's folder that is there is this trial's (check_trial_folders): replaced
        if any(_kind(f / config.run_name) == "folder" for f in (folder, trace_dir)):
            config = cell_config(base, experiment, folder, trace_dir, slug, replace=True)
        cell = TrialCell(experiment, config.run_name)
        cells.append(cell)
        if try_read_result(folder / cell.folder / RESULT_FILE) is not None:
            cell.status = "ok"
            cell.reason = "kept from before (--resume)"
            continue
        # no cell may take longer than the whole budget (status timeout, the rest go on)
        jobs.append(
            (
                cell,
                CellJob(
                    name=cell.folder,
                    config=config_to_json(config),
                    log_path=str(folder / "logs" / f"{cell.folder}.log"),
                    timeout_s=budget_s,
                ),
            )
        )
    return cells, jobs


def _stopped(trial: Trial, began: float, stop: KeyboardInterrupt) -> NoReturn:
    """Record the cells a stop interrupted, then say what was kept."""
    cells, folder = trial.cells, trial.folder
    for cell in cells:
        if cell.status == "running":
            cell.status, cell.reason = "interrupted", signals.describe(stop)
    trial.wall_s = time.perf_counter() - began
    write_json_atomic(folder / TRIAL_FILE, trial.to_dict())
    done = sum(1 for c in cells if c.status == "ok")
    raise Interrupted(
        f"advise --try stopped; {done} finished cell(s) kept in {folder} (continue with --resume)",
        exit_code=signals.exit_code(stop),
    ) from None


def _retime(trial: Trial, processes: int, say: Say) -> None:
    """The rounds over the finished cells, then the baseline again; a stop keeps what was
    taken."""
    try:
        _sample(trial, processes, say)
        baseline_again(trial, say)
    except KeyboardInterrupt as stop:
        write_json_atomic(trial.folder / TRIAL_FILE, trial.to_dict())
        raise Interrupted(
            f"advise --try stopped while re-timing; the cells and the windows "
            f"taken so far are kept in {trial.folder} (continue with --resume)",
            exit_code=signals.exit_code(stop),
        ) from None


def _sample(trial: Trial, processes: int, say: Say) -> None:
    """The rounds over the finished forward cells (the baseline among them)."""
    if processes <= 1:
        return
    configs, have, results = {}, {}, {}
    for cell in trial.cells:
        result = (
            try_read_result(trial.folder / cell.folder / RESULT_FILE)
            if cell.status == "ok"
            else None
        )
        if result is None or not workload(result.workload).sampled:
            continue
        windows = config_samples(result, trial.folder / cell.folder / RESULT_FILE)
        if not len(windows):
            continue
        configs[cell.folder] = rounds.window_config(
            config_of(result), result.timing.iters, result.timing.warmup_iters
        )
        have[cell.folder], results[cell.folder] = windows, result
    if len(configs) < 2:
        return
    began = time.perf_counter()
    say(f"timing {len(configs)} cells again: {processes} processes each, interleaved")

    recorded: dict[str, int] = {}

    def record(sampled: rounds.Sampled) -> None:
        for name in sampled.windows:
            merged = sampled.merged(name, have[name])
            if len(merged) != recorded.get(name):
                recorded[name] = len(merged)
                results[name] = record_processes(
                    trial.folder / name,
                    merged,
                    f"advise --try: {processes} processes per cell, interleaved",
                    results[name],
                )

    rounds.sample(configs, have, processes, say=say, on_round=record)
    trial.rounds_s = time.perf_counter() - began


def baseline_again(trial: Trial, say: Say) -> None:
    """A baseline whose verdicts would rest on one timed window, that window flagged noisy,
    bimodal or drifting (profiler.analysis.timed_window): one more window of it in a fresh process
    (profiler.sweep.rounds.run_round), recorded beside its own (processes.csv), so the verdicts
    rest on both; said in one line, and kept in ``trial.baseline_again``. A window that fails
    is said too, and the baseline keeps its one window."""
    from profiler.analysis.timed_window import window_flags
    from profiler.analysis.trial import baseline_noise

    cell = trial.cells[0]
    path = trial.folder / cell.folder / RESULT_FILE
    result = try_read_result(path) if cell.status == "ok" else None
    if result is None or not workload(result.workload).sampled:
        return
    have = config_samples(result, path)
    noise = baseline_noise(result, path)
    flags = window_flags(noise.warnings)
    if len(have.for_verdict()) != 1 or not flags or noise.cv is None:
        return
    why = f"the baseline's one window is {' and '.join(flags)} (CV {units.percent(100 * noise.cv)})"
    say(f"{why}: timing it once more in a fresh process before any verdict")
    config = rounds.window_config(
        config_of(result), result.timing.iters, result.timing.warmup_iters
    )
    got = rounds.run_round([(cell.folder, config)])[cell.folder]
    if isinstance(got, str):
        trial.baseline_again = f"{why}; its second window failed ({got})"
        say(f"  the baseline: no second window ({got})")
        return
    record_processes(
        trial.folder / cell.folder,
        ConfigSamples((*have.windows, window_of(got))),
        f"advise --try: the baseline timed once more (its window was {' and '.join(flags)})",
        result,
    )
    trial.baseline_again = (
        f"{why}: timed once more in a fresh process; the verdicts rest on both windows"
    )

"""Running a sweep's plan (profiler.sweep.plan): its cells handed to an executor, each start and
outcome recorded in the manifest (profiler.sweep.record), then --processes' sampling rounds.

An executor (profiler.sweep.executors; ``--executor``, default local) runs the cells: the local one
keeps a worker process per GPU (``--gpus``, default all visible) alive across cells, so imports
and the CUDA context are paid once per GPU, and never runs two cells on one GPU at once;
``--isolate`` gives every cell a fresh process instead. A crash, a CUDA out-of-memory or a hung
compiler in one cell is recorded with its reason (the worker replaced) and the sweep goes on.
This process never imports torch: it validates the options (RunConfig, the backend registry),
hands out the cells, summarizes each finished cell's trace (profiler.trace, torch-free) and
writes the tables.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from profiler import notices, runs, signals, units
from profiler.analysis import sequential as sequential_rule
from profiler.analysis.headline import machine_noise
from profiler.errors import Interrupted, UserError, os_error_line
from profiler.fsutil import clean_leftovers, folder_lock
from profiler.notices import Say
from profiler.runs.layout import MANIFEST
from profiler.runs.manifest import (
    INTERRUPTED,
    OK,
    RUNNING,
    SweepManifest,
)
from profiler.runs.samples import config_samples, record_processes
from profiler.sweep import executors, rounds
from profiler.sweep.cell import CellJob, CellOutcome
from profiler.sweep.plan import SweepPlan, cell_config, cell_job
from profiler.sweep.record import (
    clean_cells,
    describe,
    is_done,
    on_gpu,
    record_interrupted,
    record_outcome,
    record_start,
    start_manifest,
    write_manifest,
)

#: a sweep's progress bar: called once per cell done or skipped
Progress = Callable[[], object]


def make_executor(p: SweepPlan) -> executors.Executor:
    settings = executors.ExecutorSettings(
        gpus=p.gpus,
        isolate=p.isolate,
        log_dir=p.sweep_dir / "logs",
        options={"address": p.ray_address, "shared_fs": p.ray_shared_fs},
    )
    return executors.get(p.executor)(settings)


@dataclass
class SweepOutcome:
    manifest: SweepManifest
    wall_s: float
    ran: int
    skipped: int


def run_sweep(p: SweepPlan, say: Say = print, progress: Progress | None = None) -> SweepOutcome:
    """Run every cell not done yet. ``say(text)`` prints a line per cell; ``progress(advance)``
    moves a progress bar. Ctrl-C marks the running cell interrupted, keeps the finished ones,
    and raises Interrupted once the manifest is written."""
    # one process writes a sweep folder at a time: a second refuses with one line
    with folder_lock(p.sweep_dir, p.trace_dir, what="sweep"):
        for folder in (p.sweep_dir, p.trace_dir):  # what killed cells left
            clean_leftovers(folder)
        return _run_sweep(p, say, progress)


def _run_sweep(p: SweepPlan, say: Say, progress: Progress | None) -> SweepOutcome:
    began = time.perf_counter()
    manifest = start_manifest(p)
    p.sweep_dir.mkdir(parents=True, exist_ok=True)
    write_manifest(p.sweep_dir, manifest)
    executor = make_executor(p)
    if hasattr(executor, "say"):  # an executor's own lines (Ray's cluster) go with the sweep's
        executor.say = say
    say(
        f"sweep {p.name}: {len(p.backends)} backends x {len(p.batch_sizes)} batch sizes = "
        f"{len(p.cells)} cells of {p.options['model']}, {executor.describe()}; results in "
        f"{p.sweep_dir}/"
    )
    labels = {c.name: f"[{i}/{len(p.cells)}] {c.label}" for i, c in enumerate(p.cells, start=1)}
    jobs, skipped = _jobs(p, manifest, labels, say, progress)
    events = _CellEvents(p, manifest, labels, say, progress)
    session = getattr(executor, "session", contextlib.nullcontext)
    try:
        with session():  # Ray: one connection for the cells and the rounds
            executor.run(jobs, events.on_start, events.on_done)
            sample_cells(p, manifest, say, executor)
    except KeyboardInterrupt as stop:  # Ctrl-C; SIGTERM and SIGHUP in signals.as_interrupts()
        raise _interrupted(p, manifest, events, stop, began) from None
    wall = time.perf_counter() - began
    manifest.wall_s = round(wall, 3)
    write_manifest(p.sweep_dir, manifest)
    return SweepOutcome(manifest=manifest, wall_s=wall, ran=len(jobs), skipped=skipped)


def _jobs(
    p: SweepPlan,
    manifest: SweepManifest,
    labels: dict[str, str],
    say: Say,
    progress: Progress | None,
) -> tuple[list[CellJob], int]:
    """The jobs of the cells to run, and how many were skipped (done before, --resume)."""
    jobs, skipped = [], 0
    for cell in p.cells:
        name = cell.name
        if p.resume and is_done(p.sweep_dir, manifest.cells[name], name, p.trace_dir):
            skipped += 1
            say(f"{labels[name]}: done before, skipped (--resume)")
            if progress:
                progress()
        else:
            # a cell of this sweep whose folder is there but damaged is run again in its place
            replace = p.resume and (p.sweep_dir / name).is_dir()
            jobs.append(cell_job(p, cell, replace=replace))
    return jobs, skipped


@dataclass
class _CellEvents:
    """What the executor reports of each cell, into the manifest (written after each change)."""

    p: SweepPlan
    manifest: SweepManifest
    labels: dict[str, str]
    say: Callable[[str], object]
    progress: Callable[[], object] | None
    running: set[str] = field(default_factory=set)
    unwritable: list[OSError] = field(default_factory=list)  # the manifest write that failed
    # the cells the last manifest written lists as running
    listed_running: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        cells = self.manifest.cells
        self.listed_running = {name for name, cell in cells.items() if cell.status == RUNNING}

    def save(self) -> None:
        """sweep.json after a cell's change. A write that fails stops the sweep (the executor
        stops the running cells as for Ctrl-C); later changes wait in memory for the stop's
        last try."""
        if self.unwritable:
            return
        try:
            write_manifest(self.p.sweep_dir, self.manifest)
        except OSError as error:
            self.unwritable.append(error)
            raise executors.SweepStopped(f"the sweep stopped: {os_error_line(error)}") from None
        self.listed_running.clear()
        self.listed_running.update(n for n, c in self.manifest.cells.items() if c.status == RUNNING)

    def on_start(self, job: CellJob, where: dict[str, Any]) -> None:
        self.running.add(job.name)
        record_start(self.manifest.cells[job.name], job.name, where)
        self.save()

    def on_done(self, job: CellJob, outcome: CellOutcome) -> None:
        self.running.discard(job.name)
        cell = self.manifest.cells[job.name]
        record_outcome(self.p, job.name, cell, outcome)
        self.save()
        if outcome.status != INTERRUPTED:
            said = describe(self.p.sweep_dir, job.name, cell)
            self.say(f"{self.labels[job.name]}{on_gpu(cell)}: {said}")
            if self.progress:
                self.progress()


def _interrupted(
    p: SweepPlan,
    manifest: SweepManifest,
    events: _CellEvents,
    stop: KeyboardInterrupt,
    began: float,
) -> Exception:
    """A sweep stopped (Ctrl-C, SIGTERM, SIGHUP): the running cells marked interrupted, the
    manifest written; the error to raise."""
    for name in events.running:  # cells the executor could not report
        record_interrupted(manifest.cells[name], stop)
    clean_cells(p)
    manifest.wall_s = round(time.perf_counter() - began, 3)
    if events.unwritable:
        return _stopped(p, manifest, events.unwritable[0], events.listed_running)
    write_manifest(p.sweep_dir, manifest)
    done = sum(1 for c in manifest.cells.values() if c.status == OK)
    return Interrupted(
        f"sweep stopped; {done} finished cell(s) kept in {p.sweep_dir} (stopped by "
        f"{signals.describe(stop)}; continue with --resume)",
        exit_code=signals.exit_code(stop),
    )


def _stopped(
    p: SweepPlan, manifest: SweepManifest, error: OSError, listed_running: set[str]
) -> UserError:
    """The one line of a sweep stopped because its manifest could not be written (a full
    disk), after one more try to write it (the stopped cells' staging folders are gone now).
    Either way sweep.json is whole: each write replaces it at once, or not at all."""
    done = sum(1 for c in manifest.cells.values() if c.status == OK)
    line = (
        f"{os_error_line(error)}: the sweep stopped; {done} finished cell(s) kept in {p.sweep_dir}"
    )
    try:
        write_manifest(p.sweep_dir, manifest)
    except OSError:
        line += (
            f"; {MANIFEST} could not be brought up to date: it lists "
            f"{len(listed_running)} cell(s) as running, which --resume runs again"
        )
    return UserError(line + "; make room, then continue with --resume")


def sample_cells(
    p: SweepPlan, manifest: SweepManifest, say: Say, executor: executors.Executor | None = None
) -> None:
    """--processes / --target-noise: more windows of every finished cell in fresh processes,
    interleaved over the cells (profiler.sweep.rounds), recorded in each cell's folder after
    every round (processes.csv, result.json's repeat_runs). An executor with a
    ``round_runner()`` runs the rounds' processes where it runs cells (Ray: as tasks on the
    cluster's GPUs); otherwise they run here, on --gpus."""
    if p.processes <= 1 and p.target_noise is None:
        return
    cells, have, results = _finished_cells(p, manifest)
    if p.executor == "local" and not p.gpus:  # no GPU here: a GPU's cells cannot be timed
        elsewhere = [name for name, r in results.items() if not r.device.startswith("cpu")]
        for name in elsewhere:
            del cells[name], have[name], results[name]
        if elsewhere:
            say(
                f"sampling: {len(elsewhere)} cell(s) recorded on a GPU left out of the rounds "
                "(this machine has none); their verdicts rest on the windows they have"
            )
    if not cells:
        return
    sequential = not p.fixed_rounds and p.target_noise is None
    say(f"sampling: {_sampling_words(p)}, {len(cells)} cells interleaved in fresh processes")
    round_runner, gpus = rounds.run_round, p.gpus or None
    if executor is not None and hasattr(executor, "round_runner"):
        round_runner, gpus = executor.round_runner()
    where = rounds.Sampled(windows={}, gpus=tuple(gpus or ())).placed()
    record = _recorder(p, len(cells), where, have, results)
    groups = {c.name: c.group for c in p.cells}  # the cells a verdict compares share a process
    sampled = rounds.sample(
        cells,
        have,
        p.processes,
        target_noise=p.target_noise,
        budget_s=p.budget_s,
        say=say,
        on_round=record,
        gpus=gpus,
        groups=groups,
        round_runner=round_runner,
        comparisons=[(a, b) for a, b in p.comparisons() if a in cells and b in cells]
        if sequential
        else None,
        machine=machine_noise(*results.values()),
    )
    record(sampled)
    say(
        f"sampling took {units.time(sampled.wall_s, 's', decimals=0, thousands=False)} "
        f"({sampled.rounds} round(s)"
        + (f" in {sampled.processes} processes over {where}" if len(sampled.gpus) > 1 else "")
        + ")"
        + (
            f"; {early} of {len(cells)} cells decided before round {p.processes}"
            if (early := _early(sampled, p.processes))
            else ""
        )
    )
    if sampled.errors:  # (a round's process killed: the OOM killer, a kill -9)
        first, why = next(iter(sampled.errors.items()))
        notices.warn(
            f"{len(sampled.errors)} of {len(cells)} cell(s) left the rounds with fewer than "
            f"the {p.processes} processes asked ({first}: {why}); their verdicts rest on the "
            "windows they have: `sweep --resume` times them again"
        )


def _early(sampled: rounds.Sampled, most: int) -> int:
    """The cells the sequential rounds let go before round ``most`` (--processes)."""
    return sum(1 for after in sampled.settled_after.values() if after < most)


def _sampling_words(p: SweepPlan) -> str:
    """How many rounds the cells take, in words."""
    if p.target_noise:
        return (
            f"{p.processes} processes per cell, more until ±{units.plain(100 * p.target_noise)} %"
            f" or {units.plain(p.budget_s or rounds.DEFAULT_BUDGET_S)} s"
        )
    if p.fixed_rounds:
        return f"{p.processes} processes per cell"
    return (
        f"up to {p.processes} rounds per cell"
        + (f", more within {units.plain(p.budget_s)} s for undecided ones" if p.budget_s else "")
        + f"; sequential ({sequential_rule.RULE}): a cell leaves the rounds once its verdicts "
        f"are decided at p < {units.plain(sequential_rule.INTERIM_ALPHA)}"
    )


def _finished_cells(
    p: SweepPlan, manifest: SweepManifest
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The cells the rounds sample (ok, their result.json read, with windows): per cell name
    its window config, the windows it has, and its result."""
    cells, have, results = {}, {}, {}
    for cell in p.cells:
        name = cell.name
        result = (
            runs.try_read_result(p.sweep_dir / name / runs.RESULT_FILE)
            if manifest.cells[name].status == OK
            else None
        )
        if result is None:
            continue
        windows = config_samples(
            result, p.sweep_dir / name / runs.RESULT_FILE, manifest.cells[name].gpu
        )
        if not len(windows):
            continue
        config = cell_config(
            p.options, cell.backend, cell.batch_size, cell.axis, p.sweep_dir, p.trace_dir
        )
        cells[name] = rounds.window_config(config, result.timing.iters, result.timing.warmup_iters)
        have[name], results[name] = windows, result
    return cells, have, results


def _recorder(
    p: SweepPlan, count: int, where: str, have: dict[str, Any], results: dict[str, Any]
) -> Callable[[rounds.Sampled], None]:
    """What records the rounds so far in each cell's folder (a cell they added nothing to since
    its last write is not rewritten)."""
    # what each cell's files hold now
    recorded: dict[str, tuple[Any, ...]] = {name: (len(have[name]), 0) for name in have}

    def record(sampled: rounds.Sampled) -> None:
        for name in sampled.windows:
            merged = sampled.merged(name, have[name])
            state = (len(merged), sampled.pilot_rounds)
            if state != recorded.get(name):
                recorded[name] = state
                results[name] = record_processes(
                    p.sweep_dir / name,
                    merged,
                    f"{_sampling_words(p)}; interleaved over {count} cells "
                    + (
                        "(a round = one fresh process timing each cell once, the leader rotated)"
                        if len(sampled.gpus) < 2
                        else f"(a round = fresh processes on {where} at once, "
                        "each timing the cells of whole batch-size groups once, the leader "
                        "rotated: windows pair only within one process, so on one GPU)"
                    ),
                    results[name],
                )

    return record

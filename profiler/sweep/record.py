"""A sweep's manifest: started from the plan (the folders checked, a resumed sweep's options
compared), and each cell's start and outcome recorded in it.

Layout of a sweep called S (``--name``, default ``sweep_<model>``):

    runs/S/sweep.json          the manifest: model, backends, batch sizes, baseline, shared
                               options, and per cell its status, reason, exit code, seconds and
                               trace metrics; written atomically after every change
    runs/S/benchmark.csv|.md   one row per cell (analysis.benchmark)
    runs/S/logs/<cell>.log     the cell's stdout and stderr
    runs/S/<backend>_bs<N>/    the cell's run folder (result.json, latency.csv)
    tb_logs/S/<backend>_bs<N>/ the cell's trace (TensorBoard shows S/<cell> as the run name)

Cell statuses: ok, failed, oom (the error line says "out of memory"), timeout
(``--cell-timeout``), interrupted (Ctrl-C), running (the sweep died while the cell ran), and
pending. Each cell records the GPU, host and worker that ran it. ``--resume`` skips the cells that
are ok and whose result.json exists, and runs the others again.
"""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from profiler import notices, runs, signals, units
from profiler.analysis.sweep_analysis import cell_metrics
from profiler.errors import UserError
from profiler.fsutil import MARKER, clean_leftovers, is_ours
from profiler.runs.config import RunConfig, keyed, run_options
from profiler.runs.layout import MANIFEST
from profiler.runs.manifest import (
    FAILED,
    INTERRUPTED,
    OK,
    RUNNING,
    SweepCell,
    SweepManifest,
    owner_gone_note,
    settle_running,
    shared_options,
)
from profiler.sweep.cell import CellOutcome
from profiler.sweep.plan import SweepPlan

read_manifest = runs.read_manifest


def write_manifest(sweep_dir: Path, manifest: SweepManifest) -> None:
    manifest.updated = _now()
    runs.write_manifest(sweep_dir, manifest)


def check_resumable(sweep_dir: Path, manifest: SweepManifest, options: dict[str, Any]) -> None:
    """Refuse to resume a sweep folder whose cells were measured differently."""
    old = manifest.options
    if old.get("model") != options.get("model"):
        raise UserError(
            f"{sweep_dir} holds a sweep of model {old.get('model')!r}, not "
            f"{options.get('model')!r}: pass --name for a new sweep"
        )
    shared = shared_options()
    # an option the manifest does not name (one added since the sweep began) had its default
    defaults = keyed({f.name: f.default for f in fields(RunConfig) if f.name in run_options()})
    before = {key: old.get(key, defaults.get(key)) for key in shared}
    # a swept option's cells are named by their value: another list is another grid
    swept = {
        key for key in shared if isinstance(before[key], list) or isinstance(options.get(key), list)
    }
    changed = [
        key
        for key, spec in shared.items()
        if not spec.resumable and key not in swept and before[key] != options.get(key)
    ]
    if changed:
        parts = [
            f"{shared[k].flags[0].split('/')[0]} {before[k]!r} (now {options.get(k)!r})"
            for k in changed
        ]
        raise UserError(
            f"{sweep_dir} was swept with {', '.join(parts)}: pass the same options "
            "to resume it, or --name for a new sweep"
        )


def _now(timespec: str = "seconds") -> str:
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


def start_manifest(p: SweepPlan) -> SweepManifest:
    """A fresh manifest, or the resumed one with this invocation's grid; refuses a sweep folder
    that exists without --resume, or that holds another model or other options."""
    check_sweep_folders(p)
    existing = p.sweep_dir.exists() and any(p.sweep_dir.iterdir())
    manifest = None
    if existing:
        if not p.resume:
            raise UserError(
                f"{p.sweep_dir} already exists: pass --resume to continue that "
                "sweep, or --name for a new one"
            )
        manifest = read_manifest(p.sweep_dir)
        if manifest is None:
            raise UserError(
                f"{p.sweep_dir} is not a sweep folder (no {MANIFEST}); use another --name"
            )
        check_resumable(p.sweep_dir, manifest, p.options)
        # (this sweep holds the folder's lock: a cell listed running is an earlier one's)
        orphans = settle_running(p.sweep_dir, manifest, mine=True)
        if orphans:
            notices.note(owner_gone_note(p.sweep_dir, orphans))
    grid = dict(
        model=p.options["model"],
        backends=p.backends,
        batch_sizes=p.batch_sizes,
        baseline=p.baseline,
        options=p.options,
        cell_timeout_s=p.cell_timeout_s,
        runs_dir=str(p.sweep_dir),
        tb_dir=str(p.trace_dir),
        command_line=[Path(sys.argv[0]).name, *sys.argv[1:]],
    )
    if manifest is None:
        manifest = SweepManifest(name=p.name, created=_now(), **grid)
    else:
        for key, value in grid.items():
            setattr(manifest, key, value)
    for cell in p.cells:
        manifest.cells.setdefault(
            cell.name,
            SweepCell(backend=cell.backend, batch_size=cell.batch_size, axis=cell.axis or None),
        )
    return manifest


def check_sweep_folders(p: SweepPlan) -> None:
    """A sweep writes only into folders it made: refused in one line, before anything is
    written, a file or symlink at the sweep's or its traces' place, a cell's folder in the sweep
    that this tool did not make (no marker, no result.json), and a trace folder holding
    anything but cells' trace folders (folders this tool made, or, resuming, folders of the
    cells its manifest lists: a sweep copied without its hidden files)."""
    how = "a sweep writes only into folders it made; move it away, or pass --name for another sweep"
    for path in (p.sweep_dir, p.trace_dir):
        if os.path.lexists(path) and not stat.S_ISDIR(os.lstat(path).st_mode):
            raise UserError(f"{path} exists and is not a folder (a file or a symlink): {how}")
    names = [cell.name for cell in p.cells]
    for name in names:
        cell = p.sweep_dir / name
        if os.path.lexists(cell) and not (
            stat.S_ISDIR(os.lstat(cell).st_mode)
            and (is_ours(cell) or (cell / runs.RESULT_FILE).is_file())
        ):
            raise UserError(
                f"{cell} was not made by this tool (no {MARKER} marker): a sweep "
                "never replaces it; move it away"
            )
    try:
        manifest = read_manifest(p.sweep_dir) if p.resume else None
    except UserError:  # a damaged one: start_manifest refuses it
        manifest = None
    listed = set(manifest.cells) if manifest is not None else set()
    try:
        foreign = sorted(
            e.name
            for e in p.trace_dir.iterdir()
            if not e.name.startswith(".")
            and not is_ours(e)
            and not (e.name in listed and stat.S_ISDIR(os.lstat(e).st_mode))
        )
    except FileNotFoundError:
        foreign = []
    except OSError as error:
        raise UserError(f"cannot read {p.trace_dir}: {error.strerror}") from None
    if foreign:
        raise UserError(
            f"{p.trace_dir} holds {foreign[0]!r}, which this tool did not make (no "
            f"{MARKER} marker): {how}"
        )


def is_done(sweep_dir: Path, cell: SweepCell, name: str, trace_dir: Path | None = None) -> bool:
    """An ok cell whose result.json still reads and whose traces are still there: a damaged
    cell is run again by --resume."""
    if cell.status != OK:
        return False
    result = runs.try_read_result(sweep_dir / name / runs.RESULT_FILE)
    if result is None:
        return False
    try:  # trace names are relative to where the sweep ran: found as a summarize finds them
        if len(runs.traces_named_by_result(sweep_dir / name)) == len(result.trace.files):
            return True
    except UserError:
        pass
    # the cell's trace folder still holding traces (a sweep folder moved elsewhere)
    return (
        trace_dir is not None and bool(runs.traces_in_folder(trace_dir / name))
        if result.trace.files
        else True
    )


def record_start(cell: SweepCell, name: str, where: dict[str, Any]) -> None:
    """A cell an executor started: running, where, and nothing of an earlier attempt."""
    _update(
        cell,
        status=RUNNING,
        kind=None,
        reason=None,
        exit_code=None,
        started=_now("milliseconds"),
        finished=None,
        log=f"logs/{name}.log",
        metrics=None,
        gpu=where.get("gpu"),
        node=where.get("node"),
        worker=where.get("worker"),
    )


def record_outcome(p: SweepPlan, name: str, cell: SweepCell, outcome: CellOutcome) -> None:
    """A finished cell into its manifest entry: status, reason, seconds, trace metrics."""
    _update(
        cell,
        status=outcome.status,
        kind=outcome.kind,
        reason=outcome.reason,
        exit_code=outcome.exit_code,
        elapsed_s=round(outcome.elapsed_s, 3),
        finished=_now("milliseconds"),
    )
    if outcome.gpu is not None:
        cell.gpu = outcome.gpu
    if outcome.node is not None:
        cell.node = outcome.node
    if outcome.status == OK and not (p.sweep_dir / name / runs.RESULT_FILE).is_file():
        _update(
            cell,
            status=FAILED,
            kind="died",
            reason="the cell exited 0 without writing result.json (did the model call os._exit?)",
        )
    if cell.status == OK:
        cell.metrics = cell_metrics(p.sweep_dir / name)
    else:  # a cell stopped by --cell-timeout or killed may leave staging folders
        clean_cells(p)


def record_interrupted(cell: SweepCell, stop: BaseException) -> None:
    """A running cell that the executor could not report when the sweep was stopped."""
    _update(
        cell,
        status=INTERRUPTED,
        reason=f"interrupted ({signals.describe(stop)})",
        finished=_now("milliseconds"),
    )


def on_gpu(cell: SweepCell) -> str:
    return f" on gpu {cell.gpu}" if cell.gpu is not None else ""


def clean_cells(p: SweepPlan) -> None:
    for folder in (p.sweep_dir, p.trace_dir):
        clean_leftovers(folder)


def _update(cell: SweepCell, **changes: object) -> None:
    for key, value in changes.items():
        setattr(cell, key, value)


def describe(sweep_dir: Path, name: str, cell: SweepCell) -> str:
    seconds = f"({units.time(cell.elapsed_s or 0, 's', decimals=1, thousands=False)})"
    if cell.status != OK:
        return f"{cell.status}: {cell.reason} {seconds}"
    result = runs.try_read_result(sweep_dir / name / runs.RESULT_FILE)
    if result is None:
        return f"ok {seconds}"
    broken = "; warning: the output holds NaN or Inf" if result.output.finite is False else ""
    return f"ok, p50 {units.time(result.timing.p50_ms, thousands=False)}{broken} {seconds}"

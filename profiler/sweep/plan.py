"""Sweeps: a backend x batch-size matrix of `profile.py run` cells, spread over the GPUs.

An executor (profiler.sweep.executors; ``--executor``, default local) runs the cells: the local one
keeps a worker process per GPU (``--gpus``, default all visible) alive across cells, so imports
and the CUDA context are paid once per GPU, and never runs two cells on one GPU at once;
``--isolate`` gives every cell a fresh process instead. A crash, a CUDA out-of-memory or a hung
compiler in one cell is recorded with its reason (the worker replaced) and the sweep goes on.
This process never imports torch: it validates the options (RunConfig, the backend registry),
hands out the cells, summarizes each finished cell's trace (profiler.trace, torch-free) and
writes the tables.

An option declared with an ``axis`` (--max-new-tokens, --src-len, --prompt-len, --seq-len,
--image-size) may be given a comma-separated list: the grid then holds one cell per value too,
named ``<backend>_bs<N>..._<axis><value>`` (e.g. ``_new16``).

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

import contextlib
import dataclasses
import os
import re
import stat
import sys
import time
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path

from profiler import runs, signals
from profiler.analysis.benchmark import with_gpus
from profiler.analysis.sweep import cell_metrics
from profiler.errors import Interrupted, UserError, os_error_line
from profiler.fsutil import MARKER, clean_leftovers, folder_lock, is_ours
from profiler.runs.config import (
    RunConfig,
    check_path_component,
    check_processes,
    config_to_json,
    keyed,
    run_name,
    run_options,
    unkeyed,
)
from profiler.runs.layout import MANIFEST
from profiler.runs.manifest import (
    FAILED,
    INTERRUPTED,
    OK,
    RUNNING,
    SweepCell,
    SweepManifest,
    axis_options,
    axis_values,
    cell_label,
    cell_name,
    shared_options,
)
from profiler.runs.samples import config_samples, record_processes
from profiler.runs.workloads import workload as workload_facts
from profiler.sweep import executors, rounds
from profiler.sweep.cell import CellJob, CellOutcome


def _plan_cell_name(p, backend: str, batch_size: int, axis: dict | None = None) -> str:
    return cell_name(
        backend, batch_size, p.options["model"], p.options.get("workload", "forward"), axis
    )


# ---- swept options (a list of values where a run takes one) ---------------------------------


def parse_axes(options: dict) -> dict:
    """The options with their axis values parsed: ``"64"`` -> 64, ``"16,64"`` -> [16, 64]
    (a list is an axis of the grid). Values that are numbers already are kept."""
    parsed = dict(options)
    for key, spec in axis_options().items():
        value = parsed.get(key)
        if not isinstance(value, str):
            continue
        flag = spec.flags[0]
        values = []
        for item in _split(value, flag, "16,64,256"):
            try:
                values.append(int(item))
            except ValueError:
                raise UserError(
                    f"{flag}: {item!r} is not a whole number (give one, or a "
                    "comma-separated list such as 16,64,256)"
                ) from None
        _no_duplicates(values, flag, "value")
        parsed[key] = values if len(values) > 1 else values[0]
    return parsed


def default_name(model: str) -> str:
    return "sweep_" + (re.sub(r"[^A-Za-z0-9._-]", "_", model).strip("._-") or "model")


# ---- parsing and validation ----------------------------------------------------------------


def parse_backends(text: str) -> list[str]:
    from profiler.collect import backends

    names = _split(text, "--backends", "pytorch_fp32,ttrt_fp16")
    for name in names:
        try:
            backends.get(name)
        except UserError as error:
            raise UserError(f"--backends: {error}") from None
    _no_duplicates(names, "--backends", "backend")
    return names


def parse_batch_sizes(text: str) -> list[int]:
    sizes = []
    for item in _split(text, "--bs", "1,8,32"):
        try:
            sizes.append(int(item))
        except ValueError:
            raise UserError(
                f"--bs: {item!r} is not a whole number (give a comma-separated list such as 1,8,32)"
            ) from None
        if sizes[-1] < 1:
            raise UserError(f"--bs: batch sizes must be at least 1 (got {sizes[-1]})")
    _no_duplicates(sizes, "--bs", "batch size")
    return sizes


def _split(text: str, flag: str, example: str) -> list[str]:
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise UserError(f"{flag} is empty: give a comma-separated list such as {example}")
    if not all(items):
        raise UserError(
            f"{flag} {text!r} has an empty item: give a comma-separated list such as {example}"
        )
    return items


def _no_duplicates(items: list, flag: str, what: str) -> None:
    seen = set()
    for item in items:
        if item in seen:
            raise UserError(f"{flag} names {what} {item} twice: each cell of a sweep runs once")
        seen.add(item)


def cell_config(
    options: dict,
    backend: str,
    batch_size: int,
    axis: dict | None = None,
    sweep_dir: Path = Path("runs"),
    trace_dir: Path = Path("tb_logs"),
) -> RunConfig:
    """One cell's RunConfig: the shared options (keyed as in the manifest) with the cell's
    backend, batch size and value of each swept option, writing into the sweep's folders. A cell
    with swept values gets the folder the sweep names it: `run` names a run
    ``<backend>_bs<N>_<--name>``, so --name is the rest of the cell's name."""
    shared = {k: v for k, v in options.items() if k in shared_options()}
    name = None
    if axis:
        full = cell_name(
            backend, batch_size, options["model"], options.get("workload", "forward"), axis
        )
        name = full[len(run_name(backend, batch_size, name="x")) - 1 :]
    return RunConfig(
        backend=backend,
        batch_size=batch_size,
        name=name,
        runs_dir=sweep_dir,
        tb_dir=trace_dir,
        **unkeyed({**shared, **(axis or {})}),
    )


def validate(options: dict, backend_names: list[str], batch_sizes: list[int]) -> None:
    """Every cell's configuration must be valid before the first one starts."""
    for axis in axis_values(options):
        for backend in backend_names:
            for batch_size in batch_sizes:
                cell_config(options, backend, batch_size, axis)


# ---- the manifest --------------------------------------------------------------------------

read_manifest = runs.read_manifest


def write_manifest(sweep_dir: Path, manifest: SweepManifest) -> None:
    manifest.updated = _now()
    runs.write_manifest(sweep_dir, manifest)


def check_resumable(sweep_dir: Path, manifest: SweepManifest, options: dict) -> None:
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


# ---- the sweep -----------------------------------------------------------------------------


@dataclass
class SweepPlan:
    name: str
    backends: list[str]
    batch_sizes: list[int]
    baseline: str
    options: dict
    runs_dir: Path = Path("runs")
    tb_dir: Path = Path("tb_logs")
    resume: bool = False
    cell_timeout_s: float | None = None
    # backend, batch size, and the cell's value of each swept option (empty when none is)
    cells: list[tuple[str, int, dict]] = field(default_factory=list)
    executor: str = "local"
    gpus: list[str] | None = None  # None: every visible GPU (the executor finds them)
    isolate: bool = False
    ray_address: str | None = None
    ray_shared_fs: bool = False
    #: windows per cell in fresh processes, its run's the first (profiler.sweep.rounds)
    processes: int = 1
    target_noise: float | None = None  # relative: 0.02 for --target-noise 2
    budget_s: float | None = None

    @property
    def sweep_dir(self) -> Path:
        return self.runs_dir / self.name

    @property
    def trace_dir(self) -> Path:
        return self.tb_dir / self.name


def plan(
    backends: str,
    batch_sizes: str,
    options: dict,
    name: str | None = None,
    baseline: str | None = None,
    runs_dir: Path = Path("runs"),
    tb_dir: Path = Path("tb_logs"),
    resume: bool = False,
    cell_timeout_s: float | None = None,
    executor: str = "local",
    gpus: str | None = None,
    isolate: bool = False,
    ray_address: str | None = None,
    ray_shared_fs: bool = False,
    processes: int | None = None,
    target_noise: float | None = None,
    budget_s: float | None = None,
) -> SweepPlan:
    backend_names = parse_backends(backends)
    sizes = parse_batch_sizes(batch_sizes)
    if baseline is None:
        baseline = backend_names[0]
    elif baseline not in backend_names:
        raise UserError(
            f"--baseline {baseline!r} is not one of --backends ({', '.join(backend_names)})"
        )
    if cell_timeout_s is not None and not cell_timeout_s > 0:
        raise UserError(f"--cell-timeout must be more than 0 seconds (got {cell_timeout_s})")
    name = check_path_component(name or default_name(options["model"]), "sweep name")
    runs.check_separate_roots(runs_dir, tb_dir)
    options = parse_axes(options)
    validate(options, backend_names, sizes)
    executors.get(executor)  # an unknown name is one line now, not after the first cell
    check_ray_options(executor, ray_address, ray_shared_fs)
    gpu_list = _parse_gpus(gpus, executor)
    processes = check_sampling(
        processes, target_noise, budget_s, executor, gpu_list, options.get("workload", "forward")
    )
    return SweepPlan(
        name=name,
        backends=backend_names,
        batch_sizes=sizes,
        baseline=baseline,
        options=options,
        runs_dir=runs_dir,
        tb_dir=tb_dir,
        resume=resume,
        cell_timeout_s=cell_timeout_s,
        cells=[(b, n, axis) for b in backend_names for n in sizes for axis in axis_values(options)],
        executor=executor,
        gpus=gpu_list,
        isolate=isolate,
        ray_address=ray_address,
        ray_shared_fs=ray_shared_fs,
        processes=processes,
        target_noise=None if target_noise is None else target_noise / 100,
        budget_s=budget_s,
    )


#: --processes when not given: on GPUs, five rounds (five pairs for the paired design: on the
#: H100, docs/gpu/h100/verdicts, pairing pays for GPU time from five pairs at the measured
#: within-process correlation, and the simulation calibrated on H100 noise suggests five); on
#: a machine without GPUs none (a CPU sweep tries the tool out; pass --processes to sample
#: it). QUICK_PROCESSES is the quick mode (--processes 3: unpaired, wider intervals).
DEFAULT_PROCESSES_GPU = 5
QUICK_PROCESSES = 3
DEFAULT_PROCESSES = DEFAULT_PROCESSES_GPU


def check_sampling(
    processes: int | None,
    target_noise: float | None,
    budget_s: float | None,
    executor: str,
    gpus: list[str] | None,
    workload: str,
) -> int:
    """--processes, --target-noise and --budget checked; the number of processes per cell."""
    if processes is not None:
        check_processes(processes)
    if target_noise is not None and not 0 < target_noise < 100:
        raise UserError(f"--target-noise is a percentage between 0 and 100 (got {target_noise:g})")
    if budget_s is not None and not budget_s > 0:
        raise UserError(f"--budget must be more than 0 seconds (got {budget_s:g})")
    if budget_s is not None and target_noise is None:
        raise UserError("--budget limits --target-noise: pass --target-noise P too")
    sampled = (processes or 1) > 1 or target_noise is not None
    if sampled and not workload_facts(workload).sampled:
        raise UserError(
            "--processes and --target-noise sample forward windows; they do not "
            f"apply to --workload {workload} yet"
        )
    if processes is None:  # Ray: when this machine has GPUs (a cluster's head usually does)
        on_gpus = gpus if executor == "local" else _local_gpus()
        processes = DEFAULT_PROCESSES_GPU if on_gpus and workload_facts(workload).sampled else 1
    return processes


def check_ray_options(executor: str, ray_address: str | None, ray_shared_fs: bool) -> None:
    if executor != "ray":
        if ray_address is not None or ray_shared_fs:
            flag = "--ray-address" if ray_address is not None else "--ray-shared-fs"
            raise UserError(f"{flag} needs --executor ray")
        return
    from profiler.sweep.executors.ray import check_reachable, import_ray

    import_ray()  # one line now, before the sweep folder is made, when Ray is missing
    if ray_address:
        check_reachable(ray_address)


def _local_gpus() -> list[str]:
    from profiler.sweep.executors.local import visible_gpus

    return visible_gpus()


def _parse_gpus(text: str | None, executor: str) -> list[str] | None:
    """--gpus for the local executor (checked against this machine's GPUs); other executors
    place cells on their cluster's GPUs."""
    if executor != "local":
        if text is not None:
            raise UserError(
                f"--gpus picks GPUs of this machine: the {executor} executor places cells itself"
            )
        return None
    from profiler.sweep.executors.local import parse_gpus, visible_gpus

    return parse_gpus(text, visible_gpus())


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
    for backend, batch_size, axis in p.cells:
        manifest.cells.setdefault(
            _plan_cell_name(p, backend, batch_size, axis),
            SweepCell(backend=backend, batch_size=batch_size, axis=axis or None),
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
    names = [_plan_cell_name(p, backend, size, axis) for backend, size, axis in p.cells]
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


def cell_job(
    p: SweepPlan, backend: str, batch_size: int, axis: dict | None = None, replace: bool = False
) -> CellJob:
    """One cell as an executor runs it: its RunConfig and its log file; ``replace``: the cell's
    folder may be replaced (a damaged cell of this sweep, run again on --resume)."""
    name = _plan_cell_name(p, backend, batch_size, axis)
    config = cell_config(p.options, backend, batch_size, axis, p.sweep_dir, p.trace_dir)
    if replace:
        config = dataclasses.replace(config, replace=True)
    assert config.run_name == name, (config.run_name, name)  # the folder the sweep reads
    return CellJob(
        name=name,
        config=config_to_json(config),
        log_path=str(p.sweep_dir / "logs" / f"{name}.log"),
        timeout_s=p.cell_timeout_s,
    )


def make_executor(p: SweepPlan):
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


def run_sweep(p: SweepPlan, say=print, progress=None) -> SweepOutcome:
    """Run every cell not done yet. ``say(text)`` prints a line per cell; ``progress(advance)``
    moves a progress bar. Ctrl-C marks the running cell interrupted, keeps the finished ones,
    and raises Interrupted once the manifest is written."""
    # one process writes a sweep folder at a time: a second refuses with one line
    with folder_lock(p.sweep_dir, p.trace_dir, what="sweep"):
        for folder in (p.sweep_dir, p.trace_dir):  # what killed cells left
            clean_leftovers(folder)
        return _run_sweep(p, say, progress)


def _run_sweep(p: SweepPlan, say, progress) -> SweepOutcome:
    began = time.perf_counter()
    manifest = start_manifest(p)
    p.sweep_dir.mkdir(parents=True, exist_ok=True)
    write_manifest(p.sweep_dir, manifest)
    executor = make_executor(p)
    say(
        f"sweep {p.name}: {len(p.backends)} backends x {len(p.batch_sizes)} batch sizes = "
        f"{len(p.cells)} cells of {p.options['model']}, {executor.describe()}; results in "
        f"{p.sweep_dir}/"
    )
    labels = {
        _plan_cell_name(p, b, n, axis): f"[{i}/{len(p.cells)}] {cell_label(b, n, axis)}"
        for i, (b, n, axis) in enumerate(p.cells, start=1)
    }
    jobs, skipped = [], 0
    for backend, batch_size, axis in p.cells:
        name = _plan_cell_name(p, backend, batch_size, axis)
        if p.resume and is_done(p.sweep_dir, manifest.cells[name], name, p.trace_dir):
            skipped += 1
            say(f"{labels[name]}: done before, skipped (--resume)")
            if progress:
                progress()
        else:
            # a cell of this sweep whose folder is there but damaged is run again in its place
            jobs.append(
                cell_job(
                    p, backend, batch_size, axis, replace=p.resume and (p.sweep_dir / name).is_dir()
                )
            )
    running: set[str] = set()
    unwritable: list[OSError] = []  # the manifest write that failed (a full disk)
    # the cells the last manifest written lists as running
    listed_running = {name for name, cell in manifest.cells.items() if cell.status == RUNNING}

    def save() -> None:
        """sweep.json after a cell's change. A write that fails stops the sweep (the executor
        stops the running cells as for Ctrl-C); later changes wait in memory for the stop's
        last try."""
        if unwritable:
            return
        try:
            write_manifest(p.sweep_dir, manifest)
        except OSError as error:
            unwritable.append(error)
            raise executors.SweepStopped(f"the sweep stopped: {os_error_line(error)}") from None
        listed_running.clear()
        listed_running.update(n for n, c in manifest.cells.items() if c.status == RUNNING)

    def on_start(job: CellJob, where: dict) -> None:
        running.add(job.name)
        _update(
            manifest.cells[job.name],
            status=RUNNING,
            kind=None,
            reason=None,
            exit_code=None,
            started=_now("milliseconds"),
            finished=None,
            log=f"logs/{job.name}.log",
            metrics=None,
            gpu=where.get("gpu"),
            node=where.get("node"),
            worker=where.get("worker"),
        )
        save()

    def on_done(job: CellJob, outcome: CellOutcome) -> None:
        running.discard(job.name)
        cell = manifest.cells[job.name]
        record_outcome(p, job.name, cell, outcome)
        save()
        if outcome.status != INTERRUPTED:
            say(f"{labels[job.name]}{_on_gpu(cell)}: {describe(p.sweep_dir, job.name, cell)}")
            if progress:
                progress()

    session = getattr(executor, "session", contextlib.nullcontext)
    try:
        with session():  # Ray: one connection for the cells and the rounds
            executor.run(jobs, on_start, on_done)
            sample_cells(p, manifest, say, executor)
    except KeyboardInterrupt as stop:  # Ctrl-C; SIGTERM and SIGHUP in signals.as_interrupts()
        for name in running:  # cells the executor could not report
            _update(
                manifest.cells[name],
                status=INTERRUPTED,
                reason=f"interrupted ({signals.describe(stop)})",
                finished=_now("milliseconds"),
            )
        _clean_cells(p)
        manifest.wall_s = round(time.perf_counter() - began, 3)
        if unwritable:
            raise _stopped(p, manifest, unwritable[0], listed_running) from None
        write_manifest(p.sweep_dir, manifest)
        done = sum(1 for c in manifest.cells.values() if c.status == OK)
        raise Interrupted(
            f"sweep stopped; {done} finished cell(s) kept in {p.sweep_dir} "
            "(continue with --resume)",
            exit_code=signals.exit_code(stop),
        ) from None
    wall = time.perf_counter() - began
    manifest.wall_s = round(wall, 3)
    write_manifest(p.sweep_dir, manifest)
    return SweepOutcome(manifest=manifest, wall_s=wall, ran=len(jobs), skipped=skipped)


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


def sample_cells(p: SweepPlan, manifest: SweepManifest, say, executor=None) -> None:
    """--processes / --target-noise: more windows of every finished cell in fresh processes,
    interleaved over the cells (profiler.sweep.rounds), recorded in each cell's folder after
    every round (processes.csv, result.json's repeat_runs). An executor with a
    ``round_runner()`` runs the rounds' processes where it runs cells (Ray: as tasks on the
    cluster's GPUs); otherwise they run here, on --gpus."""
    if p.processes <= 1 and p.target_noise is None:
        return
    cells, have, results = {}, {}, {}
    for backend, batch_size, axis in p.cells:
        name = _plan_cell_name(p, backend, batch_size, axis)
        result = (
            runs.try_read_result(p.sweep_dir / name / runs.RESULT_FILE)
            if manifest.cells[name].status == OK
            else None
        )
        if result is None:
            continue
        windows = with_gpus(
            config_samples(result, p.sweep_dir / name / runs.RESULT_FILE), manifest.cells[name].gpu
        )
        if not len(windows):
            continue
        job = cell_job(p, backend, batch_size, axis)
        cells[name] = rounds.window_config(
            job.config, result.timing.iters, result.timing.warmup_iters
        )
        have[name], results[name] = windows, result
    if not cells:
        return
    say(
        f"sampling: {p.processes} processes per cell"
        + (
            f", more until ±{100 * p.target_noise:g} % or "
            f"{p.budget_s or rounds.DEFAULT_BUDGET_S:g} s"
            if p.target_noise
            else ""
        )
        + f", {len(cells)} cells interleaved in fresh processes"
    )
    # what each cell's files hold now: a cell the rounds add nothing to is not rewritten
    recorded: dict[str, tuple] = {name: (len(have[name]), 0) for name in have}

    def record(sampled: rounds.Sampled) -> None:
        for name in sampled.windows:
            merged = sampled.merged(name, have[name])
            state = (len(merged), sampled.pilot_rounds)
            if state != recorded.get(name):
                recorded[name] = state
                results[name] = record_processes(
                    p.sweep_dir / name,
                    merged,
                    f"{p.processes} processes per cell, interleaved over {len(cells)} cells "
                    + (
                        "(a round = one fresh process timing each cell once, the leader rotated)"
                        if len(sampled.gpus) < 2
                        else f"(a round = fresh processes on {where} at once, "
                        "each timing the cells of whole batch-size groups once, the leader "
                        "rotated: windows pair only within one process, so on one GPU)"
                    ),
                    results[name],
                )

    round_runner, gpus = rounds.run_round, p.gpus or None
    if hasattr(executor, "round_runner"):
        round_runner, gpus = executor.round_runner()
    where = rounds.Sampled(windows={}, gpus=tuple(gpus or ())).placed()

    groups = {
        _plan_cell_name(p, b, n, axis): repr((n, sorted((axis or {}).items())))
        for b, n, axis in p.cells
    }  # the cells a verdict compares share a process
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
    )
    record(sampled)
    say(
        f"sampling took {sampled.wall_s:.0f} s ({sampled.rounds} round(s)"
        + (f" in {sampled.processes} processes over {where}" if len(sampled.gpus) > 1 else "")
        + ")"
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
        _clean_cells(p)


def _on_gpu(cell: SweepCell) -> str:
    return f" on gpu {cell.gpu}" if cell.gpu is not None else ""


def _clean_cells(p: SweepPlan) -> None:
    for folder in (p.sweep_dir, p.trace_dir):
        clean_leftovers(folder)


def _update(cell: SweepCell, **changes) -> None:
    for key, value in changes.items():
        setattr(cell, key, value)


def describe(sweep_dir: Path, name: str, cell: SweepCell) -> str:
    seconds = f"({cell.elapsed_s or 0:.1f} s)"
    if cell.status != OK:
        return f"{cell.status}: {cell.reason} {seconds}"
    result = runs.try_read_result(sweep_dir / name / runs.RESULT_FILE)
    if result is None:
        return f"ok {seconds}"
    broken = "; warning: the output holds NaN or Inf" if result.output.finite is False else ""
    return f"ok, p50 {result.timing.p50_ms:.3f} ms{broken} {seconds}"

"""`sweep --executor ray`: one Ray task per cell, placed by Ray on any node of a cluster.

Each cell is a Ray task asking for one GPU (``num_gpus=1``; one CPU on a cluster without GPUs)
that runs the cell runner every executor runs (``profiler.sweep.cell.run_job``), so run folders,
traces, logs and the manifest look the same as with the local executor. The task is a streaming
generator: it first reports where it runs (host name, the GPU Ray gave it, the Ray node), which
starts the cell's clock and marks it running, then its outcome.

How results come home:

- through Ray's object store (the default): the task runs the cell in a temporary folder on
  its node (the job's ``--runs-dir``, ``--tb-dir`` and log pointed there) and returns the run
  folder, the trace folder and the log as tar archives. This process unpacks each into a
  staging folder beside its destination in the sweep folder and renames it into place, so a
  cell is wholly there or not at all (profiler.fsutil). Nothing needs to be shared between
  the nodes.
- through a shared filesystem (``shared_fs=True``, ``--ray-shared-fs``): the sweep's folders
  have the same absolute path on every node (NFS, Lustre, ...), and the cell writes straight
  into them, atomically, as a local run does.

What can go wrong, and what is recorded:

- the cell fails (its error line, CUDA out of memory, a crash of the run): the runner's
  outcome, never retried;
- the Ray worker or node is lost while the cell runs (WorkerCrashedError, NodeDiedError, ...):
  the cell is submitted once more; lost twice, it is recorded failed with Ray's reason;
- Ray's memory monitor kills the worker (host memory): recorded oom;
- the cell runs longer than its timeout: the task is cancelled (its worker process killed) and
  the cell recorded timeout; in object-store mode its log is lost with the worker's temporary
  folder, which the next cell on that node removes;
- Ctrl-C, SIGTERM (KeyboardInterrupt here): every outstanding task is cancelled, running cells
  are reported interrupted, and KeyboardInterrupt is raised again.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import shutil
import signal
import socket
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import msgspec

from profiler import signals, units
from profiler.errors import UserError, first_line
from profiler.fsutil import replace_dir, staging_dir, write_bytes_atomic
from profiler.runs.layout import RESULT_FILE
from profiler.sweep.cell import CellJob, CellOutcome, OnDone, OnStart, outcome, run_job
from profiler.sweep.executors import ExecutorSettings

#: a lost worker or node is retried this many times; a failing cell never is
SYSTEM_RETRIES = 1
POLL_S = 0.5
#: Ray's errors for a task whose worker, node or results were lost: not the cell's fault
LOST = (
    "WorkerCrashedError",
    "NodeDiedError",
    "LocalRayletDiedError",
    "ObjectLostError",
    "RaySystemError",
)
NEEDS_RAY = '--executor ray needs Ray: pip install -e ".[cluster]"'


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise UserError(NEEDS_RAY) from None
    return ray


class RayExecutor:
    """Runs cells as Ray tasks. ``address``: None starts a local Ray instance, "auto" joins
    the cluster running on this machine, "host:port" joins that one; a process already
    connected to Ray (ray.init done) uses its connection. ``runner`` is the cell runner
    (cellrun.run_job); it must be importable on the workers."""

    def __init__(
        self,
        address: str | None = None,
        shared_fs: bool = False,
        say: Callable[[str], object] | None = None,
        runner: Callable[[CellJob], CellOutcome] = run_job,
    ) -> None:
        self.address = address
        self.shared_fs = shared_fs
        # its lines (the cluster it found, a cell Ray lost): none unless given; a sweep gives
        # its own ``say`` (profiler.sweep.runner)
        self.say: Callable[[str], object] = say or (lambda text: None)
        self.runner = runner

    def describe(self) -> str:
        return "one Ray task each (" + (
            "results in the shared folder)"
            if self.shared_fs
            else "results through Ray's object store)"
        )

    def run(
        self,
        jobs: list[CellJob],
        on_start: Callable[[CellJob, dict[str, Any]], object],
        on_done: Callable[[CellJob, CellOutcome], object],
    ) -> None:
        if not jobs:
            return
        ray = import_ray()
        with connected(ray, self.address):
            resources = cell_resources(ray)
            self.say(describe_cluster(ray, resources, self.shared_fs))
            _Cells(ray, self, resources, on_start, on_done).run(jobs)

    def session(self) -> contextlib.AbstractContextManager[None]:
        """One connection to Ray for the whole sweep: its cells, then its rounds."""
        return connected(import_ray(), self.address)

    def round_runner(self) -> tuple[RayRounds, list[str]]:
        """For --processes: the runner of a round's processes as Ray tasks, and its slots (one
        per GPU of the cluster: the rounds that run at once). Inside ``session``."""
        ray = import_ray()
        runner = RayRounds(ray, cell_resources(ray))
        return runner, runner.slots()


def from_settings(settings: ExecutorSettings) -> RayExecutor:
    """The executor from the sweep's executor settings: ``options`` may hold ``address``
    (--ray-address) and ``shared_fs`` (--ray-shared-fs)."""
    options = getattr(settings, "options", None) or {}
    return RayExecutor(
        address=options.get("address"),
        shared_fs=bool(options.get("shared_fs")),
        say=options.get("say"),
    )


@contextlib.contextmanager
def connected(ray: ModuleType, address: str | None) -> Iterator[None]:
    """Connected to Ray for the block: an existing connection is used as it is; otherwise one is
    opened (a local instance when ``address`` is None) and closed at the end."""
    if ray.is_initialized():
        yield
        return
    if address:
        check_reachable(address)
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, *signals.HANDLED)}
    try:
        ray.init(
            address=address or "local",
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        where = f"--ray-address {address}" if address else "a local Ray instance"
        raise UserError(
            f"{where}: cannot connect to Ray ({first_line(error)}); start one "
            "with `ray start --head` or check the address"
        ) from None
    finally:  # ray.init sets its own SIGTERM handler: SIGTERM must stay Ctrl-C's twin
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    try:
        yield
    finally:
        ray.shutdown()


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A host:port nothing answers at is one line now (Ray itself retries for minutes)."""
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or "://" in address:
        return  # "auto", or a ray:// client address: Ray resolves those
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as error:
        raise UserError(
            f"--ray-address {address}: no Ray head answers there "
            f"({error.strerror or error}); start one with `ray start --head`, or "
            "check the address"
        ) from None


def cell_resources(ray: ModuleType) -> dict[str, float]:
    """What one cell asks of Ray: a GPU where the cluster has any, else a CPU."""
    if ray.cluster_resources().get("GPU", 0) >= 1:
        return {"num_gpus": 1, "num_cpus": 1}
    return {"num_cpus": 1}


def task_options(resources: dict[str, Any]) -> dict[str, Any]:
    """ray.remote's options for the cell task: a stream (where, then the outcome), no retry by
    Ray (lost workers are retried here, once), and for a GPU cell a fresh worker process each
    time (max_calls=1): CUDA binds a process to the GPU it first saw, so a worker reused for a
    cell on another GPU would run it on the wrong one."""
    options = {"num_returns": "streaming", "max_retries": 0, **resources}
    if resources.get("num_gpus"):
        options["max_calls"] = 1
    return options


def describe_cluster(ray: ModuleType, resources: dict[str, Any], shared_fs: bool) -> str:
    total = ray.cluster_resources()
    nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
    unit = "GPU" if "num_gpus" in resources else "CPU"
    home = (
        "written by the cells into the shared folder"
        if shared_fs
        else "brought home through Ray's object store"
    )
    return (
        f"ray: {nodes} node(s), {units.plain(total.get('GPU', 0))} GPU(s), "
        f"{units.plain(total.get('CPU', 0))} CPU(s); one task per cell on one {unit}; "
        f"results {home}"
    )


# ---- on the worker -------------------------------------------------------------------------


def cell_task(
    job: CellJob, shared_fs: bool, runner: Callable[[CellJob], CellOutcome]
) -> Iterator[object]:
    """The Ray task: yields where it runs, then (outcome, payload). The payload is None when the
    cell wrote into a shared folder, else the archives of its run folder, trace and log."""
    from profiler.collect import bytecode

    # a fresh worker process imports torch for this cell: keep its bytecode
    bytecode.keep_bytecode()
    bytecode.precompile()
    try:
        yield where_this_runs()
        yield from _cell_items(job, shared_fs, runner)
    finally:  # a cell that failed or was cancelled before its timed window: no compile left
        bytecode.stop_precompile(others=False)


def _cell_items(
    job: CellJob, shared_fs: bool, runner: Callable[[CellJob], CellOutcome]
) -> Iterator[tuple[CellOutcome, dict[str, bytes | None] | None]]:
    """cell_task's (outcome, payload) (its doc)."""
    if shared_fs:
        yield runner(job), None
        return
    remove_orphans(Path(tempfile.gettempdir()))
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as folder:
        local = in_folder(job, Path(folder))
        outcome = runner(local)
        rehome_results(Path(folder, "runs"), local, job)
        log = Path(local.log_path)
        payload = {
            "runs": pack(Path(folder, "runs")),
            "tb": pack(Path(folder, "tb")),
            "log": log.read_bytes() if log.is_file() else None,
        }
    yield outcome, payload


def round_task(
    cells: list[tuple[str, dict[str, Any]]],
) -> tuple[dict[str, dict[str, Any] | str], dict[str, Any]]:
    """The Ray task of one process of a round: the round's fresh process
    (profiler.sweep.rounds.run_round) started from this worker, on the GPU Ray gave the task
    (CUDA_VISIBLE_DEVICES, which the child inherits); returns its records and where it ran."""
    from profiler.collect import bytecode
    from profiler.sweep import rounds

    bytecode.keep_bytecode()  # the round's child imports torch: its bytecode is kept here too
    return rounds.run_round(cells), where_this_runs()


class RayRounds:
    """sweep --processes under --executor ray: each process of a round is a Ray task asking for
    one GPU (a fresh worker each time, as for a cell), which starts the round's fresh process
    on that GPU. A round's cells share that process, so the verdicts pair windows of one process
    on one GPU, as with the local executor; each window records the GPU Ray gave (node:GPU on a
    cluster of several nodes). The slots are the cluster's GPUs: that many processes at once."""

    def __init__(self, ray: ModuleType, resources: dict[str, Any]) -> None:
        self.ray = ray
        options = {"max_retries": 0, **resources}
        if resources.get("num_gpus"):
            options["max_calls"] = 1  # CUDA binds a process to its first GPU (task_options)
        self.remote = ray.remote(**options)(round_task)
        self.nodes = sum(1 for node in ray.nodes() if node.get("Alive"))
        self.gpus = int(ray.cluster_resources().get("GPU", 0))

    def slots(self) -> list[str]:
        from profiler.sweep.rounds import RAY_SLOT

        return [f"{RAY_SLOT}{i}" for i in range(1, max(1, self.gpus) + 1)]

    @staticmethod
    def slot_name(slot: str) -> str:
        return "a Ray task's GPU"

    def __call__(
        self,
        cells: list[tuple[str, dict[str, Any]]],
        gpu: str | None = None,
        timeout_s: float | None = None,
        started: Callable[[Any], object] | None = None,
    ) -> dict[str, dict[str, Any] | str]:
        ref = self.remote.remote(cells)
        handle = _RayRound(self.ray, ref)
        if started is not None:
            started(handle)
        try:
            with signals_seen() as seen:
                found, where = self.ray.get(ref, timeout=timeout_s)
        except KeyboardInterrupt as stop:
            handle.stop()
            if seen and not isinstance(stop, signals.Terminated):
                raise signals.Terminated(seen[-1]) from None  # Ray re-raised it as a bare one
            raise
        except self.ray.exceptions.GetTimeoutError:
            handle.stop()
            return {
                key: f"the round ran past {units.time(timeout_s, 's', decimals=0, thousands=False)}"
                for key, _ in cells
            }
        except self.ray.exceptions.RayError as error:
            return {
                key: f"the round's Ray task failed: {type(error).__name__}: {first_line(error)}"
                for key, _ in cells
            }
        placed = where.get("gpu") if self.nodes < 2 else f"{where.get('node')}:{where.get('gpu')}"
        return {
            key: {**value, "gpu": placed} if isinstance(value, dict) else value
            for key, value in found.items()
        }


@dataclass(eq=False)
class _RayRound:
    """A running round's task, for rounds._Runner to stop on Ctrl-C."""

    ray: Any
    ref: Any

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.ray.cancel(self.ref, force=True)


TEMP_PREFIX = "infer-profiler-cell-"
#: payload key -> the cell config's folder it lands in
FOLDERS = {"runs": "runs_dir", "tb": "tb_dir"}


def remove_orphans(folder: Path) -> None:
    """Remove the temporary cell folders of killed workers (a cancelled cell's) on this node."""
    for entry in folder.glob(f"{TEMP_PREFIX}*-*"):
        pid = entry.name[len(TEMP_PREFIX) :].split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def where_this_runs() -> dict[str, str | None]:
    import ray

    gpus = [str(gpu) for gpu in ray.get_gpu_ids()]
    node_id = ray.get_runtime_context().get_node_id()
    return {
        "node": socket.gethostname(),
        "gpu": ",".join(gpus) or None,
        "worker": f"ray node {node_id[:12]} pid {os.getpid()}",
    }


def in_folder(job: CellJob, folder: Path) -> CellJob:
    """The job with its run folder, traces and log in ``folder`` (runs/, tb/, cell.log)."""
    return job.with_folders(str(folder / "runs"), str(folder / "tb"), str(folder / "cell.log"))


def rehome_results(runs_dir: Path, local: CellJob, home: CellJob) -> None:
    """Point the paths a run wrote into its result.json (its trace files, folders, log) at
    where they will be at home, as if the cell had run there."""
    prefixes = [(local.config[key], home.config[key]) for key in FOLDERS.values()] + [
        (local.log_path, home.log_path)
    ]

    def rehomed(value: object) -> object:
        if isinstance(value, dict):
            return {key: rehomed(item) for key, item in value.items()}
        if isinstance(value, list):
            return [rehomed(item) for item in value]
        if isinstance(value, str):
            for there, here in prefixes:
                if value == there or value.startswith(there + os.sep):
                    return here + value[len(there) :]
        return value

    for result in runs_dir.glob(f"*/{RESULT_FILE}"):
        data = rehomed(msgspec.json.decode(result.read_bytes()))
        result.write_bytes(msgspec.json.format(msgspec.json.encode(data), indent=2) + b"\n")


def absolute(job: CellJob) -> CellJob:
    """The job with absolute folders, for a worker whose working folder is not ours."""
    runs_dir, tb_dir = (os.path.abspath(job.config[key]) for key in FOLDERS.values())
    return job.with_folders(runs_dir, tb_dir, log_path=os.path.abspath(job.log_path))


def pack(folder: Path) -> bytes | None:
    """A tar archive of the visible entries of ``folder`` (None when there are none)."""
    entries = (
        sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []
    )
    if not entries:
        return None
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for entry in entries:
            tar.add(entry, arcname=entry.name)
    return buffer.getvalue()


# ---- at home -------------------------------------------------------------------------------


def bring_home(job: CellJob, payload: dict[str, bytes | None]) -> None:
    """Put a cell's archives in place: run folder into --runs-dir, trace into --tb-dir, log at
    the job's log path; each renamed whole from a staging folder beside it."""
    with signals.deferred():
        for key, option in FOLDERS.items():
            archive = payload.get(key)
            if archive:
                unpack(archive, Path(job.config[option]), job.name)
        log = payload.get("log")
        if log is not None:
            write_bytes_atomic(Path(job.log_path), log)


def unpack(archive: bytes, destination: Path, name: str) -> None:
    staging = staging_dir(destination / name)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(staging, filter="data")
        for entry in sorted(staging.iterdir()):
            if entry.is_dir():
                replace_dir(entry, destination / entry.name)
            else:
                os.replace(entry, destination / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# ---- the driver's loop ---------------------------------------------------------------------


@dataclass
class _Task:
    job: CellJob
    submitted: float
    attempt: int = 0
    started: float | None = None
    where: dict[str, Any] | None = None

    def seconds(self) -> float:
        return time.monotonic() - (self.started or self.submitted)


class _Cells:
    """The submitted tasks (streaming generator -> _Task) and what happens to each."""

    def __init__(
        self,
        ray: ModuleType,
        executor: RayExecutor,
        resources: dict[str, Any],
        on_start: OnStart,
        on_done: OnDone,
    ) -> None:
        self.ray = ray
        self.executor = executor
        self.on_start = on_start
        self.on_done = on_done
        self.remote = ray.remote(**task_options(resources))(cell_task)
        self.tasks: dict[Iterator[object], _Task] = {}

    def run(self, jobs: list[CellJob]) -> None:
        with signals_seen() as seen:
            try:
                for job in jobs:
                    self.submit(_Task(job, time.monotonic()))
                while self.tasks:
                    ready, _ = self.ray.wait(list(self.tasks), num_returns=1, timeout=POLL_S)
                    for generator in ready:
                        self.advance(generator)
                    self.stop_overdue()
            except KeyboardInterrupt as stop:
                if seen and not isinstance(stop, signals.Terminated):
                    stop = signals.Terminated(seen[-1])  # Ray re-raised it as a bare one
                self.cancel_all(stop)
                raise stop from None

    def submit(self, task: _Task) -> None:
        job = task.job if self.executor.shared_fs is False else absolute(task.job)
        generator = self.remote.remote(job, self.executor.shared_fs, self.executor.runner)
        self.tasks[generator] = task

    def advance(self, generator: Iterator[object]) -> None:
        """Take the task's next item: where it started, or its outcome (or Ray's error)."""
        task = self.tasks[generator]
        exceptions = self.ray.exceptions
        try:
            item = self.ray.get(next(generator))
        except StopIteration:
            self.finish(
                generator,
                outcome("died", "the Ray task ended without an outcome", None, task.seconds()),
            )
            return
        except exceptions.OutOfMemoryError as error:
            self.finish(
                generator,
                outcome(
                    "host-oom",
                    f"out of host memory: Ray's memory monitor stopped the cell "
                    f"({first_line(error)})",
                    None,
                    task.seconds(),
                ),
            )
            return
        except exceptions.RayError as error:
            self.failed(generator, task, error)
            return
        if task.started is None:
            task.started, task.where = time.monotonic(), item
            self.on_start(task.job, item)
            return
        ended, payload = item
        if payload is not None:
            bring_home(task.job, payload)
        self.finish(generator, ended)

    def failed(self, generator: Iterator[object], task: _Task, error: Exception) -> None:
        kind = type(error).__name__
        reason = f"{kind}: {first_line(error)}"
        if not any(cls.__name__ in LOST for cls in type(error).__mro__):
            # the task itself raised (a bug in the runner) or Ray refused it: not retried
            cause = getattr(error, "cause", None)
            if cause is not None:
                reason = f"{type(cause).__name__}: {first_line(cause)}"
            self.finish(generator, outcome("crash", reason, None, task.seconds()))
            return
        if task.attempt < SYSTEM_RETRIES:
            del self.tasks[generator]
            self.executor.say(f"{task.job.name}: Ray lost the cell ({kind}); running it again")
            self.submit(_Task(task.job, time.monotonic(), attempt=task.attempt + 1))
            return
        self.finish(
            generator,
            outcome(
                "died",
                f"Ray lost the cell {task.attempt + 1} times; last: {reason}",
                None,
                task.seconds(),
            ),
        )

    def finish(self, generator: Iterator[object], ended: CellOutcome) -> None:
        task = self.tasks.pop(generator)
        where = task.where or {}
        ended = msgspec.structs.replace(
            ended, gpu=ended.gpu or where.get("gpu"), node=ended.node or where.get("node")
        )
        self.on_done(task.job, ended)

    def stop_overdue(self) -> None:
        now = time.monotonic()
        for generator, task in list(self.tasks.items()):
            timeout = task.job.timeout_s
            if timeout and task.started is not None and now - task.started > timeout:
                self.cancel([generator])
                self.finish(
                    generator,
                    outcome(
                        "timeout",
                        f"no result after --cell-timeout {units.plain(timeout)} s "
                        "(Ray task cancelled)",
                        None,
                        task.seconds(),
                    ),
                )

    def cancel(self, generators: list[Iterator[object]]) -> None:
        """End the tasks: pending ones are dropped, running ones' worker processes killed
        (a cell stuck in a compiler or a CUDA call would not see a gentler request)."""
        for generator in generators:
            with contextlib.suppress(Exception):
                self.ray.cancel(generator, force=True)

    def _ready(self, generator: Iterator[object]) -> bool:
        return bool(self.ray.wait([generator], num_returns=1, timeout=0)[0])

    def cancel_all(self, stop: BaseException) -> None:
        for generator, task in self.tasks.items():  # started, but not yet heard of here
            if task.started is None and self._ready(generator):
                with contextlib.suppress(Exception):
                    task.where = self.ray.get(next(generator))
                    task.started = time.monotonic()
        running = [(g, t) for g, t in self.tasks.items() if t.started is not None]
        self.cancel(list(self.tasks))
        for generator, task in running:
            self.finish(
                generator,
                outcome(
                    "interrupted", f"interrupted ({signals.describe(stop)})", None, task.seconds()
                ),
            )
        self.tasks.clear()


# ---- small helpers -------------------------------------------------------------------------


@contextlib.contextmanager
def signals_seen() -> Iterator[list[int]]:
    """The SIGTERM and SIGHUP that arrive in the block, in order. A signal that lands while
    Ray waits (ray.wait, ray.get) comes out of Ray as a plain KeyboardInterrupt, without the
    signal's number that the exit status (143, 129) needs. Handlers that are not Python
    functions (no profiler.signals.as_interrupts around) are left alone."""
    seen: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen  # (handlers belong to the main thread, where the stop is raised as it is)
        return
    previous = {signum: signal.getsignal(signum) for signum in signals.HANDLED}

    def note(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)
        handler = previous[signal.Signals(signum)]
        if callable(handler):  # (note is installed only over a callable one)
            handler(signum, frame)

    for signum, handler in previous.items():
        if callable(handler):
            signal.signal(signum, note)
    try:
        yield seen
    finally:
        for signum, handler in previous.items():
            if callable(handler):
                signal.signal(signum, handler)

"""One sweep cell, run in this process: the runner every sweep executor places somewhere.

A cell is a typed job (``CellJob``): its RunConfig (as plain JSON, runs.config.config_to_json),
its log and its time limit. ``run_job`` calls the harness on that config in the calling process
(``profiler.collect.harness.run``, what `profile.py run` calls), with file descriptors 1 and 2
pointed at the cell's log (so what C++, CUDA and TensorRT print lands there too), and returns
how it ended from what the harness raised (``CellOutcome``: ok, a user error, CUDA or host out
of memory, a crash, an interruption), never from reading the log. It then puts the process
back the way the next cell expects it (``profiler.collect.state``). A local sweep worker
(``profiler.sweep.worker``) calls it once per cell; a cluster task (a Ray task, a Slurm job step)
can call it the same way. A process that dies during a cell is classified by whoever started it,
from its exit status (``death_reason``).

Importing this module does not import torch: the sweep process uses the job and outcome types,
and only ``run_job`` (in a worker) loads the harness.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

from profiler import notices
from profiler.errors import OutOfMemory, UserError, first_line, os_error_line
from profiler.runs.config import RunConfig, config_from_json, run_argv
from profiler.runs.manifest import FAILED, INTERRUPTED, OK, OOM, TIMEOUT

#: how a cell ended, as a sweep records it (the manifest's status word for each)
KINDS = {
    "ok": OK,
    "user-error": FAILED,
    "cuda-oom": OOM,
    "host-oom": OOM,
    "crash": FAILED,
    "died": FAILED,
    "timeout": TIMEOUT,
    "interrupted": INTERRUPTED,
}


class CellJob(msgspec.Struct):
    """What a worker needs to run one cell; JSON on the wire."""

    name: str
    #: the cell's RunConfig as plain JSON (runs.config.config_to_json): backend, batch size,
    #: every shared option, its --name and the sweep's folders
    config: dict[str, Any]
    log_path: str
    timeout_s: float | None = None

    @property
    def backend(self) -> str:
        return str(self.config["backend"])

    @property
    def batch_size(self) -> int:
        return int(self.config["bs"])

    def run_config(self) -> RunConfig:
        return config_from_json(self.config)

    def with_folders(self, runs_dir: str, tb_dir: str, log_path: str) -> CellJob:
        """The same cell writing its run folder, trace and log elsewhere."""
        return msgspec.structs.replace(
            self, config={**self.config, "runs_dir": runs_dir, "tb_dir": tb_dir}, log_path=log_path
        )


class CellOutcome(msgspec.Struct):
    """How a cell ended. ``kind``: ok, user-error, cuda-oom, host-oom, crash, died, timeout or
    interrupted; ``status``: the sweep's word for it (KINDS)."""

    status: str
    reason: str | None
    exit_code: int | None
    elapsed_s: float
    gpu: str | None = None  # the GPU (CUDA_VISIBLE_DEVICES of the process that ran it)
    node: str | None = None  # the host name
    kind: str | None = None


def outcome(
    kind: str, reason: str | None, exit_code: int | None, elapsed_s: float, **where: str | None
) -> CellOutcome:
    return CellOutcome(
        status=KINDS[kind],
        reason=reason,
        exit_code=exit_code,
        elapsed_s=elapsed_s,
        kind=kind,
        **where,
    )


def death_reason(exit_code: int | None) -> str:
    """Why a process that ran a cell is gone, from its exit status (negative: a signal)."""
    if exit_code is None:
        return "the worker process vanished"
    if exit_code < 0:
        name = _signal_name(-exit_code)
        if -exit_code == signal.SIGKILL:
            return f"worker killed by {name} (host out of memory?)"
        return f"worker killed by {name}"
    return (
        f"the worker process exited with status {exit_code} during the cell (did the model "
        "call os._exit or sys.exit?)"
    )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def where() -> dict[str, Any]:
    """Which GPU and host this process runs cells on."""
    return {"gpu": os.environ.get("CUDA_VISIBLE_DEVICES") or None, "node": socket.gethostname()}


# ---- running a cell in this process --------------------------------------------------------


def run_job(job: CellJob, process_mark: float | None = None) -> CellOutcome:
    """Run one cell in this process and reset the process for the next one. ``process_mark``
    (perf_counter) is when this process began loading modules: the first cell's imports phase
    starts there; later cells' imports phase starts with the cell (modules already loaded)."""
    from profiler.collect import state

    began = time.perf_counter()
    log_path = Path(job.log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        config = job.run_config()
    except UserError as error:  # the plan validated it: a job from elsewhere may not be
        return outcome("user-error", str(error), 2, time.perf_counter() - began, **where())
    saved = state.snapshot()
    # result.json records the command line: the one that runs this cell alone
    command = ["profile.py", "run", *run_argv(config.options())]
    ran = None
    try:
        with _output_into(log_path, command):
            ran = _run(config, command, process_mark if process_mark is not None else began)
    except OSError as error:  # the log itself cannot be written (a full disk): one line
        if ran is None:
            if error.filename is None:
                error.filename = str(log_path)
            ran = "user-error", os_error_line(error), 2
    finally:
        state.reset(saved)
    kind, reason, code = ran
    return outcome(kind, reason, code, time.perf_counter() - began, **where())


def _run(config: RunConfig, command: list[str], started: float) -> tuple[str, str | None, int]:
    """(kind, reason, exit status as `profile.py run` would give it) of one run, from what the
    harness raised; the log (fds 1 and 2) gets what `run` would print. ``command``: the command
    line result.json records; ``started``: where the run's imports phase starts."""
    from profiler.collect import harness
    from profiler.report.console import make_console
    from profiler.report.run_view import print_result

    # fd 2 is the cell's log here: what `run` would say on stderr goes there, whatever the
    # sweep's -q (its progress and notes, its error line: the cell's reason)
    log = make_console(stderr=True)
    try:  # the notes `run` says (a damaged noise floor), in its words
        with _interruptible(), notices.told(lambda line: print(line, file=sys.stderr)):
            result = harness.run(config, console=log, command_line=command, started=started)
        print_result(result)
        return "ok", None, 0
    except OutOfMemory as error:
        print(f"error: {error}", file=sys.stderr)
        return ("cuda-oom" if error.kind == "CUDA" else "host-oom"), str(error), 2
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return "user-error", str(error), 2
    except KeyboardInterrupt:
        print("interrupted: nothing was written for the unfinished run", file=sys.stderr)
        return "interrupted", "interrupted (Ctrl-C)", 130
    except OSError as error:  # a full disk, a read-only folder: the user's environment
        print(f"error: {os_error_line(error)}", file=sys.stderr)
        return "user-error", os_error_line(error), 2
    except SystemExit as done:  # a model's own sys.exit
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        return "crash", f"the run called sys.exit({done.code!r}) before it finished", code or 1
    except BaseException as error:  # a bug, or a library failing in a way the harness did not
        traceback.print_exc(file=sys.__stderr__ or sys.stderr)  # name; fd 2: the cell's log
        return "crash", f"{type(error).__name__}: {first_line(error)}", 1


#: SIGINTs that came between cells in a sweep worker (remember_stops): the next cell stops as
#: it begins
_stops: list[int] = []


def remember_stops(earlier: Sequence[int] = ()) -> None:
    """A sweep worker's SIGINT between cells is remembered, not raised: a stop that comes as a
    cell ends cannot cut its reset or its reply short, and one that comes after the next cell
    was handed over (or while it sets up) stops that cell as it begins. ``earlier``: stops the
    worker remembered before this module was imported."""
    _stops.extend(earlier)
    signal.signal(signal.SIGINT, lambda signum, frame: _stops.append(signum))


def stop_requested() -> bool:
    return bool(_stops)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt inside the block (the cell stops and cleans up), whatever
    the process does with it outside; a stop remembered before the block raises as it begins."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        if _stops:
            raise KeyboardInterrupt
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _output_into(log_path: Path, command: list[str]) -> Iterator[None]:
    """File descriptors 1 and 2 (and so sys.stdout, sys.stderr and every C library's output)
    into ``log_path`` for the block; put back afterwards."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


#: an executor's ``on_start(job, where)``: a cell started (``where``: gpu, node, worker)
OnStart = Callable[[CellJob, dict[str, Any]], object]
#: an executor's ``on_done(job, outcome)``: a cell ended
OnDone = Callable[[CellJob, CellOutcome], object]

"""The local executor: one long-lived worker process per GPU of this machine.

Each worker (``profiler.sweep.worker``) sees one GPU (``CUDA_VISIBLE_DEVICES``), so it pays the
imports and the CUDA context once and runs one cell at a time: never two cells on one GPU. On a
machine without GPUs there is one CPU worker. One queue feeds them: an idle worker takes the next
pending cell, preferring one of the backend it ran last (its compiled kernels and libraries are
warm). A worker that dies in a cell (a segfault, ``os._exit``, the host's OOM killer) has that
cell recorded failed with the reason and is replaced; a cell past its timeout gets SIGINT (so it
removes its staging folders), a grace period, then SIGKILL, and its worker is replaced too.

The sweep process never imports torch: GPUs are found with ``CUDA_VISIBLE_DEVICES`` or
``nvidia-smi -L``.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec

from profiler import SOURCE_ROOT, signals, units
from profiler.errors import UserError
from profiler.sweep.cell import CellJob, CellOutcome, OnDone, OnStart, death_reason, outcome
from profiler.sweep.executors import ExecutorSettings

ROOT = SOURCE_ROOT
# the worker imports the profiler package next to profile.py, as `python profile.py run` does
_BOOT = (
    "import sys, runpy; sys.path[0] = sys.argv.pop(1); "
    "runpy.run_module('profiler.sweep.worker', run_name='__main__', alter_sys=True)"
)
GRACE_S = 15.0


# ---- which GPUs ----------------------------------------------------------------------------


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (indices or UUIDs),
    without importing torch: CUDA_VISIBLE_DEVICES when set, else nvidia-smi -L's indices; []
    when there are none."""
    named = os.environ.get("CUDA_VISIBLE_DEVICES")
    if named is not None:
        items = [item.strip() for item in named.split(",") if item.strip()]
        return [] if not items or items[0] in ("-1", "NoDevFiles") else items
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return (
        [m[1] for m in re.finditer(r"^GPU (\d+):", listed.stdout, re.MULTILINE)]
        if listed.returncode == 0
        else []
    )


def parse_gpus(text: str | None, visible: list[str]) -> list[str]:
    """``--gpus``: "all" or nothing for every visible GPU, else a comma-separated list of GPU
    indices or UUIDs (as CUDA_VISIBLE_DEVICES names them)."""
    if text is None or text.strip() == "all":
        return list(visible)
    items = [item.strip() for item in text.split(",")]
    if not any(items) or not all(items):
        raise UserError(f"--gpus {text!r}: give GPU indices such as 0,1 (or all)")
    for item in items:
        if not (re.fullmatch(r"[0-9]+", item) or re.fullmatch(r"(GPU|MIG)-[0-9A-Za-z/-]+", item)):
            raise UserError(
                f"--gpus: {item!r} is not a GPU index or UUID (give indices such as 0,1, or all)"
            )
        if not visible:
            raise UserError(
                f"--gpus {text!r}: no GPU is visible here (nvidia-smi lists none, "
                "or CUDA_VISIBLE_DEVICES hides them): leave --gpus out"
            )
        if item not in visible:
            raise UserError(
                f"--gpus: GPU {item} is not visible here (visible: {','.join(visible)})"
            )
    if len(set(items)) < len(items):
        raise UserError(f"--gpus {text!r} names a GPU twice: one worker per GPU")
    return items


def _end_with_sweep() -> None:
    signals.end_with_parent(signal.SIGINT)


# ---- one worker ----------------------------------------------------------------------------

#: the sweep's process id, for its workers (profiler.sweep.worker)
SWEEP_PID_ENV = "INFER_PROFILER_SWEEP_PID"


class _Worker:
    """A worker process, the reader thread that turns its replies into events, and its cell."""

    def __init__(
        self, slot: str, gpu: str | None, settings: ExecutorSettings, events: queue.Queue[Any]
    ) -> None:
        self.slot, self.gpu = slot, gpu
        self.job: CellJob | None = None
        self.began = self.deadline = 0.0
        self.last_backend: str | None = None
        self.retired = False
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if gpu is not None:
            if "CUDA_VISIBLE_DEVICES" not in os.environ:  # indices from nvidia-smi -L
                env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # nvidia-smi's numbering
            env["CUDA_VISIBLE_DEVICES"] = gpu
        self.log_path = settings.log_dir / "workers" / f"{slot}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env[SWEEP_PID_ENV] = str(os.getpid())  # the worker leaves when this process is gone
        command = [sys.executable, "-c", _BOOT, str(ROOT)]
        if settings.isolate:
            command.append("--one-cell")
        with open(self.log_path, "a", encoding="utf-8") as log:
            # a session of its own: the terminal's Ctrl-C reaches the sweep, which stops cells;
            # a sweep killed outright (kill -9, the OOM killer) sends the worker SIGINT, which
            # stops its cell as a Ctrl-C does, so no worker runs on without its sweep
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,
                preexec_fn=_end_with_sweep,
            )
        self.name = f"{slot}/pid{self.process.pid}"
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events: queue.Queue[Any]) -> None:
        assert self.process.stdout is not None  # stdout=PIPE
        for line in self.process.stdout:
            try:
                events.put((self, msgspec.json.decode(line)))
            except msgspec.DecodeError:
                continue
        events.put((self, {"exit": self.process.wait()}))

    def where(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "node": os.uname().nodename, "worker": self.name}

    def send(self, job: CellJob) -> None:
        self.job, self.began = job, time.monotonic()
        self.deadline = self.began + job.timeout_s if job.timeout_s else float("inf")
        self.last_backend = job.backend
        assert self.process.stdin is not None  # stdin=PIPE
        try:
            self.process.stdin.write(msgspec.json.encode(job) + b"\n")
            self.process.stdin.flush()
        except OSError:  # died already: its exit event records the cell
            pass

    def outcome(self, kind: str, reason: str | None, exit_code: int | None) -> CellOutcome:
        return outcome(
            kind,
            reason,
            exit_code,
            time.monotonic() - self.began,
            gpu=self.gpu,
            node=os.uname().nodename,
        )

    def close_input(self) -> None:
        """No more cells: the worker ends after the one it runs."""
        assert self.process.stdin is not None  # stdin=PIPE
        try:
            self.process.stdin.close()
        except OSError:
            pass

    def stop(self, grace_s: float = GRACE_S, interrupt: bool = True) -> None:
        """Retire the worker: SIGINT to its cell (staging removed), its input closed, then
        SIGKILL after ``grace_s``."""
        self.retired = True
        if self.process.poll() is None and interrupt and self.job is not None:
            self.process.send_signal(signal.SIGINT)
        self.close_input()
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        except KeyboardInterrupt:  # a second Ctrl-C: do not wait any longer
            self.process.kill()
            self.process.wait()
            raise


# ---- the executor --------------------------------------------------------------------------


class LocalExecutor:
    """One worker per GPU in ``settings.gpus`` (every visible GPU when None; one CPU worker
    when there is none); ``settings.isolate``: a fresh process per cell."""

    def __init__(self, settings: ExecutorSettings) -> None:
        self.settings = settings
        gpus = settings.gpus if settings.gpus is not None else visible_gpus()
        self.slots: list[tuple[str, str | None]] = [(f"gpu{g}", g) for g in gpus] or [("cpu", None)]

    def describe(self) -> str:
        how = "a fresh process per cell" if self.settings.isolate else "one worker"
        if self.slots[0][1] is None:
            return f"on the CPU ({how})"
        gpus = ",".join(g for _, g in self.slots if g is not None)
        each = "" if self.settings.isolate or len(self.slots) == 1 else " each"
        return f"on GPU {gpus} ({how}{each})"

    def run(self, jobs: list[CellJob], on_start: OnStart, on_done: OnDone) -> None:
        events: queue.Queue[Any] = queue.Queue()
        pending = list(jobs)
        workers: dict[str, _Worker] = {}
        try:
            while pending or any(w.job for w in workers.values()):
                self._hand_out(pending, workers, events, on_start)
                self._wait_for_event(workers, events, on_done)
        except KeyboardInterrupt as stop:
            self._interrupt(workers, events, on_done, stop)
            raise
        finally:  # idle workers end at the end of their input
            live = [w for w in workers.values() if not w.retired]
            for worker in live:
                worker.close_input()
            for worker in live:
                worker.stop(grace_s=10.0, interrupt=False)

    def _hand_out(
        self,
        pending: list[CellJob],
        workers: dict[str, _Worker],
        events: queue.Queue[Any],
        on_start: OnStart,
    ) -> None:
        for slot, gpu in self.slots:
            if not pending:
                return
            worker = workers.get(slot)
            if worker is None or worker.retired:
                worker = workers[slot] = _Worker(slot, gpu, self.settings, events)
            if worker.job is None:
                job = _next_job(pending, worker.last_backend)
                worker.send(job)
                on_start(job, worker.where())

    def _wait_for_event(
        self, workers: dict[str, _Worker], events: queue.Queue[Any], on_done: OnDone
    ) -> None:
        busy = [w for w in workers.values() if w.job]
        wait = min([w.deadline for w in busy], default=float("inf")) - time.monotonic()
        try:
            worker, message = events.get(timeout=min(max(wait, 0.0), 1.0))
        except queue.Empty:
            worker = None
        if worker is not None:
            self._handle(worker, message, on_done)
        self._stop_late_cells(busy, on_done)

    def _handle(self, worker: _Worker, message: dict[str, Any], on_done: OnDone) -> None:
        """A worker's reply (a cell's outcome) or its end."""
        if worker.retired:
            return
        if "exit" in message:
            worker.retired = True  # replaced before its slot's next cell
        job = worker.job
        if job is None:
            return
        if "outcome" in message:
            outcome = msgspec.convert(message["outcome"], CellOutcome)
            outcome.gpu = worker.gpu  # the sweep's name for the GPU, not the worker's view
            worker.job = None
            if self.settings.isolate:  # it ends after one cell; the next gets a new one
                worker.retired = True
                worker.close_input()
        elif "exit" in message:
            worker.job = None
            outcome = worker.outcome(
                "died", self._death_reason(worker, job, message["exit"]), message["exit"]
            )
        else:
            return
        on_done(job, outcome)
        if outcome.kind == "interrupted":  # the cell saw a Ctrl-C meant for the sweep
            raise KeyboardInterrupt

    @staticmethod
    def _death_reason(worker: _Worker, job: CellJob, code: int | None) -> str:
        reason = death_reason(code)
        if not Path(job.log_path).exists():  # died before the cell began: its own stderr
            reason += f": {said}" if (said := _last_line(worker.log_path)) else ""
        return reason

    def _stop_late_cells(self, busy: list[_Worker], on_done: OnDone) -> None:
        now = time.monotonic()
        for worker in busy:
            if worker.job is not None and now >= worker.deadline:
                job = worker.job
                assert job.timeout_s  # a deadline is set only by a timeout (start)
                worker.stop()
                worker.job = None
                on_done(
                    job,
                    worker.outcome(
                        "timeout",
                        f"no result after --cell-timeout {units.plain(job.timeout_s)} s",
                        worker.process.returncode,
                    ),
                )

    def _interrupt(
        self,
        workers: dict[str, _Worker],
        events: queue.Queue[Any],
        on_done: OnDone,
        stop: BaseException,
    ) -> None:
        """Stop every running cell (each removes its staging folders) and report it: a cell
        that finished in the meantime keeps its result, the others are interrupted."""
        busy = [w for w in workers.values() if w.job and not w.retired]
        for worker in busy:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGINT)
            worker.close_input()
        reason = f"interrupted ({signals.describe(stop)})"
        deadline = time.monotonic() + GRACE_S
        while any(w.job for w in busy) and time.monotonic() < deadline:
            try:
                worker, message = events.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                break
            if worker not in busy or worker.job is None:
                continue
            job, worker.job = worker.job, None
            outcome = (
                msgspec.convert(message["outcome"], CellOutcome) if "outcome" in message else None
            )
            if outcome is None or outcome.kind != "ok":
                outcome = worker.outcome("interrupted", reason, outcome and outcome.exit_code)
            outcome.gpu = worker.gpu
            on_done(job, outcome)
        for worker in busy:
            job, worker.job = worker.job, None
            worker.stop(grace_s=0.0 if job else GRACE_S, interrupt=False)
            if job is not None:  # no answer within the grace period: killed
                on_done(job, worker.outcome("interrupted", reason, worker.process.returncode))


def _last_line(path: Path) -> str | None:
    """The last line a worker that never started its cell wrote to its own stderr (an import
    that failed, a bad interpreter): the one thing that says why."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return None
    lines = [line for line in lines if line]
    return lines[-1] if lines else None


def _next_job(pending: list[CellJob], last_backend: str | None) -> CellJob:
    """The first pending cell of the backend the worker ran last, else the first pending."""
    for index, job in enumerate(pending):
        if job.backend == last_backend:
            return pending.pop(index)
    return pending.pop(0)

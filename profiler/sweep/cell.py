"""One sweep cell, run in this process: the runner every sweep executor places somewhere.

A cell is a ``profile.py run`` command line (``CellJob.argv``). ``run_job`` runs it in the
calling process with file descriptors 1 and 2 pointed at the cell's log (so what C++, CUDA and
TensorRT print lands there too), catches how it ended, classifies it (``CellOutcome``) and then
puts the process back the way the next cell expects it (``reset_after_cell``). A local sweep
worker (``profiler.sweep.worker``) calls it once per cell; a cluster task (a Ray task, a Slurm job
step) can call it the same way.

Importing this module does not import torch: the sweep process uses ``failure_reason`` and the
job and outcome types, and only ``run_job`` (in a worker) loads the harness.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import msgspec

OK, FAILED, OOM, TIMEOUT, INTERRUPTED = "ok", "failed", "oom", "timeout", "interrupted"


class CellJob(msgspec.Struct):
    """What a worker needs to run one cell; JSON on the wire."""

    name: str
    backend: str
    batch_size: int
    #: the ``profile.py run`` arguments, without interpreter or script: ["run", "--backend", ...]
    argv: list[str]
    log_path: str
    timeout_s: float | None = None


class CellOutcome(msgspec.Struct):
    """How a cell ended. status: ok, failed, oom, timeout or interrupted."""

    status: str
    reason: str | None
    exit_code: int | None
    elapsed_s: float
    gpu: str | None = None  # the GPU (CUDA_VISIBLE_DEVICES of the process that ran it)
    node: str | None = None  # the host name


def failure_reason(log_text: str) -> str | None:
    """The last ``error:`` line (the harness's one-line user errors, CUDA OOM included), else
    the last non-empty line (a crash's exception line)."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    if errors:
        return errors[-1][len("error:"):].strip()
    return lines[-1] if lines else None


def classify(exit_code: int, log_path: Path) -> tuple[str, str | None]:
    """(status, reason) of a cell that ended with ``exit_code`` (a negative code: killed by
    that signal), its log in ``log_path``."""
    if exit_code == 0:
        return OK, None
    if exit_code in (130, -signal.SIGINT):
        return INTERRUPTED, "interrupted (Ctrl-C)"
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    reason = failure_reason(text) or f"exit status {exit_code}"
    return (OOM if "out of memory" in reason.lower() else FAILED), reason


def death_reason(exit_code: int | None) -> str:
    """Why a process that ran a cell is gone, from its exit status (negative: a signal)."""
    if exit_code is None:
        return "the worker process vanished"
    if exit_code < 0:
        name = _signal_name(-exit_code)
        if -exit_code == signal.SIGKILL:
            return f"worker killed by {name} (host out of memory?)"
        return f"worker killed by {name}"
    return (f"the worker process exited with status {exit_code} during the cell (did the model "
            "call os._exit or sys.exit?)")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def where() -> dict:
    """Which GPU and host this process runs cells on."""
    return {"gpu": os.environ.get("CUDA_VISIBLE_DEVICES") or None, "node": socket.gethostname()}


# ---- running a cell in this process --------------------------------------------------------

def run_job(job: CellJob, process_mark: float | None = None) -> CellOutcome:
    """Run one cell in this process and reset the process for the next one. ``process_mark``
    (perf_counter) is when this process began loading modules: the first cell's imports phase
    starts there; later cells' imports phase starts with the cell (modules already loaded)."""
    from profiler.runs import phases

    began = time.perf_counter()
    phases.process_mark = process_mark if process_mark is not None else began
    log_path = Path(job.log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    saved = _FlagSnapshot.take()
    try:
        with _output_into(log_path, ["profile.py", *job.argv]):
            code = _call_cli(job.argv)
    finally:
        reset_after_cell(saved)
    status, reason = classify(code, log_path)
    return CellOutcome(status=status, reason=reason, exit_code=code,
                       elapsed_s=time.perf_counter() - began, **where())


def _call_cli(argv: list[str]) -> int:
    """``profile.py <argv>`` in this process; sys.argv reads as it would (result.json's
    command line comes from it)."""
    from profiler.cli.app import main

    saved, sys.argv = sys.argv, ["profile.py", *argv]
    try:
        with _interruptible():
            return main(argv)
    except SystemExit as done:  # main catches typer's; a model's own sys.exit lands here
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except KeyboardInterrupt:  # between the CLI's handlers (a second Ctrl-C)
        return 130
    finally:
        sys.argv = saved


@contextlib.contextmanager
def _interruptible():
    """SIGINT raises KeyboardInterrupt inside the block (the cell stops and cleans up), whatever
    the process does with it outside: a sweep worker ignores it between cells, so a stop meant
    for a cell that just ended cannot cut the reset or the reply short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _output_into(log_path: Path, command: list[str]):
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


@dataclass
class _FlagSnapshot:
    """The process-wide switches a cell may change, as they were before it."""

    torch_flags: dict
    environ: dict
    cwd: str

    @classmethod
    def take(cls) -> "_FlagSnapshot":
        return cls(torch_flags=_torch_flags(), environ=dict(os.environ), cwd=os.getcwd())


def _torch_flags() -> dict:
    import torch

    return {"matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "matmul_fp16_reduced": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "matmul_bf16_reduced": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "cudnn_enabled": torch.backends.cudnn.enabled,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "default_dtype": torch.get_default_dtype(),
            "grad_enabled": torch.is_grad_enabled(),
            "num_threads": torch.get_num_threads()}


def _set_torch_flags(flags: dict) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = flags["matmul_allow_tf32"]
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = \
        flags["matmul_fp16_reduced"]
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = \
        flags["matmul_bf16_reduced"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn_allow_tf32"]
    torch.backends.cudnn.benchmark = flags["cudnn_benchmark"]
    torch.backends.cudnn.deterministic = flags["cudnn_deterministic"]
    torch.backends.cudnn.enabled = flags["cudnn_enabled"]
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    torch.use_deterministic_algorithms(flags["deterministic"])
    torch.set_default_dtype(flags["default_dtype"])
    torch.set_grad_enabled(flags["grad_enabled"])
    torch.set_num_threads(flags["num_threads"])


def reset_after_cell(before: _FlagSnapshot) -> None:
    """What one cell left behind, gone before the next: compiled graphs and Dynamo's caches,
    the cell's tensors and the CUDA caching allocator's blocks and peak statistics, the math
    switches (TF32, reduced-precision reductions, cuDNN autotuner, matmul precision, default
    dtype), environment variables and working folder; the RNGs seeded back to 0."""
    import gc

    import torch

    with contextlib.suppress(Exception):
        torch.compiler.reset()  # Dynamo's graphs, guards and Inductor's in-memory caches
    _set_torch_flags(before.torch_flags)
    os.environ.clear()
    os.environ.update(before.environ)
    with contextlib.suppress(OSError):
        os.chdir(before.cwd)
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        with contextlib.suppress(Exception):  # a CUDA error in the cell may make these fail
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.reset_accumulated_memory_stats()
    torch.manual_seed(0)

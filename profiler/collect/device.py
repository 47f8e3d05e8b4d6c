"""The device side every step shares: synchronize, NVTX ranges, the math flags, running out of
memory, and Kineto's noise on a machine without a GPU."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

import torch

from profiler.runs.config import RunConfig

NVTX_DOMAIN = "infer-profiler"

try:
    import nvtx as _nvtx
except ImportError:  # recorded in the metadata; ranges are then simply absent
    _nvtx = None

#: the NVTX ranges are recorded (the nvtx package is installed)
HAS_NVTX = _nvtx is not None


def nvtx_range(message: str):
    if _nvtx is None:
        return contextlib.nullcontext()
    return _nvtx.annotate(message, domain=NVTX_DOMAIN)


def sync(use_cuda: bool) -> None:
    if use_cuda:
        torch.cuda.synchronize()


def name(use_cuda: bool) -> str:
    return torch.cuda.get_device_name() if use_cuda else "CPU"


def set_math_flags(config: RunConfig) -> dict:
    """FP32 means FP32 unless --tf32: set both TF32 switches explicitly (PyTorch's default lets
    cuDNN use TF32) and report what they read, with cuDNN's autotuner setting."""
    torch.backends.cuda.matmul.allow_tf32 = config.tf32
    torch.backends.cudnn.allow_tf32 = config.tf32
    torch.backends.cudnn.benchmark = config.cudnn_benchmark
    return {
        "tf32": config.tf32,
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
    }


def _out_of_memory_types() -> tuple:
    kinds = [
        getattr(torch, "OutOfMemoryError", None),
        getattr(torch.cuda, "OutOfMemoryError", None),
    ]
    return tuple(k for k in kinds if k is not None)


# torch's CPU allocator raises a plain RuntimeError: "... DefaultCPUAllocator: can't allocate
# memory: you tried to allocate N bytes. Error code 12 (Cannot allocate memory)"
_HOST_OOM = re.compile(r"can't allocate memory|Cannot allocate memory")


# ONNX Runtime's CUDA provider: its arena ("BFCArena::AllocateRawInternal ... Failed to allocate
# memory for requested buffer of size N") or a CUDA call ("CUDA failure 2: out of memory"),
# raised as onnxruntime's own RuntimeException (not a Python RuntimeError). This tool's sessions
# keep every buffer on the GPU (IO binding), so their arena running out is GPU memory.
_ORT_CUDA_OOM = re.compile(
    r"Failed to allocate memory for requested buffer|"
    r"CUDA failure 2: out of memory|cudaErrorMemoryAllocation"
)


def out_of_memory_kind(error: BaseException) -> str | None:
    """ "CUDA" or "host" when ``error`` is running out of that memory, else None."""
    if isinstance(error, _out_of_memory_types()):
        return "CUDA"
    if type(error).__module__.startswith("onnxruntime") and _ORT_CUDA_OOM.search(str(error)):
        return "CUDA"
    if isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and _HOST_OOM.search(str(error))
    ):
        return "host"
    return None


def release_cuda_memory() -> None:
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


#: what Kineto's C++ side writes to fd 2 on a machine without a GPU, at every profiler start
#: and stop: its USDT probe lines and "gpuGetDeviceCount failed with code 35" (no CUDA driver)
KINETO_NOISE = re.compile(r"^(USDT:|ERROR:.*gpuGetDeviceCount failed)")


@contextlib.contextmanager
def inductor_left_unimported():
    """torch.profiler asks ``hasattr(torch, "_inductor")`` at every cycle's start (for Inductor's
    CUDA-graph setting), and that question imports torch._inductor and torch._dynamo: about 2 s
    of a run that never compiles. Where Inductor is not imported yet, its setting cannot be on,
    so for the block torch's lazy-module list leaves it out and the answer is no. An
    ``import torch._inductor`` inside the block still works; only the bare attribute reads as
    absent. Where torch keeps no such list, nothing changes."""
    lazy = getattr(torch, "_lazy_modules", None)
    if "torch._inductor" in sys.modules or not isinstance(lazy, set) or "_inductor" not in lazy:
        yield
        return
    lazy.discard("_inductor")
    try:
        yield
    finally:
        lazy.add("_inductor")


class Captured:
    """What a captured_stderr block wrote to fd 2 (``text``, set when the block ends)."""

    text: str = ""


@contextlib.contextmanager
def captured_stderr(keep=lambda line: True):
    """fd 2 goes to a temporary file for the block (Python's own stderr, the progress bar
    included, still goes to the terminal); afterwards the lines ``keep`` accepts are written
    back, and all of them are in the yielded ``Captured.text``: what a C++ library (Kineto,
    TensorRT) wrote there, to show and to read."""
    captured = Captured()
    sys.stderr.flush()
    saved_fd, python_stderr = os.dup(2), sys.stderr
    with tempfile.TemporaryFile("w+b") as caught:
        os.dup2(caught.fileno(), 2)
        sys.stderr = open(  # noqa: SIM115 (closefd=False: on the saved descriptor)
            saved_fd, "w", closefd=False, encoding=python_stderr.encoding, errors="backslashreplace"
        )
        try:
            yield captured
        finally:
            sys.stderr.flush()
            sys.stderr = python_stderr
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            caught.seek(0)
            captured.text = caught.read().decode(errors="replace")
            kept = [line for line in captured.text.splitlines(True) if keep(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()


@contextlib.contextmanager
def kineto_quiet(enabled: bool):
    """Keep KINETO_NOISE off the terminal (the other lines written to fd 2 are shown after the
    block)."""
    if not enabled:
        yield
        return
    with captured_stderr(lambda line: not KINETO_NOISE.match(line)):
        yield

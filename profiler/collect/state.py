"""The process-wide state a run may change, taken before and put back after: what lets one
process run sweep cells one after another as if each had a process of its own."""

from __future__ import annotations

import contextlib
import gc
import os
from dataclasses import dataclass

import torch


@dataclass
class Snapshot:
    """The process-wide switches a run may change, as they were before it."""

    torch_flags: dict
    environ: dict
    cwd: str


def snapshot() -> Snapshot:
    return Snapshot(torch_flags=torch_flags(), environ=dict(os.environ), cwd=os.getcwd())


def torch_flags() -> dict:
    matmul = torch.backends.cuda.matmul
    return {
        "matmul_allow_tf32": matmul.allow_tf32,
        "matmul_fp16_reduced": matmul.allow_fp16_reduced_precision_reduction,
        "matmul_bf16_reduced": matmul.allow_bf16_reduced_precision_reduction,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_enabled": torch.backends.cudnn.enabled,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "default_dtype": torch.get_default_dtype(),
        "grad_enabled": torch.is_grad_enabled(),
        "num_threads": torch.get_num_threads(),
    }


def set_torch_flags(flags: dict) -> None:
    torch.backends.cuda.matmul.allow_tf32 = flags["matmul_allow_tf32"]
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = flags["matmul_fp16_reduced"]
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = flags["matmul_bf16_reduced"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn_allow_tf32"]
    torch.backends.cudnn.benchmark = flags["cudnn_benchmark"]
    torch.backends.cudnn.deterministic = flags["cudnn_deterministic"]
    torch.backends.cudnn.enabled = flags["cudnn_enabled"]
    torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    if (
        "_inductor" in vars(torch)
        or torch.are_deterministic_algorithms_enabled() != flags["deterministic"]
        or torch.is_deterministic_algorithms_warn_only_enabled()
    ):  # else nothing to put back; the call imports Inductor and Dynamo (1.5 s of CPU)
        torch.use_deterministic_algorithms(flags["deterministic"])
    torch.set_default_dtype(flags["default_dtype"])
    torch.set_grad_enabled(flags["grad_enabled"])
    torch.set_num_threads(flags["num_threads"])


def reset(before: Snapshot) -> None:
    """What one run left behind, gone before the next: compiled graphs and Dynamo's caches,
    the run's tensors and the CUDA caching allocator's blocks and peak statistics, the math
    switches (TF32, reduced-precision reductions, cuDNN autotuner, matmul precision, default
    dtype), environment variables and working folder; the RNGs seeded back to 0."""
    with contextlib.suppress(Exception):
        if "_dynamo" in vars(torch):  # else nothing was compiled (importing Dynamo took 1.5 s)
            torch.compiler.reset()  # Dynamo's graphs, guards and Inductor's in-memory caches
    set_torch_flags(before.torch_flags)
    os.environ.clear()
    os.environ.update(before.environ)
    with contextlib.suppress(OSError):
        os.chdir(before.cwd)
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        with contextlib.suppress(Exception):  # a CUDA error in the run may make these fail
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.reset_accumulated_memory_stats()
    torch.manual_seed(0)

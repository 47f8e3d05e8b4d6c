"""The schema tables: Kineto's spellings -> the kinds and columns the analyses read, and
DeviceProperties (what the trace says about one GPU).

Schema drift between Kineto versions is handled as data, not as ``if`` chains:

- ``EVENT_KINDS`` maps every ``cat`` spelling to one kind (2021 ``Kernel``/``Runtime``/
  ``Operator`` and today's ``kernel``/``cuda_runtime``/``cuda_driver``/``cpu_op`` ...);
- ``ARG_COLUMNS`` maps every spelling of an ``args`` key to one column (``External id`` and the
  old ``external id`` ...);
- ``DEVICE_PROPERTY_KEYS`` does the same for the per-GPU properties block (``deviceProperties``
  with ``numSms``/``computeMajor`` today, ``computeProperties`` with ``multiProcessorCount``/
  ``major`` in the 2021 plugin test files).

A new spelling is a new row in one of these tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Event kinds the analyses know. The position is the code stored in ``events.kind``.
KINDS: tuple[str, ...] = (
    "kernel",  # a GPU kernel execution (CUPTI activity)
    "memcpy",  # a GPU copy
    "memset",  # a GPU memset
    "runtime",  # a CUDA runtime API call on a CPU thread (cudaLaunchKernel ...)
    "driver",  # a CUDA driver API call (cuLaunchKernelEx: cuBLAS nvjet, TensorRT, Triton)
    "cpu_op",  # an operator on a CPU thread (aten::conv2d ...)
    "annotation",  # record_function / ProfilerStep#N on a CPU thread
    "gpu_annotation",  # the GPU-timeline copy Kineto makes of a CPU annotation
    "python",  # python_function events (with_stack)
    "trace",  # the 'PyTorch Profiler (0)' span of the whole recording
)
KIND = {name: code for code, name in enumerate(KINDS)}

#: ``cat`` as written by Kineto -> kind. Old spellings are from torch 1.8/1.9 (2021, the
#: TensorBoard plugin's samples); new ones from torch >= 1.10 (libkineto ActivityType names).
EVENT_KINDS: dict[str, str] = {
    "Kernel": "kernel",
    "kernel": "kernel",
    "Memcpy": "memcpy",
    "gpu_memcpy": "memcpy",
    "Memset": "memset",
    "gpu_memset": "memset",
    "Runtime": "runtime",
    "cuda_runtime": "runtime",
    "cuda_driver": "driver",
    "Operator": "cpu_op",
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "annotation",
    "Python": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python",
    "Trace": "trace",
}
KIND_CODE = {cat: KIND[kind] for cat, kind in EVENT_KINDS.items()}


@dataclass(frozen=True)
class ArgColumn:
    """One column filled from ``args``: the first of ``keys`` present wins."""

    column: str
    type: str  # "int", "float" or "dim3"
    keys: tuple[str, ...]
    kernels_only: bool = False


#: ``args`` keys -> columns. Old Kineto wrote ``external id``; today it is ``External id``.
ARG_COLUMNS: tuple[ArgColumn, ...] = (
    ArgColumn("external_id", "int", ("External id", "external id")),
    ArgColumn("correlation", "int", ("correlation",)),
    ArgColumn("device", "int", ("device",)),
    ArgColumn("stream", "int", ("stream",)),
    ArgColumn("registers_per_thread", "int", ("registers per thread",), kernels_only=True),
    # static + dynamic shared memory per block, bytes (libkineto CuptiActivity.h adds the two)
    ArgColumn("shared_memory", "int", ("shared memory",), kernels_only=True),
    ArgColumn("blocks_per_sm", "float", ("blocks per SM",), kernels_only=True),
    ArgColumn("warps_per_sm", "float", ("warps per SM",), kernels_only=True),
    ArgColumn("kineto_occupancy_pct", "float", ("est. achieved occupancy %",), kernels_only=True),
    ArgColumn("grid", "dim3", ("grid",), kernels_only=True),
    ArgColumn("block", "dim3", ("block",), kernels_only=True),
)

#: Our name -> the keys Kineto used for it in ``deviceProperties`` (today) or
#: ``computeProperties`` (the 2021 plugin test input, which copies cudaDeviceProp's names).
DEVICE_PROPERTY_KEYS: dict[str, tuple[str, ...]] = {
    "id": ("id",),
    "name": ("name",),
    "compute_major": ("computeMajor", "major"),
    "compute_minor": ("computeMinor", "minor"),
    "num_sms": ("numSms", "multiProcessorCount"),
    "max_threads_per_block": ("maxThreadsPerBlock",),
    "max_threads_per_sm": ("maxThreadsPerMultiprocessor", "maxThreadsPerMultiProcessor"),
    "regs_per_block": ("regsPerBlock",),
    "regs_per_sm": ("regsPerMultiprocessor",),
    "warp_size": ("warpSize",),
    "shared_mem_per_block": ("sharedMemPerBlock",),
    "shared_mem_per_block_optin": ("sharedMemPerBlockOptin",),
    "shared_mem_per_sm": ("sharedMemPerMultiprocessor",),
    "total_global_mem": ("totalGlobalMem",),
}
DEVICE_PROPERTY_BLOCKS = ("deviceProperties", "computeProperties")


@dataclass(frozen=True)
class DeviceProperties:
    """What the trace says about one GPU (cudaDeviceProp, as Kineto wrote it)."""

    id: int
    name: str = ""
    compute_major: int = 0
    compute_minor: int = 0
    num_sms: int = 0
    max_threads_per_block: int = 1024
    max_threads_per_sm: int = 0
    regs_per_block: int = 65536
    regs_per_sm: int = 0
    warp_size: int = 32
    shared_mem_per_block: int = 49152
    shared_mem_per_block_optin: int = 0
    shared_mem_per_sm: int = 0
    total_global_mem: int = 0

    @property
    def compute_capability(self) -> str:
        return f"{self.compute_major}.{self.compute_minor}"

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> DeviceProperties:
        values: dict[str, Any] = {}
        for ours, keys in DEVICE_PROPERTY_KEYS.items():
            for key in keys:
                if key in raw and raw[key] is not None:
                    values[ours] = raw[key]
                    break
        values.setdefault("id", 0)
        # (Any: a field gets whichever of the two types the trace wrote)
        known: dict[str, Any] = {
            k: v for k, v in values.items() if isinstance(v, (int, str)) and not isinstance(v, bool)
        }
        return cls(**known)

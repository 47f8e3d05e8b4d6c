"""Kineto trace file (JSON or .json.gz) -> typed columns.

Only the fields the analyses need are decoded: msgspec decodes each event into a small typed
Struct, the loader turns a chunk of those into numpy columns and lets the Structs go, so a
GB-sized trace never exists as millions of Python dicts. Names are interned into one table
(``Trace.names``) and the events refer to them by number.

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

import gc
import gzip
import zlib
from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, Optional, Union

import msgspec
import numpy as np
import pandas as pd

from ..errors import UserError

# --------------------------------------------------------------------------------------------
# Schema tables
# --------------------------------------------------------------------------------------------

#: Event kinds the analyses know. The position is the code stored in ``events.kind``.
KINDS: tuple[str, ...] = (
    "kernel",          # a GPU kernel execution (CUPTI activity)
    "memcpy",          # a GPU copy
    "memset",          # a GPU memset
    "runtime",         # a CUDA runtime API call on a CPU thread (cudaLaunchKernel ...)
    "driver",          # a CUDA driver API call (cuLaunchKernelEx: cuBLAS nvjet, TensorRT, Triton)
    "cpu_op",          # an operator on a CPU thread (aten::conv2d ...)
    "annotation",      # record_function / ProfilerStep#N on a CPU thread
    "gpu_annotation",  # the GPU-timeline copy Kineto makes of a CPU annotation
    "python",          # python_function events (with_stack)
    "trace",           # the 'PyTorch Profiler (0)' span of the whole recording
)
KIND = {name: code for code, name in enumerate(KINDS)}

#: ``cat`` as written by Kineto -> kind. Old spellings are from torch 1.8/1.9 (2021, the
#: TensorBoard plugin's samples); new ones from torch >= 1.10 (libkineto ActivityType names).
EVENT_KINDS: dict[str, str] = {
    "Kernel": "kernel", "kernel": "kernel",
    "Memcpy": "memcpy", "gpu_memcpy": "memcpy",
    "Memset": "memset", "gpu_memset": "memset",
    "Runtime": "runtime", "cuda_runtime": "runtime",
    "cuda_driver": "driver",
    "Operator": "cpu_op", "cpu_op": "cpu_op", "operator": "cpu_op",
    "user_annotation": "annotation", "Python": "annotation",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python",
    "Trace": "trace",
}
_KIND_CODE = {cat: KIND[kind] for cat, kind in EVENT_KINDS.items()}


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
    def from_json(cls, raw: dict) -> "DeviceProperties":
        values = {}
        for ours, keys in DEVICE_PROPERTY_KEYS.items():
            for key in keys:
                if key in raw and raw[key] is not None:
                    values[ours] = raw[key]
                    break
        values.setdefault("id", 0)
        known = {k: v for k, v in values.items()
                 if isinstance(v, (int, str)) and not isinstance(v, bool)}
        return cls(**known)


# --------------------------------------------------------------------------------------------
# Decoders built from the tables
# --------------------------------------------------------------------------------------------

_ARG_TYPES = {"int": Optional[int], "float": Optional[float], "dim3": Optional[list[int]]}


def _field_name(column: ArgColumn, i: int) -> str:
    return f"{column.column}__{i}"


_Args = msgspec.defstruct(
    "_Args",
    [(_field_name(col, i), _ARG_TYPES[col.type], msgspec.field(name=key, default=None))
     for col in ARG_COLUMNS for i, key in enumerate(col.keys)],
    gc=False,
)
_NO_ARGS = _Args()


class _Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: Union[int, str] = 0
    tid: Union[int, str] = 0
    ts: float = 0.0
    dur: float = 0.0
    args: Optional[_Args] = None


class _TraceFile(msgspec.Struct):
    traceEvents: list[msgspec.Raw]
    deviceProperties: Optional[list[dict[str, Any]]] = None
    computeProperties: Optional[list[dict[str, Any]]] = None


_FILE_DECODER = msgspec.json.Decoder(_TraceFile)
_CHUNK_DECODER = msgspec.json.Decoder(list[_Event])
_CHUNK = 100_000  # events decoded into Structs at a time

EVENT_COLUMNS = ("kind", "name_id", "thread", "ts", "dur") + tuple(
    c.column for c in ARG_COLUMNS if not c.kernels_only)
KERNEL_COLUMNS = tuple(c.column for c in ARG_COLUMNS if c.kernels_only and c.type != "dim3") + (
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


@dataclass
class Trace:
    """A parsed trace: plain columns, nothing torch-specific."""

    path: Path
    #: one row per complete ('X') event of a known kind, in file order; columns EVENT_COLUMNS
    events: pd.DataFrame
    #: launch configuration of the kernel rows, same index as those rows of ``events``
    kernel_launch: pd.DataFrame
    #: name_id -> name
    names: np.ndarray
    #: thread code -> (pid, tid) as written in the trace
    threads: list[tuple]
    devices: dict[int, DeviceProperties]
    #: every ``cat`` seen on a complete event, with its count (unknown ones included)
    categories: dict[str, int] = field(default_factory=dict)
    #: the 'PyTorch Profiler (0)' span, or the span of all events
    span: tuple[float, float] = (0.0, 0.0)

    @property
    def schema(self) -> str:
        old = {"Kernel", "Runtime", "Operator", "Memcpy", "Memset"}
        return "kineto-2021 (Kernel/Runtime/Operator)" if old & set(self.categories) else "kineto"

    def of_kind(self, kind: str) -> pd.DataFrame:
        return self.events[self.events["kind"] == KIND[kind]]

    def name_of(self, name_ids) -> np.ndarray:
        return self.names[np.asarray(name_ids, dtype=np.int64)]

    @property
    def has_gpu_activity(self) -> bool:
        gpu = [KIND["kernel"], KIND["memcpy"], KIND["memset"]]
        return bool(self.events["kind"].isin(gpu).any())


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

_GZIP_MAGIC = b"\x1f\x8b"


def read_bytes(path: Path) -> bytes:
    """The JSON text of a trace file, gunzipped when needed; one-line errors for bad files."""
    if not path.exists():
        raise UserError(f"no such file: {path}")
    if path.is_dir():
        raise UserError(f"{path} is a folder, expected a trace file")
    data = path.read_bytes()
    if not data:
        raise UserError(f"{path} is empty: not a trace")
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (EOFError, zlib.error, gzip.BadGzipFile) as error:
            raise UserError(f"{path} is a damaged or truncated gzip file ({error})") from None
        if not data:
            raise UserError(f"{path} holds an empty gzip stream: not a trace")
    elif path.suffix == ".gz":
        raise UserError(f"{path} ends in .gz but is not gzip data")
    return data


def load_trace(path: Path | str) -> Trace:
    # millions of short-lived objects and no reference cycles: the cyclic GC would only rescan
    # them over and over, so it is paused while decoding
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(Path(path))
    finally:
        if enabled:
            gc.enable()


def _load(path: Path) -> Trace:
    data = read_bytes(path)
    try:
        head = _FILE_DECODER.decode(data)
    except msgspec.ValidationError as error:
        if "traceEvents" in str(error):
            raise UserError(f"{path} is JSON but has no traceEvents list: not a Kineto/Chrome "
                            "trace (torch.profiler writes one with export_chrome_trace or "
                            "tensorboard_trace_handler)") from None
        raise UserError(f"{path} is not a trace object: {error}") from None
    except msgspec.DecodeError as error:
        raise UserError(f"{path} is not valid JSON, perhaps truncated ({error})") from None

    devices = {}
    for block in DEVICE_PROPERTY_BLOCKS:
        for raw in getattr(head, block) or []:
            if isinstance(raw, dict):
                props = DeviceProperties.from_json(raw)
                devices.setdefault(props.id, props)

    raws = head.traceEvents
    del head
    builder = _ColumnBuilder()
    for start in range(0, len(raws), _CHUNK):
        chunk = b"[" + b",".join(raws[start:start + _CHUNK]) + b"]"
        try:
            events = _CHUNK_DECODER.decode(chunk)
        except msgspec.ValidationError as error:
            raise UserError(f"{path}: an event has an unexpected field type ({error})") from None
        builder.add(events)
        del events, chunk
    del raws, data
    return builder.finish(path, devices)


class _ColumnBuilder:
    """Turns chunks of decoded events into numpy columns; interns names and threads."""

    def __init__(self) -> None:
        self.name_ids: dict[str, int] = {}
        self.thread_ids: dict[tuple, int] = {}
        self.categories: dict[str, int] = {}
        self.parts: list[dict[str, np.ndarray]] = []
        self.kernel_parts: list[dict[str, np.ndarray]] = []
        self.offset = 0
        self.span_min = np.inf
        self.span_max = -np.inf
        self.profiler_span: tuple[float, float] | None = None

    def add(self, events: list) -> None:
        complete = [e for e in events if e.ph == "X"]
        cats = [e.cat for e in complete]
        for cat, count in Counter(cats).items():
            self.categories[cat] = self.categories.get(cat, 0) + count
        kinds = np.array([_KIND_CODE.get(c, -1) for c in cats], dtype=np.int8)
        keep = np.flatnonzero(kinds >= 0)
        if len(keep) == 0:
            return
        kept = [complete[i] for i in keep]
        kinds = kinds[keep]
        names, threads = self.name_ids, self.thread_ids
        part = {
            "kind": kinds,
            "name_id": np.array([names.setdefault(e.name, len(names)) for e in kept],
                                dtype=np.int32),
            "thread": np.array([threads.setdefault((e.pid, e.tid), len(threads)) for e in kept],
                               dtype=np.int32),
            "ts": np.array([e.ts for e in kept], dtype=np.float64),
            "dur": np.array([e.dur for e in kept], dtype=np.float64),
        }
        args = [e.args or _NO_ARGS for e in kept]
        for column in ARG_COLUMNS:
            if not column.kernels_only:
                part[column.column] = _int_column(_coalesce(args, column))
        trace_rows = np.flatnonzero(kinds == KIND["trace"])
        for i in trace_rows:
            if kept[i].name.startswith("PyTorch Profiler") and self.profiler_span is None:
                self.profiler_span = (kept[i].ts, kept[i].ts + kept[i].dur)
        self.span_min = min(self.span_min, float(part["ts"].min()))
        self.span_max = max(self.span_max, float((part["ts"] + part["dur"]).max()))

        kernel_rows = np.flatnonzero(kinds == KIND["kernel"])
        if len(kernel_rows):
            kargs = [args[i] for i in kernel_rows]
            kpart: dict[str, np.ndarray] = {"row": kernel_rows + self.offset}
            for column in ARG_COLUMNS:
                if not column.kernels_only:
                    continue
                values = _coalesce(kargs, column)
                if column.type == "dim3":
                    try:  # fast path: every kernel has [x, y, z]
                        dims = np.array(values, dtype=np.int64).reshape(-1, 3)
                    except (TypeError, ValueError):
                        dims = np.array([_dim3(v) for v in values], dtype=np.int64).reshape(-1, 3)
                    for axis, letter in enumerate("xyz"):
                        kpart[f"{column.column}_{letter}"] = dims[:, axis]
                elif column.type == "int":
                    kpart[column.column] = _int_column(values)
                else:
                    kpart[column.column] = np.array(values, dtype=np.float64)
            self.kernel_parts.append(kpart)
        self.parts.append(part)
        self.offset += len(kept)

    def finish(self, path: Path, devices: dict[int, DeviceProperties]) -> Trace:
        if self.parts:
            events = pd.DataFrame({c: np.concatenate([p[c] for p in self.parts])
                                   for c in EVENT_COLUMNS})
        else:
            events = pd.DataFrame({c: np.array([], dtype=np.float64) for c in EVENT_COLUMNS})
            events["kind"] = events["kind"].astype(np.int8)
            for c in ("name_id", "thread"):
                events[c] = events[c].astype(np.int32)
            for c in EVENT_COLUMNS[5:]:
                events[c] = events[c].astype(np.int64)
        if self.kernel_parts:
            rows = np.concatenate([p["row"] for p in self.kernel_parts])
            launch = pd.DataFrame({c: np.concatenate([p[c] for p in self.kernel_parts])
                                   for c in KERNEL_COLUMNS}, index=rows)
        else:
            launch = pd.DataFrame({c: np.array([], dtype=np.float64) for c in KERNEL_COLUMNS})
        names = np.empty(len(self.name_ids), dtype=object)
        names[:] = list(self.name_ids)
        span = self.profiler_span or (
            (self.span_min, self.span_max) if np.isfinite(self.span_min) else (0.0, 0.0))
        return Trace(path=path, events=events, kernel_launch=launch, names=names,
                     threads=list(self.thread_ids), devices=devices,
                     categories=dict(sorted(self.categories.items(), key=lambda kv: -kv[1])),
                     span=span)


def _coalesce(args: list, column: ArgColumn) -> list:
    first = list(map(attrgetter(_field_name(column, 0)), args))
    for i in range(1, len(column.keys)):
        other = list(map(attrgetter(_field_name(column, i)), args))
        if any(v is not None for v in other):
            first = [v if v is not None else o for v, o in zip(first, other)]
    return first


def _int_column(values: list) -> np.ndarray:
    """Integers with -1 for missing (ids, devices, streams, counts are never negative)."""
    as_float = np.array(values, dtype=np.float64)  # None -> nan
    return np.where(np.isnan(as_float), -1, as_float).astype(np.int64)


def _dim3(value) -> tuple[int, int, int]:
    if not value:
        return (0, 0, 0)
    v = list(value)[:3] + [1] * (3 - len(value))
    return (int(v[0]), int(v[1]), int(v[2]))

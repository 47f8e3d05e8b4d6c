"""Kineto trace file (JSON or .json.gz) -> typed columns.

Only the fields the analyses need are decoded: msgspec decodes each complete ('X') event into a
small typed Struct (other events into empty ones), the loader turns a piece of the file at a time
into numpy columns and lets the Structs go, so a GB-sized trace never exists as millions of
Python dicts. Names are interned into one table (``Trace.names``) and the events refer to them
by number. Fields of events other than 'X' are not decoded, so not type-checked either (unless
their piece holds an event of no or a non-standard 'ph', see ``_complete_events``).

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
import mmap
import os
import pickle
import re
import warnings
import zlib
from collections import Counter
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Union

import msgspec
import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.errors import UserError

# --------------------------------------------------------------------------------------------
# Schema tables
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Decoders built from the tables
# --------------------------------------------------------------------------------------------

_ARG_TYPES = {"int": int | None, "float": float | None, "dim3": list[int] | None}
#: what a column holds when its key is absent: -1 for ints (ids, devices, counts are never
#: negative), nan for floats. Absent keys decode straight to these, so a column is one
#: ``np.fromiter`` pass; an explicit ``null`` still decodes to None and takes a slower path.
_ARG_DEFAULTS = {"int": -1, "float": float("nan"), "dim3": None}


def _field_name(column: ArgColumn, i: int) -> str:
    return f"{column.column}__{i}"


if TYPE_CHECKING:
    # built from ARG_COLUMNS at run time, so its fields are unknown to a type checker (they are
    # read through _ARG_GETTERS)
    _Args = msgspec.Struct
else:
    _Args = msgspec.defstruct(
        "_Args",
        [
            (
                _field_name(col, i),
                _ARG_TYPES[col.type],
                msgspec.field(name=key, default=_ARG_DEFAULTS[col.type]),
            )
            for col in ARG_COLUMNS
            for i, key in enumerate(col.keys)
        ],
        gc=False,
    )
_NO_ARGS = _Args()


class _Complete(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """A complete event ('ph': 'X'), the only kind the analyses read."""

    cat: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: float = float("nan")  # absent: nan, flagged and excluded (see _impossible_rows)
    dur: float = float("nan")
    args: _Args | None = None


#: The other 'ph' values of the Trace Event Format (duration B/E, instant, counter, async, flow,
#: sample, object, metadata, memory dump, mark, clock sync, context). Decoded through a union
#: tagged by 'ph', each of those events is an empty Struct: none of its fields are decoded.
_OTHER_PHASES = (
    "B",
    "E",
    "i",
    "I",
    "C",
    "b",
    "n",
    "e",
    "S",
    "T",
    "p",
    "F",
    "s",
    "t",
    "f",
    "P",
    "N",
    "O",
    "D",
    "M",
    "V",
    "v",
    "R",
    "c",
    "(",
    ")",
)
_SKIPPED = tuple(
    msgspec.defstruct(f"_Phase{i}", [], tag_field="ph", tag=ph, gc=False)
    for i, ph in enumerate(_OTHER_PHASES)
)


class _Event(_Complete, gc=False, tag=False):
    """Any event, 'ph' as a plain field: for lists with an event of no or another 'ph'."""

    ph: str = ""


class _TraceFile(msgspec.Struct):
    traceEvents: list[msgspec.Raw]
    # Any: a property block of an odd shape is ignored (_devices), never a reason to refuse
    deviceProperties: Any = None
    computeProperties: Any = None


_FILE_DECODER = msgspec.json.Decoder(_TraceFile)
#: any event, tagged by 'ph' (Union[...] over a tuple built at run time, which a type checker
#: cannot read as a type)
_ANY_PHASE: Any = Union.__getitem__((_Complete, *_SKIPPED))
_PHASE_DECODER = msgspec.json.Decoder(list[_ANY_PHASE])
_CHUNK_DECODER = msgspec.json.Decoder(list[_Event])


def _complete_events(text: bytes) -> list[_Complete]:
    """The complete events of a JSON list of events, as _Complete or _Event Structs.

    Strict typed decoding first (fast); a field of an unexpected type anywhere in ``text``
    (a ROCm ``"stream": "0x0"``, an Inductor ``"grid": "grid(100,)"`` on a cpu_op) sends the
    list through ``_lenient_events``, which keeps every event and drops only the odd values."""
    try:
        return [e for e in _PHASE_DECODER.decode(text) if e.__class__ is _Complete]
    except msgspec.ValidationError:  # no 'ph', a 'ph' outside the format, or a wrong type
        pass
    try:
        return [e for e in _CHUNK_DECODER.decode(text) if e.ph == "X"]
    except msgspec.ValidationError:  # a field of an unexpected type
        return _lenient_events(text)


def _lenient_events(text: bytes) -> list[_Complete]:
    """The complete events of a JSON list, decoded untyped and then checked value by value:
    a value of the wrong type reads as absent (a missing ``ts``/``dur`` is then flagged and
    the event excluded, see ``_impossible_rows``); an item that is not an object is skipped."""
    items = msgspec.json.decode(text)
    if not isinstance(items, list):
        raise msgspec.ValidationError("the events are not a list")
    return [_checked_event(e) for e in items if isinstance(e, dict) and e.get("ph") == "X"]


def _checked_event(raw: dict[str, Any]) -> _Complete:
    args = raw.get("args")
    return _Complete(
        cat=_text(raw.get("cat")),
        name=_text(raw.get("name")),
        pid=_thread_part(raw.get("pid")),
        tid=_thread_part(raw.get("tid")),
        ts=_number(raw.get("ts")),
        dur=_number(raw.get("dur")),
        args=_checked_args(args) if isinstance(args, dict) else None,
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _thread_part(value: object) -> int | str:
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else _text(value)


def _number(value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an int beyond float range
            return float("inf")
    return float("nan")


def _checked_args(raw: dict[str, Any]) -> _Args:
    values: dict[str, int | float | list[int]] = {}
    for column in ARG_COLUMNS:
        for i, key in enumerate(column.keys):
            value = _arg_value(raw.get(key), column.type)
            if value is not None:
                values[_field_name(column, i)] = value
    return _Args(**values)


def _arg_value(value: object, type_: str) -> int | float | list[int] | None:
    """``value`` as the column's type, or None when it is absent or of another type. A string
    int column value is read as a number when it is one (``"0x0"``, ``"7"``)."""
    if value is None or isinstance(value, bool):
        return None
    if type_ == "dim3":
        if (
            isinstance(value, list)
            and 0 < len(value) <= 3
            and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            return value
        return None
    if type_ == "float":
        return _number(value) if isinstance(value, (int, float)) else None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            return None
    return None


_CHUNK = 100_000  # events decoded into Structs at a time

EVENT_COLUMNS = ("kind", "name_id", "thread", "ts", "dur") + tuple(
    c.column for c in ARG_COLUMNS if not c.kernels_only
)
KERNEL_COLUMNS = tuple(c.column for c in ARG_COLUMNS if c.kernels_only and c.type != "dim3") + (
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
)


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
    threads: list[tuple[int | str, int | str]]
    devices: dict[int, DeviceProperties]
    #: every ``cat`` seen on a complete event, with its count (unknown ones included)
    categories: dict[str, int] = field(default_factory=dict)
    #: the 'PyTorch Profiler (0)' span, or the span of all events
    span: tuple[float, float] = (0.0, 0.0)
    #: events left out of ``events`` because their values cannot be real: reason -> count
    excluded: dict[str, int] = field(default_factory=dict)
    #: complete events of a category the loader does not read (another accelerator's, a new
    #: Kineto activity type): (cat, pid) -> count
    unread: dict[tuple[str, Any], int] = field(default_factory=dict)

    @property
    def host_pids(self) -> set[int | str]:
        """The pids of the CPU-side events (operators, runtime calls, annotations)."""
        cpu = [KIND[k] for k in ("runtime", "driver", "cpu_op", "annotation", "python")]
        codes = np.unique(self.events["thread"].to_numpy()[self.events["kind"].isin(cpu)])
        return {self.threads[code][0] for code in codes.tolist()}

    @property
    def unanalysed_device_events(self) -> list[tuple[int, str, Any]]:
        """(count, cat, pid) of the unread events that sit on a process other than the host's
        (a device timeline: Kineto gives each device its own pid), most first."""
        host = self.host_pids
        return sorted(
            ((n, cat, pid) for (cat, pid), n in self.unread.items() if pid not in host),
            key=lambda t: (-t[0], t[1], str(t[2])),
        )

    @property
    def unanalysed_warning(self) -> str | None:
        """``N events of category X on device Y, not analysed`` for each such group, or None."""
        found = self.unanalysed_device_events
        if not found:
            return None
        groups = "; ".join(
            f"{n} events of category {cat!r} on device {pid}" for n, cat, pid in found
        )
        return groups + (
            ", not analysed (this tool reads CUDA kernel, memcpy and memset events only)"
        )

    @property
    def excluded_warning(self) -> str | None:
        """One line naming what was left out of the figures and why, or None."""
        if not self.excluded:
            return None
        total = sum(self.excluded.values())
        reasons = ", ".join(f"{n} {reason}" for reason, n in self.excluded.items())
        return (
            f"{total} of {total + len(self.events)} events left out of the figures, their "
            f"values cannot be real: {reasons}"
        )

    @property
    def schema(self) -> str:
        old = {"Kernel", "Runtime", "Operator", "Memcpy", "Memset"}
        return "kineto-2021 (Kernel/Runtime/Operator)" if old & set(self.categories) else "kineto"

    def of_kind(self, kind: str) -> pd.DataFrame:
        return self.events[self.events["kind"] == KIND[kind]]

    def name_of(self, name_ids: npt.ArrayLike) -> np.ndarray:
        return self.names[np.asarray(name_ids, dtype=np.int64)]

    @property
    def has_gpu_activity(self) -> bool:
        gpu = [KIND["kernel"], KIND["memcpy"], KIND["memset"]]
        return bool(self.events["kind"].isin(gpu).any())


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

_GZIP_MAGIC = b"\x1f\x8b"
#: a trace file's text: read into memory, or mapped (see _MMAP_MIN_BYTES)
_Data = bytes | mmap.mmap
#: plain files at least this big are memory-mapped rather than read: mapping page-cache pages is
#: much cheaper than copying them into fresh memory (on the 2-core VM this runs on, touching
#: fresh memory costs up to ~2.5 s per GB), and the loader only ever reads the buffer
_MMAP_MIN_BYTES = 1 << 20


def read_bytes(path: Path) -> bytes:
    """The JSON text of a trace file, gunzipped when needed; one-line errors for bad files."""
    data = _read(path, mmap_ok=False)
    assert isinstance(data, bytes)
    return data


def _read(path: Path, mmap_ok: bool = True) -> bytes | mmap.mmap:
    """Like read_bytes, but a large uncompressed file comes back as a read-only mmap."""
    if not path.exists():
        raise UserError(f"no such file: {path}")
    if path.is_dir():
        raise UserError(f"{path} is a folder, expected a trace file")
    try:
        return _read_file(path, mmap_ok)
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror or error}") from None


def _read_file(path: Path, mmap_ok: bool) -> bytes | mmap.mmap:
    with open(path, "rb") as f:
        magic = f.read(2)
        size = os.fstat(f.fileno()).st_size
        if mmap_ok and magic != _GZIP_MAGIC and size >= _MMAP_MIN_BYTES and path.suffix != ".gz":
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        data = magic + f.read()
    if not data:
        raise UserError(f"{path} is empty: not a trace")
    if data[:2] == _GZIP_MAGIC:
        try:
            data = _gunzip(path, data)
        except (EOFError, zlib.error, gzip.BadGzipFile) as error:
            raise UserError(f"{path} is a damaged or truncated gzip file ({error})") from None
        if not data:
            raise UserError(f"{path} holds an empty gzip stream: not a trace")
    elif path.suffix == ".gz":
        raise UserError(f"{path} ends in .gz but is not gzip data")
    return data


def _as_utf8(data: bytes | mmap.mmap) -> bytes:
    text = bytes(data).decode("utf-8", errors="replace").encode("utf-8")
    if isinstance(data, mmap.mmap):
        data.close()
    return text


#: a trace's JSON compresses about 10:1; far beyond this, the file is a gzip bomb
_MAX_INFLATION = 200
_INFLATE_FLOOR = 256 << 20  # small files may inflate to this whatever their ratio


def _gunzip(path: Path, data: bytes) -> bytes:
    """gzip.decompress in pieces, refusing a stream that inflates beyond _MAX_INFLATION times
    its size (a gzip bomb would take the machine's memory)."""
    limit = max(_INFLATE_FLOOR, _MAX_INFLATION * len(data))
    pieces, total, rest = [], 0, data
    while rest:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while rest and not inflater.eof:
            piece = inflater.decompress(rest[: 1 << 20], limit + 1 - total)
            rest = inflater.unconsumed_tail + rest[1 << 20 :]
            total += len(piece)
            pieces.append(piece)
            if total > limit:
                raise UserError(
                    f"{path} inflates to more than {limit >> 20} MiB, over "
                    f"{_MAX_INFLATION} times its size: a gzip bomb, not a trace"
                )
        if not inflater.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        rest = inflater.unused_data.lstrip(b"\0")  # a further gzip member, as gzip.decompress
    return b"".join(pieces)


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
    data = _read(path)
    try:
        try:
            return _load_split(path, data) or _load_robust(path, data)
        except UnicodeDecodeError:  # bytes that are not UTF-8 in a name: shown as U+FFFD
            data = _as_utf8(data)
            return _load_split(path, data) or _load_robust(path, data)
    except UnicodeDecodeError as error:
        raise UserError(
            f"{path} is not UTF-8 text ({error.reason} at byte {error.start})"
        ) from None
    except RecursionError:
        raise UserError(f"{path} nests JSON lists or objects too deeply to be a trace") from None
    finally:
        if isinstance(data, mmap.mmap):
            try:
                data.close()
            except BufferError:  # a view is still alive (an exception's traceback): GC closes it
                pass


def _devices(head: _Head | _TraceFile) -> dict[int, DeviceProperties]:
    devices: dict[int, DeviceProperties] = {}
    for block in DEVICE_PROPERTY_BLOCKS:
        listed = getattr(head, block)
        for raw in listed if isinstance(listed, list) else []:
            if isinstance(raw, dict):
                props = DeviceProperties.from_json(raw)
                devices.setdefault(props.id, props)
    return devices


# --------------------------------------------------------------------------------------------
# Fast path: split the traceEvents text into pieces of whole events without parsing it first
# --------------------------------------------------------------------------------------------
#
# Decoding a GB-sized trace in one go would hold every event's Struct at once (~1.6 GB for 1 GB
# of JSON), and parsing it once just to find the events (a list of msgspec.Raw) costs a second
# full scan plus a copy of every event. Instead the events text is cut into pieces of about
# _PIECE_BYTES at what looks like the end of an event: '}', the list's ',' and the next '{"'
# (JSON whitespace between). That pattern can also occur inside an event (kernel names such as
# '...{lambda()#1}, {...', a list of objects in args), so nothing found is trusted until msgspec
# has decoded it strictly:
#
# - a piece is decoded as '[' + text + ']' (_complete_events). If the text does not end exactly
#   at the end of a top-level event, the object it cuts into is left unclosed and the strict
#   decoder rejects the piece (appending ']' cannot close a '{'); then the next candidate is
#   tried. So a piece that decodes is a whole number of events, and the next piece starts at
#   the '{' after the list's comma;
# - the whole file minus the events array (the array replaced by a marker) is decoded as the
#   trace object, and must have the marker as its traceEvents: this checks the array's bounds
#   and everything outside it (deviceProperties, JSON validity of the rest).
#
# Anything unexpected (the checks failing, an invalid or unusual file) sends the file to the
# robust path below, which parses it in full and gives the error messages. The result is the
# same either way (tests/test_trace_loading.py checks it on re-formatted fixtures).

_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\n\r]*:[ \t\n\r]*\[')
#: an event's closing brace, the list's comma and the next event's opening '{"'
_EVENT_END = re.compile(rb'\}[ \t\n\r]*,[ \t\n\r]*(\{)[ \t\n\r]*"')
_MARKER = b'["traceEvents-splice-marker"]'
_PIECE_BYTES = 2 << 20  # JSON text decoded into Structs at a time (smaller pieces stay in cache)
_CUT_TRIES = 8  # candidate cuts tried per piece before parsing the file in full
_END_TRIES = 16  # candidate ends of the events array


class _Head(msgspec.Struct):
    traceEvents: msgspec.Raw
    deviceProperties: Any = None
    computeProperties: Any = None


_HEAD_DECODER = msgspec.json.Decoder(_Head)


def _split_head(data: _Data) -> tuple[_Head, int, int] | None:
    """The trace object without its events, and the events array's inner bounds [start, end)."""
    key = _EVENTS_KEY.search(data)
    if key is None:
        return None
    start = key.end()  # just after '['
    # The array's ']' is one of the file's last few ']'. Splicing the marker in at a ']' inside
    # the array leaves that array's closers unmatched (invalid); at a ']' after it (a list in a
    # later key) it can be valid too, so the first valid one from the start is the array's.
    found = None
    end = len(data)
    for _ in range(_END_TRIES):
        end = data.rfind(b"]", start, end)
        if end < 0:
            break
        text = b"".join((data[: start - 1], _MARKER, data[end + 1 :]))
        try:
            head = _HEAD_DECODER.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if bytes(head.traceEvents) == _MARKER and text.count(_MARKER) == 1:
            found = head, start, end
    return found


def _load_split(path: Path, data: _Data) -> Trace | None:
    split = _split_head(data)
    if split is None:
        return None
    head, start, end = split
    builder = (
        _build_halves(data, start, end)
        if _PARALLEL_LOAD and len(data) >= _PARALLEL_MIN_BYTES
        else None
    )
    if builder is None:
        builder = _build_range(data, start, end)
    return builder.finish(path, _devices(head)) if builder is not None else None


def _build_range(data: _Data, start: int, end: int) -> _ColumnBuilder | None:
    """The columns of the events text [start, end), piece by piece; None when a piece does not
    decode (then the caller parses the file another way)."""
    view = memoryview(data)
    builder = _ColumnBuilder()
    try:
        pos = start
        while True:
            events, stop = _decode_piece(data, view, pos, end)
            # (every piece after the first starts at a '{', so a trailing comma, '[..., ]', is
            # never a piece of its own: it fails to decode with the last event)
            if events is None:
                return None
            builder.add(events)
            del events
            if stop == end:
                return builder
            pos = stop
    finally:
        view.release()


# Decoding is Python-bound work on one core. A large trace is cut in two at an event boundary
# near its middle: a forked child process builds the second half's columns while this process
# builds the first half's, and the child's columns are appended with its names and threads
# renumbered as if one process had read the file from the start (the result is identical; a
# test compares the two). The cut is checked like every piece cut: the first half's last piece
# must decode strictly, ending there. Anything unexpected falls back to one process.

#: forking needs a POSIX system; off under a test that wants the one-process path
_PARALLEL_LOAD = hasattr(os, "fork") and (os.cpu_count() or 1) >= 2
#: below this, a fork and the transfer of the child's columns cost more than they save
_PARALLEL_MIN_BYTES = 64 << 20
#: the share of the events text this process reads: after its part it still unpickles the
#: child's columns and builds the frames (~0.6 s of ~6.7 s of CPU on a 1 GB trace), so the
#: child takes a little more than half
_FIRST_SHARE = 0.45


def _build_halves(data: _Data, start: int, end: int) -> _ColumnBuilder | None:
    cut = _EVENT_END.search(data, start + int((end - start) * _FIRST_SHARE), end)
    if cut is None:
        return None
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # (the child never takes a lock another thread may hold)
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: the second half's columns, pickled down the pipe
        os.close(read_end)
        try:
            second = _build_range(data, cut.start(1), end)
            with os.fdopen(write_end, "wb") as pipe:
                pickle.dump(
                    second.state() if second is not None else None,
                    pipe,
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        first = _build_range(data, start, cut.start() + 1)
        with os.fdopen(read_end, "rb") as pipe:
            try:
                second = pickle.load(pipe)
            except Exception:  # the child died (killed for memory) before writing it all
                second = None
    finally:
        os.waitpid(pid, 0)
    if first is None or second is None:
        return None
    first.append_state(second)
    return first


def _decode_piece(
    data: _Data, view: memoryview, pos: int, end: int
) -> tuple[list[_Complete] | None, int]:
    """The events of about _PIECE_BYTES of text from ``pos``, and where the next piece starts
    (``end`` after the last piece); None when no cut decodes (then the file is parsed in full).
    """
    search_from = pos + _PIECE_BYTES
    for _ in range(_CUT_TRIES):
        cut = _EVENT_END.search(data, search_from, end) if search_from < end else None
        stop = cut.start() + 1 if cut else end
        try:
            # (a bracketed copy of the piece: decoding in place from the mapping was measured
            # slower, the copy is hot in cache when msgspec reads it)
            events = _complete_events(b"".join((b"[", view[pos:stop], b"]")))
        except msgspec.DecodeError:
            if cut is None:
                return None, end
            search_from = stop  # that '}' was inside an event: try the next candidate
            continue
        except msgspec.ValidationError:
            return None, end
        return events, (cut.start(1) if cut else end)
    return None, end


# --------------------------------------------------------------------------------------------
# Robust path: parse the whole file into one Raw per event, then decode those in chunks
# --------------------------------------------------------------------------------------------


def _load_robust(path: Path, data: _Data) -> Trace:
    try:
        head = _FILE_DECODER.decode(data)
    except msgspec.ValidationError as error:
        if "traceEvents" in str(error):
            raise UserError(
                f"{path} is JSON but has no traceEvents list: not a Kineto/Chrome "
                "trace (torch.profiler writes one with export_chrome_trace or "
                "tensorboard_trace_handler)"
            ) from None
        raise UserError(f"{path} is not a trace object: {error}") from None
    except msgspec.DecodeError as error:
        raise UserError(f"{path} is not valid JSON, perhaps truncated ({error})") from None

    devices = _devices(head)
    raws = head.traceEvents
    del head
    builder = _ColumnBuilder()
    for start in range(0, len(raws), _CHUNK):
        chunk = b"[" + b",".join(raws[start : start + _CHUNK]) + b"]"
        try:
            events = _complete_events(chunk)
        except msgspec.ValidationError as error:
            raise UserError(f"{path}: an event has an unexpected field type ({error})") from None
        builder.add(events)
        del events, chunk
    del raws
    return builder.finish(path, devices)


_K = TypeVar("_K")


class _Interner(dict[_K, int]):
    """value -> number, in order of first appearance. ``interner[value]`` numbers unseen values,
    so ``map(interner.__getitem__, values)`` interns a whole column at C speed."""

    def __missing__(self, key: _K) -> int:
        self[key] = number = len(self)
        return number


_CAT, _NAME, _PID, _TID = (attrgetter(a) for a in ("cat", "name", "pid", "tid"))
_TS, _DUR = attrgetter("ts"), attrgetter("dur")
_ARG_GETTERS = {
    (c.column, i): attrgetter(_field_name(c, i)) for c in ARG_COLUMNS for i in range(len(c.keys))
}


class _BuilderState(TypedDict):
    """A _ColumnBuilder's names, threads, counts and columns (``state``; picklable)."""

    names: list[str]
    threads: list[tuple[int | str, int | str]]
    categories: dict[str, int]
    unread: Counter[tuple[str, int | str]]
    parts: list[dict[str, np.ndarray]]
    kernel_parts: list[dict[str, np.ndarray]]
    rows: int


class _ColumnBuilder:
    """Turns chunks of decoded events into numpy columns; interns names and threads.

    Each column is one C-level pass (``map`` + ``np.fromiter``) over the chunk's Structs: per
    event Python work is what dominates loading, so there is no per-event Python code here
    beyond the ``ph`` filter."""

    def __init__(self) -> None:
        self.name_ids: _Interner[str] = _Interner()
        self.thread_ids: _Interner[tuple[int | str, int | str]] = _Interner()
        self.cat_ids: _Interner[str] = _Interner()
        self.cat_counts = np.zeros(0, dtype=np.int64)
        self.kind_of_cat = np.zeros(0, dtype=np.int8)
        self.unread: Counter[tuple[str, int | str]] = Counter()
        self.parts: list[dict[str, np.ndarray]] = []
        self.kernel_parts: list[dict[str, np.ndarray]] = []
        self.offset = 0

    def add(self, complete: list[_Complete]) -> None:
        cat_codes = np.fromiter(
            map(self.cat_ids.__getitem__, map(_CAT, complete)), dtype=np.int32, count=len(complete)
        )
        if len(self.cat_ids) > len(self.cat_counts):
            self.cat_counts = np.concatenate(
                [self.cat_counts, np.zeros(len(self.cat_ids) - len(self.cat_counts), np.int64)]
            )
            self.kind_of_cat = np.array(
                [_KIND_CODE.get(c, -1) for c in self.cat_ids], dtype=np.int8
            )
        self.cat_counts += np.bincount(cat_codes, minlength=len(self.cat_counts))
        kinds = self.kind_of_cat[cat_codes]
        if (kinds < 0).any():  # unknown categories: count them by (cat, pid), drop the events
            keep = kinds >= 0
            unread = list(compress(complete, (~keep).tolist()))
            self.unread.update(zip(map(_CAT, unread), map(_PID, unread)))
            complete = list(compress(complete, keep.tolist()))
            kinds = kinds[keep]
        kept, n = complete, len(complete)
        if n == 0:
            return
        part: dict[str, np.ndarray] = {
            "kind": kinds,
            "name_id": np.fromiter(
                map(self.name_ids.__getitem__, map(_NAME, kept)), dtype=np.int32, count=n
            ),
            "thread": np.fromiter(
                map(self.thread_ids.__getitem__, zip(map(_PID, kept), map(_TID, kept))),
                dtype=np.int32,
                count=n,
            ),
            "ts": np.fromiter(map(_TS, kept), dtype=np.float64, count=n),
            "dur": np.fromiter(map(_DUR, kept), dtype=np.float64, count=n),
        }
        # Python function events carry none of ARG_COLUMNS' keys (their args are the Python
        # ids of the call tree), and they are often half of a trace: their columns stay absent
        args_rows = np.flatnonzero(kinds != KIND["python"])
        if len(args_rows) == n:
            args = [e.args or _NO_ARGS for e in kept]  # a Struct is always true: None -> default
        else:
            args = [e.args or _NO_ARGS for e in map(kept.__getitem__, args_rows.tolist())]
        for column in ARG_COLUMNS:
            if not column.kernels_only:
                part[column.column] = _absent_where_not(args_rows, n, _arg_column(args, column))

        kernel_rows = np.flatnonzero(kinds == KIND["kernel"])
        if len(kernel_rows):
            kargs = [args[i] for i in np.searchsorted(args_rows, kernel_rows).tolist()]
            kpart: dict[str, np.ndarray] = {"row": kernel_rows + self.offset}
            for column in ARG_COLUMNS:
                if not column.kernels_only:
                    continue
                if column.type == "dim3":
                    dims = _dim3_column(list(map(_ARG_GETTERS[column.column, 0], kargs)))
                    for axis, letter in enumerate("xyz"):
                        kpart[f"{column.column}_{letter}"] = dims[:, axis]
                else:
                    kpart[column.column] = _arg_column(kargs, column)
            self.kernel_parts.append(kpart)
        self.parts.append(part)
        self.offset += n

    def state(self) -> _BuilderState:
        """What ``append_state`` needs of this builder (picklable)."""
        return {
            "names": list(self.name_ids),
            "threads": list(self.thread_ids),
            "categories": dict(zip(self.cat_ids, self.cat_counts.tolist())),
            "unread": self.unread,
            "parts": self.parts,
            "kernel_parts": self.kernel_parts,
            "rows": self.offset,
        }

    def append_state(self, later: _BuilderState) -> None:
        """Append the columns of the events that follow this builder's (another builder's
        ``state``), renumbering names and threads as if this builder had read them."""
        name_id = np.fromiter(
            map(self.name_ids.__getitem__, later["names"]),
            dtype=np.int32,
            count=len(later["names"]),
        )
        thread = np.fromiter(
            map(self.thread_ids.__getitem__, later["threads"]),
            dtype=np.int32,
            count=len(later["threads"]),
        )
        cat_codes = [self.cat_ids[cat] for cat in later["categories"]]
        counts = np.zeros(len(self.cat_ids), dtype=np.int64)
        counts[: len(self.cat_counts)] = self.cat_counts
        np.add.at(counts, cat_codes, list(later["categories"].values()))
        self.cat_counts = counts
        self.unread.update(later["unread"])
        for part in later["parts"]:
            part["name_id"] = name_id[part["name_id"]]
            part["thread"] = thread[part["thread"]]
            self.parts.append(part)
        for kpart in later["kernel_parts"]:
            kpart["row"] = kpart["row"] + self.offset
            self.kernel_parts.append(kpart)
        self.offset += later["rows"]

    def finish(self, path: Path, devices: dict[int, DeviceProperties]) -> Trace:
        if self.parts:
            # copy=False: the frame keeps these fresh arrays rather than copying them into
            # 2-D blocks (a second ~100 MB of fresh memory, slow to touch on a VM)
            events = pd.DataFrame(
                {c: np.concatenate([p[c] for p in self.parts]) for c in EVENT_COLUMNS}, copy=False
            )
        else:
            events = pd.DataFrame({c: np.array([], dtype=np.float64) for c in EVENT_COLUMNS})
            events["kind"] = events["kind"].astype(np.int8)
            for c in ("name_id", "thread"):
                events[c] = events[c].astype(np.int32)
            for c in EVENT_COLUMNS[5:]:
                events[c] = events[c].astype(np.int64)
        if self.kernel_parts:
            rows = np.concatenate([p["row"] for p in self.kernel_parts])
            launch = pd.DataFrame(
                {c: np.concatenate([p[c] for p in self.kernel_parts]) for c in KERNEL_COLUMNS},
                index=rows,
                copy=False,
            )
        else:
            launch = pd.DataFrame({c: np.array([], dtype=np.float64) for c in KERNEL_COLUMNS})
        names = np.empty(len(self.name_ids), dtype=object)
        names[:] = list(self.name_ids)
        excluded = _impossible_rows(events)
        if excluded:
            events, launch = _without_rows(events, launch, excluded.pop("_rows"))
        return Trace(
            path=path,
            events=events,
            kernel_launch=launch,
            names=names,
            threads=list(self.thread_ids),
            devices=devices,
            categories=dict(
                sorted(zip(self.cat_ids, self.cat_counts.tolist()), key=lambda kv: -kv[1])
            ),
            span=_span(events, names),
            excluded=excluded,
            unread=dict(self.unread),
        )


#: no trace lasts a day: a duration longer than that, or a start further than that from the
#: trace's median start, is a damaged value (in µs, Kineto's unit)
_ABSURD_US = 86_400e6
#: from 2**53 µs on, float64 cannot hold a timestamp to the microsecond (durations derived from
#: such timestamps collapse through rounding)
_MAX_TS_US = float(2**53)


def _impossible_rows(events: pd.DataFrame) -> dict[str, Any]:
    """Counts of events whose values cannot be real, by reason (the first reason that applies),
    and under ``"_rows"`` the mask of them all; {} when there are none."""
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    with np.errstate(invalid="ignore"):
        checks = [
            ("missing or non-numeric ts/dur", np.isnan(ts) | np.isnan(dur)),
            ("non-finite ts/dur", np.isinf(ts) | np.isinf(dur)),
            ("negative dur", dur < 0),
            ("absurd dur (over a day)", dur > _ABSURD_US),
            ("absurd ts", np.abs(ts) >= _MAX_TS_US),
        ]
    bad = np.zeros(len(events), dtype=bool)
    counts: dict[str, Any] = {}
    for reason, mask in checks:
        new = mask & ~bad
        if new.any():
            counts[reason] = int(new.sum())
            bad |= new
    if (~bad).any():  # starts far from where the rest of the trace is
        far = ~bad & (np.abs(ts - np.median(ts[~bad])) > _ABSURD_US)
        if far.any():
            counts["absurd ts (over a day from the rest)"] = int(far.sum())
            bad |= far
    duplicated = _duplicated(events) & ~bad
    if duplicated.any():
        counts["duplicated"] = int(duplicated.sum())
        bad |= duplicated
    if counts:
        counts["_rows"] = bad
    return counts


def _duplicated(events: pd.DataFrame) -> np.ndarray:
    """Rows equal in every column to an earlier row: the same event written twice. Python
    function events are left out (their own ids are not among the columns)."""
    candidates = np.flatnonzero(events["kind"].to_numpy() != KIND["python"])
    mask = np.zeros(len(events), dtype=bool)
    # one 64-bit hash per row finds the few rows that may repeat (pandas' duplicated() over
    # every column is many times slower on millions of events); those are compared exactly
    hashes = _row_hashes(events)[candidates]
    ordered = np.sort(hashes)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(repeated):
        maybe = candidates[np.isin(hashes, repeated)]
        mask[maybe] = events.iloc[maybe].duplicated().to_numpy()
    return mask


def _row_hashes(events: pd.DataFrame) -> np.ndarray:
    """A 64-bit number per event from its kind, thread, name, ts and dur: equal events get
    equal numbers; different events rarely do, and then only cost an exact comparison."""

    def bits(column: str, dtype: type[np.generic]) -> np.ndarray:
        values: np.ndarray = events[column].to_numpy().astype(dtype, copy=False)
        return values.view(np.uint64)

    key: np.ndarray
    with np.errstate(over="ignore"):
        key = bits("ts", np.float64) + bits("dur", np.float64) * np.uint64(0x9E3779B97F4A7C15)
        key += bits("name_id", np.int64) * np.uint64(0xC2B2AE3D27D4EB4F)
        key += (bits("thread", np.int64) << np.uint64(8)) + bits("kind", np.int64)
    return key


def _without_rows(
    events: pd.DataFrame, launch: pd.DataFrame, drop: np.ndarray
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``events`` without the ``drop`` rows, renumbered, and the kernel launch rows to match."""
    keep = ~drop
    new_row = np.cumsum(keep) - 1
    kept_launch = launch[keep[launch.index.to_numpy()]]
    kept_launch.index = new_row[kept_launch.index.to_numpy()]
    return events[keep].reset_index(drop=True), kept_launch


def _span(events: pd.DataFrame, names: np.ndarray) -> tuple[float, float]:
    """The 'PyTorch Profiler (0)' span, or the span of all events."""
    spans = events[events["kind"] == KIND["trace"]]
    for name_id, ts, dur in zip(spans["name_id"], spans["ts"], spans["dur"]):
        if names[name_id].startswith("PyTorch Profiler"):
            return (float(ts), float(ts + dur))
    if events.empty:
        return (0.0, 0.0)
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    return (float(ts.min()), float((ts + dur).max()))


def _absent_where_not(rows: np.ndarray, n: int, values: np.ndarray) -> np.ndarray:
    """``values`` of ``rows`` spread over ``n`` rows, the others absent (-1 or nan)."""
    if len(rows) == n:
        return values
    spread = np.full(n, -1 if values.dtype == np.int64 else np.nan, dtype=values.dtype)
    spread[rows] = values
    return spread


def _arg_column(args: list[_Args], column: ArgColumn) -> np.ndarray:
    """One int or float column from the args Structs; the first of the column's keys present
    wins (ints: -1 = absent, floats: nan = absent)."""
    values = _arg_values(args, column, 0)
    for i in range(1, len(column.keys)):  # e.g. the old 'external id' spelling
        other = _arg_values(args, column, i)
        absent = values == -1 if column.type == "int" else np.isnan(values)
        if absent.any():
            values = np.where(absent, other, values)
    return values


def _arg_values(args: list[_Args], column: ArgColumn, i: int) -> np.ndarray:
    get = _ARG_GETTERS[column.column, i]
    dtype = np.int64 if column.type == "int" else np.float64
    try:
        return np.fromiter(map(get, args), dtype=dtype, count=len(args))
    except (TypeError, OverflowError):  # an explicit null, or an int beyond 64 bits
        values = np.array([np.nan if v is None else v for v in map(get, args)], dtype=np.float64)
        if column.type == "float":
            return values
        absent = np.isnan(values) | (np.abs(values) >= 2.0**63)  # beyond int64: unusable
        return np.where(absent, -1, values).astype(np.int64)


def _dim3_column(values: list[list[int] | None]) -> np.ndarray:
    try:  # fast path: every kernel has [x, y, z]
        dims = np.array(values, dtype=np.int64)
        if dims.ndim == 2 and dims.shape[1] == 3:
            return dims
    except (TypeError, ValueError):
        pass
    return np.array([_dim3(v) for v in values], dtype=np.int64).reshape(-1, 3)


def _dim3(value: list[int] | None) -> tuple[int, int, int]:
    if not value:
        return (0, 0, 0)
    v = list(value)[:3] + [1] * (3 - len(value))
    return (int(v[0]), int(v[1]), int(v[2]))

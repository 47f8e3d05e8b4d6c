"""Decoded events -> numpy columns: ``ColumnBuilder`` turns pieces of ``Complete`` Structs into
columns, interning names and threads into numbered tables (``Trace.names``) and kernels' launch
configurations into a table of the distinct ones, so a GB-sized trace never exists as millions
of Python objects; ``merged`` joins builders that read parts of one file (halves.py), and
``finish`` makes the Trace.

What is kept per event is what the tables read per event: one row per complete event of a kind
the analyses know (``EVENT_COLUMNS``), in the narrowest integer type its ids fit (``_narrow``),
and for a kernel one int32, the number of its launch configuration. Everything else is counted
or stored once: events of other 'ph' (flows, instants, counters, metadata) are never decoded
beyond their tag, complete events of an unknown category are counted per (cat, pid), names,
threads, categories and launch configurations are tables of their distinct values.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections import Counter
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.decode import NO_ARGS, Complete, field_name
from profiler.trace.excluded import impossible_rows
from profiler.trace.parsed_trace import KernelLaunch, Trace
from profiler.trace.schema import ARG_COLUMNS, KIND, KIND_CODE, DeviceProperties

#: the int columns filled from args for every event (the kernels' launch columns aside)
ID_COLUMNS = tuple(c.column for c in ARG_COLUMNS if not c.kernels_only)
EVENT_COLUMNS = ("kind", "name_id", "thread", "ts", "dur") + ID_COLUMNS
KERNEL_COLUMNS = tuple(c.column for c in ARG_COLUMNS if c.kernels_only and c.type != "dim3") + (
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
)
#: the narrowest type an id column is stored in (wider where its values need it)
_SMALLEST: dict[str, type[np.signedinteger[Any]]] = {
    "external_id": np.int32,
    "correlation": np.int32,
    "device": np.int16,
}
_INT_TYPES: tuple[type[np.signedinteger[Any]], ...] = (np.int8, np.int16, np.int32, np.int64)
#: the narrowest type each int column of the events frame is stored in, wider where its values
#: need it (a name, thread, device or stream number of every event: 1 or 2 bytes, not 4 or 8)
_STORED: dict[str, type[np.signedinteger[Any]]] = {
    "name_id": np.int16,
    "thread": np.int16,
    "external_id": np.int32,
    "correlation": np.int32,
    "device": np.int8,
    "stream": np.int8,
}


_K = TypeVar("_K")


class _Interner(dict[_K, int]):
    """value -> number, in order of first appearance. ``interner[value]`` numbers unseen values,
    so ``map(interner.__getitem__, values)`` interns a whole column at C speed."""

    def __missing__(self, key: _K) -> int:
        self[key] = number = len(self)
        return number


_CAT, _NAME, _PID, _TID = (attrgetter(a) for a in ("cat", "name", "pid", "tid"))
_TS, _DUR = attrgetter("ts"), attrgetter("dur")
#: (column, key position) -> the getter of that args key, from the event
_ARG_GETTERS = {
    (c.column, i): attrgetter(f"args.{field_name(c, i)}")
    for c in ARG_COLUMNS
    for i in range(len(c.keys))
}
#: every args key of the launch columns, in ARG_COLUMNS order: a kernel's configuration
_LAUNCH_KEYS = [(c, i) for c in ARG_COLUMNS if c.kernels_only for i in range(len(c.keys))]
_CONFIG = attrgetter(*(f"args.{field_name(c, i)}" for c, i in _LAUNCH_KEYS))


@dataclass
class _Mark:
    """Where one chunk of the file ended in a builder: its number and the sizes of the builder's
    parts and tables after it (halves.py reads a file's chunks in two processes)."""

    chunk: int
    parts: int
    names: int
    threads: int
    cats: int
    configs: int


@dataclass
class BuilderState:
    """A ColumnBuilder's tables, counts, parts and chunk marks (picklable)."""

    names: list[str]
    threads: list[tuple[int | str, int | str]]
    cats: list[str]
    cat_counts: npt.NDArray[np.int64]
    configs: list[tuple[Any, ...]]
    unread: Counter[tuple[str, int | str]]
    parts: list[dict[str, npt.NDArray[Any]]]
    marks: list[_Mark] = field(default_factory=list)


class ColumnBuilder:
    """Turns pieces of decoded events into numpy columns; interns names, threads, categories
    and kernel launch configurations.

    Each column is one C-level pass (``map`` + ``np.fromiter``) over the piece's Structs: per
    event Python work is what dominates loading, so there is no per-event Python code here
    beyond the selections by kind."""

    def __init__(self) -> None:
        self.name_ids: _Interner[str] = _Interner()
        self.thread_ids: _Interner[tuple[int | str, int | str]] = _Interner()
        self.cat_ids: _Interner[str] = _Interner()
        self.config_ids: _Interner[tuple[Any, ...]] = _Interner()
        self.cat_counts: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.kind_of_cat: npt.NDArray[np.int8] = np.zeros(0, dtype=np.int8)
        self.unread: Counter[tuple[str, int | str]] = Counter()
        self.parts: list[dict[str, npt.NDArray[Any]]] = []
        self.marks: list[_Mark] = []

    @property
    def rows(self) -> int:
        return sum(len(p["kind"]) for p in self.parts)

    def add(self, complete: list[Complete]) -> None:
        cat_codes = np.fromiter(
            map(self.cat_ids.__getitem__, map(_CAT, complete)), dtype=np.int32, count=len(complete)
        )
        if len(self.cat_ids) > len(self.cat_counts):
            self.cat_counts = np.concatenate(
                [self.cat_counts, np.zeros(len(self.cat_ids) - len(self.cat_counts), np.int64)]
            )
            self.kind_of_cat = np.array([KIND_CODE.get(c, -1) for c in self.cat_ids], dtype=np.int8)
        self.cat_counts += np.bincount(cat_codes, minlength=len(self.cat_counts))
        kinds = self.kind_of_cat[cat_codes]
        if (kinds < 0).any():  # unknown categories: count them by (cat, pid), drop the events
            keep = kinds >= 0
            unread = list(compress(complete, _flags(~keep)))
            self.unread.update(zip(map(_CAT, unread), map(_PID, unread)))
            complete = list(compress(complete, _flags(keep)))
            kinds = kinds[keep]
        kept, n = complete, len(complete)
        if n == 0:
            return
        part: dict[str, npt.NDArray[Any]] = {
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
        try:
            self._args_columns(part, kept, kinds)
        except AttributeError:  # an explicit "args": null; read as no args
            for event in kept:
                if event.args is None:
                    event.args = NO_ARGS
            self._args_columns(part, kept, kinds)
        self.parts.append(part)

    def _args_columns(
        self, part: dict[str, npt.NDArray[Any]], kept: list[Complete], kinds: npt.NDArray[np.int8]
    ) -> None:
        """The id columns and the kernels' configuration numbers of a piece, into ``part``."""
        # Python function events carry none of ARG_COLUMNS' keys (their args are the Python
        # ids of the call tree), and they are often half of a trace: their columns stay absent
        python = kinds == KIND["python"]
        rows = np.flatnonzero(~python) if python.any() else None
        items = kept if rows is None else list(compress(kept, _flags(~python)))
        for column in ID_COLUMNS:
            values = _int_column(items, column)
            if rows is not None:
                spread = np.full(len(kept), -1, dtype=values.dtype)
                spread[rows] = values
                values = spread
            part[column] = _narrow(values, _SMALLEST.get(column, np.int16))
        kernel_rows = np.flatnonzero(kinds == KIND["kernel"])
        if len(kernel_rows):
            kernels = list(compress(kept, _flags(kinds == KIND["kernel"])))
            part["kernel_row"] = kernel_rows.astype(np.int32)
            part["config"] = np.fromiter(
                map(self.config_ids.__getitem__, map(_CONFIG, kernels)),
                dtype=np.int32,
                count=len(kernels),
            )

    def mark(self, chunk: int) -> None:
        """The events added so far end chunk number ``chunk`` of the file."""
        self.marks.append(
            _Mark(
                chunk,
                len(self.parts),
                len(self.name_ids),
                len(self.thread_ids),
                len(self.cat_ids),
                len(self.config_ids),
            )
        )

    def state(self) -> BuilderState:
        """What ``merged`` needs of this builder (picklable)."""
        return BuilderState(
            names=list(self.name_ids),
            threads=list(self.thread_ids),
            cats=list(self.cat_ids),
            cat_counts=self.cat_counts,
            configs=list(self.config_ids),
            unread=self.unread,
            parts=self.parts,
            marks=self.marks,
        )

    def finish(self, path: Path, devices: dict[int, DeviceProperties]) -> Trace:
        """The Trace; the parts are consumed (each column's pieces freed once it is joined)."""
        launch = KernelLaunch(
            rows=_kernel_rows(self.parts),
            config=_concat([p["config"] for p in self.parts if "config" in p], np.int32),
            configs=_configs_table(list(self.config_ids)),
        )
        events = _joined(self.parts)
        self.parts = []
        names = np.empty(len(self.name_ids), dtype=object)
        names[:] = list(self.name_ids)
        excluded = impossible_rows(events)
        if excluded:
            keep = ~excluded.pop("_rows")
            events = events[keep].reset_index(drop=True)
            launch = launch.without(keep)
        return Trace(
            path=path,
            events=events,
            launch=launch,
            names=names,
            threads=list(self.thread_ids),
            devices=devices,
            categories=dict(
                sorted(
                    zip(self.cat_ids, cast(list[int], self.cat_counts.tolist())),
                    key=lambda kv: -kv[1],
                )
            ),
            span=_span(events, names),
            excluded=excluded,
            unread=dict(self.unread),
        )


def merged(states: list[BuilderState]) -> ColumnBuilder:
    """One builder from builders that read the chunks of one file (each its own, in order):
    names, threads, categories and configurations numbered as one builder reading the chunks
    in order would have numbered them, the parts in chunk order."""
    out = ColumnBuilder()
    tables = (
        ("names", "name_ids"),
        ("threads", "thread_ids"),
        ("cats", "cat_ids"),
        ("configs", "config_ids"),
    )
    maps = [{t: np.zeros(len(getattr(s, t)), dtype=np.int32) for t, _ in tables} for s in states]
    order = sorted((m.chunk, i, k) for i, s in enumerate(states) for k, m in enumerate(s.marks))
    # first the numbering: the values a chunk met first, in the order its builder met them
    for _, i, k in order:
        state, mark = states[i], states[i].marks[k]
        before = states[i].marks[k - 1] if k else None
        for table, interner_name in tables:
            interner = getattr(out, interner_name)
            values = getattr(state, table)
            start = getattr(before, table) if before else 0
            for local in range(start, getattr(mark, table)):
                maps[i][table][local] = interner[values[local]]
    # then the parts, renumbered where a builder's numbers are not the merged ones
    for _, i, k in order:
        state, mark = states[i], states[i].marks[k]
        start = states[i].marks[k - 1].parts if k else 0
        renumber = {
            column: maps[i][table]
            for column, table in (
                ("name_id", "names"),
                ("thread", "threads"),
                ("config", "configs"),
            )
            if not np.array_equal(maps[i][table], np.arange(len(maps[i][table])))
        }
        for part in state.parts[start : mark.parts]:
            for column, table_map in renumber.items():
                if column in part:
                    part[column] = table_map[part[column]]
            out.parts.append(part)
    out.cat_counts = np.zeros(len(out.cat_ids), dtype=np.int64)
    for i, state in enumerate(states):
        np.add.at(out.cat_counts, maps[i]["cats"][: len(state.cat_counts)], state.cat_counts)
        out.unread.update(state.unread)
    out.kind_of_cat = np.array([KIND_CODE.get(c, -1) for c in out.cat_ids], dtype=np.int8)
    return out


def _concat(arrays: list[npt.NDArray[Any]], dtype: type[np.generic]) -> npt.NDArray[Any]:
    return np.concatenate(arrays) if arrays else np.array([], dtype=dtype)


def _joined(parts: list[dict[str, npt.NDArray[Any]]]) -> pd.DataFrame:
    """The events frame of the parts, one column at a time (each column's pieces are freed
    once it is joined, so the parts and the frame are never both held whole)."""
    if not parts:
        events = pd.DataFrame({c: np.array([], dtype=np.float64) for c in EVENT_COLUMNS})
        events["kind"] = events["kind"].astype(np.int8)
        for c in ("name_id", "thread"):
            events[c] = events[c].astype(np.int32)
        for c in ID_COLUMNS:
            events[c] = events[c].astype(_SMALLEST.get(c, np.int16))
        return events
    columns = {}
    for column in EVENT_COLUMNS:
        pieces = [p[column] for p in parts]
        dtype: np.dtype[Any] = pieces[0].dtype
        if column in _STORED:
            lo = min(int(x.min()) for x in pieces if len(x))
            hi = max(int(x.max()) for x in pieces if len(x))
            dtype = np.dtype(_fitting(lo, hi, _STORED[column]))
        columns[column] = np.concatenate(pieces, dtype=dtype, casting="same_kind")
        del pieces
        for p in parts:
            del p[column]
        give_back_memory()
    # copy=False: the frame keeps these fresh arrays rather than copying them into 2-D blocks
    return pd.DataFrame(columns, copy=False)


def _kernel_rows(parts: list[dict[str, npt.NDArray[Any]]]) -> npt.NDArray[np.int64]:
    """The row in the joined events of each kernel (parts' ``kernel_row`` are within a part)."""
    rows, offset = [], 0
    for p in parts:
        if "kernel_row" in p:
            rows.append(p["kernel_row"].astype(np.int64) + offset)
        offset += len(p["kind"])
    return _concat(rows, np.int64)


def _configs_table(configs: list[tuple[Any, ...]]) -> pd.DataFrame:
    """The launch columns of each distinct configuration (KERNEL_COLUMNS): ints -1 and floats
    nan where absent, a dim3 padded with 1s (0s when absent)."""
    values = dict(zip(_LAUNCH_KEYS, zip(*configs))) if configs else {}
    table: dict[str, npt.NDArray[Any]] = {}
    for column in ARG_COLUMNS:
        if not column.kernels_only:
            continue
        keys = [values.get((column, i), ()) for i in range(len(column.keys))]
        if column.type == "dim3":
            dims = np.array([_dim3(v) for v in keys[0]], dtype=np.int64).reshape(-1, 3)
            for axis, letter in enumerate("xyz"):
                table[f"{column.column}_{letter}"] = dims[:, axis]
        elif column.type == "int":
            table[column.column] = np.array(
                [next((v for v in map(_int_value, row) if v != -1), -1) for row in zip(*keys)],
                dtype=np.int64,
            ).reshape(-1)
        else:
            table[column.column] = np.array(
                [next((v for v in map(_float_value, row) if v == v), np.nan) for row in zip(*keys)],
                dtype=np.float64,
            ).reshape(-1)
    # (int32 where they fit: a kernel's row in kernel_rows holds them all)
    return pd.DataFrame(
        {
            c: _narrow(table[c], np.int32) if table[c].dtype == np.int64 else table[c]
            for c in KERNEL_COLUMNS
        }
    )


def _int_value(value: Any) -> int:
    """An int args value as stored: -1 when absent (null) or beyond 64 bits."""
    if value is None or not -(2**63) <= value < 2**63:
        return -1
    return int(value)


def _float_value(value: Any) -> float:
    return np.nan if value is None else float(value)


def _int_column(items: list[Complete], column: str) -> npt.NDArray[np.int64]:
    """One id column of the events ``items``: the first of its args keys present wins (-1 =
    absent: missing, null or beyond 64 bits)."""
    values = _ints(items, _ARG_GETTERS[column, 0])
    i = 1
    while (column, i) in _ARG_GETTERS:  # e.g. the old 'external id' spelling
        absent: npt.NDArray[np.intp] = np.flatnonzero(values == -1)
        if not len(absent):
            break
        values[absent] = _ints(
            list(map(items.__getitem__, cast(list[int], absent.tolist()))), _ARG_GETTERS[column, i]
        )
        i += 1
    return values


def _ints(items: list[Complete], get: attrgetter[Any]) -> npt.NDArray[np.int64]:
    try:
        return np.fromiter(map(get, items), dtype=np.int64, count=len(items))
    except (TypeError, OverflowError):  # an explicit null, or an int beyond 64 bits
        return np.fromiter(map(_int_value, map(get, items)), dtype=np.int64, count=len(items))


def _narrow(
    values: npt.NDArray[np.integer[Any]], smallest: type[np.signedinteger[Any]]
) -> npt.NDArray[np.signedinteger[Any]]:
    """``values`` in the first of int8/int16/int32/int64, from ``smallest`` on, that holds
    them."""
    if not len(values):
        return values.astype(smallest)
    return values.astype(_fitting(int(values.min()), int(values.max()), smallest))


def _fitting(
    lo: int, hi: int, smallest: type[np.signedinteger[Any]]
) -> type[np.signedinteger[Any]]:
    """The first of int8/int16/int32/int64, from ``smallest`` on, that holds [lo, hi]."""
    for dtype in _INT_TYPES[_INT_TYPES.index(smallest) :]:
        info = np.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return dtype
    return np.int64


def _span(events: pd.DataFrame, names: npt.NDArray[np.object_]) -> tuple[float, float]:
    """The 'PyTorch Profiler (0)' span, or the span of all events."""
    trace = np.flatnonzero(events["kind"].to_numpy() == KIND["trace"])
    ts_all, dur_all = events["ts"].to_numpy(), events["dur"].to_numpy()
    for name_id, ts, dur in zip(events["name_id"].to_numpy()[trace], ts_all[trace], dur_all[trace]):
        if names[name_id].startswith("PyTorch Profiler"):
            return (float(ts), float(ts + dur))
    if events.empty:
        return (0.0, 0.0)
    return (float(ts_all.min()), float((ts_all + dur_all).max()))


def _flags(mask: npt.NDArray[np.bool_]) -> list[bool]:
    """``mask`` as Python bools, for ``compress`` (which then selects at C speed)."""
    return cast(list[bool], mask.tolist())


def _dim3(value: tuple[int, ...] | None) -> tuple[int, int, int]:
    if not value:
        return (0, 0, 0)
    v = list(value)[:3] + [1] * (3 - len(value))
    return (int(v[0]), int(v[1]), int(v[2]))


def _libc_trim() -> Any:
    """glibc's malloc_trim, or None (another C library, or none found)."""
    try:
        name = ctypes.util.find_library("c")
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None


_MALLOC_TRIM = _libc_trim()


def give_back_memory() -> None:
    """Return the C heap's free memory to the system (glibc's malloc_trim). Reading a trace
    frees millions of small objects and arrays; the heap keeps their pages, and the process
    would hold them (its RSS) as if it still used them."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)

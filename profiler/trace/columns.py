"""Decoded events -> numpy columns: ``ColumnBuilder`` turns chunks of ``Complete`` Structs into
columns, interning names and threads into numbered tables (``Trace.names``), so a GB-sized trace
never exists as millions of Python dicts; ``finish`` makes the Trace."""

from __future__ import annotations

from collections import Counter
from itertools import compress
from operator import attrgetter
from pathlib import Path
from typing import TypedDict, TypeVar

import numpy as np
import pandas as pd

from profiler.trace.decode import NO_ARGS, Args, Complete, field_name
from profiler.trace.excluded import impossible_rows, without_rows
from profiler.trace.record import Trace
from profiler.trace.schema import ARG_COLUMNS, KIND, KIND_CODE, ArgColumn, DeviceProperties

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
    (c.column, i): attrgetter(field_name(c, i)) for c in ARG_COLUMNS for i in range(len(c.keys))
}


class BuilderState(TypedDict):
    """A ColumnBuilder's names, threads, counts and columns (``state``; picklable)."""

    names: list[str]
    threads: list[tuple[int | str, int | str]]
    categories: dict[str, int]
    unread: Counter[tuple[str, int | str]]
    parts: list[dict[str, np.ndarray]]
    kernel_parts: list[dict[str, np.ndarray]]
    rows: int


class ColumnBuilder:
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
            args = [e.args or NO_ARGS for e in kept]  # a Struct is always true: None -> default
        else:
            args = [e.args or NO_ARGS for e in map(kept.__getitem__, args_rows.tolist())]
        for column in ARG_COLUMNS:
            if not column.kernels_only:
                part[column.column] = _absent_where_not(args_rows, n, _arg_column(args, column))

        kernel_rows = np.flatnonzero(kinds == KIND["kernel"])
        if len(kernel_rows):
            self.kernel_parts.append(self._kernel_part(kernel_rows, args_rows, args))
        self.parts.append(part)
        self.offset += n

    def _kernel_part(
        self, kernel_rows: np.ndarray, args_rows: np.ndarray, args: list[Args]
    ) -> dict[str, np.ndarray]:
        """The launch configuration columns of a chunk's kernel rows (``args``: those of the
        chunk's ``args_rows``)."""
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
        return kpart

    def state(self) -> BuilderState:
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

    def append_state(self, later: BuilderState) -> None:
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
        excluded = impossible_rows(events)
        if excluded:
            events, launch = without_rows(events, launch, excluded.pop("_rows"))
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


def _arg_column(args: list[Args], column: ArgColumn) -> np.ndarray:
    """One int or float column from the args Structs; the first of the column's keys present
    wins (ints: -1 = absent, floats: nan = absent)."""
    values = _arg_values(args, column, 0)
    for i in range(1, len(column.keys)):  # e.g. the old 'external id' spelling
        other = _arg_values(args, column, i)
        absent = values == -1 if column.type == "int" else np.isnan(values)
        if absent.any():
            values = np.where(absent, other, values)
    return values


def _arg_values(args: list[Args], column: ArgColumn, i: int) -> np.ndarray:
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

"""Events whose values cannot be real (missing, non-finite, negative or absurd ts/dur, the same
event written twice): found by ``impossible_rows`` and left out of a Trace (columns.py)."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.schema import KIND

#: no trace lasts a day: a duration longer than that, or a start further than that from the
#: trace's median start, is a damaged value (in µs, Kineto's unit)
_ABSURD_US = 86_400e6
#: from 2**53 µs on, float64 cannot hold a timestamp to the microsecond (durations derived from
#: such timestamps collapse through rounding)
_MAX_TS_US = float(2**53)


def impossible_rows(events: pd.DataFrame) -> dict[str, Any]:
    """Counts of events whose values cannot be real, by reason (the first reason that applies),
    and under ``"_rows"`` the mask of them all; {} when there are none. (Checked a block of
    events at a time: a trace of tens of millions of events holds a few masks, not dozens.)"""
    ts, dur = events["ts"].to_numpy(), events["dur"].to_numpy()
    bad = np.zeros(len(events), dtype=bool)
    counts: dict[str, Any] = {}
    for i in range(0, len(events), _BLOCK):
        b = bad[i : i + _BLOCK]
        for reason, mask in _checks(ts[i : i + _BLOCK], dur[i : i + _BLOCK]):
            new = mask & ~b
            counts[reason] = counts.get(reason, 0) + int(new.sum())
            b |= new
    counts = {reason: n for reason, n in counts.items() if n}
    if (~bad).any():  # starts far from where the rest of the trace is
        middle = np.median(ts[~bad], overwrite_input=True)
        far = np.zeros(len(events), dtype=bool)
        for i in range(0, len(events), _BLOCK):
            far[i : i + _BLOCK] = ~bad[i : i + _BLOCK] & (
                np.abs(ts[i : i + _BLOCK] - middle) > _ABSURD_US
            )
        if far.any():
            counts["absurd ts (over a day from the rest)"] = int(far.sum())
            bad |= far
        del far
    duplicated = _duplicated(events, bad)
    if duplicated.any():
        counts["duplicated"] = int(duplicated.sum())
        bad |= duplicated
    if counts:
        counts["_rows"] = bad
    return counts


#: events checked at a time
_BLOCK = 1 << 19


def _checks(
    ts: npt.NDArray[np.float64], dur: npt.NDArray[np.float64]
) -> list[tuple[str, npt.NDArray[np.bool_]]]:
    """Each reason an event's values cannot be real, in order, with the events it holds for."""
    with np.errstate(invalid="ignore"):
        return [
            ("missing or non-numeric ts/dur", np.isnan(ts) | np.isnan(dur)),
            ("non-finite ts/dur", np.isinf(ts) | np.isinf(dur)),
            ("negative dur", dur < 0),
            ("absurd dur (over a day)", dur > _ABSURD_US),
            ("absurd ts", np.abs(ts) >= _MAX_TS_US),
        ]


def _duplicated(events: pd.DataFrame, bad: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Rows not ``bad`` equal in every column to an earlier row: the same event written twice.
    Python function events are left out (their own ids are not among the columns)."""
    ts, kind = events["ts"].to_numpy(), events["kind"].to_numpy()
    mask = np.zeros(len(events), dtype=bool)
    # rows that repeat are of one kind and share their start: those that share it with another
    # row of their kind (a trace writes each kind's events in time order: no sort then) ...
    found = []
    present: npt.NDArray[np.intp] = np.flatnonzero(np.bincount(kind, minlength=len(KIND)))
    for k in cast(list[int], present.tolist()):
        if k == KIND["python"]:
            continue
        rows = np.flatnonzero((kind == k) & ~bad)
        if len(events) < 2**31:
            rows = rows.astype(np.int32)
        starts = ts[rows]
        if (starts[1:] < starts[:-1]).any():
            order = np.argsort(starts, kind="stable")
            rows, starts = rows[order], starts[order]
            del order
        shared = np.flatnonzero(starts[1:] == starts[:-1])
        found.append(rows[np.union1d(shared, shared + 1)])
        del rows, starts
    candidates = np.sort(np.concatenate(found)) if found else np.array([], dtype=np.int64)
    if not len(candidates):
        return mask
    # ... then one 64-bit hash per row finds the few rows that may repeat (pandas' duplicated()
    # over every column is many times slower on millions of events); those are compared exactly
    hashes = _row_hashes(events.iloc[candidates])
    ordered = np.sort(hashes)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if len(repeated):
        maybe = candidates[np.isin(hashes, repeated)]
        mask[maybe] = events.iloc[maybe].duplicated().to_numpy()
    return mask


def _row_hashes(events: pd.DataFrame) -> npt.NDArray[np.uint64]:
    """A 64-bit number per event from its kind, thread, name, ts and dur: equal events get
    equal numbers; different events rarely do, and then only cost an exact comparison."""

    def bits(column: str, dtype: type[np.generic]) -> npt.NDArray[np.uint64]:
        values: npt.NDArray[Any] = events[column].to_numpy().astype(dtype, copy=False)
        return values.view(np.uint64)

    key: npt.NDArray[np.uint64]
    with np.errstate(over="ignore"):
        key = bits("ts", np.float64) + bits("dur", np.float64) * np.uint64(0x9E3779B97F4A7C15)
        key += bits("name_id", np.int64) * np.uint64(0xC2B2AE3D27D4EB4F)
        key += (bits("thread", np.int64) << np.uint64(8)) + bits("kind", np.int64)
    return key

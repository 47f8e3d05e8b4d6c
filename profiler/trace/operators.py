"""The CPU operators (and record_function ranges) of a trace by name: calls, total and self CPU
time, and the GPU kernel time each launched; self time found for every nested range at once."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from profiler.trace.columns import give_back_memory
from profiler.trace.kernels import NO_OPERATOR
from profiler.trace.load import KIND, Trace

#: events and sorted ranges handled at a time
_SEGMENTS = 1 << 19


def operator_table(trace: Trace, kernels: pd.DataFrame) -> pd.DataFrame:
    """CPU operators and record_function ranges by name: calls, total (inclusive) and self CPU
    µs, and the GPU kernel time they launched directly (innermost operator).

    Self CPU time is torch.profiler's (``key_averages()``'s ``self_cpu_time_total``): the range
    less the ranges nested in it on its thread, CUDA runtime and driver calls included, since
    torch.profiler makes those calls children of the operator that made them. The TensorBoard
    plugin's "Host Self Duration" subtracts the operator's runtime calls too."""
    agg = _operator_sums(trace)
    if agg is None:
        return pd.DataFrame(
            columns=["operator", "calls", "cpu_total_us", "cpu_self_us", "kernels", "kernel_us"]
        )
    if len(kernels):
        launched = kernels.groupby("operator_id")["dur"].agg(["size", "sum"])
        agg = _with_replayed(agg, launched)
        agg["kernels"] = launched["size"].reindex(agg.index).fillna(0).astype(int)
        agg["kernel_us"] = launched["sum"].reindex(agg.index).fillna(0.0)
        orphan = launched.loc[launched.index < 0] if (launched.index < 0).any() else None
    else:
        agg["kernels"], agg["kernel_us"], orphan = 0, 0.0, None
    agg.insert(0, "operator", trace.names[agg.index.to_numpy()])
    agg = agg.reset_index(drop=True)
    if orphan is not None and len(orphan):
        agg = pd.concat(
            [
                agg,
                pd.DataFrame(
                    [
                        {
                            "operator": NO_OPERATOR,
                            "calls": 0,
                            "cpu_total_us": 0.0,
                            "cpu_self_us": 0.0,
                            "kernels": int(orphan["size"].sum()),
                            "kernel_us": float(orphan["sum"].sum()),
                        }
                    ]
                ),
            ],
            ignore_index=True,
        )
    return agg.sort_values(["cpu_total_us", "kernel_us"], ascending=False).reset_index(drop=True)


def _with_replayed(agg: pd.DataFrame, launched: pd.DataFrame) -> pd.DataFrame:
    """The operators seen only at a CUDA graph's capture (trace.graphs) added with no CPU
    time: their kernels were replayed, they made no CPU call in this trace."""
    absent = launched.index[(launched.index >= 0) & ~launched.index.isin(agg.index)]
    if not len(absent):
        return agg
    agg = pd.concat(
        [agg, pd.DataFrame(0.0, index=absent, columns=["cpu_total_us", "cpu_self_us"])]
    ).fillna({"calls": 0})
    agg["calls"] = agg["calls"].astype(int)
    return agg


def _operator_sums(trace: Trace) -> pd.DataFrame | None:
    """Per name of the operators and ranges (steps left out): calls, total and self µs; None
    when there are none."""
    give_back_memory()  # (what the analyses before freed, before the largest temporaries)
    ev = trace.events
    kind = ev["kind"].to_numpy()
    is_op = np.isin(kind, [KIND["cpu_op"], KIND["annotation"]])
    if not is_op.any():
        return None
    is_step = pd.Series(trace.names).str.startswith("ProfilerStep#").to_numpy()
    name_id = ev["name_id"].to_numpy()
    is_op &= ~is_step[name_id]
    ops = np.flatnonzero(is_op)
    del is_op
    if len(ev) < 2**31:
        ops = ops.astype(np.int32)
    self_us = self_times(ev, np.isin(kind, [KIND[k] for k in _SELF_TIME_KINDS]), ops)
    # (only the columns used are filtered: a row filter copies every column it is given. One
    # frame of every operator row: pandas' sums per group depend on the frame's layout)
    frame = pd.DataFrame(
        {"name_id": name_id[ops], "dur": ev["dur"].to_numpy()[ops], "self": self_us}, copy=False
    )
    del ops, self_us
    return frame.groupby("name_id").agg(
        calls=("dur", "size"), cpu_total_us=("dur", "sum"), cpu_self_us=("self", "sum")
    )


#: the CPU ranges that nest under an operator and leave its self time: child operators and
#: record_function ranges, and the CUDA runtime/driver calls it made
_SELF_TIME_KINDS = ("cpu_op", "annotation", "runtime", "driver")


def self_times(
    ev: pd.DataFrame, nested: npt.NDArray[np.bool_], wanted: npt.NDArray[np.integer[Any]]
) -> npt.NDArray[np.float64]:
    """Self time of the nested CPU ranges ``wanted`` (ascending rows of ``ev`` where ``nested``
    holds), per thread, without a Python loop over events.

    Ranges on one thread nest. Sorted by (start, longest first), the ranges enclosing range i
    are exactly the earlier ones that have not ended by its start, so its depth is
    i - #(ranges ending at or before its start); its parent is the last earlier range one level
    up. Self time = duration - the durations of the children.

    Threads are laid side by side in time (t0), and the sorted ranges are taken a block at a
    time, cut where every earlier range has ended before the next one starts: the earlier
    blocks then count as ended for every range of the block and hold none of its parents, so
    each block gives the bits the whole would, with a block's temporaries."""
    ts, dur = ev["ts"].to_numpy(dtype=np.float64), ev["dur"].to_numpy(dtype=np.float64)
    thread = ev["thread"].to_numpy()
    lo = float(np.min(ts, where=nested, initial=np.inf))
    hi = -np.inf
    for i in range(0, len(ts), _SEGMENTS):
        ends = ts[i : i + _SEGMENTS] + dur[i : i + _SEGMENTS]
        hi = max(hi, float(np.max(ends, where=nested[i : i + _SEGMENTS], initial=-np.inf)))
    span = (np.float64(hi) - np.float64(lo)) + 1.0
    real = np.flatnonzero(nested & (dur > 0))
    out = np.zeros(len(wanted))
    if not len(real):
        return out
    real = real.astype(np.int32) if len(ts) < 2**31 else real
    t0 = (ts[real] - lo) + thread[real].astype(np.float64) * span  # threads side by side
    order = _by_start_longest_first(t0, dur, real)
    for first, last in _nesting_blocks(t0, dur, real, order):
        rows = order[first:last]
        s = t0[rows]
        d = dur[real[rows]]
        e = s + d
        depth = np.arange(len(rows)) - np.searchsorted(np.sort(e), s, side="right")
        depth = np.maximum(depth, 0)
        parent = np.full(len(rows), -1)
        for level in range(1, int(depth.max()) + 1 if len(depth) else 0):
            up = np.flatnonzero(depth == level - 1)
            here = np.flatnonzero(depth == level)
            if len(up) == 0 or len(here) == 0:
                continue
            j = np.searchsorted(up, here, side="left") - 1
            parent[here] = np.where(j >= 0, up[np.clip(j, 0, None)], -1)
        has = parent >= 0
        # bincount adds the weights in order, as np.add.at would, only faster
        child_sum = np.bincount(parent[has], weights=d[has], minlength=len(rows))
        found = real[rows]
        at = np.clip(np.searchsorted(wanted, found), 0, max(len(wanted) - 1, 0))
        keep = wanted[at] == found if len(wanted) else np.zeros(len(found), dtype=bool)
        out[at[keep]] = np.maximum(d - child_sum, 0.0)[keep]
    return out


#: the nested ranges whose self time is found at a time, at least
_NESTING_BLOCK = 1 << 18


def _by_start_longest_first(
    t0: npt.NDArray[np.float64],
    dur: npt.NDArray[np.float64],
    real: npt.NDArray[np.signedinteger[Any]],
) -> npt.NDArray[np.signedinteger[Any]]:
    """The order of np.lexsort((-dur[real], t0)): a stable sort by t0, which is fast on the few
    time-ordered runs a trace's events come in, then the ranges that start together by -dur
    (stably)."""
    order = np.argsort(t0, kind="stable")
    if len(order) < 2**31:
        order = order.astype(np.int32)
    tied = []
    for i in range(0, len(order), _SEGMENTS):
        starts = t0[order[i : i + _SEGMENTS + 1]]
        tied.append(np.flatnonzero(starts[1:] == starts[:-1]) + i)
    ties = np.concatenate(tied) if tied else np.array([], dtype=np.int64)
    if len(ties):
        rows = np.union1d(ties, ties + 1)
        sub = order[rows]
        order[rows] = sub[np.lexsort((-dur[real[sub]], t0[sub]))]
    return order


def _nesting_blocks(
    t0: npt.NDArray[np.float64],
    dur: npt.NDArray[np.float64],
    real: npt.NDArray[np.signedinteger[Any]],
    order: npt.NDArray[np.signedinteger[Any]],
) -> list[tuple[int, int]]:
    """Blocks [first, last) of ``order`` of at least _NESTING_BLOCK ranges (the last one may be
    smaller), each starting where every range before it has ended before it starts."""
    cuts = []
    latest = -np.inf
    for i in range(0, len(order), _SEGMENTS):
        rows = order[i : i + _SEGMENTS]
        s = t0[rows]
        e = s + dur[real[rows]]
        before = np.maximum.accumulate(np.concatenate([[latest], e[:-1]]))
        cuts.append(np.flatnonzero(s > before) + i)
        latest = max(latest, float(e.max()))
    free = np.concatenate(cuts)
    blocks, first = [], 0
    while first < len(order):
        at = int(np.searchsorted(free, first + _NESTING_BLOCK, side="left"))
        last = int(free[at]) if at < len(free) else len(order)
        blocks.append((first, last))
        first = last
    return blocks

"""Interval arithmetic in numpy for the trace's tables: the union of many intervals, how much of
a window they cover (for one window or many, the same bits either way), and which regions of a
cut timeline they cover. Many intervals are taken a block at a time, so that the temporaries are
a block's, never all of them."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd


def merge(
    starts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Union of intervals, as sorted disjoint (starts, ends).

    A union is the same whatever the grouping, and its bounds are the intervals' own values:
    many intervals are merged a block at a time and the blocks' unions merged again, which
    gives the same bits with a block's temporaries, not all of them."""
    if len(starts) > _MERGE_BLOCK:
        blocks = [
            _merge(starts[i : i + _MERGE_BLOCK], ends[i : i + _MERGE_BLOCK])
            for i in range(0, len(starts), _MERGE_BLOCK)
        ]
        return _merge(
            np.concatenate([b[0] for b in blocks]), np.concatenate([b[1] for b in blocks])
        )
    return _merge(starts, ends)


def _merge(
    starts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    if len(starts) == 0:
        return np.array([]), np.array([])
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    del order
    running_end = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > running_end[:-1]
    del running_end
    return s[new], np.maximum.reduceat(e, np.flatnonzero(new)) if len(s) else e[new]


#: intervals merged at a time (merge)
_MERGE_BLOCK = 1 << 19


def covered(
    starts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64], lo: float, hi: float
) -> float:
    """Length of merged intervals (starts, ends) inside [lo, hi]."""
    if len(starts) == 0 or hi <= lo:
        return 0.0
    return float(np.clip(np.minimum(ends, hi) - np.maximum(starts, lo), 0, None).sum())


def covered_per_window(
    starts: npt.ArrayLike,
    ends: npt.ArrayLike,
    w_lo: npt.NDArray[np.float64] | pd.Series,
    w_hi: npt.NDArray[np.float64] | pd.Series,
) -> npt.NDArray[np.float64]:
    """Covered length of merged intervals inside each window (windows may be many).

    Per window, the same as ``covered``: only the intervals that overlap the window are clipped
    (the others clip to exactly +0.0), and their sum is the one numpy makes of the array of
    full length those zeros pad them to (``padded_sum``), so it gives the same bits, without
    recomputing or summing every interval for every window."""
    starts, ends = np.asarray(starts, dtype=np.float64), np.asarray(ends, dtype=np.float64)
    out = np.zeros(len(w_lo))
    if len(starts) == 0:
        return out
    for k, (lo, hi) in enumerate(zip(w_lo, w_hi)):
        if hi <= lo:
            continue
        # merged intervals are sorted and disjoint: those overlapping [lo, hi] are contiguous
        i0 = int(np.searchsorted(ends, lo, side="right"))
        i1 = int(np.searchsorted(starts, hi, side="left"))
        part = np.clip(np.minimum(ends[i0:i1], hi) - np.maximum(starts[i0:i1], lo), 0, None)
        out[k] = padded_sum(part, len(starts), i0)
    return out


def padded_sum(values: npt.NDArray[np.float64], n: int, at: int) -> float:
    """``float(a.sum())`` of the float64 array ``a`` of length ``n`` that is +0.0 but for
    ``a[at : at + len(values)] = values`` (``values`` >= +0.0), without building ``a``.

    numpy sums a contiguous float64 array pairwise (``pairwise_sum`` in its loops: halves
    split at a multiple of 8, blocks of at most 128 summed in 8 running sums, fewer than 8
    added one by one) onto +0.0. The blocks of zeros add exactly +0.0, so only the nodes of
    that tree that overlap ``values`` are computed: whole ones by numpy itself, the others as
    numpy 2.4 would (tests/test_streaming_reader.py checks it against numpy's own sum; an older
    numpy orders its additions otherwise, a few units in the last place apart)."""
    if not len(values):
        return 0.0
    return 0.0 + _pairwise(values, 0, n, at, at + len(values))


def _pairwise(values: npt.NDArray[np.float64], lo: int, n: int, i0: int, i1: int) -> float:
    """numpy's pairwise sum of a[lo : lo + n], where a is +0.0 outside [i0, i1) and
    ``values`` inside."""
    if lo + n <= i0 or lo >= i1:
        return 0.0
    if i0 <= lo and lo + n <= i1:  # a whole node: numpy's own sum, from +0.0
        return float(np.add.reduce(values[lo - i0 : lo - i0 + n], initial=0.0))
    if n > 128:
        half = n // 2
        half -= half % 8
        return _pairwise(values, lo, half, i0, i1) + _pairwise(values, lo + half, n - half, i0, i1)
    a = [float(values[i - i0]) if i0 <= i < i1 else 0.0 for i in range(lo, lo + n)]
    if n < 8:
        total = 0.0
        for x in a:
            total += x
        return total
    r = a[:8]
    whole = n - n % 8
    for i in range(8, whole, 8):
        for j in range(8):
            r[j] += a[i + j]
    total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    for x in a[whole:]:
        total += x
    return total


def _inside(
    points: npt.NDArray[np.float64], starts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64]
) -> npt.NDArray[np.intp]:
    """Index of the merged interval containing each point, or -1."""
    if len(starts) == 0:
        return np.full(len(points), -1)
    i = np.searchsorted(starts, points, side="right") - 1
    ok = (i >= 0) & (points < ends[np.clip(i, 0, None)])
    return np.where(ok, i, -1)


def merge_mask(
    ts: npt.NDArray[np.float64], dur: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """merge() of the intervals [ts, ts + dur] of the events where ``mask`` holds, a block of
    events at a time: the same as ``merge(ts[mask], (ts + dur)[mask])`` without those copies."""
    blocks = []
    for i in range(0, len(mask), _MERGE_BLOCK):
        rows = np.flatnonzero(mask[i : i + _MERGE_BLOCK]) + i
        starts = ts[rows]
        blocks.append(_merge(starts, starts + dur[rows]))
    if len(blocks) == 1:
        return blocks[0]
    return _merge(
        np.concatenate([b[0] for b in blocks] or [np.array([])]),
        np.concatenate([b[1] for b in blocks] or [np.array([])]),
    )


def covered_regions(
    cuts: npt.NDArray[np.float64], starts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64]
) -> npt.NDArray[np.bool_]:
    """For each region [cuts[r], cuts[r+1]) (the last one open-ended), whether one of the merged
    intervals (starts, ends) covers it; the same as ``_inside(point, starts, ends) >= 0`` for any
    point of the region, provided every interval bound within [cuts[0], cuts[-1]] is a cut.

    Each interval covers the regions from its start's cut index to its end's. Merged intervals
    are disjoint and sorted, so those that cover any region start and stop at cut indices that
    all differ: a +1 at each start and a -1 at each stop, summed in order, is 1 inside them."""
    m = len(cuts)
    first = np.searchsorted(cuts, starts, side="left")
    stop = np.searchsorted(cuts, ends, side="left")
    some = first < stop
    marks = np.zeros(m + 1, dtype=np.int8)
    marks[first[some]] = 1
    marks[stop[some]] -= 1
    return np.cumsum(marks[:m], dtype=np.int8) > 0

"""The vectorized interval helpers of trace/intervals.py against their direct definitions."""

import numpy as np
import pytest

from profiler.trace import intervals


@pytest.mark.parametrize("seed", range(20))
def test_covered_regions_equals_a_search_per_midpoint(seed):
    rng = np.random.default_rng(seed)
    base = 1.7e15 if seed % 2 else 0.0  # large epoch-µs values: 1 ulp = 0.25 µs
    ulp = np.spacing(base) if base else 0.25
    # starts and lengths on a coarse grid, so bounds coincide and segments of 1 ulp occur
    starts = base + ulp * rng.integers(0, 400, size=60).astype(float)
    ends = starts + ulp * rng.integers(0, 6, size=60)
    ms, me = intervals.merge(starts, ends)
    lo, hi = base + ulp * 50, base + ulp * 350  # windows cut some intervals off
    other = base + ulp * rng.integers(0, 400, size=30).astype(float)  # bounds of other roles
    cuts = np.unique(np.concatenate([[lo, hi], ms, me, other]))
    cuts = cuts[(cuts >= lo) & (cuts <= hi)]
    seg_s, seg_e = cuts[:-1], cuts[1:]
    mid = (seg_s + seg_e) / 2
    region = np.arange(len(mid)) + (mid >= seg_e)
    expected = intervals._inside(mid, ms, me) >= 0
    assert (intervals.covered_regions(cuts, ms, me)[region] == expected).all()


@pytest.mark.parametrize("seed", range(10))
def test_covered_per_window_is_bitwise_the_per_window_sum(seed):
    rng = np.random.default_rng(seed)
    starts = 4.4e12 + rng.random(3000) * 1e6  # non-integer µs, as in recent traces
    ms, me = intervals.merge(starts, starts + rng.random(3000) * 400)
    w_lo = np.sort(4.4e12 + rng.random(50) * 1.1e6 - 5e4)
    w_hi = w_lo + rng.random(50) * 3e4
    w_hi[3] = w_lo[3]  # an empty window
    expected = [intervals.covered(ms, me, lo, hi) for lo, hi in zip(w_lo, w_hi)]
    assert intervals.covered_per_window(ms, me, w_lo, w_hi).tolist() == expected
    assert (
        intervals.covered_per_window(np.array([]), np.array([]), w_lo, w_hi).tolist() == [0.0] * 50
    )

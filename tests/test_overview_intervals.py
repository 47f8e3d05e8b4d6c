"""The vectorized interval helpers of trace/overview.py against their direct definitions."""

import numpy as np
import pytest

from profiler.trace import overview as ov


@pytest.mark.parametrize("seed", range(20))
def test_covered_regions_equals_a_search_per_midpoint(seed):
    rng = np.random.default_rng(seed)
    base = 1.7e15 if seed % 2 else 0.0  # large epoch-µs values: 1 ulp = 0.25 µs
    ulp = np.spacing(base) if base else 0.25
    # starts and lengths on a coarse grid, so bounds coincide and segments of 1 ulp occur
    starts = base + ulp * rng.integers(0, 400, size=60).astype(float)
    ends = starts + ulp * rng.integers(0, 6, size=60)
    ms, me = ov.merge(starts, ends)
    lo, hi = base + ulp * 50, base + ulp * 350  # windows cut some intervals off
    other = base + ulp * rng.integers(0, 400, size=30).astype(float)  # bounds of other roles
    cuts = np.unique(np.concatenate([[lo, hi], ms, me, other]))
    cuts = cuts[(cuts >= lo) & (cuts <= hi)]
    seg_s, seg_e = cuts[:-1], cuts[1:]
    mid = (seg_s + seg_e) / 2
    region = np.arange(len(mid)) + (mid >= seg_e)
    expected = ov._inside(mid, ms, me) >= 0
    assert (ov._covered_regions(cuts, ms, me)[region] == expected).all()

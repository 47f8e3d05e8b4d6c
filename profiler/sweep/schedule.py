"""The order in which a sweep's (or a compare's) samples are taken: interleaved, A B A B ...,
round-robin over the cells and repeated, so that drift of the machine (clocks, temperature,
other tenants) hits every cell alike instead of the cells sampled last.

With a seed, each round is rotated so that no cell is always first: over every ``len(cells)``
consecutive rounds (counted from the first) each cell leads exactly once, in an order drawn
from the seed. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np


class Turn(NamedTuple):
    cell: Any
    sample: int  # 0 for the cell's first sample, 1 for its second ...


def interleaved(cells: Sequence[Any], samples: int, seed: int | None = None) -> list[Turn]:
    """``samples`` turns of every cell, one round (each cell once) after another."""
    if samples < 0:
        raise ValueError("samples must be >= 0")
    cells = list(cells)
    n = len(cells)
    if not n:
        return []
    leads = [0] * samples
    if seed is not None:
        rng = np.random.default_rng(seed)
        leads = [int(v) for block in range(0, samples, n) for v in rng.permutation(n)][:samples]
    return [
        Turn(cells[(lead + i) % n], sample) for sample, lead in enumerate(leads) for i in range(n)
    ]

"""The interleaved sampling order of a sweep's cells."""

from collections import Counter

import pytest

from profiler.sweep.rounds import Turn, interleaved


def test_round_robin_repeated():
    order = interleaved(["A", "B"], 3)
    assert [t.cell for t in order] == ["A", "B", "A", "B", "A", "B"]
    assert [t.sample for t in order] == [0, 0, 1, 1, 2, 2]
    assert order[0] == Turn("A", 0)
    assert [t.cell for t in interleaved(["x", "y", "z"], 2)] == ["x", "y", "z"] * 2


def test_every_round_has_every_cell_once_with_a_seed():
    cells = ["a", "b", "c", "d"]
    order = interleaved(cells, 8, seed=3)
    assert Counter(t.cell for t in order) == {c: 8 for c in cells}
    for r in range(8):
        round_ = order[4 * r : 4 * r + 4]
        assert {t.sample for t in round_} == {r}
        first = cells.index(round_[0].cell)  # a rotation of the cells' order
        assert [t.cell for t in round_] == [cells[(first + i) % 4] for i in range(4)]


def test_seeded_rotation_balances_who_goes_first():
    cells = ["a", "b", "c"]
    order = interleaved(cells, 9, seed=5)
    leaders = [order[3 * r].cell for r in range(9)]
    assert Counter(leaders) == {"a": 3, "b": 3, "c": 3}
    for block in range(3):  # each cell leads once in every three rounds
        assert sorted(leaders[3 * block : 3 * block + 3]) == cells
    assert interleaved(cells, 9, seed=5) == order
    assert any(interleaved(cells, 9, seed=s) != order for s in range(6, 10))
    # partial last block: still every cell sampled the asked number of times
    assert Counter(t.cell for t in interleaved(cells, 4, seed=5)) == {c: 4 for c in cells}


def test_edges():
    assert interleaved([], 5) == []
    assert interleaved(["a"], 0) == []
    with pytest.raises(ValueError):
        interleaved(["a"], -1)

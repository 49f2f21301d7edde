"""nas.study.pareto: dominance, fronts and hypervolume against hand-computed cases and a brute-force count."""

from __future__ import annotations

import itertools
import random

import pytest

from nas.study.pareto import dominates, hypervolume, hypervolume_history, nondominated_sort, pareto_front

MIN2, MIN3 = ["minimize"] * 2, ["minimize"] * 3


def test_dominance_with_mixed_directions_and_ties() -> None:
    dirs = ["maximize", "minimize"]  # top-1 up, MACs down
    assert dominates((80, 2), (70, 3), dirs)
    assert dominates((80, 3), (70, 3), dirs)  # equal in one, better in the other
    assert not dominates((80, 3), (80, 3), dirs)  # equal points do not dominate each other
    assert not dominates((80, 4), (70, 3), dirs)  # a trade-off
    with pytest.raises(ValueError, match="direction"):
        dominates((1, 2), (2, 3), ["max", "min"])


def test_front_keeps_equal_points_and_sorting_peels_fronts() -> None:
    points = [(1, 3), (2, 2), (2, 2), (3, 1), (3, 3), (4, 4)]
    assert pareto_front(points, MIN2) == [0, 1, 2, 3]
    assert nondominated_sort(points, MIN2) == [[0, 1, 2, 3], [4], [5]]


def test_hypervolume_two_objectives_by_hand() -> None:
    assert hypervolume([(1, 3), (2, 2), (3, 1)], MIN2, (4, 4)) == 6  # strips of 3, 2 and 1
    # top-1 (max) vs MACs (min) against (0 %, 10 G): [0, 80] x [4, 10] plus [0, 70] x [2, 4]
    assert hypervolume([(70, 2), (80, 4)], ["maximize", "minimize"], (0, 10)) == 80 * 6 + 70 * 2
    assert hypervolume([(2, 2), (2, 2)], MIN2, (4, 4)) == 4  # a duplicate adds nothing
    assert hypervolume([(5, 1), (1, 4)], MIN2, (4, 4)) == 0  # on or beyond the reference: nothing
    assert hypervolume([], MIN2, (4, 4)) == 0


def test_hypervolume_three_objectives_by_hand() -> None:
    assert hypervolume([(0, 0, 0)], MIN3, (1, 2, 3)) == 6
    # boxes of 4 and 2 overlapping in a unit cube
    assert hypervolume([(0, 0, 1), (1, 1, 0)], MIN3, (2, 2, 2)) == 5
    dirs = ["maximize", "minimize", "minimize"]
    assert hypervolume([(2, 0, 1), (1, 1, 0)], dirs, (0, 2, 2)) == 5  # the same case, first axis flipped


@pytest.mark.parametrize("dims", [2, 3, 4])
def test_hypervolume_equals_a_count_of_dominated_unit_cells(dims: int) -> None:
    rng = random.Random(dims)
    side = 5
    for _ in range(20):
        points = [tuple(rng.randrange(side) for _ in range(dims)) for _ in range(rng.randint(1, 8))]
        cells = sum(
            any(all(p[i] <= c[i] for i in range(dims)) for p in points)
            for c in itertools.product(range(side), repeat=dims)
        )
        assert hypervolume(points, ["minimize"] * dims, (side,) * dims) == cells


def test_history_is_monotone_and_skips_failed_trials() -> None:
    history = hypervolume_history([(3, 3), None, (1, 3), (2, 2), (3, 3)], MIN2, (4, 4))
    assert history == [1, 1, 3, 5, 5]  # (2, 2) adds [2, 4] x [2, 3]

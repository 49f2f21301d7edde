"""Rank statistics: hand-worked values, the edge cases (ties, constants, -inf, NaN) and pandas as an
independent implementation on random data (``DataFrame.corr``; ``Series.corr`` would need scipy)."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest

from evaluators.ranking import kendall_tau, kendall_top, precision_at_k, ranks, spearman, top_indices

# Hand-worked with ties: ranks x = (1, 2.5, 2.5, 4), ranks y = (1, 4, 2.5, 2.5), both centred at 2.5:
# sum dx dy = 2.25, sum dx^2 = sum dy^2 = 4.5, rho = 0.5. Pairs: (0,1) (0,2) (0,3) concordant, (1,3)
# discordant, (1,2) tied in x only, (2,3) tied in y only: tau-b = (3 - 1) / sqrt((6 - 1)(6 - 1)) = 0.4.
TIED_X, TIED_Y = [1, 2, 2, 3], [1, 3, 2, 2]
# Hand-worked without ties: rank differences (-2, 1, 1, -1, 1), rho = 1 - 6 * 8 / (5 * 24) = 0.6;
# y has 3 inversions (3>1, 3>2, 5>4) of 10 pairs: tau = (7 - 3) / 10 = 0.4.
PLAIN_X, PLAIN_Y = [1, 2, 3, 4, 5], [3, 1, 2, 5, 4]


def test_ranks_average_ties() -> None:
    assert ranks([10, 30, 20, 30]) == [1, 3.5, 2, 3.5]
    assert ranks([-math.inf, 0, -math.inf]) == [1.5, 3, 1.5]
    assert ranks([]) == []


@pytest.mark.parametrize("fn", [spearman, kendall_tau])
def test_perfect_and_reversed(fn) -> None:
    x = [0.3, 1.5, 2.0, 7.0, 11.0, 12.5]
    assert fn(x, [v * 3 + 1 for v in x]) == pytest.approx(1.0)
    assert fn(x, [math.exp(v) for v in x]) == pytest.approx(1.0)  # only the order matters
    assert fn(x, [-v for v in x]) == pytest.approx(-1.0)


def test_hand_worked_with_ties() -> None:
    assert spearman(TIED_X, TIED_Y) == pytest.approx(0.5)
    assert kendall_tau(TIED_X, TIED_Y) == pytest.approx(0.4)


def test_hand_worked_without_ties() -> None:
    assert spearman(PLAIN_X, PLAIN_Y) == pytest.approx(0.6)
    assert kendall_tau(PLAIN_X, PLAIN_Y) == pytest.approx(0.4)


def test_symmetric() -> None:
    assert spearman(TIED_Y, TIED_X) == spearman(TIED_X, TIED_Y)
    assert kendall_tau(TIED_Y, TIED_X) == kendall_tau(TIED_X, TIED_Y)


def test_tau_b_not_tau_a() -> None:
    # All ties in y but one pair: tau-a would be 1/3, tau-b normalizes by the untied pairs only.
    x, y = [1, 2, 3], [0, 0, 1]
    # pairs: (0,1) tied in y; (0,2), (1,2) concordant -> (2 - 0) / sqrt(3 * 2)
    assert kendall_tau(x, y) == pytest.approx(2 / math.sqrt(6))


def test_minus_infinity_is_the_worst_score() -> None:
    x = [1.0, 2.0, 3.0, 4.0]
    assert spearman(x, [-math.inf, 0.0, 1.0, 2.0]) == pytest.approx(1.0)
    assert kendall_tau(x, [-math.inf, 0.0, 1.0, 2.0]) == pytest.approx(1.0)
    # two -inf are a tie, not a NaN difference
    assert kendall_tau(x, [-math.inf, -math.inf, 1.0, 2.0]) == pytest.approx(5 / math.sqrt(30))


def test_undefined_cases() -> None:
    assert math.isnan(spearman([1, 2, 3], [5, 5, 5]))
    assert math.isnan(kendall_tau([1, 2, 3], [5, 5, 5]))
    assert math.isnan(spearman([1], [2]))
    assert math.isnan(kendall_tau([1], [2]))
    with pytest.raises(ValueError, match="NaN"):
        spearman([1, math.nan], [1, 2])
    with pytest.raises(ValueError, match="lengths"):
        kendall_tau([1, 2], [1, 2, 3])


@pytest.mark.parametrize("seed", range(20))
def test_matches_pandas(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(3, 40)
    if seed % 2:  # small integer range: many ties
        x = [rng.randint(0, 5) for _ in range(n)]
        y = [rng.randint(0, 5) for _ in range(n)]
    else:  # correlated continuous scores
        x = [rng.gauss(0, 1) for _ in range(n)]
        y = [v + rng.gauss(0, 0.7) for v in x]
    frame = pd.DataFrame({"x": x, "y": y})
    for method, fn in (("spearman", spearman), ("kendall", kendall_tau)):
        expected = frame.corr(method=method).loc["x", "y"]
        got = fn(x, y)
        if math.isnan(expected):
            assert math.isnan(got)
        else:
            assert got == pytest.approx(expected, abs=1e-12), method


def test_top_indices_break_ties_by_order() -> None:
    assert top_indices([3, 5, 5, 1], 2) == [1, 2]
    assert top_indices([3, 5, 5, 1], 3) == [1, 2, 0]


def test_kendall_top_count() -> None:
    assert kendall_top(list(range(20)), list(range(20))).count == 5  # ceil(2) < min_items
    assert kendall_top(list(range(100)), list(range(100))).count == 10  # ceil(0.1 * 100)
    assert kendall_top(list(range(101)), list(range(101))).count == 11  # ceil(10.1)
    assert kendall_top(list(range(3)), list(range(3))).count == 3  # capped at N
    assert kendall_top(list(range(20)), list(range(20)), frac=0.5, min_items=2).count == 10


def test_kendall_top_uses_the_reference_top_only() -> None:
    ref = list(range(20))  # top 5: positions 15..19
    pred = [-v for v in ref]  # reversed everywhere ...
    pred[15:] = [1000 + v for v in ref[15:]]  # ... except in the reference's top 5
    result = kendall_top(ref, pred)
    assert result == (pytest.approx(1.0), 5)
    assert kendall_tau(ref, pred) < 0
    # within the top 5, one swapped adjacent pair: (9 - 1) / 10
    pred[18], pred[19] = pred[19], pred[18]
    assert kendall_top(ref, pred).tau == pytest.approx(0.8)


def test_kendall_top_rejects_bad_frac() -> None:
    with pytest.raises(ValueError, match="frac"):
        kendall_top([1, 2], [1, 2], frac=0)


def test_precision_at_k() -> None:
    ref = [10, 9, 8, 7, 6, 5, 4, 3, 2, 1]  # reference top 5: positions 0..4
    assert precision_at_k(ref, ref) == 1.0
    assert precision_at_k(ref, [-v for v in ref]) == 0.0
    pred = [10, 9, 8, 0, 0, 7, 6, 0, 0, 0]  # predictor's top 5: 0, 1, 2, 5, 6 -> 3 of 5
    assert precision_at_k(ref, pred) == pytest.approx(0.6)
    assert precision_at_k(ref, pred, k=3) == 1.0
    assert precision_at_k(ref[:3], pred[:3], k=5) == 1.0  # k capped at N
    with pytest.raises(ValueError, match="k must"):
        precision_at_k(ref, pred, k=0)

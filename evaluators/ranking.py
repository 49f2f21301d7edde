"""Rank agreement between a reference and a predictor: how well an evaluator orders architectures.

Every function takes two equally long sequences of scores for the same architectures, ``ref`` (the
reference, e.g. top-1 after long training) and ``pred`` (the evaluator's score), and **higher is better in
both**: a caller whose score is a cost (loss, error, latency) negates it first. ``-inf`` is a valid score (the
worst: a diverged run, a singular NASWOT kernel); NaN is refused.

- :func:`spearman`: Spearman's rho, the Pearson correlation of the ranks, ties given their average rank.
- :func:`kendall_tau`: Kendall's tau-b, ``(C - D) / sqrt((n0 - n1) (n0 - n2))`` over the
  ``n0 = n (n - 1) / 2`` pairs, with ``C`` / ``D`` the concordant / discordant pairs and ``n1`` / ``n2`` the
  pairs tied in ``ref`` / in ``pred`` (Kendall 1945); without ties it is the plain tau-a.
- :func:`kendall_top`: tau-b restricted to the reference's best architectures, where a search spends its
  time (``max(ceil(frac * N), min_items)`` of them, at most N).
- :func:`precision_at_k`: the fraction of the predictor's top ``k`` that is in the reference's top ``k``.

Both correlations are ``nan`` when either side is constant (the statistic is undefined), as scipy and
pandas return. Pure Python: O(N^2) pairs for Kendall, meant for the tens to thousands of architectures of a
ranking study. scipy is not needed (``scipy.stats.spearmanr`` / ``kendalltau`` compute the same values).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["TopKendall", "kendall_tau", "kendall_top", "precision_at_k", "ranks", "spearman", "top_indices"]


class TopKendall(NamedTuple):
    """Kendall's tau-b within the reference's top ``count`` architectures."""

    tau: float
    count: int


def _check(x: Sequence[float], y: Sequence[float]) -> tuple[list[float], list[float]]:
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    if len(xs) != len(ys):
        raise ValueError(f"scores of different lengths: {len(xs)} and {len(ys)}")
    if any(math.isnan(v) for v in xs + ys):
        raise ValueError("scores contain NaN; use -inf for the worst possible score")
    return xs, ys


def ranks(x: Sequence[float]) -> list[float]:
    """1-based ranks in ascending order (the largest value gets rank N); ties share their average rank."""
    values = [float(v) for v in x]
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for pos in range(i, j + 1):
            out[order[pos]] = (i + j) / 2 + 1  # average of the 1-based positions i+1 .. j+1
        i = j + 1
    return out


def _pearson(x: list[float], y: list[float]) -> float:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return math.nan
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` (average ranks for ties); nan if either is constant
    or there are fewer than 2 items."""
    xs, ys = _check(x, y)
    if len(xs) < 2:
        return math.nan
    return _pearson(ranks(xs), ranks(ys))


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of ``x`` and ``y`` (tie-corrected); nan if either is constant or there are fewer
    than 2 items."""
    xs, ys = _check(x, y)
    concordant = discordant = untied_x = untied_y = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[i] - xs[j], ys[i] - ys[j]
            if xs[i] == xs[j]:
                dx = 0.0  # -inf - -inf is nan: equal values are a tie, whatever they are
            if ys[i] == ys[j]:
                dy = 0.0
            untied_x += dx != 0
            untied_y += dy != 0
            if dx * dy > 0:
                concordant += 1
            elif dx * dy < 0:
                discordant += 1
    # untied_x = n0 - n1 and untied_y = n0 - n2 of the tau-b formula
    if untied_x == 0 or untied_y == 0:
        return math.nan
    return max(-1.0, min(1.0, (concordant - discordant) / math.sqrt(untied_x * untied_y)))


def top_indices(scores: Sequence[float], k: int) -> list[int]:
    """Positions of the ``k`` highest scores, best first; equal scores keep their input order."""
    values = [float(v) for v in scores]
    return sorted(range(len(values)), key=lambda i: (-values[i], i))[: max(k, 0)]


def kendall_top(
    ref: Sequence[float], pred: Sequence[float], frac: float = 0.1, min_items: int = 5
) -> TopKendall:
    """Kendall's tau-b of ``pred`` against ``ref`` within the reference's top ``max(ceil(frac * N),
    min_items)`` architectures (all N if fewer); returns the tau and that count. A tie at the cut is broken
    by input order."""
    xs, ys = _check(ref, pred)
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    count = min(len(xs), max(math.ceil(frac * len(xs)), min_items))
    top = top_indices(xs, count)
    return TopKendall(kendall_tau([xs[i] for i in top], [ys[i] for i in top]), count)


def precision_at_k(ref: Sequence[float], pred: Sequence[float], k: int = 5) -> float:
    """The fraction of the predictor's top ``k`` that is also in the reference's top ``k`` (k is capped at
    N). A tie at either cut is broken by input order."""
    xs, ys = _check(ref, pred)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    k = min(k, len(xs))
    if k == 0:
        return math.nan
    return len(set(top_indices(xs, k)) & set(top_indices(ys, k))) / k

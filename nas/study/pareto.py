"""Pareto dominance and hypervolume for any number of objectives, each maximized or minimized.

``dominates(a, b, directions)``: ``a`` is at least as good as ``b`` in every objective and strictly better in
one. ``pareto_front(points, directions)`` returns the indices of the non-dominated points (ties: equal points
are all kept). ``best_first`` orders points for a table: by the first objective, best first, ties by the
next. ``nondominated_sort`` peels successive fronts (NSGA-II's ranking, Deb et al. 2002).

``hypervolume(points, directions, reference)`` is the volume of objective space that the points dominate and
that dominates ``reference`` (a point worse than any a search should find in every objective; points not
strictly better than it in every objective add nothing). Exact, by slicing along the last objective
(While et al. 2006, HSO), with a sort-and-sweep for two objectives: meant for the fronts of searches (tens to
hundreds of points, 2 or 3 objectives). ``hypervolume_history`` is its value after each trial in order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "best_first",
    "dominates",
    "hypervolume",
    "hypervolume_history",
    "nondominated_sort",
    "pareto_front",
]


def _signed(point: Sequence[float], directions: Sequence[str]) -> list[float]:
    """The point with every objective turned into one to maximize."""
    if len(point) != len(directions):
        raise ValueError(f"a point of {len(point)} values for {len(directions)} objectives")
    out = []
    for value, direction in zip(point, directions, strict=True):
        if direction not in ("maximize", "minimize"):
            raise ValueError(f"direction: unknown {direction!r}; allowed: maximize, minimize")
        out.append(float(value) if direction == "maximize" else -float(value))
    return out


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    sa, sb = _signed(a, directions), _signed(b, directions)
    return all(x >= y for x, y in zip(sa, sb, strict=True)) and any(
        x > y for x, y in zip(sa, sb, strict=True)
    )


def pareto_front(points: Sequence[Sequence[float]], directions: Sequence[str]) -> list[int]:
    """Indices (in input order) of the points no other point dominates."""
    signed = [_signed(p, directions) for p in points]
    front = []
    for i, p in enumerate(signed):
        if not any(
            all(x >= y for x, y in zip(q, p, strict=True)) and any(x > y for x, y in zip(q, p, strict=True))
            for j, q in enumerate(signed)
            if j != i
        ):
            front.append(i)
    return front


def best_first(points: Sequence[Sequence[float]], directions: Sequence[str]) -> list[int]:
    """Indices of ``points`` ordered best first: by the first objective in its direction, ties by the next
    objective, then by input order."""
    signed = [_signed(p, directions) for p in points]
    return sorted(range(len(points)), key=lambda i: [-v for v in signed[i]])


def nondominated_sort(points: Sequence[Sequence[float]], directions: Sequence[str]) -> list[list[int]]:
    """Successive Pareto fronts: front 0 is the non-dominated set, front 1 that of the rest, and so on."""
    remaining = list(range(len(points)))
    fronts = []
    while remaining:
        local = pareto_front([points[i] for i in remaining], directions)
        front = [remaining[i] for i in local]
        fronts.append(front)
        taken = set(front)
        remaining = [i for i in remaining if i not in taken]
    return fronts


def _minimized(point: Sequence[float], directions: Sequence[str]) -> list[float]:
    return [-v for v in _signed(point, directions)]


def _hv_min(points: list[list[float]], reference: list[float]) -> float:
    """Hypervolume of minimization points that are all strictly better than ``reference``."""
    if not points:
        return 0.0
    if len(reference) == 1:
        return reference[0] - min(p[0] for p in points)
    if len(reference) == 2:
        volume, best_y = 0.0, reference[1]
        for x, y in sorted(points):  # by x; a point adds the strip below the best y seen so far
            if y < best_y:
                volume += (reference[0] - x) * (best_y - y)
                best_y = y
        return volume
    ordered = sorted(points, key=lambda p: p[-1])
    volume = 0.0
    for i, point in enumerate(ordered):
        upper = ordered[i + 1][-1] if i + 1 < len(ordered) else reference[-1]
        if upper > point[-1]:  # the slab [point, upper) in the last objective, dominated by points 0..i
            volume += (upper - point[-1]) * _hv_min([p[:-1] for p in ordered[: i + 1]], reference[:-1])
    return volume


def hypervolume(
    points: Sequence[Sequence[float]], directions: Sequence[str], reference: Sequence[float]
) -> float:
    """The volume dominated by ``points`` and bounded by ``reference`` (in the objectives' own units)."""
    ref = _minimized(reference, directions)
    inside = []
    for point in points:
        mp = _minimized(point, directions)
        if all(math.isfinite(v) for v in mp) and all(v < r for v, r in zip(mp, ref, strict=True)):
            inside.append(mp)
    front = [inside[i] for i in pareto_front(inside, ["minimize"] * len(ref))]
    return _hv_min(front, ref)


def hypervolume_history(
    points: Sequence[Sequence[float] | None], directions: Sequence[str], reference: Sequence[float]
) -> list[float]:
    """Hypervolume of the first 1, 2, ... points in order (``None``: a failed trial, adds nothing)."""
    out, seen = [], []
    for point in points:
        if point is not None:
            seen.append(point)
            seen = [seen[i] for i in pareto_front(seen, directions)]  # only the front matters later
        out.append(hypervolume(seen, directions, reference))
    return out

"""Readable axes and labels for the report's plots, as plain numbers (no plotting library here).

- :func:`integer_step`: the tick step of an axis of counts (trial numbers): 1, 2, 5, 10, 20, ... so that at
  most ``most`` ticks show and none falls between two integers;
- :func:`log_ticks`: ticks of a log axis at 1, 2 and 5 times each power of ten inside the data's range
  (fewer where they would crowd), labelled like ``4.2G`` / ``25M`` instead of plotly's ``425.07B``;
- :func:`place_labels`: where to write each of several labels next to its point so that no two labels
  overlap, no label covers another point, and every label stays inside the plot (pixel coordinates, y
  down). Candidates around the point at growing distances are tried in a fixed order; the first that fits
  wins (a leader line joins a distant label to its point). Where none fits, the least bad one is taken.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Box", "integer_step", "label_size", "log_ticks", "place_labels"]

CHAR_PX = 6.2  # the width of one character of the labels' 10 px sans-serif font, generously
LINE_PX = 14  # the height of one line of it


def integer_step(count: int, most: int = 10) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that shows ``count`` consecutive integers in at most
    ``most`` ticks."""
    for power in itertools.count():
        for mantissa in (1, 2, 5):
            step = mantissa * 10**power
            if math.ceil(max(count, 1) / step) <= most:
                return step
    raise AssertionError("not reached")


def log_ticks(low: float, high: float, most: int = 8) -> list[float]:
    """Tick values for a log axis over [``low``, ``high``] (both > 0): 1, 2, 5 x 10^k, else 1, 3 x 10^k,
    else 10^k, the first of these that gives 2 to ``most`` ticks; in a narrower range 1, 1.5, 2, 3, 5,
    7 x 10^k, else its ends and middle to two significant digits, rounded inwards."""
    if not (low > 0 and high >= low):
        raise ValueError(f"a log axis needs 0 < low <= high, got {low}, {high}")
    for mantissas in ((1, 2, 5), (1, 3), (1,), (1, 1.5, 2, 3, 5, 7)):
        ticks = [
            m * 10.0**k
            for k in range(math.floor(math.log10(low)), math.floor(math.log10(high)) + 1)
            for m in mantissas
            if low <= m * 10.0**k <= high
        ]
        if 2 <= len(ticks) <= most or (mantissas == (1,) and len(ticks) > most):
            return ticks
    # a range too narrow for two round numbers: its ends and middle, to two significant digits, the ends
    # rounded inwards (rounded to the nearest they could fall outside the axis, and not be drawn)
    middle = float(f"{math.sqrt(low * high):.2g}")
    return sorted({_two_digits(low, math.ceil), middle, _two_digits(high, math.floor)})


def _two_digits(value: float, rounding: Callable[[float], int]) -> float:
    """``value`` to two significant digits, rounded by ``rounding`` (``math.ceil`` or ``math.floor``)."""
    scale = 10.0 ** (math.floor(math.log10(value)) - 1)
    return rounding(round(value / scale, 9)) * scale  # round first: 81e6 / 1e6 is 81.00000000000001


@dataclass(frozen=True)
class Box:
    """A rectangle in pixels: left, top, right, bottom (y grows down)."""

    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other: Box) -> bool:
        return (
            self.left < other.right
            and other.left < self.right
            and self.top < other.bottom
            and other.top < self.bottom
        )

    def inside(self, other: Box) -> bool:
        return (
            self.left >= other.left
            and self.right <= other.right
            and self.top >= other.top
            and self.bottom <= other.bottom
        )

    def contains(self, x: float, y: float) -> bool:
        return self.left <= x <= self.right and self.top <= y <= self.bottom


def label_size(text: str) -> tuple[float, float]:
    """(width, height) in pixels of a one-line label."""
    return len(text) * CHAR_PX + 6, LINE_PX


_DIRECTIONS = ((0, -1), (0, 1), (1, 0), (-1, 0), (1, -1), (-1, -1), (1, 1), (-1, 1))
_DISTANCES = (16, 34, 52, 70, 90, 115)
_MARKER_PX = 7  # a point's marker covers this radius


def place_labels(
    points: Sequence[tuple[float, float]],
    labels: Sequence[str],
    area: Box,
    others: Sequence[tuple[float, float]] = (),
) -> list[tuple[float, float]]:
    """The offset (dx, dy) in pixels from each point to the centre of its label; ``others`` are points
    that carry no label and must not be covered either."""
    placed: list[Box] = []
    markers = [*points, *others]
    out = []
    for (x, y), text in zip(points, labels, strict=True):
        w, h = label_size(text)
        best: tuple[float, tuple[float, float], Box] | None = None
        for distance in _DISTANCES:
            for dx, dy in _DIRECTIONS:
                cx = x + dx * (distance + (w / 2 if dx else 0))
                cy = y + dy * (distance + (h / 2 if dy else 0) - (8 if dy else 0))
                box = Box(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
                covered = sum(
                    Box(box.left - _MARKER_PX, box.top - _MARKER_PX, box.right + _MARKER_PX,
                        box.bottom + _MARKER_PX).contains(px, py)
                    for px, py in markers
                )  # fmt: skip
                bad = 1000 * (not box.inside(area)) + 100 * sum(box.overlaps(b) for b in placed) + covered
                if best is None or bad < best[0]:
                    best = (bad, (cx - x, cy - y), box)
                if bad == 0:
                    break
            if best is not None and best[0] == 0:
                break
        assert best is not None  # there are candidates
        placed.append(best[2])
        out.append(best[1])
    return out

"""results.plot_layout: integer ticks, round log ticks, and label placement without overlap or clipping."""

from __future__ import annotations

import random

import pytest

from results.plot_layout import Box, integer_step, label_size, log_ticks, place_labels


@pytest.mark.parametrize(("count", "step"), [(1, 1), (10, 1), (11, 2), (14, 2), (21, 5), (50, 5), (51, 10)])
def test_integer_step_is_a_whole_round_number_with_at_most_ten_ticks(count: int, step: int) -> None:
    assert integer_step(count) == step


def test_log_ticks_are_round_and_inside_the_range() -> None:
    assert log_ticks(15e6, 300e6) == [20e6, 50e6, 100e6, 200e6]
    assert log_ticks(1e3, 1e9) == [1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9]  # 1-2-5 would be 19 ticks
    narrow = log_ticks(81.3e6, 83.6e6)  # no round number inside: ends (rounded inwards) and middle
    assert narrow == [82e6, 83e6]  # the middle, 82.4e6, is 82e6 to two digits
    assert log_ticks(2.04e9, 8.96e9) == [3e9, 5e9, 7e9]  # one 1-2-5 number inside: a denser round set
    assert log_ticks(2.04e9, 2.96e9) == [2.1e9, 2.5e9, 2.9e9]  # none: the ends inwards, not 2.0e9 and 3.0e9
    with pytest.raises(ValueError, match="log axis"):
        log_ticks(0, 10)


def _boxes(points, labels, offsets):
    out = []
    for (x, y), text, (dx, dy) in zip(points, labels, offsets, strict=True):
        w, h = label_size(text)
        out.append(Box(x + dx - w / 2, y + dy - h / 2, x + dx + w / 2, y + dy + h / 2))
    return out


def test_ten_crowded_labels_neither_overlap_nor_leave_the_plot() -> None:
    rng = random.Random(0)
    area = Box(0, 0, 980, 388)
    # a cluster as the coatnet baselines make at CoAtNet-0's scale, and a few spread ones near the edges
    points = [(200 + rng.uniform(-30, 30), 300 + rng.uniform(-20, 20)) for _ in range(6)]
    points += [(5, 5), (975, 10), (970, 380), (490, 200)]
    labels = ["CoAtNet-0 = C-C-T-T", "C-C-C-C", "C-C-C-T", "C-T-T-T", "ViT_REL", "CoAtNet-1", "CoAtNet-2",
              "CoAtNet-3", "CoAtNet-4", "a long label of a baseline"]  # fmt: skip
    others = [(rng.uniform(0, 980), rng.uniform(0, 388)) for _ in range(20)]
    boxes = _boxes(points, labels, place_labels(points, labels, area, others))
    assert all(b.inside(area) for b in boxes)
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    for box, point in zip(boxes, points, strict=True):
        assert not box.contains(*point)  # a label never hides its own star

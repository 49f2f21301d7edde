"""A small drawing of one architecture, as inline SVG for the report: the stem, then one box per stage
(its block and mixer, depth, width, stride), then the head, left to right as data flows. A box's height
grows with the stage's width (log scale) and its colour says the container block, so a front's members
compare at a glance."""

from __future__ import annotations

import html
import math

from nas.core.arch import Arch, Stage

__all__ = ["arch_svg"]

_COLOURS = {"mbconv": "#cfe3f7", "bottleneck": "#d5efd0", "transformer": "#fbe0c4"}
_PLAIN = "#e6e6e6"  # stem and head
_BOX_W, _GAP, _PAD = 92, 14, 6
_MIN_H, _MAX_H = 58, 104  # box heights for the narrowest and the widest stage
_LINE = 13  # px per text line (font size 11)


def _stage_lines(stage: Stage) -> list[str]:
    if stage.block == "mbconv":
        op = "MBConv"
    elif stage.block == "bottleneck":
        op = f"bottleneck {stage.mixer}"
    else:
        op = f"T-{stage.mixer}"
    if stage.mixer == "local" and stage.k is not None:
        op += f" k{stage.k}"
    if stage.mixer == "ext" and stage.memory is not None:
        op += f" m{stage.memory}"
    return [op, f"x{stage.depth}", f"{stage.width} ch", f"/{stage.stride}"]


def _height(width: int, low: int, high: int) -> float:
    if high <= low:
        return _MIN_H
    return _MIN_H + (_MAX_H - _MIN_H) * math.log(width / low) / math.log(high / low)


def arch_svg(arch: Arch, *, title: str = "") -> str:
    """The drawing of ``arch`` as an ``<svg>`` element (``title`` its tooltip and accessible name)."""
    stem = arch.stem
    stem_lines = [f"{stem.kind} stem", f"{stem.width} ch"] + ([f"patch {stem.patch}"] if stem.patch else [])
    head_lines = [f"{arch.head.kind} head"] + ([f"{arch.head.width} ch"] if arch.head.width else [])
    widths = [s.width for s in arch.stages]
    low, high = min(widths, default=1), max(widths, default=1)
    boxes = [(stem_lines, _PLAIN, _MIN_H)]
    boxes += [
        (_stage_lines(s), _COLOURS.get(s.block, _PLAIN), _height(s.width, low, high)) for s in arch.stages
    ]
    boxes.append((head_lines, _PLAIN, _MIN_H))
    height = _MAX_H + 2 * _PAD
    width = len(boxes) * (_BOX_W + _GAP) - _GAP + 2 * _PAD
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='arch' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' role='img' aria-label='{html.escape(title, quote=True)}'>",
        f"<title>{html.escape(title)}</title>",
    ]
    mid = height / 2
    for n, (lines, colour, box_h) in enumerate(boxes):
        x = _PAD + n * (_BOX_W + _GAP)
        y = mid - box_h / 2
        if n:  # the arrow from the previous box
            parts.append(
                f"<line x1='{x - _GAP}' y1='{mid}' x2='{x - 2}' y2='{mid}' stroke='#555' "
                "marker-end='url(#arrow)'/>"
            )
        parts.append(
            f"<rect x='{x}' y='{y:.1f}' width='{_BOX_W}' height='{box_h:.1f}' rx='4' fill='{colour}' "
            "stroke='#555'/>"
        )
        first = mid - (len(lines) - 1) * _LINE / 2 + 4
        for k, line in enumerate(lines):
            weight = " font-weight='600'" if k == 0 else ""
            parts.append(
                f"<text x='{x + _BOX_W / 2}' y='{first + k * _LINE:.1f}' text-anchor='middle' "
                f"font-size='11'{weight}>{html.escape(line)}</text>"
            )
    parts.insert(
        2,
        "<defs><marker id='arrow' viewBox='0 0 6 6' refX='6' refY='3' markerWidth='6' markerHeight='6' "
        "orient='auto'><path d='M0,0 L6,3 L0,6 z' fill='#555'/></marker></defs>",
    )
    parts.append("</svg>")
    return "".join(parts)

"""results.arch_drawing: a well-formed SVG of the stem, one box per stage (op, depth, width) and the head."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from results.arch_drawing import arch_svg
from search_spaces import get_space

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("name", ["CoAtNet-0", "ViT_REL"])
def test_a_drawing_has_a_box_per_stage_with_its_choices(name: str) -> None:
    arch = get_space("coatnet").baselines()[name].arch
    root = ET.fromstring(arch_svg(arch, title=f"<{name}>"))  # the title is escaped: still well-formed XML
    rects = root.findall(f"{SVG}rect")
    assert len(rects) == len(arch.stages) + 2  # stem, stages, head
    texts = [t.text for t in root.iter(f"{SVG}text")]
    for stage in arch.stages:
        assert f"x{stage.depth}" in texts and f"{stage.width} ch" in texts
    assert f"{arch.stem.kind} stem" in texts and "mlp head" in texts
    heights = [float(r.get("height")) for r in rects[1:-1]]
    widths = [s.width for s in arch.stages]
    assert heights.index(max(heights)) == widths.index(max(widths))  # the widest stage is the tallest box


def test_a_local_attention_stage_shows_its_extent() -> None:
    arch = get_space("sasa").baselines()
    drawing = arch_svg(next(b.arch for b in arch.values() if any(s.mixer == "local" for s in b.arch.stages)))
    assert "bottleneck local k" in drawing

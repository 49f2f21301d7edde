"""Hypothesis strategies for valid architectures, small enough to build and run in unit tests."""

from __future__ import annotations

from hypothesis import strategies as st

from nas.core.arch import BLOCK_MIXERS, HEAD_KINDS, Arch, Head, Stage, Stem


def _mixer_dim(block: str, width: int, expand: int) -> int:
    return {"mbconv": width * expand, "bottleneck": width // expand, "transformer": width}[block]


@st.composite
def stages(draw: st.DrawFn, max_width: int = 64, max_depth: int = 2) -> Stage:
    block = draw(st.sampled_from(sorted(BLOCK_MIXERS)))
    mixer = draw(st.sampled_from(BLOCK_MIXERS[block]))
    expand = draw(st.sampled_from((1, 2, 4)))
    width = (
        expand * draw(st.integers(1, max_width // 4)) * 4
        if block == "bottleneck"
        else draw(st.integers(1, max_width // 8)) * 8
    )
    k = None
    if mixer == "local":
        k = draw(st.sampled_from((3, 5, 7)))
    elif mixer == "conv":
        k = draw(st.sampled_from((None, 3, 5)))
    heads = None
    if mixer != "conv":
        dim = _mixer_dim(block, width, expand)
        even = mixer == "local"
        heads = draw(
            st.sampled_from([h for h in (1, 2, 4, 8) if dim % h == 0 and (not even or dim // h % 2 == 0)])
        )
    return Stage(
        block=block,
        mixer=mixer,
        depth=draw(st.integers(1, max_depth)),
        width=width,
        stride=draw(st.sampled_from((1, 2))),
        expand=expand,
        k=k,
        memory=draw(st.sampled_from((None, 8, 64))) if mixer == "ext" else None,
        heads=heads,
    )


@st.composite
def archs(draw: st.DrawFn, max_stages: int = 4, max_width: int = 64, max_depth: int = 2) -> Arch:
    kind = draw(st.sampled_from(("conv", "resnet", "attn", "patch")))
    stem = Stem(
        kind,
        draw(st.integers(1, max_width // 8)) * 8,
        patch=draw(st.sampled_from((2, 4))) if kind == "patch" else None,
    )
    head_kind = draw(st.sampled_from(HEAD_KINDS))
    head = Head(head_kind, draw(st.integers(1, max_width)) if head_kind == "mlp" else None)
    body = draw(st.lists(stages(max_width, max_depth), min_size=1, max_size=max_stages))
    return Arch(stem, tuple(body), head)

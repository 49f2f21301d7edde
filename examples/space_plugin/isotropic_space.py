"""``isotropic``: ViT-style networks at one resolution, a search space shipped as a plugin of nas.

ViT (Dosovitskiy et al. 2020) patchifies the image once and keeps every block at that token resolution and
width. Here the patch (8 or 16) and the width are chosen once, and each of three stages of transformer
blocks chooses its token mixer: relative attention (CoAtNet's, as in ViT_REL), external attention (EANet,
Guo et al. 2021, with 32 or 64 memory slots) or local attention (SASA, k 3 or 7), and its depth. The
baselines are the two uniform networks at ViT-S scale (depth 12, width 384, patch 16): every block
relative attention (DeiT-S, to within 0.5% of its parameters and MACs), or every block external
attention.

The package's pyproject.toml names the class in the ``nas.search_spaces`` entry-point group, which is all
nas needs: installed beside it (``pip install -e examples/space_plugin``), ``nas search --space isotropic``
searches it, in every process of the search.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from nas.core.arch import Arch, Head, Stage, Stem
from search_spaces import Baseline, PaperFigure, ProxyProfile, SearchSpace

__all__ = ["IsotropicSpace"]

_PATCHES = (8, 16)
_WIDTHS = (192, 384)
_STAGES = 3
_DEPTHS = (1, 6)
_OPS = ("rel", "ext", "local")
_MEMORY = (32, 64)
_LOCAL_K = (3, 7)


def _stage(op: str, depth: int, width: int, option: int | None) -> Stage:
    """A stage of ``depth`` transformer blocks at stride 1; ``option`` is ext's memory or local's k."""
    if op == "ext":
        return Stage("transformer", "ext", depth, width, stride=1, memory=option)
    if op == "local":
        return Stage("transformer", "local", depth, width, stride=1, k=option)
    return Stage("transformer", "rel", depth, width, stride=1)


def _option(op: str) -> tuple[str, tuple[int, ...]] | None:
    """The name and values of an op's own choice: ext's memory slots, local's extent; rel has none."""
    return {"ext": ("memory", _MEMORY), "local": ("k", _LOCAL_K)}.get(op)


def _arch(patch: int, width: int, stages: Sequence[Stage]) -> Arch:
    return Arch(Stem("patch", width, patch=patch), tuple(stages), Head("norm"))


class IsotropicSpace(SearchSpace):
    name = "isotropic"
    description = "a patch stem, then three transformer stages at its resolution: rel, ext or local attention"
    profiles: ClassVar[dict[str, ProxyProfile]] = {
        "cpu": ProxyProfile(
            "cpu",
            img_size=64,
            width_mult=0.25,
            depth_mult=0.5,
            epochs=1,
            batch_size=64,
            train_samples=4000,
            val_samples=2000,
            description="64 px, 1/4 width, 1/2 depth, 1 epoch of 4000 images",
        ),
        "full": ProxyProfile(
            "full", img_size=224, epochs=300, batch_size=1024, description="the network itself at 224 px"
        ),
    }

    def sample(self, trial: Any) -> Arch:
        patch = trial.suggest_categorical("stem.patch", _PATCHES)
        width = trial.suggest_categorical("width", _WIDTHS)
        stages = []
        for i in range(1, _STAGES + 1):
            op = trial.suggest_categorical(f"s{i}.op", _OPS)
            option = _option(op)
            value = trial.suggest_categorical(f"s{i}.{option[0]}", option[1]) if option else None
            stages.append(_stage(op, trial.suggest_int(f"s{i}.depth", *_DEPTHS), width, value))
        return _arch(patch, width, stages)

    def encode(self, arch: Arch) -> dict[str, Any]:
        if arch.stem.kind != "patch" or len(arch.stages) != _STAGES:
            raise ValueError(f"the isotropic space has a patch stem and {_STAGES} stages, not {arch.key}")
        params: dict[str, Any] = {"stem.patch": arch.stem.patch, "width": arch.stem.width}
        for i, stage in enumerate(arch.stages, start=1):
            if stage.block != "transformer" or stage.mixer not in _OPS:
                raise ValueError(f"s{i}: {stage.block}({stage.mixer}) is not a choice of the isotropic space")
            params[f"s{i}.op"] = stage.mixer
            if (option := _option(stage.mixer)) is not None:
                params[f"s{i}.{option[0]}"] = getattr(stage, option[0])
            params[f"s{i}.depth"] = stage.depth
        return params

    def choices(self) -> dict[str, str]:
        memory, k = (", ".join(map(str, values)) for values in (_MEMORY, _LOCAL_K))
        ops = f"transformer(rel) | transformer(ext, memory in {{{memory}}}) | "
        ops += f"transformer(local, k in {{{k}}})"
        choices = {"stem.patch": f"patch stem: {', '.join(map(str, _PATCHES))}"}
        choices["width"] = f"every stage: {', '.join(map(str, _WIDTHS))}"
        for i in range(1, _STAGES + 1):
            choices[f"s{i}"] = f"{ops}; depth {_DEPTHS[0]}..{_DEPTHS[1]}; stride 1"
        return choices

    def decisions(self) -> dict[str, tuple[Any, ...] | range]:
        out: dict[str, tuple[Any, ...] | range] = {"stem.patch": _PATCHES, "width": _WIDTHS}
        for i in range(1, _STAGES + 1):
            out[f"s{i}.op"] = _OPS
            out[f"s{i}.memory"], out[f"s{i}.k"] = _MEMORY, _LOCAL_K
            out[f"s{i}.depth"] = range(_DEPTHS[0], _DEPTHS[1] + 1)
        return out

    def count(self, domains: Mapping[str, Sequence[Any]]) -> int:
        per_stage = [
            sum(len(domains[f"s{i}.{_option(op)[0]}"]) if _option(op) else 1 for op in domains[f"s{i}.op"])
            * len(domains[f"s{i}.depth"])
            for i in range(1, _STAGES + 1)
        ]
        return len(domains["stem.patch"]) * len(domains["width"]) * math.prod(per_stage)

    def supernet_cover(self) -> list[Arch]:
        return [
            _arch(
                patch, width, [_stage(op, _DEPTHS[1], width, max(o[1]) if (o := _option(op)) else None)] * 3
            )
            for patch in _PATCHES
            for width in _WIDTHS
            for op in _OPS
        ]

    def baselines(self) -> dict[str, Baseline]:
        """The two uniform networks at ViT-S scale: 12 blocks of width 384 behind a patch-16 stem. The one of
        relative attention is DeiT-S (Touvron et al. 2021, Table 1: 22M params, 4.6 GFLOPs, which are MACs)
        with a relative bias in place of absolute position embeddings and a pooled head in place of the
        class token; the one of external attention has no paper figure."""
        deit = PaperFigure("Touvron et al. 2021, DeiT, Table 1 (DeiT-S)", "MACs", 22e6, ((224, 4.6e9),))
        figures = {"rel": deit, "ext": PaperFigure("no paper figure", "MACs")}
        return {
            f"uniform-{op}": Baseline(
                f"uniform-{op}", _arch(16, 384, [_stage(op, 4, 384, 64 if op == "ext" else None)] * 3), figure
            )
            for op, figure in figures.items()
        }

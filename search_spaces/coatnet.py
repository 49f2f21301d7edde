"""The ``coatnet`` space: CoAtNet's four-stage layout with a free choice of block per stage.

Dai et al. 2021 ("CoAtNet", Table 3) fix the layout C-C-T-T: a stride-2 conv stem (S0), MBConv stages S1-S2
and relative-attention Transformer stages S3-S4, at output strides 4, 8, 16 and 32. Here each stage chooses
``mbconv``, ``transformer(local, k)`` (SASA's local attention), ``transformer(rel)`` (CoAtNet) or
``transformer(ext)`` (EANet), with its depth and width from ranges that contain CoAtNet-0..4; the stem is the
conv stem or a ViT patch stem of patch 4, 8 or 16. Behind a patch stem of patch p, the stages whose output
stride is finer than p are dropped, the stage at stride p keeps the patch resolution (stride 1) and takes the
patch embedding's width, and later stages downsample as usual. The head is timm's CoAtNet pre-logits head
(LayerNorm, Linear to the last width, tanh), which the papers' parameter counts include.

``CoAtNetSpace()`` is that space. Its keyword arguments make variants of it (to study how costs grow with the
space): the ops, the local-attention extents, the stem widths and patches, and per stage the depth range and
the width choices; the number of stages is the number of depth ranges, at output strides 4, 8, 16, ...
(doubling). Only a variant that contains them has the papers' baselines.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from nas.core.arch import Arch, Head, Stage, Stem
from search_spaces.base import Baseline, PaperFigure, ProxyProfile, SearchSpace

__all__ = ["CoAtNetSpace"]

# The defaults: CoAtNet's four stages at output strides 4, 8, 16, 32 behind the stride-2 conv stem
_FIRST_STRIDE = 4
_DEPTHS = ((1, 3), (1, 12), (1, 28), (1, 3))
_WIDTHS = ((64, 96, 128, 192), (128, 192, 256, 384), (256, 384, 512, 768), (512, 768, 1024, 1536))
_STEM_WIDTHS = (64, 128, 192)
_PATCHES = (4, 8, 16)
_OPS = ("mbconv", "local", "rel", "ext")
_LOCAL_K = (3, 5, 7, 9, 11)

# Table 3 layouts (S0 width, S1..S4 depths and widths) and Table 4 costs (params, MACs at 224 and 384 px).
# The 512 px figures (and CoAtNet-4's) are Table 4's ImageNet-21K rows: the same networks, fine-tuned larger.
_COATNETS = {
    "CoAtNet-0": (64, (2, 3, 5, 2), (96, 192, 384, 768), 25e6, {224: 4.2e9, 384: 13.4e9}),
    "CoAtNet-1": (64, (2, 6, 14, 2), (96, 192, 384, 768), 42e6, {224: 8.4e9, 384: 27.4e9}),
    "CoAtNet-2": (128, (2, 6, 14, 2), (128, 256, 512, 1024), 75e6, {224: 15.7e9, 384: 49.8e9, 512: 96.7e9}),
    "CoAtNet-3": (
        192,
        (2, 6, 14, 2),
        (192, 384, 768, 1536),
        168e6,
        {224: 34.7e9, 384: 107.4e9, 512: 203.1e9},
    ),
    "CoAtNet-4": (192, (2, 12, 28, 2), (192, 384, 768, 1536), 275e6, {384: 189.5e9, 512: 360.9e9}),
}
_SOURCE = "Dai et al. 2021, CoAtNet, Table 3-4"


def _stage(op: str, depth: int, width: int, stride: int, k: int | None = None) -> Stage:
    if op == "mbconv":
        return Stage("mbconv", "conv", depth, width, stride=stride)
    return Stage("transformer", op, depth, width, stride=stride, k=k)


def _op_label(op: str, local_k: tuple[int, ...] | None = None) -> str:
    if op == "mbconv":
        return "mbconv"
    if op == "local" and local_k is not None:
        return f"transformer(local, k in {{{', '.join(map(str, local_k))}}})"
    return f"transformer({op})"


class CoAtNetSpace(SearchSpace):
    name = "coatnet"
    description = (
        "CoAtNet's 4-stage layout; per stage MBConv or a Transformer with local, rel or ext attention"
    )
    profiles: ClassVar[dict[str, ProxyProfile]] = {
        "cpu": ProxyProfile(
            "cpu",
            img_size=32,
            width_mult=0.25,
            depth_mult=0.2,
            relax_strides=1,
            epochs=1,
            batch_size=64,
            # 4000 images, not 2000: against a 50x reference on two seeds it ranks at Spearman 0.92 and 0.85,
            # 2000 images at 0.77 and 0.37 (benchmarks/evaluator_quality.py; notes/lab-notebook.md)
            train_samples=4000,
            val_samples=2000,
            description="32 px, 1/4 width, 1/5 depth, S1 stride 1, 1 epoch of 4000 images (~20 s on 2 cores)",
        ),
        "gpu": ProxyProfile(
            "gpu",
            img_size=64,
            width_mult=0.5,
            depth_mult=0.5,
            relax_strides=1,
            epochs=10,
            batch_size=256,
            description="64 px, 1/2 width and depth, 10 epochs",
        ),
        "full": ProxyProfile(
            "full", img_size=224, epochs=300, batch_size=1024, description="the network itself at 224 px"
        ),
    }

    def __init__(
        self,
        *,
        ops: Sequence[str] = _OPS,
        local_k: Sequence[int] = _LOCAL_K,
        depths: Sequence[tuple[int, int]] = _DEPTHS,
        widths: Sequence[Sequence[int]] = _WIDTHS,
        stem_widths: Sequence[int] = _STEM_WIDTHS,
        patches: Sequence[int] = _PATCHES,
    ) -> None:
        """``depths[i]`` (low, high) and ``widths[i]`` are stage S<i+1>'s choices; there are as many stages as
        depth ranges, at output strides 4, 8, 16, ... A patch stem's patch must be one of those strides."""
        self.ops, self.local_k, self.patches = tuple(ops), tuple(local_k), tuple(patches)
        self.depths = tuple((int(lo), int(hi)) for lo, hi in depths)
        self.widths = tuple(tuple(w) for w in widths)
        self.stem_widths = tuple(stem_widths)
        self.strides = tuple(_FIRST_STRIDE * 2**i for i in range(len(self.depths)))
        if not self.ops or not set(self.ops) <= set(_OPS) or len(set(self.ops)) != len(self.ops):
            raise ValueError(f"ops: {self.ops} must be distinct choices among {', '.join(_OPS)}")
        if "local" in self.ops and not self.local_k:
            raise ValueError("local_k: the local op needs at least one extent")
        if not self.depths or len(self.widths) != len(self.depths):
            raise ValueError(
                f"depths and widths: one entry per stage each, got {len(depths)} and {len(widths)}"
            )
        if any(not 1 <= lo <= hi for lo, hi in self.depths) or not all(self.widths) or not self.stem_widths:
            raise ValueError(
                "depths, widths and stem_widths: every range 1 <= low <= high, every choice non-empty"
            )
        if not set(self.patches) <= set(self.strides):
            raise ValueError(f"patches: {self.patches} must be among the stages' strides {self.strides}")
        defaults = (_OPS, _LOCAL_K, _DEPTHS, _WIDTHS, _STEM_WIDTHS, _PATCHES)
        if (self.ops, self.local_k, self.depths, self.widths, self.stem_widths, self.patches) != defaults:
            self.description = (
                f"a variant of the coatnet space: {len(self.depths)} stages, ops {', '.join(self.ops)}"
            )

    def _op(self, stage: Stage, label: str) -> str:
        op = "mbconv" if stage.block == "mbconv" else stage.mixer if stage.block == "transformer" else None
        if op not in self.ops:
            raise ValueError(
                f"{label}: {stage.block}({stage.mixer}) is not a choice of the coatnet space; allowed: "
                + ", ".join(map(_op_label, self.ops))
            )
        return op

    def sample(self, trial: Any) -> Arch:
        patch = None
        if trial.suggest_categorical("stem", ("conv", "patch") if self.patches else ("conv",)) == "patch":
            patch = trial.suggest_categorical("stem.patch", self.patches)
        first = 0 if patch is None else self.strides.index(patch)
        stages = []
        for i in range(first, len(self.strides)):
            op = trial.suggest_categorical(f"s{i + 1}.op", self.ops)
            k = trial.suggest_categorical(f"s{i + 1}.k", self.local_k) if op == "local" else None
            depth = trial.suggest_int(f"s{i + 1}.depth", *self.depths[i])
            width = trial.suggest_categorical(f"s{i + 1}.width", self.widths[i])
            stages.append(_stage(op, depth, width, 1 if i == first and patch else 2, k))
        if patch is None:
            stem = Stem("conv", trial.suggest_categorical("stem.width", self.stem_widths))
        else:
            stem = Stem("patch", stages[0].width, patch=patch)
        return Arch(stem, tuple(stages), Head("mlp", stages[-1].width))

    def encode(self, arch: Arch) -> dict[str, Any]:
        params: dict[str, Any] = {"stem": arch.stem.kind}
        first = 0
        if arch.stem.kind == "patch":
            if arch.stem.patch not in self.patches:
                raise ValueError(
                    f"stem.patch: {arch.stem.patch} is not a choice of the coatnet space; allowed: "
                    f"{', '.join(map(str, self.patches))}"
                )
            params["stem.patch"] = arch.stem.patch
            first = self.strides.index(arch.stem.patch)
        else:
            params["stem.width"] = arch.stem.width
        if len(arch.stages) != len(self.strides) - first:
            raise ValueError(
                f"stages: the coatnet space has {len(self.strides) - first} stages behind a "
                f"{arch.stem.key} stem, got {len(arch.stages)}"
            )
        for i, stage in enumerate(arch.stages, start=first + 1):
            params[f"s{i}.op"] = self._op(stage, f"s{i}")
            if stage.mixer == "local":
                params[f"s{i}.k"] = stage.k
            params[f"s{i}.depth"] = stage.depth
            params[f"s{i}.width"] = stage.width
        return params

    def choices(self) -> dict[str, str]:
        choices = {"stem": "conv (2 x 3x3, stride 2)" + (" | patch (ViT patchify)" if self.patches else "")}
        choices["stem.width"] = f"conv stem: {', '.join(map(str, self.stem_widths))}"
        if self.patches:
            choices["stem.patch"] = (
                f"patch stem: {', '.join(map(str, self.patches))} (drops the stages finer than p)"
            )
        ops = " | ".join(_op_label(op, self.local_k) for op in self.ops)
        for i, (lo, hi) in enumerate(self.depths):
            choices[f"s{i + 1}"] = f"{ops}; depth {lo}..{hi}; width {', '.join(map(str, self.widths[i]))}"
        return choices

    def decisions(self) -> dict[str, tuple[Any, ...] | range]:
        out: dict[str, tuple[Any, ...] | range] = {"stem": ("conv", "patch") if self.patches else ("conv",)}
        out["stem.width"] = self.stem_widths
        if self.patches:
            out["stem.patch"] = self.patches
        for i, (lo, hi) in enumerate(self.depths, start=1):
            out[f"s{i}.op"] = self.ops
            if "local" in self.ops:
                out[f"s{i}.k"] = self.local_k
            out[f"s{i}.depth"] = range(lo, hi + 1)
            out[f"s{i}.width"] = self.widths[i - 1]
        return out

    def count(self, domains: Mapping[str, Sequence[Any]]) -> int:
        per_stage = []
        for i in range(1, len(self.depths) + 1):
            ops = sum(len(domains[f"s{i}.k"]) if op == "local" else 1 for op in domains[f"s{i}.op"])
            per_stage.append(ops * len(domains[f"s{i}.depth"]) * len(domains[f"s{i}.width"]))
        stems = domains["stem"]
        conv = len(domains["stem.width"]) * math.prod(per_stage) if "conv" in stems else 0
        patches = domains.get("stem.patch", ()) if "patch" in stems else ()
        return conv + sum(math.prod(per_stage[self.strides.index(p) :]) for p in patches)

    def supernet_cover(self) -> list[Arch]:
        # A conv stem of the widest and of the narrowest width, so that the projection shortcut into S1 is
        # seen at its full output width (S1 may run at stride 1, where equal widths need no projection).
        stems = [
            (min(self.stem_widths), None),
            (max(self.stem_widths), None),
            *((None, p) for p in self.patches),
        ]
        k = max(self.local_k, default=None)
        cover = []
        for stem_width, patch in stems:
            first = 0 if patch is None else self.strides.index(patch)
            for op in self.ops:
                for w in range(max(map(len, self.widths))):  # every width of every stage
                    stages = tuple(
                        _stage(op, self.depths[i][1], self.widths[i][min(w, len(self.widths[i]) - 1)],
                               1 if i == first and patch else 2, k if op == "local" else None)
                        for i in range(first, len(self.strides))
                    )  # fmt: skip
                    stem = (
                        Stem("conv", stem_width)
                        if patch is None
                        else Stem("patch", stages[0].width, patch=patch)
                    )
                    cover.append(Arch(stem, stages, Head("mlp", stages[-1].width)))
        return cover

    def baselines(self) -> dict[str, Baseline]:
        """CoAtNet-0..4, the layout study and ViT_REL: those of them in the space (all, by default)."""
        out = {}
        for name, (stem, depths, widths, params, macs) in _COATNETS.items():
            flops = tuple(macs.items())
            out[name] = Baseline(
                name, _coatnet("CCTT", stem, depths, widths), PaperFigure(_SOURCE, "MACs", params, flops)
            )
        stem, depths, widths = _COATNETS["CoAtNet-0"][:3]
        study = PaperFigure("Dai et al. 2021, CoAtNet, Sec. 3.2 layout study (at CoAtNet-0 scale)", "MACs")
        for layout in ("CCCC", "CCCT", "CCTT", "CTTT"):
            name = "-".join(layout)
            out[name] = Baseline(name, _coatnet(layout, stem, depths, widths), study)
        vit = Arch(
            Stem("patch", 384, patch=16),
            (_stage("rel", 9, 384, 1), _stage("rel", 2, 768, 2)),
            Head("mlp", 768),
        )
        out["ViT_REL"] = Baseline("ViT_REL", vit, study)
        return {name: baseline for name, baseline in out.items() if self.contains(baseline.arch)}


def _coatnet(layout: str, stem: int, depths: tuple[int, ...], widths: tuple[int, ...]) -> Arch:
    stages = tuple(
        _stage("mbconv" if kind == "C" else "rel", d, w, 2)
        for kind, d, w in zip(layout, depths, widths, strict=True)
    )
    return Arch(Stem("conv", stem), stages, Head("mlp", widths[-1]))

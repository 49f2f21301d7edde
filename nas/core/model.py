"""The model builder: one :class:`~nas.core.arch.Arch` -> one standalone ``nn.Module``.

The stage builder, not the blocks, owns channels, strides, feature sizes and drop-path rates (as timm's
``byobnet``); blocks and stems come from the registries in :mod:`nas.core.ops` by the names the ``Arch``
carries.
The network follows timm's interface: ``forward_features`` (the last feature map), ``forward_head``
(pool, head, classifier) and ``num_features``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
from timm.layers import LayerNorm
from torch.overrides import TorchFunctionMode

from nas.core.arch import Arch, Head, Stage
from nas.core.bounds import MAX_CLASSES, MAX_IMG_SIZE, MAX_IN_CHANS, shown, whole
from nas.core.ops import BLOCKS, STEMS, MixerCfg
from nas.core.ops._layers import out_size

__all__ = [
    "BlockSpec",
    "NasNet",
    "SkipMetaInit",
    "build_model",
    "check_img_size",
    "check_task",
    "count_params",
    "head_layers",
    "img_size_pair",
    "mixer_cfg",
    "plan_blocks",
]


def mixer_cfg(stage: Stage, feat_size: tuple[int, int]) -> MixerCfg:
    """The mixer settings of ``stage`` for a block whose input map is ``feat_size``."""
    return MixerCfg(stage.mixer, heads=stage.heads, k=stage.k, memory=stage.memory, feat_size=feat_size)


@dataclass(frozen=True)
class BlockSpec:
    """Everything a block builder needs for block ``index`` of stage ``stage``."""

    stage: int
    index: int
    block: str
    in_dim: int
    out_dim: int
    stride: int
    mixer: MixerCfg
    drop_path: float
    expand: int

    def build(self) -> nn.Module:
        return BLOCKS.get(self.block)(
            self.in_dim, self.out_dim, self.stride, self.mixer, self.drop_path, expand=self.expand
        )


def plan_blocks(
    arch: Arch, img_size: tuple[int, int], drop_path_rate: float = 0.0
) -> tuple[list[BlockSpec], tuple[int, int]]:
    """The blocks of ``arch`` in order, and the feature size after the last: the one place that decides
    channels, strides, feature sizes and drop-path rates (the model and the supernet both build from it)."""
    size = out_size(img_size, arch.stem.stride)
    # linearly 0 .. drop_path_rate over the blocks, as torch.linspace (in Python, so it works on meta too)
    rates = [drop_path_rate * i / max(arch.depth - 1, 1) for i in range(arch.depth)]
    specs, in_dim = [], arch.stem.width
    for s, stage in enumerate(arch.stages):
        for i in range(stage.depth):
            stride = stage.stride if i == 0 else 1
            specs.append(
                BlockSpec(
                    s, i, stage.block, in_dim, stage.width, stride, mixer_cfg(stage, size), rates.pop(0),
                    stage.expand,
                )
            )  # fmt: skip
            in_dim, size = stage.width, out_size(size, stride)
    return specs, size


def check_img_size(arch: Arch, img_size: int | tuple[int, int]) -> tuple[int, int]:
    """``img_size`` as (H, W); ValueError in one sentence unless each side is a whole number of pixels of at
    most ``MAX_IMG_SIZE`` (4096) and at least the arch's total stride (the one size rule)."""
    size = img_size_pair(img_size)
    if min(size) < arch.min_img_size:
        raise ValueError(
            f"image size {size[0]}x{size[1]} is too small for {arch.key}: its total stride is "
            f"{arch.stride}, so each side must be at least {arch.min_img_size} px"
        )
    return size


def img_size_pair(img_size: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    """``img_size`` (a side, or a (height, width) pair) as (H, W); ValueError in one sentence unless each side
    is a whole number of pixels between 1 and ``MAX_IMG_SIZE`` (4096)."""
    if isinstance(img_size, (tuple, list)) and len(img_size) == 2:
        return whole("img_size", img_size[0], 1, MAX_IMG_SIZE), whole(
            "img_size", img_size[1], 1, MAX_IMG_SIZE
        )
    if isinstance(img_size, int) and not isinstance(img_size, bool):
        return (whole("img_size", img_size, 1, MAX_IMG_SIZE),) * 2
    raise ValueError(f"img_size: must be a side or a (height, width) pair of pixels, got {shown(img_size)}")


def check_task(num_classes: int, in_chans: int) -> None:
    """ValueError in one sentence unless ``num_classes`` (0: no classifier, timm's convention) and
    ``in_chans`` are whole numbers within their bounds (:mod:`nas.core.bounds`)."""
    whole("num_classes", num_classes, 0, MAX_CLASSES)
    whole("in_chans", in_chans, 1, MAX_IN_CHANS)


def head_layers(
    head: Head, in_dim: int, num_classes: int = 1000, drop_rate: float = 0.0
) -> tuple[nn.Module, nn.Module, nn.Module, nn.Module, int]:
    """The layers after the global average pool of a ``head`` on ``in_dim`` channels: ``head_norm``,
    ``pre_logits``, ``head_drop``, ``fc``, and the width the classifier sees (``head_hidden_size``)."""
    norm = LayerNorm(in_dim) if head.kind in ("norm", "mlp") else nn.Identity()
    pre_logits: nn.Module = nn.Identity()
    if head.kind == "mlp":
        pre_logits = nn.Sequential(nn.Linear(in_dim, head.width), nn.Tanh())
        in_dim = head.width
    fc = nn.Linear(in_dim, num_classes) if num_classes > 0 else nn.Identity()
    return norm, pre_logits, nn.Dropout(drop_rate), fc, in_dim


class SkipMetaInit(TorchFunctionMode):
    """Skip in-place ops (weight initialization) on meta tensors: they have no values to set, and torch runs
    them through slow reference implementations (two thirds of a meta build's time otherwise). Use as
    ``with torch.device("meta"), SkipMetaInit(): build_model(...)``."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name.endswith("_") and not name.startswith("_") and args and getattr(args[0], "is_meta", False):
            return args[0]
        return func(*args, **(kwargs or {}))


class NasNet(nn.Module):
    """Stem -> stages of blocks -> global average pool -> head -> classifier."""

    def __init__(
        self,
        arch: Arch,
        num_classes: int = 1000,
        in_chans: int = 3,
        img_size: int | tuple[int, int] = 224,
        drop_path_rate: float = 0.0,
        drop_rate: float = 0.0,
    ) -> None:
        super().__init__()
        size = check_img_size(arch, img_size)
        check_task(num_classes, in_chans)
        self.arch = arch
        self.num_classes = num_classes
        self.in_chans = in_chans
        self.img_size = size  # the size its position tables were built for (any size >= min runs)
        self.num_features = arch.num_features
        self.stem = STEMS.get(arch.stem.kind)(in_chans, arch.stem.width, patch=arch.stem.patch)
        specs, self.feature_size = plan_blocks(arch, size, drop_path_rate)
        stages: list[list[nn.Module]] = [[] for _ in arch.stages]
        for spec in specs:
            stages[spec.stage].append(spec.build())
        self.stages = nn.Sequential(*(nn.Sequential(*blocks) for blocks in stages))
        in_dim = arch.stages[-1].width if arch.stages else arch.stem.width
        self.head_norm, self.pre_logits, self.head_drop, self.fc, self.head_hidden_size = head_layers(
            arch.head, in_dim, num_classes, drop_rate
        )
        self.memory_format = torch.contiguous_format

    def use_memory_format(self, memory_format: torch.memory_format) -> NasNet:
        """Keep the weights, and run every map, in ``memory_format``: ``torch.channels_last`` (each pixel's
        channels adjacent) or ``torch.contiguous_format`` (NCHW, as built). The ops keep the format of the
        map they are given; the stem's output is put into it, since a stem's input (an image of one or three
        channels) does not tell it."""
        self.memory_format = memory_format
        return self.to(memory_format=memory_format)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        if self.memory_format is torch.contiguous_format:  # as built: nothing to put into a format
            return self.stages(self.stem(x))  # (B, num_features, H / stride, W / stride)
        x = self.stem(x.contiguous(memory_format=self.memory_format))
        return self.stages(x.contiguous(memory_format=self.memory_format))

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        x = self.pre_logits(self.head_norm(x.mean((2, 3))))
        return x if pre_logits else self.fc(self.head_drop(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))


def build_model(
    arch: Arch,
    num_classes: int = 1000,
    in_chans: int = 3,
    img_size: int | tuple[int, int] = 224,
    drop_path_rate: float = 0.0,
    drop_rate: float = 0.0,
) -> NasNet:
    """Build the standalone network for ``arch``; ``img_size`` sizes position tables, any size >= the
    arch's total stride runs."""
    return NasNet(arch, num_classes, in_chans, img_size, drop_path_rate, drop_rate)


def count_params(module: nn.Module) -> int:
    """Number of parameters of ``module`` (shared parameters once)."""
    return sum(p.numel() for p in module.parameters())

"""Convolutional stems: ``conv`` (CoAtNet S0), ``resnet`` (ResNet) and ``patch`` (ViT patchify).

- ``conv``: two 3x3 convs, the first with stride 2, BatchNorm + GELU between (Dai et al. 2021, Table 3, S0).
- ``resnet``: 7x7/2 conv, BatchNorm, ReLU, 3x3/2 max pool (He et al. 2016); stride 4.
- ``patch``: non-overlapping p x p patches embedded by a conv with kernel = stride = p (Dosovitskiy et al.
  2020, Eq. 1); inputs whose side is not a multiple of p are zero-padded on the bottom/right.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from nas.core.ops.registry import STEMS

__all__ = ["ConvStem", "PatchStem", "ResNetStem"]


class ConvStem(nn.Module):
    def __init__(self, in_chans: int, width: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_chans, width, 3, stride=2, padding=1, bias=False)
        self.norm1 = nn.Sequential(nn.BatchNorm2d(width), nn.GELU())
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv2(self.norm1(self.conv1(x)))  # (B, width, H / 2, W / 2)


class ResNetStem(nn.Sequential):
    def __init__(self, in_chans: int, width: int) -> None:
        super().__init__(
            nn.Conv2d(in_chans, width, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(True),
            nn.MaxPool2d(3, stride=2, padding=1),
        )


class PatchStem(nn.Module):
    def __init__(self, in_chans: int, width: int, patch: int) -> None:
        super().__init__()
        self.patch = patch
        self.proj = nn.Conv2d(in_chans, width, patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad_h, pad_w = -x.shape[-2] % self.patch, -x.shape[-1] % self.patch
        if pad_h or pad_w:
            x = F.pad(x, (0, pad_w, 0, pad_h))
        return self.proj(x)  # (B, width, ceil(H / p), ceil(W / p))


@STEMS.register("conv")
def _build_conv_stem(in_chans: int, width: int, *, patch: int | None) -> nn.Module:
    return ConvStem(in_chans, width)


@STEMS.register("resnet")
def _build_resnet_stem(in_chans: int, width: int, *, patch: int | None) -> nn.Module:
    return ResNetStem(in_chans, width)


@STEMS.register("patch")
def _build_patch_stem(in_chans: int, width: int, *, patch: int | None) -> nn.Module:
    return PatchStem(in_chans, width, patch)

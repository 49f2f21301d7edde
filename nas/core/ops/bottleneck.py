"""``bottleneck`` block: the ResNet bottleneck around any token mixer (He et al. 2016; SASA, BoTNet).

1x1 reduction to ``width / expand`` channels, BatchNorm + ReLU, the token mixer, BatchNorm + ReLU, 1x1
expansion, BatchNorm (its scale zero-initialized, as in Goyal et al. 2017), residual add, ReLU. With the
``conv`` mixer this is ResNet v1.5 (stride on the 3x3, as torchvision and timm). With attention mixers it is
SASA's block (Ramachandran et al. 2019, Sec. 4.1): the mixer replaces the 3x3 conv and a downsampling block
average-pools 2x2 after attention (the mixer owns that pool). The shortcut of a block that changes width or
stride is a strided 1x1 conv + BatchNorm.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from timm.layers import DropPath

from nas.core.ops.registry import BLOCKS, MIXERS, MixerCfg

__all__ = ["Bottleneck"]


class Bottleneck(nn.Module):
    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        stride: int,
        mixer_cfg: MixerCfg,
        *,
        expand: int = 4,
        drop_path: float = 0.0,
    ) -> None:
        super().__init__()
        mid = out_dim // expand
        self.reduce = nn.Sequential(nn.Conv2d(in_dim, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU(True))
        self.mixer = MIXERS.get(mixer_cfg.name)(mid, mid, mixer_cfg, stride)
        self.norm = nn.Sequential(nn.BatchNorm2d(mid), nn.ReLU(True))
        self.restore = nn.Sequential(nn.Conv2d(mid, out_dim, 1, bias=False), nn.BatchNorm2d(out_dim))
        nn.init.zeros_(self.restore[1].weight)
        self.shortcut = nn.Identity()
        if stride != 1 or in_dim != out_dim:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_dim, out_dim, 1, stride=stride, bias=False), nn.BatchNorm2d(out_dim)
            )
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.act = nn.ReLU(True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.mixer(self.reduce(x)))  # (B, mid, H / s, W / s)
        return self.act(self.shortcut(x) + self.drop_path(self.restore(y)))


@BLOCKS.register("bottleneck")
def _build_bottleneck(
    in_dim: int, out_dim: int, stride: int, mixer_cfg: MixerCfg, drop_path: float, *, expand: int
) -> nn.Module:
    return Bottleneck(in_dim, out_dim, stride, mixer_cfg, expand=expand, drop_path=drop_path)

"""``transformer`` block: pre-norm token mixer + pre-norm FFN on NCHW maps (CoAtNet's T block; MetaFormer).

Dai et al. 2021, Sec. 2.3 and Eq. 5: ``x <- Proj(Pool(x)) + Attention(Pool(Norm(x)))`` for a downsampling
block, then ``x <- x + FFN(Norm(x))`` with LayerNorm, an FFN of expansion ``expand`` (4) and GELU. Any token
mixer fits (Yu et al. 2022, "MetaFormer"): ``rel`` gives CoAtNet, ``ext`` EANet, ``local`` a SASA-style local
Transformer. The mixer sees the pooled map, so it is built for that size.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn as nn
from timm.layers import ConvMlp, DropPath, LayerNorm2d

from nas.core.ops._layers import out_size, pool2
from nas.core.ops.mbconv import projection_shortcut
from nas.core.ops.registry import BLOCKS, MIXERS, MixerCfg

__all__ = ["Transformer"]


class Transformer(nn.Module):
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
        self.shortcut = projection_shortcut(in_dim, out_dim, stride)
        self.norm1 = LayerNorm2d(in_dim)
        self.pool = pool2() if stride == 2 else nn.Identity()
        mixer_cfg = dataclasses.replace(mixer_cfg, feat_size=out_size(mixer_cfg.feat_size, stride))
        self.mixer = MIXERS.get(mixer_cfg.name)(in_dim, out_dim, mixer_cfg, 1)
        self.norm2 = LayerNorm2d(out_dim)
        self.mlp = ConvMlp(out_dim, out_dim * expand, act_layer=nn.GELU)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.shortcut(x) + self.drop_path(
            self.mixer(self.pool(self.norm1(x)))
        )  # (B, C_out, H / s, W / s)
        return x + self.drop_path(self.mlp(self.norm2(x)))


@BLOCKS.register("transformer")
def _build_transformer(
    in_dim: int, out_dim: int, stride: int, mixer_cfg: MixerCfg, drop_path: float, *, expand: int
) -> nn.Module:
    return Transformer(in_dim, out_dim, stride, mixer_cfg, expand=expand, drop_path=drop_path)

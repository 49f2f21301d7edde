"""``conv`` token mixer: a dense k x k convolution (ResNet, He et al. 2016; the baseline SASA replaces).

Bias-free because every container follows its mixer with a normalization or a residual projection.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from nas.core.ops.registry import MIXERS, MixerCfg

__all__ = ["ConvMixer"]


class ConvMixer(nn.Module):
    def __init__(self, dim: int, out_dim: int | None = None, *, k: int = 3, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(dim, out_dim or dim, k, stride=stride, padding=k // 2, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)  # (B, C, H, W) -> (B, C_out, ceil(H / s), ceil(W / s))


@MIXERS.register("conv")
def _build_conv(in_dim: int, out_dim: int, cfg: MixerCfg, stride: int) -> nn.Module:
    return ConvMixer(in_dim, out_dim, k=cfg.k, stride=stride)

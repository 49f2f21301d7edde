"""``mbconv`` block: CoAtNet's pre-norm MBConv with squeeze-excitation (Dai et al. 2021, Sec. 2.1 and Eq. 5).

Inverted bottleneck (Sandler et al. 2018) as CoAtNet uses it: pre-norm BatchNorm, 1x1 expansion by ``expand``
(4) of the output width, BatchNorm + GELU, k x k depthwise conv (the block's token mixer), BatchNorm + GELU,
squeeze-excitation with a reduction of 0.25 of the output width, 1x1 projection. A downsampling block follows
CoAtNet Eq. 5: ``x <- Proj(Pool(x)) + Conv(DepthConv(Conv(Norm(x), stride=2)))``, i.e. stride 2 on the first
1x1 conv and a 2x2-pooled, 1x1-projected shortcut. (timm's ``coatnet_*`` strides the depthwise conv instead,
CoAtNet Table 9; that variant costs about 10% more MACs.)
"""

from __future__ import annotations

import torch
import torch.nn as nn
from timm.layers import DropPath, SEModule

from nas.core.ops._layers import pool2
from nas.core.ops.registry import BLOCKS, MixerCfg

__all__ = ["MBConv", "projection_shortcut"]


def projection_shortcut(in_dim: int, out_dim: int, stride: int) -> nn.Module:
    """CoAtNet's shortcut: identity, or 2x2-pool (when strided) then a 1x1 projection (when widths differ)."""
    if stride == 1 and in_dim == out_dim:
        return nn.Identity()
    # The conv is always child 1, pooled or not, so that every variant shares parameter names (the supernet
    # maps a block's parameters by name).
    return nn.Sequential(pool2() if stride == 2 else nn.Identity(), nn.Conv2d(in_dim, out_dim, 1))


class MBConv(nn.Module):
    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        stride: int = 1,
        *,
        k: int = 3,
        expand: int = 4,
        drop_path: float = 0.0,
    ) -> None:
        super().__init__()
        mid = out_dim * expand
        self.shortcut = projection_shortcut(in_dim, out_dim, stride)
        self.pre_norm = nn.BatchNorm2d(in_dim)
        self.expand = nn.Conv2d(in_dim, mid, 1, stride=stride, bias=False)
        self.norm1 = nn.Sequential(nn.BatchNorm2d(mid), nn.GELU())
        self.mixer = nn.Conv2d(mid, mid, k, padding=k // 2, groups=mid, bias=False)
        self.norm2 = nn.Sequential(nn.BatchNorm2d(mid), nn.GELU())
        self.se = SEModule(mid, rd_channels=max(1, out_dim // 4), act_layer=nn.SiLU)
        self.project = nn.Conv2d(mid, out_dim, 1)
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(self.expand(self.pre_norm(x)))  # (B, mid, H / s, W / s)
        y = self.se(self.norm2(self.mixer(y)))
        return self.shortcut(x) + self.drop_path(self.project(y))


@BLOCKS.register("mbconv")
def _build_mbconv(
    in_dim: int, out_dim: int, stride: int, mixer_cfg: MixerCfg, drop_path: float, *, expand: int
) -> nn.Module:
    if mixer_cfg.name != "conv":
        raise ValueError(f"an mbconv block's mixer is its depthwise conv, got mixer {mixer_cfg.name!r}")
    return MBConv(in_dim, out_dim, stride, k=mixer_cfg.k, expand=expand, drop_path=drop_path)

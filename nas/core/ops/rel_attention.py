"""``rel`` token mixer: global multi-head self-attention with a 2-D relative position bias (CoAtNet).

Dai et al. 2021, "CoAtNet: Marrying Convolution and Attention for All Data Sizes", Eq. 3 (pre-normalization
relative attention): ``y_i = sum_j softmax_j(x_i^T x_j / sqrt(d) + w_{i-j}) x_j`` with one learnable scalar
``w`` per head and relative offset, a table of (2H-1)(2W-1) entries per head, added to the logits before the
softmax. The table is sized for the feature map the mixer is built for; at another size it is resized by
bilinear interpolation (as CoAtNet does when fine-tuning at 384 px). A downsampling use (stride 2, e.g. in a
BoTNet-style bottleneck) average-pools after attention.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.layers import trunc_normal_

from nas.core.ops._layers import channels_last, pool2, tensor_cache
from nas.core.ops.registry import MIXERS, MixerCfg

__all__ = ["RelAttention", "relative_index"]


@tensor_cache(maxsize=32)
def relative_index(height: int, width: int, device: torch.device | None = None) -> torch.Tensor:
    """(N, N) index into a flattened (2H-1, 2W-1) table for every query/key pair of an H x W map.

    Cached per size and device (not while torch traces, see :func:`~nas.core.ops._layers.tensor_cache`), not
    held as a buffer: the module then owns only its learned state, so a supernet can build it on the meta
    device and lend it sliced weights. Made outside inference mode even
    when first asked for inside it (a latency measurement): a cached inference tensor would break every
    later training step."""
    with torch.inference_mode(False):
        # offset (dy, dx) sits at (dy + H - 1) * (2W - 1) + (dx + W - 1); with a = y * (2W - 1) + x per
        # position that is a_i - a_j + (H - 1) * (2W - 1) + W - 1: one (N, N) subtraction
        row_stride = 2 * width - 1
        rows = torch.arange(height, device=device)[:, None] * row_stride
        flat = (rows + torch.arange(width, device=device)[None]).flatten()  # (N,)
        return flat[:, None] - (flat - (height - 1) * row_stride - (width - 1))[None, :]


@tensor_cache(maxsize=32)
def _head_relative_index(heads: int, height: int, width: int, device: torch.device | None) -> torch.Tensor:
    """:func:`relative_index` for every head at once, into the flattened (heads, 2H-1, 2W-1) table."""
    per_head = (2 * height - 1) * (2 * width - 1)
    with torch.inference_mode(False):  # cached: never an inference tensor (see relative_index)
        offsets = torch.arange(heads, device=device)[:, None] * per_head
        return (offsets + relative_index(height, width, device=device).flatten()[None]).flatten()


class RelAttention(nn.Module):
    def __init__(
        self,
        dim: int,
        out_dim: int | None = None,
        *,
        heads: int,
        feat_size: tuple[int, int],
        stride: int = 1,
    ) -> None:
        super().__init__()
        out_dim = out_dim or dim
        if out_dim % heads:
            raise ValueError(f"rel attention: {out_dim} channels are not divisible by {heads} heads")
        self.heads = heads
        self.feat_size = tuple(feat_size)
        self.qkv = nn.Conv2d(dim, 3 * out_dim, 1)
        self.proj = nn.Conv2d(out_dim, out_dim, 1)
        height, width = self.feat_size
        self.bias_table = nn.Parameter(torch.zeros(heads, 2 * height - 1, 2 * width - 1))
        trunc_normal_(self.bias_table, std=0.02)
        self.pool = pool2() if stride == 2 else nn.Identity()

    def position_bias(self, height: int, width: int) -> torch.Tensor:
        """(heads, N, N) additive logits bias for an H x W map."""
        table = self.bias_table
        if (height, width) != self.feat_size:
            table = F.interpolate(
                table[None], size=(2 * height - 1, 2 * width - 1), mode="bilinear", align_corners=False
            )[0]
        # index_select on a 1-D tensor: its backward (index_add_) accumulates serially, so training is
        # bit-for-bit repeatable on the CPU; advanced indexing's backward adds with atomics in parallel.
        index = _head_relative_index(table.shape[0], height, width, table.device)
        return table.reshape(-1).index_select(0, index).view(table.shape[0], height * width, height * width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, height, width = x.shape
        q, k, v = self.qkv(x).reshape(batch, 3, self.heads, -1, height * width).transpose(-1, -2).unbind(1)
        bias = self.position_bias(height, width).to(q.dtype)  # (heads, N, N)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # (B, heads, N, d)
        if channels_last(x):  # the heads' channels interleaved per pixel: the network's format kept
            out = out.transpose(1, 2).reshape(batch, height, width, -1).permute(0, 3, 1, 2)
        else:
            out = out.transpose(-1, -2).reshape(batch, -1, height, width)
        return self.pool(self.proj(out))


@MIXERS.register("rel")
def _build_rel(in_dim: int, out_dim: int, cfg: MixerCfg, stride: int) -> nn.Module:
    return RelAttention(in_dim, out_dim, heads=cfg.heads, feat_size=cfg.feat_size, stride=stride)

"""``attn`` stem: SASA's attention stem with spatially-aware values (Ramachandran et al. 2019, Sec. 3.2).

At the stem, pixels carry little content, so SASA makes the *values* position-aware: each pixel's value is a
convex mixture of ``values`` (M = 4) value projections, weighted by a softmax over m of position
embeddings (Eq. 4-5): ``v_ab = (sum_m p(a, b, m) W_V^m) x_ab``,
``p(a, b, m) = softmax_m((emb_row(a) + emb_col(b))^T nu^m)``.
Each pixel attends over the 4 x 4 spatial block it lies in (heads = 8, scaled dot-product logits; the
padding of an image whose side is not a multiple of 4 is excluded from the softmax), then BatchNorm and a
4 x 4 max pool give stride 4, the output size of the ResNet stem it replaces.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.layers import trunc_normal_

from nas.arch import ATTN_STEM_HEADS
from nas.ops._layers import standard_ops_only
from nas.ops.registry import STEMS

__all__ = ["AttentionStem"]

# CUDA's fused attention kernels (flash, memory-efficient) put the batch on a grid axis of at most 65535
# blocks (pytorch#146704: "invalid configuration argument" beyond). The stem's batch is images x 4x4 blocks,
# 65536 already at batch 256 and 64 px (the gpu profiles) and 3.2 M at batch 1024 and 224 px, so it attends
# in slices of at most this many blocks.
SDPA_MAX_BATCH = 32768


class AttentionStem(nn.Module):
    def __init__(
        self, in_chans: int, width: int, *, heads: int = ATTN_STEM_HEADS, block: int = 4, values: int = 4
    ) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"attention stem: width {width} is not divisible by {heads} heads")
        self.heads, self.block, self.values = heads, block, values
        self.query = nn.Conv2d(in_chans, width, 1, bias=False)
        self.key = nn.Conv2d(in_chans, width, 1, bias=False)
        self.value = nn.Conv2d(in_chans, values * width, 1, bias=False)  # W_V^1..M stacked
        self.emb_row = nn.Parameter(torch.empty(block, width))
        self.emb_col = nn.Parameter(torch.empty(block, width))
        self.emb_mix = nn.Parameter(torch.empty(values, width))  # nu^1..M
        for p in (self.emb_row, self.emb_col, self.emb_mix):
            trunc_normal_(p, std=0.02)
        self.norm = nn.BatchNorm2d(width)
        self.pool = nn.MaxPool2d(block, block, ceil_mode=True)

    def value_weights(self) -> torch.Tensor:
        """p(a, b, m) for every in-block position: (block, block, values), a softmax over m."""
        emb = self.emb_row[:, None, :] + self.emb_col[None, :, :]  # (block, block, width)
        return (emb @ self.emb_mix.t()).softmax(dim=-1)

    def _to_blocks(self, t: torch.Tensor) -> torch.Tensor:
        """Channels-last (B, H, W, C), H and W whole blocks -> (B * blocks, heads, block^2, C / heads)."""
        batch, height, width, chans = t.shape
        b = self.block
        t = t.reshape(batch, height // b, b, width // b, b, self.heads, chans // self.heads)
        return t.permute(0, 1, 3, 5, 2, 4, 6).reshape(-1, self.heads, b * b, chans // self.heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, _, height, width = x.shape
        b, chans = self.block, self.query.out_channels
        pad_h, pad_w = -height % b, -width % b
        x = F.pad(x, (0, pad_w, 0, pad_h))
        hp, wp = height + pad_h, width + pad_w
        # q, k and the M value projections: one channels-last matmul, the 1x1 convolutions' weights and
        # multiply-adds (a convolution from 1-3 channels ran several times slower on CPU)
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight]).flatten(1)
        q, k, values = F.linear(x.permute(0, 2, 3, 1), weight).split([chans, chans, self.values * chans], -1)
        # v at each pixel: its M values mixed by p(a, b, m), a broadcast matmul (the same multiply-adds as an
        # einsum over m, without the einsum's two transposing copies of the values)
        mix = self.value_weights().repeat(hp // b, wp // b, 1)[:, :, None, :]  # (Hp, Wp, 1, M)
        values = values.reshape(batch, hp, wp, self.values, chans)
        v = torch.matmul(mix.to(values.dtype), values).reshape(batch, hp, wp, chans)
        mask = None
        if pad_h or pad_w:  # keys in the padding take no part in the softmax
            inside = torch.zeros(hp, wp, dtype=torch.bool, device=x.device)
            inside[:height, :width] = True
            mask = self._to_blocks(inside[None, :, :, None].expand(batch, hp, wp, self.heads))
            mask = mask[:, :, None, :, 0]  # (B * blocks, heads, 1, block^2)
        q, k, v = self._to_blocks(q), self._to_blocks(k), self._to_blocks(v)
        # a standalone file keeps its batch free: one call, as a loop over the traced size would fix it
        if standard_ops_only() or q.shape[0] <= SDPA_MAX_BATCH:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B * blocks, heads, block^2, d)
        else:
            out = torch.cat(
                [
                    F.scaled_dot_product_attention(
                        q[s : s + SDPA_MAX_BATCH],
                        k[s : s + SDPA_MAX_BATCH],
                        v[s : s + SDPA_MAX_BATCH],
                        attn_mask=None if mask is None else mask[s : s + SDPA_MAX_BATCH],
                    )
                    for s in range(0, q.shape[0], SDPA_MAX_BATCH)
                ]
            )
        out = out.reshape(batch, hp // b, wp // b, self.heads, b, b, -1).permute(0, 3, 6, 1, 4, 2, 5)
        out = out.reshape(batch, -1, hp, wp)[:, :, :height, :width]
        return self.pool(self.norm(out))  # (B, width, ceil(H / 4), ceil(W / 4))


@STEMS.register("attn")
def _build_attention_stem(in_chans: int, width: int, *, patch: int | None) -> nn.Module:
    return AttentionStem(in_chans, width)

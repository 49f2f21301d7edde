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

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.layers import trunc_normal_

from nas.core.arch import ATTN_STEM_HEADS
from nas.core.ops._layers import channels_last, standard_ops_only
from nas.core.ops.registry import STEMS

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

    def value_weights(self) -> torch.Tensor:
        """p(a, b, m) for every in-block position: (block, block, values), a softmax over m."""
        emb = self.emb_row[:, None, :] + self.emb_col[None, :, :]  # (block, block, width)
        return (emb @ self.emb_mix.t()).softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, in_chans, height, width = x.shape
        b, chans = self.block, self.query.out_channels
        pad_h, pad_w = -height % b, -width % b
        rows, cols = (height + pad_h) // b, (width + pad_w) // b
        # Every map from here on lies block by block, (N = B * blocks, block^2, channels), a block's pixels in
        # a row, so that the heads and the max pool are views: the maps rearranged are the image (a few
        # channels) and the attention's output (one copy, for the norm). (N, b^2, in):
        pixels = F.pad(x, (0, pad_w, 0, pad_h)).reshape(batch, in_chans, rows, b, cols, b)
        pixels = pixels.permute(0, 2, 4, 3, 5, 1).reshape(-1, b * b, in_chans)
        # q, k and the M value projections: one matmul, the 1x1 convolutions' weights and multiply-adds (a
        # convolution from 1-3 channels ran several times slower on CPU)
        weight = torch.cat([self.query.weight, self.key.weight, self.value.weight]).flatten(1)
        q, k, values = F.linear(pixels, weight).split([chans, chans, self.values * chans], -1)
        # v at each pixel: its M values mixed by p(a, b, m), a broadcast matmul (the same multiply-adds as an
        # einsum over m, without the einsum's two transposing copies of the values)
        mix = self.value_weights().reshape(b * b, 1, self.values).to(values.dtype)
        v = torch.matmul(mix, values.reshape(-1, b * b, self.values, chans))  # (N, b^2, 1, C)
        inside = None
        if pad_h or pad_w:  # keys in the padding take no part in the softmax, nor pixels in its norm or pool
            grid = torch.zeros(rows * b, cols * b, dtype=torch.bool, device=x.device)
            grid[:height, :width] = True
            inside = grid.reshape(rows, b, cols, b).transpose(1, 2).reshape(1, -1, b * b)
            inside = inside.expand(batch, -1, -1).reshape(-1, b * b)  # (N, b^2)
        out = self._attend(*map(self._heads_first, (q, k, v)), inside)  # (N, heads, b^2, d)
        out = out.transpose(1, 2).reshape(-1, chans)  # (N * b^2, C): a pixel per row
        if inside is None:
            out = self.norm(out[:, :, None, None]).view(-1, b * b, chans)
        else:  # BatchNorm's statistics over the image's pixels only, as on the cropped map
            kept = self._image_rows(batch, height, width, rows, cols, x.device)
            normed = self.norm(out.index_select(0, kept)[:, :, None, None]).flatten(1)
            out = torch.full_like(out, -math.inf).index_copy(0, kept, normed).view(-1, b * b, chans)
        out = out.amax(1).view(batch, rows, cols, chans).permute(0, 3, 1, 2)  # the 4 x 4 max pool, per block
        return out if channels_last(x) else out.contiguous()  # (B, width, ceil(H / 4), ceil(W / 4))

    def _image_rows(
        self, batch: int, height: int, width: int, rows: int, cols: int, device: torch.device
    ) -> torch.Tensor:
        """The rows of the block layout (N * b^2 of them) that hold an image's pixel, not padding: computed
        from the shapes alone (no ``nonzero``), so that a meta-device trace counts a padded stem too."""
        b = self.block
        r, c = torch.arange(height, device=device)[:, None], torch.arange(width, device=device)
        in_image = ((r // b) * cols + c // b) * (b * b) + (r % b) * b + c % b  # (H, W)
        first = torch.arange(batch, device=device)[:, None] * (rows * cols * b * b)  # each image's first row
        return (first + in_image.flatten()).flatten()

    def _heads_first(self, t: torch.Tensor) -> torch.Tensor:
        """(N, b^2, C) -> (N, heads, b^2, C / heads): a view on the CPU, whose attention kernel takes any
        strides; elsewhere contiguous, the layout the fused CUDA kernels were measured on."""
        t = t.reshape(t.shape[0], -1, self.heads, t.shape[-1] // self.heads).transpose(1, 2)
        return t if t.device.type == "cpu" else t.contiguous()

    @staticmethod
    def _attend(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, inside: torch.Tensor | None
    ) -> torch.Tensor:
        mask = None if inside is None else inside[:, None, None, :]  # (N, 1, 1, b^2): the keys to attend to
        # a standalone file keeps its batch free: one call, as a loop over the traced size would fix it
        if standard_ops_only() or q.shape[0] <= SDPA_MAX_BATCH:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return torch.cat(
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


@STEMS.register("attn")
def _build_attention_stem(in_chans: int, width: int, *, patch: int | None) -> nn.Module:
    return AttentionStem(in_chans, width)

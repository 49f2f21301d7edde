"""Naive SASA local attention (Ramachandran et al. 2019, arXiv 1906.05909, Eq. 2 and 3) with ``F.unfold``.

The ground truth for ``nas.ops.local_attention``: every query attends to its k x k neighbourhood of keys,
with a relative embedding ``[rel_row[dy], rel_col[dx]]`` added to each key; neighbours outside the image are
excluded from the softmax rather than treated as zero vectors.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def local_attention_reference(
    q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor, kernel: int
) -> Tensor:
    """(B, heads, d, H, W) q, k, v and (kernel, d/2) relative tables -> (B, heads, d, H, W)."""
    b, h, d, hh, ww = q.shape
    pad, win = (kernel - 1) // 2, kernel * kernel

    def windows(t: Tensor) -> Tensor:  # (B, h, d, H, W) -> (B, h, d, k*k, H*W), zero outside the image
        return F.unfold(t.reshape(b, h * d, hh, ww), kernel, padding=pad).view(b, h, d, win, hh * ww)

    # rel[:, r * kernel + c] = [rel_row[r], rel_col[c]], the order in which unfold lists window offsets
    rel = torch.cat(
        [rel_row[:, None].expand(-1, kernel, -1), rel_col[None].expand(kernel, -1, -1)], dim=-1
    ).reshape(win, d)
    keys = windows(k) + rel.t()[:, :, None]
    logits = (q.reshape(b, h, d, 1, hh * ww) * keys).sum(2) * d**-0.5  # (B, h, k*k, H*W)
    inside = F.unfold(q.new_ones(1, 1, hh, ww), kernel, padding=pad) > 0  # (1, k*k, H*W)
    attn = logits.masked_fill(~inside, float("-inf")).softmax(dim=2)
    return (attn[:, :, None] * windows(v)).sum(3).view(b, h, d, hh, ww)

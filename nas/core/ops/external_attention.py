"""``ext`` token mixer: multi-head external attention with two learnable memories (EANet).

Guo et al. 2021, "Beyond Self-attention: External Attention using Two Linear Layers for Visual Tasks",
Eq. 5-6 and Sec. 3.3 (multi-head form): ``A = Norm(F M_k^T)``, ``F_out = A M_v`` with memories ``M_k, M_v`` of
``S`` slots shared by all heads. Norm is the paper's double normalization: a softmax over the N tokens for
each slot, then an L1 normalization over the S slots for each token. As in the paper's multi-head version, a
1x1 projection first widens the channels by ``coef`` (4), splitting them into ``heads * coef`` heads, and a
final 1x1 projection maps back. Cost is O(d S N): linear in the number of tokens. A downsampling use
(stride 2) average-pools after attention.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from timm.layers import trunc_normal_

from nas.core.ops._layers import pool2
from nas.core.ops.registry import MIXERS, MixerCfg

__all__ = ["ExternalAttention", "double_normalize"]


def double_normalize(logits: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
    """EANet's double normalization of (..., S, N) logits: softmax over tokens N, then L1 over slots S."""
    attn = logits.softmax(dim=-1)
    return attn / (eps + attn.sum(dim=-2, keepdim=True))


class ExternalAttention(nn.Module):
    def __init__(
        self,
        dim: int,
        out_dim: int | None = None,
        *,
        heads: int,
        memory: int = 64,
        coef: int = 4,
        stride: int = 1,
    ) -> None:
        super().__init__()
        out_dim = out_dim or dim
        if out_dim % heads:
            raise ValueError(f"external attention: {out_dim} channels are not divisible by {heads} heads")
        self.heads = heads * coef
        head_dim = out_dim // heads
        self.widen = nn.Conv2d(dim, out_dim * coef, 1)
        self.mem_k = nn.Parameter(torch.empty(memory, head_dim))  # M_k: S x d, shared by the heads
        self.mem_v = nn.Parameter(torch.empty(head_dim, memory))  # M_v^T: d x S
        trunc_normal_(self.mem_k, std=head_dim**-0.5)
        trunc_normal_(self.mem_v, std=memory**-0.5)
        self.proj = nn.Conv2d(out_dim * coef, out_dim, 1)
        self.pool = pool2() if stride == 2 else nn.Identity()

    def forward(self, x: torch.Tensor, eps: float = 1e-9) -> torch.Tensor:
        batch, _, height, width = x.shape
        groups = batch * self.heads
        feats = self.widen(x).reshape(groups, -1, height * width)  # (B heads, d, N)
        # double_normalize, rearranged for speed: the L1 norm over slots is one number per token, so it
        # divides the (d, N) output instead of the (S, N) attention; batched matmuls with the memories
        # expanded (no copies), where a broadcast ``mem_k @ feats`` copies a transposed operand each way.
        attn = torch.bmm(self.mem_k.expand(groups, -1, -1), feats).softmax(dim=-1)  # (B heads, S, N)
        norm = attn.sum(dim=-2, keepdim=True) + eps  # (B heads, 1, N)
        out = torch.bmm(self.mem_v.expand(groups, -1, -1), attn) / norm  # (B heads, d, N)
        return self.pool(self.proj(out.reshape(batch, -1, height, width)))


@MIXERS.register("ext")
def _build_ext(in_dim: int, out_dim: int, cfg: MixerCfg, stride: int) -> nn.Module:
    return ExternalAttention(in_dim, out_dim, heads=cfg.heads, memory=cfg.memory, stride=stride)

"""Small shared layers of the ops (private): the ceil-mode 2x2 average pool every strided op agrees on."""

from __future__ import annotations

import torch.nn as nn

__all__ = ["out_size", "pool2"]


def pool2() -> nn.Module:
    """2x2/2 average pool mapping H to ceil(H / 2), like every other strided op here, so odd sizes work."""
    return nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)


def out_size(size: tuple[int, int], stride: int) -> tuple[int, int]:
    """Spatial size after an op of this stride (all strided ops here round up)."""
    return (-(-size[0] // stride), -(-size[1] // stride))

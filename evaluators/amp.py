"""The one mixed-precision rule of every trainer (proxy, one-shot supernet, full training).

On CUDA: bf16 autocast where the GPU computes it natively (Ampere on), else fp16 with a ``GradScaler`` (bf16
has fp32's range, so only fp16 needs loss scaling). Elsewhere: fp32, no autocast, no scaler.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

__all__ = ["amp_dtype", "autocast", "grad_scaler"]


def amp_dtype(device: torch.device) -> torch.dtype | None:
    """The autocast dtype for ``device``; None means full precision. bf16 only where ``device`` computes it
    natively (compute capability 8.0 on, and ROCm's GPUs): ``torch.cuda.is_bf16_supported()`` also says yes
    for a T4 or V100, which only emulates it (no bf16 tensor cores nor cuDNN's bf16 convolutions), and it asks
    the current device, not the one trained on."""
    if device.type != "cuda":
        return None
    if torch.version.hip:
        return torch.bfloat16
    return torch.bfloat16 if torch.cuda.get_device_capability(device) >= (8, 0) else torch.float16


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` at ``dtype``, or a no-op context for full precision."""
    return contextlib.nullcontext() if dtype is None else torch.autocast(device.type, dtype=dtype)


def grad_scaler(dtype: torch.dtype | None) -> torch.amp.GradScaler | None:
    """A loss scaler when training in fp16, else None."""
    return torch.amp.GradScaler("cuda") if dtype == torch.float16 else None

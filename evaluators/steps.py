"""The steps every trainer here takes the same way (proxy, one-shot supernet, full training): a backward
through the fp16 loss scaler when there is one, the optimizer's update (unscale, clip, step) and a
validation pass. The loops around them differ (a ladder's resumable stream, a supernet's paths, mixup and
EMA), so each trainer keeps its loop and calls these.

The order is the one the trainers had, so their results are bit for bit what they were: zero the gradients
before the backward (a one-shot step accumulates the backward of several paths), unscale before clipping,
and validate in ``inference_mode`` with the loss summed in float64 over float32 logits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["backward", "update", "validate"]


def backward(loss: torch.Tensor, scaler: torch.amp.GradScaler | None) -> None:
    """Backpropagate ``loss``, scaled when training in fp16 (``scaler``)."""
    (scaler.scale(loss) if scaler is not None else loss).backward()


def update(
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None,
    clip: float | None = None,
    parameters: Callable[[], Iterator[nn.Parameter]] | None = None,
) -> None:
    """Apply the gradients: with ``clip``, their global norm over ``parameters()`` clipped first (unscaled
    first under fp16); through the scaler when there is one, so that it skips a step with inf or NaN."""
    if clip is not None:
        if parameters is None:
            raise ValueError("update: clipping needs the parameters whose gradients it clips")
        if scaler is not None:
            scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(parameters(), clip)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()


@torch.inference_mode()
def validate(
    model: nn.Module,
    batches: Iterable[Any],
    device: torch.device,
    precision: Callable[[], Any],
) -> dict[str, float]:
    """``model``'s top-1 (%), mean cross-entropy and image count over ``batches`` (moved to ``device``),
    its forward under ``precision`` (an autocast context, or a no-op one). The loss is summed on the device
    in float64 and read once at the end: a non-finite loss is the caller's to judge. No batch at all gives
    0 and 0."""
    model.eval()
    correct = total = 0
    loss_sum = torch.zeros((), device=device, dtype=torch.float64)
    for x, y in batches:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with precision():
            logits = model(x)
        loss_sum += F.cross_entropy(logits.float(), y, reduction="sum")
        correct += int((logits.argmax(1) == y).sum())
        total += len(y)
    images = max(total, 1)
    return {"top1": 100.0 * correct / images, "loss": loss_sum.item() / images, "val_images": total}

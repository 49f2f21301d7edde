"""The steps every trainer here takes the same way (proxy, one-shot supernet, full training): a backward
through the fp16 loss scaler when there is one, the optimizer's update (unscale, clip, step) and a
validation pass. The loops around them differ (a ladder's resumable stream, a supernet's paths, mixup and
EMA), so each trainer keeps its loop and calls these.

Before validating, a trainer may recompute its BatchNorm statistics with the trained weights
(:func:`recalibrate_bn`, PreciseBN in Wu & Johnson, "Rethinking 'Batch' in BatchNorm", 2021): the running
averages training keeps (momentum 0.1) are those of weights that changed since, which is far off after the
few hundred steps of a proxy or the few of a ladder's first rung.

The order is the one the trainers had, so their results are bit for bit what they were: zero the gradients
before the backward (a one-shot step accumulates the backward of several paths), unscale before clipping,
and validate in ``inference_mode`` with the loss summed in float64 over float32 logits.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["backward", "recalibrate_bn", "update", "validate"]


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


@torch.no_grad()  # not inference_mode: the buffers it writes are the ones training goes on with
def recalibrate_bn(
    model: nn.Module,
    batches: Iterable[Any],
    device: torch.device,
    precision: Callable[[], Any],
) -> None:
    """Replace every BatchNorm's running statistics by their plain average over ``batches`` (moved to
    ``device``, forward under ``precision``), with ``model``'s weights as they are. Only the BatchNorm layers
    run in training mode (dropout and drop-path stay off), so this draws no random numbers; the model is
    left in eval mode. No BatchNorm, or no batch: nothing changes."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    batches = iter(batches)
    first = next(batches, None)
    if first is None:
        return
    momenta = [m.momentum for m in norms]
    model.eval()
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative moving average: every batch weighs the same
        m.train()
    try:
        for x, _ in itertools.chain([first], batches):
            with precision():
                model(x.to(device, non_blocking=True))
    finally:
        for m, momentum in zip(norms, momenta, strict=True):
            m.momentum = momentum
        model.eval()

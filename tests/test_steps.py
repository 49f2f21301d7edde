"""evaluators/steps.py: the backward, update and validation every trainer shares, against computations
written out here by hand (the trainers' own tests check that their results did not change)."""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from evaluators.steps import backward, recalibrate_bn, update, validate


def _linear() -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(6, 4)


def test_validate_is_top1_and_mean_cross_entropy_over_uneven_batches() -> None:
    model = _linear()
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(23, 6, generator=gen), torch.randint(0, 4, (23,), generator=gen)
    batches = [(x[:10], y[:10]), (x[10:20], y[10:20]), (x[20:], y[20:])]  # 10, 10 and 3 images
    model.train()
    metrics = validate(model, batches, torch.device("cpu"), contextlib.nullcontext)
    with torch.no_grad():
        logits = model(x)
    assert metrics["val_images"] == 23
    assert metrics["top1"] == pytest.approx(100.0 * float((logits.argmax(1) == y).float().mean()))
    assert metrics["loss"] == pytest.approx(float(F.cross_entropy(logits, y)), rel=1e-6)
    assert not model.training  # validation runs the model in eval mode
    assert validate(model, [], torch.device("cpu"), contextlib.nullcontext) == {
        "top1": 0.0,
        "loss": 0.0,
        "val_images": 0,
    }


def test_update_clips_the_global_gradient_norm_before_the_step() -> None:
    model = _linear()
    before = [p.detach().clone() for p in model.parameters()]
    loss = (model(torch.ones(2, 6)) ** 2).sum() * 100  # a gradient far above the clip
    backward(loss, None)
    grads = [p.grad.detach().clone() for p in model.parameters()]
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    assert norm > 1.0
    update(torch.optim.SGD(model.parameters(), lr=1.0), None, clip=1.0, parameters=model.parameters)
    for p, b, g in zip(model.parameters(), before, grads, strict=True):  # SGD at lr 1: p = b - g / norm
        torch.testing.assert_close(p.detach(), b - g / norm, rtol=1e-5, atol=1e-6)


def test_update_without_clip_is_the_optimizers_step() -> None:
    model, twin = _linear(), _linear()
    for net in (model, twin):
        (net(torch.ones(3, 6)).sum()).backward()
    update(torch.optim.SGD(model.parameters(), lr=0.1), None)
    torch.optim.SGD(twin.parameters(), lr=0.1).step()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_clipping_needs_the_parameters() -> None:
    model = _linear()
    with pytest.raises(ValueError, match="clipping needs the parameters"):
        update(torch.optim.SGD(model.parameters(), lr=0.1), None, clip=1.0)


def _batches(n: int, size: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    labels = torch.zeros(size, dtype=torch.long)
    return [(torch.randn(size, 6, generator=gen) * 3 + 1, labels) for _ in range(n)]


def test_recalibrate_bn_sets_the_plain_average_of_the_batches_statistics_with_dropout_off() -> None:
    torch.manual_seed(0)
    dropout, norm = nn.Dropout(0.5), nn.BatchNorm1d(6, momentum=0.3)
    model = nn.Sequential(dropout, norm, nn.Linear(6, 4))
    model.train()
    model(torch.randn(8, 6))  # running statistics of other data, to be replaced
    batches = _batches(3, 16, seed=2)
    rng = torch.get_rng_state()
    recalibrate_bn(model, batches, torch.device("cpu"), contextlib.nullcontext)
    assert torch.equal(torch.get_rng_state(), rng)  # dropout stayed off: nothing drawn
    means = torch.stack([x.mean(0) for x, _ in batches])
    variances = torch.stack([x.var(0, unbiased=True) for x, _ in batches])
    torch.testing.assert_close(norm.running_mean, means.mean(0))
    torch.testing.assert_close(norm.running_var, variances.mean(0))
    assert int(norm.num_batches_tracked) == 3
    assert norm.momentum == 0.3 and not model.training and not dropout.training


def test_recalibrate_bn_without_batchnorm_or_batches_changes_nothing_and_reads_nothing() -> None:
    model = _linear()
    batches = iter(_batches(2, 4, seed=0))
    recalibrate_bn(model, batches, torch.device("cpu"), contextlib.nullcontext)
    assert len(list(batches)) == 2  # not one batch read for a network with nothing to recalibrate
    norm = nn.BatchNorm1d(6)
    norm.running_mean.fill_(5.0)
    recalibrate_bn(norm, [], torch.device("cpu"), contextlib.nullcontext)
    assert torch.equal(norm.running_mean, torch.full((6,), 5.0))

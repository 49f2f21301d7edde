"""BatchNorm over the global batch of a data-parallel run, on any device and process-group backend.

Data-parallel training splits each global batch across workers; a plain BatchNorm in training mode then
normalizes each worker's share by that share's statistics, so the run no longer computes what one process
computes on the whole batch (Ioffe & Szegedy 2015, Alg. 1, takes the mini-batch mean and variance).
``torch.nn.SyncBatchNorm`` fixes that on GPUs only (this torch refuses CPU inputs, so gloo runs cannot use
it), and replacing modules would drop a supernet path's bindings to its shared weights.
:func:`use_global_batchnorm` therefore changes the class of every ``BatchNorm2d`` of a network in place
(same object, same parameters and bindings) to :class:`GlobalBatchNorm2d`, which, in training mode inside a
process group of more than one worker, sums each channel's count-weighted mean and then its squared
deviations from that mean over all workers (two differentiable all-reduces: the backward pass all-reduces
the gradients of the statistics, as the chain rule through a global mean asks), and updates the running
statistics as ``F.batch_norm`` would (momentum, unbiased variance). Every worker must hold an equal share
(the trainer checks it). Outside training, or alone, it is a plain ``BatchNorm2d``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn

__all__ = ["GlobalBatchNorm2d", "use_global_batchnorm"]


class _SumOverWorkers(torch.autograd.Function):
    """The sum of a tensor over all workers; its gradient is the sum of the workers' gradients (each worker's
    loss depends on every worker's input through the sum). ``torch.distributed.nn.functional.all_reduce`` does
    the same but is deprecated in this torch, for a private replacement."""

    @staticmethod
    def forward(ctx: object, t: torch.Tensor) -> torch.Tensor:
        t = t.clone()
        dist.all_reduce(t)
        return t

    @staticmethod
    def backward(ctx: object, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.clone()
        dist.all_reduce(grad)
        return grad


def _all_reduce(t: torch.Tensor) -> torch.Tensor:
    return _SumOverWorkers.apply(t)


class GlobalBatchNorm2d(nn.BatchNorm2d):
    """``BatchNorm2d`` whose training-mode statistics are those of the batch summed over all workers."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.training and dist.is_initialized() and dist.get_world_size() > 1):
            return super().forward(x)
        self._check_input_dim(x)
        world = dist.get_world_size()
        if self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
        momentum = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
        count = x.numel() // x.shape[1] * world  # equal shares: the global batch's values per channel
        dims = (0, 2, 3)
        mean = _all_reduce(x.sum(dims)) / count  # (C,)
        centred = x - mean[None, :, None, None]
        var = _all_reduce(centred.square().sum(dims)) / count  # biased, as the normalization uses
        y = centred * torch.rsqrt(var + self.eps)[None, :, None, None]
        if self.affine:
            y = y * self.weight[None, :, None, None] + self.bias[None, :, None, None]
        if self.track_running_stats and self.running_mean is not None:
            with torch.no_grad():
                self.running_mean.mul_(1 - momentum).add_(mean.detach(), alpha=momentum)
                unbiased = var.detach() * (count / max(count - 1, 1))
                self.running_var.mul_(1 - momentum).add_(unbiased, alpha=momentum)
        return y


def use_global_batchnorm(model: nn.Module) -> nn.Module:
    """Make every ``BatchNorm2d`` of ``model`` a :class:`GlobalBatchNorm2d` in place; returns ``model``."""
    for module in model.modules():
        if type(module) is nn.BatchNorm2d:
            module.__class__ = GlobalBatchNorm2d
    return model

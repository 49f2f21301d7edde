"""One worker's part of a data-parallel training step: its share of the global batch, averaged gradients.

Every worker holds the whole model, reads the same global batch and trains on its :meth:`Shard.take` share;
after the backward pass :meth:`Shard.average` all-reduces, in one flat buffer, the gradient of every parameter
that has one and the step's loss, and divides by the number of workers. Since the shares are equal, the mean
of the workers' mean losses is the global batch's mean loss, so the averaged gradient is the one a single
process computes on the whole batch (with BatchNorm over the global batch:
:mod:`evaluators.global_batchnorm`).

Only parameters with a gradient are reduced: a supernet step trains one path, every worker the same one, so
the set is the same on every worker, and the others keep ``grad = None`` as in a single process. This is why
``DistributedDataParallel`` is not used: with ``find_unused_parameters`` it reduces every bucket of the whole
supernet, unused parameters' zeros included, and walks the autograd graph each step; it also fills unused
gradients with zeros, and AdamW then decays and moves weights that a single process leaves alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn

__all__ = ["Shard"]


@dataclass(frozen=True)
class Shard:
    """Worker ``rank`` of ``world`` in an initialized ``torch.distributed`` process group."""

    rank: int
    world: int

    def take(self, batch: torch.Tensor) -> torch.Tensor:
        """This worker's equal share of a global ``batch`` (the global batch divides by ``world``)."""
        if len(batch) % self.world:
            raise ValueError(f"a batch of {len(batch)} does not split into {self.world} equal shares")
        n = len(batch) // self.world
        return batch[self.rank * n : (self.rank + 1) * n]

    def average(self, model: nn.Module, loss: float) -> float:
        """Average every gradient of ``model`` and ``loss`` over the workers, in place; returns the mean
        loss."""
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads] + [grads[0].new_tensor([loss])])
        dist.all_reduce(flat)
        flat /= self.world
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()
        return float(flat[-1])

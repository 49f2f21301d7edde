"""One worker's part of a data-parallel training step: its share of the global batch, averaged gradients.

Every worker holds the whole model, reads the same global batch and trains on its :meth:`Shard.take` share;
after the backward pass :meth:`Shard.average` all-reduces, in one flat buffer, the gradient of every parameter
that has one and the step's loss, and divides by the number of workers. Since the shares are equal, the mean
of the workers' mean losses is the global batch's mean loss, so the averaged gradient is the one a single
process computes on the whole batch (with BatchNorm over the global batch:
:mod:`evaluators.global_batchnorm`).

Only parameters with a gradient are reduced: a supernet step trains one path, every worker the same one, so
the set is the same on every worker, and the others keep ``grad = None`` as in a single process. Zero-filled
gradients for the rest would not be the same run: AdamW decays and moves a weight whose gradient is zero, and
leaves one without a gradient alone. ``DistributedDataParallel(find_unused_parameters=True)`` is no option
either: on the supernet, whose paths use views of the shared weights, its reducer stops the first backward
with "Encountered gradient which is undefined, but still allreduced by DDP reducer" (torch 2.14), and it
would reduce every bucket of the whole supernet. Measured on the coatnet space's ``cpu`` profile (2 gloo
processes, a global batch of 64): one step's path has 6.0 M of the supernet's 19.4 M parameters, and their
all-reduce took 30 ms of a 372 ms step (8%).
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

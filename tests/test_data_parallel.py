"""One data-parallel step without Ray (evaluators/data_parallel.py, evaluators/global_batchnorm.py): two gloo
processes, each on its half of a batch, give the gradients, BatchNorm outputs and running statistics of one
process on the whole batch, and leave unused parameters without a gradient."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from processes import free_port

from evaluators.data_parallel import Shard
from evaluators.global_batchnorm import GlobalBatchNorm2d, use_global_batchnorm


def _net() -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.GELU(), nn.Conv2d(8, 8, 1), nn.BatchNorm2d(8)
    )
    return net.double()  # float64: sums split two ways agree to rounding, far below the tolerance


def _batch() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return (
        torch.randn(8, 3, 6, 6, generator=g, dtype=torch.float64),
        torch.randn(8, 8, 6, 6, generator=g, dtype=torch.float64),
    )


def _step(net: nn.Module, x: torch.Tensor, target: torch.Tensor, shard: Shard | None) -> float:
    unused = nn.Linear(2, 2).double()  # a parameter outside the step, as a supernet's other paths
    net.add_module("unused", unused)
    net.train()
    out = net[:5](x)
    loss = F.mse_loss(out, target)
    loss.backward()
    value = loss.item()
    if shard is not None:
        value = shard.average(net, value)
    assert unused.weight.grad is None
    return value


def _outcome(net: nn.Module, loss: float) -> dict[str, object]:
    """The step's loss, every gradient and every buffer (the running statistics)."""
    grads = {f"grad.{n}": p.grad for n, p in net.named_parameters() if p.grad is not None}
    return {"loss": loss, **grads, **{f"buffer.{n}": b for n, b in net.named_buffers()}}


def _worker(rank: int, port: int, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        net = use_global_batchnorm(_net())
        assert isinstance(net[1], GlobalBatchNorm2d)
        shard = Shard(rank, 2)
        x, target = _batch()
        loss = _step(net, shard.take(x), shard.take(target), shard)
        state = {
            "loss": loss,
            **{f"grad.{n}": p.grad for n, p in net.named_parameters() if p.grad is not None},
        }
        state.update({f"buffer.{n}": b for n, b in net.named_buffers()})
        torch.save(state, Path(folder) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_two_gloo_processes_step_as_one(tmp_path: Path) -> None:
    # spawn, not fork: a fork after another test imported Ray (whose threads hold locks) can hang the children
    mp.start_processes(_worker, args=(free_port(), str(tmp_path)), nprocs=2, start_method="spawn")
    net = _net()
    x, target = _batch()
    loss = _step(net, x, target, None)
    expected = {
        "loss": loss,
        **{f"grad.{n}": p.grad for n, p in net.named_parameters() if p.grad is not None},
    }
    expected.update({f"buffer.{n}": b for n, b in net.named_buffers()})
    for rank in (0, 1):
        got = torch.load(tmp_path / f"rank{rank}.pt", weights_only=True)
        assert got.keys() == expected.keys()
        assert got["loss"] == pytest.approx(expected["loss"], abs=1e-12)
        for name in expected:
            if name != "loss":
                torch.testing.assert_close(got[name], expected[name], atol=1e-12, rtol=0, msg=name)


def test_shard_refuses_a_batch_that_does_not_split() -> None:
    with pytest.raises(ValueError, match="does not split into 3 equal shares"):
        Shard(0, 3).take(torch.zeros(8))

"""Data-parallel supernet training with Ray Train: :meth:`OneShotEvaluator.train` with ``workers`` > 1.

A ``ray.train.torch.TorchTrainer`` starts ``workers`` processes (on this machine or on the Ray cluster the
process is connected to) in one ``torch.distributed`` group: nccl on GPUs, gloo on CPUs. Each builds the whole
supernet from the same seed and runs :meth:`OneShotEvaluator.fit` as one
:class:`~evaluators.data_parallel.Shard`:

- every worker draws the same path sequence (the same ``random.Random(seed)``, advanced the same way, so
  the path of step t is a function of the seed and t, and a resumed run continues it from the checkpoint);
- every worker reads the same global batch (``batch_size`` of the config, the data order seeded alike) and
  trains on its equal share; the learning rate is the config's, set for that global batch;
- BatchNorm normalizes over the global batch (:mod:`evaluators.global_batchnorm`) and the gradients of the
  active path and the loss are averaged (:mod:`evaluators.data_parallel`), so the weights after each step are
  those of one process on the whole batch, up to float rounding (tests/test_oneshot_ray.py measures it).

After every epoch rank 0 reports the checkpoint (the same dict as ``supernet.pt``) through Ray Train's
checkpointing; when a worker or its node dies, Ray Train restarts the group (up to ``max_failures`` times) and
every worker resumes from the last reported epoch. The final checkpoint is returned to the caller, which
writes it to the run directory. Ray Train keeps its checkpoints under ``<run_dir>/supernet-ray/`` (a folder
every node must reach on a multi-node cluster) or, without a run directory, in a temporary folder.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluators.checkpoint import save_checkpoint
from evaluators.data_parallel import Shard
from evaluators.global_batchnorm import use_global_batchnorm

if TYPE_CHECKING:
    from evaluators.oneshot import OneShotEvaluator

__all__ = ["train_on_ray"]

_FILE = "supernet.pt"


def train_on_ray(
    evaluator: OneShotEvaluator,
    state: dict[str, Any] | None,
    *,
    max_failures: int = 3,
    callbacks: Sequence[Any] = (),
) -> dict[str, Any]:
    """Train ``evaluator``'s supernet from ``state`` (None: from the start) in ``evaluator.workers`` Ray Train
    workers; returns the last epoch's checkpoint dict. ``callbacks`` are Ray Train ``UserCallback``s."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    if evaluator.config.batch_size % evaluator.workers:
        raise ValueError(
            f"supernet-workers: a global batch of {evaluator.config.batch_size} does not split into "
            f"{evaluator.workers} equal shares; use a batch size that {evaluator.workers} divides"
        )
    use_gpu = evaluator.use_gpu
    resources = {"CPU": evaluator.cpus_per_worker, **({"GPU": 1} if use_gpu else {})}
    scratch = None
    if evaluator.checkpoint is not None:
        storage = evaluator.checkpoint.parent.resolve() / "supernet-ray"
    else:
        storage = Path(scratch := tempfile.mkdtemp(prefix="nas-supernet-ray-"))
    trainer = TorchTrainer(
        _worker,
        train_loop_config={
            "evaluator_type": type(evaluator),  # each worker builds its own evaluator of this class
            "space": evaluator.space,
            "profile": evaluator.profile,
            "data": evaluator.data,
            "seed": evaluator.seed,
            "config": evaluator.config,
            "state": state,
            "dtype": evaluator.dtype,
        },
        scaling_config=ScalingConfig(
            num_workers=evaluator.workers, use_gpu=use_gpu, resources_per_worker=resources
        ),
        run_config=RunConfig(
            name="train",
            storage_path=str(storage),
            failure_config=FailureConfig(max_failures=max_failures),
            checkpoint_config=CheckpointConfig(num_to_keep=2),
            callbacks=list(callbacks),
        ),
    )
    try:
        result = trainer.fit()
        if result.checkpoint is None:
            raise RuntimeError(f"Ray Train's supernet training under {storage} reported no checkpoint")
        with result.checkpoint.as_directory() as folder:
            return evaluator.read_checkpoint(Path(folder) / _FILE)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _worker(config: dict[str, Any]) -> None:
    """One Ray Train worker: the same supernet, its share of every batch, rank 0 reports checkpoints."""
    import ray.train
    import ray.train.torch

    context = ray.train.get_context()
    shard = Shard(context.get_world_rank(), context.get_world_size())
    evaluator: OneShotEvaluator = config["evaluator_type"](
        config["space"],
        config["profile"],
        config["data"],
        seed=config["seed"],
        config=config["config"],
        device=ray.train.torch.get_device(),
        dtype=config["dtype"],
    )
    evaluator.supernet.path_hook = use_global_batchnorm
    state = config["state"]
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:  # restarted after a failure: resume from the last reported epoch
        with checkpoint.as_directory() as folder:
            state = evaluator.read_checkpoint(Path(folder) / _FILE)

    def report(epoch_state: dict[str, Any]) -> None:
        metrics = {
            "epoch": epoch_state["epoch"],
            "train_loss": epoch_state["train_loss"],
            "train_seconds": epoch_state["train_seconds"],
            "pid": os.getpid(),
        }
        if shard.rank != 0:
            ray.train.report(metrics)
            return
        with tempfile.TemporaryDirectory() as folder:
            save_checkpoint(epoch_state, Path(folder) / _FILE)
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(folder))

    evaluator.fit(state, shard=shard, save=report)

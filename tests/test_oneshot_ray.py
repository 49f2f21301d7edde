"""Data-parallel supernet training with Ray Train (evaluators/oneshot_ray.py): two gloo workers on the CPU
compute the weights of one process on the same global batches and paths, and a killed worker resumes."""

from __future__ import annotations

import dataclasses
import os
import signal
from pathlib import Path

import pytest
import torch

from evaluators.data import DataSplit, load_dataset
from evaluators.oneshot import OneShotConfig, OneShotEvaluator
from search_spaces import get_space
from search_spaces.base import ProxyProfile

TINY = ProxyProfile(
    "tiny", img_size=32, width_mult=0.125, depth_mult=0.1, relax_strides=1, batch_size=32, val_samples=200
)
# 6 steps of a global batch of 32 (16 per worker) on the same uniformly sampled paths
CONFIG = OneShotConfig(epochs=2, train_samples=96, batch_size=32, bn_batches=2, warmup_epochs=0.0)


@pytest.fixture(scope="module")
def fashion() -> DataSplit:
    return load_dataset("fashion-mnist", img_size=32, train_samples=1000, val_size=300, seed=0)


@pytest.fixture(scope="module")
def local_ray():
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


# AdamW is checked in float64: in float32 its first steps turn the rounding noise of gradients that are zero
# in exact arithmetic (a pre-norm BatchNorm's bias, followed by a convolution and another BatchNorm) into
# steps of about the learning rate, however the sums are split: one process trained twice, on 1 and on 2
# threads, differs by 7.6e-4 after these 6 steps, and 2 workers by 1.05e-3 (see the README). SGD, whose step
# is proportional to the gradient, is checked in float32 at a learning rate of 0.1, where per-worker
# BatchNorm statistics instead of global ones would differ by 7.8e-4.
PRECISIONS = {
    "adamw-float64": (CONFIG, torch.float64),
    "sgd-float32": (dataclasses.replace(CONFIG, opt="sgd", lr=0.1), torch.float32),
}


def _evaluator(
    data: DataSplit, run_dir: Path | None, workers: int = 1, precision: str = "adamw-float64"
) -> OneShotEvaluator:
    config, dtype = PRECISIONS[precision]
    return OneShotEvaluator(
        get_space("coatnet"),
        TINY,
        data,
        seed=0,
        config=config,
        run_dir=run_dir,
        workers=workers,
        dtype=dtype,
    )


def _max_difference(a: OneShotEvaluator, b: OneShotEvaluator) -> tuple[float, str]:
    worst, where = 0.0, ""
    for (name, x), y in zip(a.supernet.state_dict().items(), b.supernet.state_dict().values(), strict=True):
        if x.is_floating_point():
            diff = float((x - y).abs().max()) if x.numel() else 0.0
            if diff > worst:
                worst, where = diff, name
        else:
            assert torch.equal(x, y), name  # num_batches_tracked: the same steps on the same paths
    return worst, where


@pytest.mark.slow  # about 100 s each here: Ray's start, two trainings and ten scorings
@pytest.mark.parametrize("precision", PRECISIONS)
def test_two_gloo_workers_train_the_weights_of_one_process(
    fashion: DataSplit, local_ray: None, tmp_path: Path, precision: str
) -> None:
    single = _evaluator(fashion, tmp_path / "single", precision=precision)
    single.train()
    parallel = _evaluator(fashion, tmp_path / "parallel", workers=2, precision=precision)
    info = parallel.train()
    assert info["workers"] == 2 and info["steps"] == single.info["steps"] == 6
    worst, where = _max_difference(single, parallel)
    assert worst <= 1e-5, f"{where} differs by {worst:.3g}"
    assert info["train_loss"] == pytest.approx(single.info["train_loss"], abs=1e-5)
    # the final checkpoint is in the run directory: a later search loads it without training
    again = _evaluator(fashion, tmp_path / "parallel", workers=2, precision=precision)
    assert again.train()["train_seconds_this_call"] == 0

    space = get_space("coatnet")
    archs = list(space.baselines().values())[:2]
    archs += [space.sample_random(seed) for seed in range(5 - len(archs))]
    for entry in archs:
        arch = getattr(entry, "arch", entry)
        a, b = single.evaluate(arch), parallel.evaluate(arch)
        assert a["top1"] == b["top1"], arch.key
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-4), arch.key


def test_refuses_a_batch_that_does_not_split(fashion: DataSplit) -> None:
    evaluator = _evaluator(fashion, None, workers=3)
    with pytest.raises(ValueError, match="does not split into 3 equal shares"):
        evaluator.train()


@pytest.mark.slow  # about 75 s here
def test_a_killed_worker_resumes_from_its_checkpoint(
    fashion: DataSplit, local_ray: None, tmp_path: Path
) -> None:
    from ray.train import UserCallback

    from evaluators.oneshot_ray import train_on_ray

    marker = tmp_path / "killed"  # the callback runs in Ray Train's controller: it tells us by a file

    class KillWorkerOneAfterEpochOne(UserCallback):
        """After epoch 1's checkpoint, SIGKILL worker 1's process (once)."""

        def after_report(self, run_context, metrics, checkpoint) -> None:
            if not marker.exists() and checkpoint is not None and metrics[1]["epoch"] == 1:
                marker.write_text(str(metrics[1]["pid"]))
                os.kill(metrics[1]["pid"], signal.SIGKILL)

    whole = _evaluator(fashion, None)
    whole.train()
    cut = _evaluator(fashion, tmp_path, workers=2)
    state = train_on_ray(cut, None, max_failures=1, callbacks=[KillWorkerOneAfterEpochOne()])
    assert marker.exists() and state["epoch"] == CONFIG.epochs and state["steps"] == whole.info["steps"]
    cut.supernet.load_state_dict(state["supernet"])
    worst, where = _max_difference(whole, cut)
    assert worst <= 1e-5, f"{where} differs by {worst:.3g} after the resume"

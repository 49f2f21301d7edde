"""The one-shot evaluator (evaluators/oneshot.py): trains a supernet on real Fashion-MNIST, checkpoints every
epoch, resumes bit-for-bit, refuses a checkpoint of other settings and scores architectures."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from evaluators import oneshot
from evaluators.data import DataSplit, load_dataset
from evaluators.oneshot import OneShotConfig, OneShotEvaluator, _ExtremeTrial
from nas.core.atomic import Held
from search_spaces import get_space
from search_spaces.base import ProxyProfile

# The coatnet space at 1/8 width and 1/10 depth: a supernet that trains a step in well under a second.
TINY = ProxyProfile(
    "tiny", img_size=32, width_mult=0.125, depth_mult=0.1, relax_strides=1, batch_size=32, val_samples=200
)
CONFIG = OneShotConfig(epochs=2, train_samples=192, batch_size=32, bn_batches=2)


@pytest.fixture(scope="module")
def fashion() -> DataSplit:
    return load_dataset("fashion-mnist", img_size=32, train_samples=1000, val_size=300, seed=0)


class _Killed(Exception):
    pass


def _die_after_first_epoch(epoch: int, metrics: dict[str, float]) -> None:
    raise _Killed  # epoch 1's checkpoint is written before the report


def _evaluator(data: DataSplit, run_dir: Path | None, config: OneShotConfig = CONFIG) -> OneShotEvaluator:
    return OneShotEvaluator(get_space("coatnet"), TINY, data, seed=0, config=config, run_dir=run_dir)


def test_trains_checkpoints_and_scores(fashion: DataSplit, tmp_path: Path) -> None:
    calls: list[int] = []
    evaluator = _evaluator(fashion, tmp_path)
    info = evaluator.train(report=lambda epoch, m: calls.append(epoch))
    assert calls == [1, 2] and (tmp_path / "supernet.pt").exists()
    assert info["steps"] == 2 * (192 // 32) and info["images"] == 2 * 192 and info["train_seconds"] > 0
    arch = get_space("coatnet").baselines()["CoAtNet-0"].arch
    scored = evaluator.evaluate(arch)
    assert 0 <= scored["top1"] <= 100 and scored["eval_seconds"] > 0
    assert scored["arch"] == TINY.apply(arch).key

    again = _evaluator(fashion, tmp_path)  # a finished checkpoint is loaded, not retrained
    assert again.train()["train_seconds_this_call"] == 0
    assert again.evaluate(arch)["top1"] == scored["top1"]


def test_resume_after_an_interruption_equals_an_uninterrupted_run(fashion: DataSplit, tmp_path: Path) -> None:
    whole = _evaluator(fashion, tmp_path / "whole")
    whole.train()

    cut = _evaluator(fashion, tmp_path / "cut")
    with pytest.raises(_Killed):
        cut.train(report=_die_after_first_epoch)
    resumed = _evaluator(fashion, tmp_path / "cut")
    info = resumed.train()
    assert info["steps"] == whole.info["steps"]
    for (name, a), b in zip(
        whole.supernet.state_dict().items(), resumed.supernet.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)


def test_a_second_process_waits_for_the_supernet_another_trains(
    fashion: DataSplit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two sessions of one study (two terminals, or machines sharing the folder) each trained the supernet
    from scratch at once, each charged for it. The second now waits for the first's, then loads it. (One
    ``flock`` per open file, so two threads of this process contend as two processes do.)"""
    blocked, sole = threading.Event(), oneshot.sole

    @contextlib.contextmanager
    def sole_noting_a_wait(path: Path) -> Iterator[None]:
        try:
            with sole(path):
                yield
        except Held:
            blocked.set()
            raise

    def wait_for_the_second(epoch: int, metrics: dict[str, float]) -> None:
        if epoch == 1:  # the first holds the supernet until the second has found it held
            assert blocked.wait(60)

    monkeypatch.setattr(oneshot, "_WAIT_SECONDS", 0.05)
    first, second = _evaluator(fashion, tmp_path), _evaluator(fashion, tmp_path)
    results: dict[str, Any] = {}
    trainer = threading.Thread(target=lambda: results.update(first=first.train(report=wait_for_the_second)))
    trainer.start()
    with monkeypatch.context() as patch:
        # until the first holds the lock: its holder writes its pid there once it has it (the file alone
        # exists a moment before: the second, started then, took the lock and the first waited)
        lock = tmp_path / "supernet.pt.lock"
        while not (lock.exists() and lock.read_text().strip()) and trainer.is_alive():
            time.sleep(0.01)
        patch.setattr(oneshot, "sole", sole_noting_a_wait)
        results["second"] = second.train()
    trainer.join()
    assert results["first"]["train_seconds_this_call"] > 0 and results["first"]["waited_seconds"] == 0
    assert results["second"]["train_seconds_this_call"] == 0  # loaded, not trained again
    assert results["second"]["waited_seconds"] > 0 and second.waited_seconds > 0
    assert "waiting for the supernet" in capsys.readouterr().err
    for (name, a), b in zip(
        first.supernet.state_dict().items(), second.supernet.state_dict().values(), strict=True
    ):
        torch.testing.assert_close(a, b, atol=0, rtol=0, msg=name)


def test_refuses_a_checkpoint_of_other_settings(fashion: DataSplit, tmp_path: Path) -> None:
    _evaluator(fashion, tmp_path, OneShotConfig(epochs=1, train_samples=64, batch_size=32)).train()
    other = _evaluator(fashion, tmp_path, OneShotConfig(epochs=1, train_samples=64, batch_size=32, lr=1e-3))
    with pytest.raises(ValueError, match="other settings"):
        other.train()


def test_scoring_settings_reuse_a_trained_supernet(fashion: DataSplit, tmp_path: Path) -> None:
    """bn_batches, finetune_steps and finetune_lr change how weights are scored, not how they are trained:
    a supernet trained under one setting is loaded, not retrained, under another; so is a checkpoint
    written when the settings still named them."""
    config = OneShotConfig(epochs=1, train_samples=64, batch_size=32, bn_batches=2)
    _evaluator(fashion, tmp_path, config).train()
    arch = get_space("coatnet").baselines()["CoAtNet-0"].arch
    finetuned = dataclasses.replace(config, bn_batches=1, finetune_steps=1, finetune_lr=1e-3)
    again = _evaluator(fashion, tmp_path, finetuned)
    assert again.train()["train_seconds_this_call"] == 0
    assert 0 <= again.evaluate(arch)["top1"] <= 100

    path = tmp_path / "supernet.pt"
    state = torch.load(path, weights_only=True)
    state["settings"]["config"].update(bn_batches=2, finetune_steps=0, finetune_lr=5e-4)  # the old form
    torch.save(state, path)
    assert _evaluator(fashion, tmp_path, finetuned).train()["train_seconds_this_call"] == 0


def test_sandwich_rule_with_distillation(fashion: DataSplit) -> None:
    space = get_space("coatnet")
    rng = random.Random(0)
    largest, smallest = space.sample(_ExtremeTrial(rng, True)), space.sample(_ExtremeTrial(rng, False))
    assert all(s.depth >= t.depth for s, t in zip(largest.stages[-2:], smallest.stages[-2:], strict=True))
    assert largest.stages[-1].width == 1536 and smallest.stages[-1].width == 512
    config = OneShotConfig(epochs=1, train_samples=64, batch_size=32, sandwich=True, bn_batches=1)
    info = _evaluator(fashion, None, config).train()
    assert info["images"] == 64 * 3  # largest, smallest and one random path per step
    assert info["train_loss"] == info["train_loss"]  # finite, not NaN


def test_finetuning_a_path_in_fp16_goes_through_the_loss_scaler(
    fashion: DataSplit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under fp16 autocast (a GPU without bf16) the scoring's fine-tune scales its loss as training does:
    unscaled fp16 gradients underflow. On the CPU the same path runs through a CPU ``GradScaler``."""
    import evaluators.oneshot as oneshot

    scaled: list[float] = []

    class RecordingScaler(torch.amp.GradScaler):
        def scale(self, outputs: torch.Tensor) -> torch.Tensor:
            scaled.append(float(outputs.detach()))
            return super().scale(outputs)

    monkeypatch.setattr(
        oneshot, "grad_scaler", lambda dtype: RecordingScaler("cpu") if dtype == torch.float16 else None
    )
    config = OneShotConfig(epochs=1, train_samples=64, batch_size=32, bn_batches=1, finetune_steps=2)
    evaluator = _evaluator(fashion, tmp_path, config)
    evaluator.train()
    evaluator.amp_dtype = torch.float16  # as on a GPU without bf16
    scored = evaluator.evaluate(get_space("coatnet").baselines()["CoAtNet-0"].arch)
    assert len(scaled) == 2 and all(loss == loss for loss in scaled)  # both fine-tune steps, finite
    assert 0 <= scored["top1"] <= 100


def test_an_fp16_supernet_resumes_with_its_loss_scale(
    fashion: DataSplit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint keeps fp16's loss scale: a resumed run scales as an uninterrupted one (a scaler that
    restarted at its initial scale would skip or mis-scale steps the uninterrupted run took)."""
    import evaluators.oneshot as oneshot

    def scaler(dtype: torch.dtype | None) -> torch.amp.GradScaler | None:  # doubles after every good step
        return (
            torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=1) if dtype == torch.float16 else None
        )

    monkeypatch.setattr(oneshot, "grad_scaler", scaler)
    config = OneShotConfig(epochs=2, train_samples=64, batch_size=32, bn_batches=1)

    def fp16(run_dir: Path) -> OneShotEvaluator:
        evaluator = _evaluator(fashion, run_dir, config)
        evaluator.amp_dtype = torch.float16  # as on a GPU without bf16
        return evaluator

    fp16(tmp_path / "whole").train()

    with pytest.raises(_Killed):
        fp16(tmp_path / "cut").train(report=_die_after_first_epoch)
    fp16(tmp_path / "cut").train()
    whole, cut = (torch.load(tmp_path / d / "supernet.pt", weights_only=True) for d in ("whole", "cut"))
    assert whole["scaler"]["scale"] > 8.0  # it grew: the steps were taken
    assert cut["scaler"]["scale"] == whole["scaler"]["scale"]

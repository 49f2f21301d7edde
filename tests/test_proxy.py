"""Proxy training (evaluators/proxy.py): it learns real Fashion-MNIST, is repeatable, reports every epoch and
stops loudly on divergence."""

from __future__ import annotations

from dataclasses import replace

import pytest

from evaluators.amp import amp_dtype
from evaluators.complexity import pick_device
from evaluators.data import DataSplit, load_dataset
from evaluators.hyperparams import MAX_LR
from evaluators.proxy import ProxyEvaluator, TrainConfig, TrainingDiverged, train_proxy
from nas.core.arch import Arch, Stage, Stem
from search_spaces import get_space
from search_spaces.base import ProxyProfile

# A two-stage hybrid small enough for several runs per test file: one MBConv, one relative-attention block.
TINY = Arch(Stem("conv", 16), (Stage("mbconv", "conv", 1, 16), Stage("transformer", "rel", 1, 32)))
TINY_PROFILE = ProxyProfile("tiny", img_size=32, epochs=1, batch_size=64, train_samples=512)


@pytest.fixture(scope="module")
def fashion() -> DataSplit:
    return load_dataset("fashion-mnist", img_size=32, train_samples=2000, val_size=500, seed=0)


def test_coatnet0_cpu_proxy_beats_chance_and_reports_each_epoch(fashion: DataSplit) -> None:
    space = get_space("coatnet")
    # the cpu profile's network and image size; batch 32 gives the 2000 samples enough steps to learn in
    profile = replace(space.profile("cpu"), epochs=2, train_samples=2000, batch_size=32, val_samples=None)
    calls: list[tuple[int, dict[str, float]]] = []
    arch = space.baselines()["CoAtNet-0"].arch
    result = train_proxy(arch, profile, fashion, seed=0, report=lambda e, m: calls.append((e, m)))
    assert [epoch for epoch, _ in calls] == [1, 2]
    assert all({"top1", "loss", "train_loss"} <= set(m) for _, m in calls)
    assert result["top1"] == calls[-1][1]["top1"] > 50  # chance is 10%
    # the one device rule: CUDA with autocast where there is a GPU, else the CPU in full precision
    device = pick_device()
    assert result["epochs"] == 2 and result["device"] == str(device)
    amp = amp_dtype(device)
    assert result["amp"] == ("fp32" if amp is None else str(amp).removeprefix("torch."))
    assert result["params"] > 0 and result["images_per_second"] > 0 and result["train_seconds"] > 0
    assert result["arch"] == profile.apply(arch).key


def test_same_seed_same_result_other_seed_differs(fashion: DataSplit) -> None:
    evaluator = ProxyEvaluator(TINY_PROFILE, fashion, seed=0)
    first = evaluator.evaluate(TINY)
    again = train_proxy(TINY, TINY_PROFILE, fashion, seed=0)
    other = train_proxy(TINY, TINY_PROFILE, fashion, seed=1)
    assert (first["top1"], first["loss"]) == (again["top1"], again["loss"])
    assert other["loss"] != first["loss"]
    assert 0 <= first["top1"] <= 100


def test_divergence_raises_with_where_and_loss(fashion: DataSplit) -> None:
    config = TrainConfig(opt="sgd", lr=MAX_LR, warmup_epochs=0)
    with pytest.raises(TrainingDiverged, match=r"loss (nan|inf) at epoch 1, step \d+") as err:
        train_proxy(TINY, TINY_PROFILE, fashion, seed=0, config=config)
    assert err.value.epoch == 1 and err.value.step >= 1


def test_report_exception_stops_the_run(fashion: DataSplit) -> None:
    class Pruned(Exception):
        pass

    def prune(epoch: int, metrics: dict[str, float]) -> None:
        raise Pruned(epoch)

    with pytest.raises(Pruned):
        train_proxy(TINY, replace(TINY_PROFILE, epochs=3, train_samples=128), fashion, report=prune)


def test_profile_and_data_must_agree(fashion: DataSplit) -> None:
    with pytest.raises(ValueError, match="data is at 32 px but profile 'tiny' trains at 64"):
        train_proxy(TINY, replace(TINY_PROFILE, img_size=64), fashion)
    with pytest.raises(ValueError, match="asked for 5000 training samples; the split holds 2000"):
        train_proxy(TINY, replace(TINY_PROFILE, train_samples=5000), fashion)


def test_bn_recalibration_changes_what_is_measured_not_what_is_trained(fashion: DataSplit) -> None:
    """Recomputing BatchNorm's statistics before each validation (PreciseBN) reads images from its own
    batches and draws no random numbers: the second epoch trains exactly as without it (drop-path and
    augmentation draw from the generators), while what each validation measures changes."""
    profile = replace(TINY_PROFILE, epochs=2)
    runs = {}
    for batches in (0, 2):
        config = TrainConfig(augment=True, drop_path_rate=0.1, bn_recalibration=batches)
        epochs: list[dict[str, float]] = []
        train_proxy(TINY, profile, fashion, seed=0, config=config, report=lambda _, m, e=epochs: e.append(m))
        runs[batches] = epochs
    assert [m["train_loss"] for m in runs[2]] == [m["train_loss"] for m in runs[0]]
    assert all(a["loss"] != b["loss"] for a, b in zip(runs[2], runs[0], strict=True))

"""A single-fidelity proxy run with an epoch checkpoint (evaluators/proxy.py ``checkpoint=``): killed after an
epoch, it continues where it stopped and ends as the uninterrupted run does, bit for bit on the CPU; a
checkpoint of another run is refused in one sentence."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from evaluators.data import DataSplit, load_dataset
from evaluators.proxy import ADDED_FIELDS, Fidelity, TrainConfig, TrainingStopped, train_proxy
from nas.core.arch import Arch, Stage, Stem
from search_spaces.base import ProxyProfile

# one block of each kind that draws from torch's generator in training (drop-path) or reads BatchNorm stats
TINY = Arch(Stem("conv", 16), (Stage("mbconv", "conv", 1, 16), Stage("transformer", "rel", 1, 32)))
PROFILE = ProxyProfile("tiny", img_size=32, epochs=3, batch_size=64, train_samples=256, val_samples=200)
# augmentation draws from the batches' generator and drop-path from torch's: both must be restored
CONFIG = TrainConfig(augment=True, drop_path_rate=0.2)
METRICS = ("top1", "loss", "train_loss")


class Killed(Exception):
    pass


@pytest.fixture(scope="module")
def fashion() -> DataSplit:
    return load_dataset("fashion-mnist", img_size=32, train_samples=600, val_size=200, seed=0)


def _kill_at(epoch: int):
    def report(at: int, metrics: dict[str, float]) -> None:
        if at == epoch:  # before that epoch's checkpoint: it is lost, as a kill inside it would lose it
            raise Killed(at)

    return report


def _train(fashion: DataSplit, **kwargs):
    return train_proxy(TINY, PROFILE, fashion, seed=3, config=CONFIG, **kwargs)


@pytest.fixture(scope="module")
def straight(fashion: DataSplit) -> dict:
    return _train(fashion)


@pytest.mark.parametrize("killed_at", [1, 2, 3])
def test_a_killed_run_continues_to_the_uninterrupted_result(
    fashion: DataSplit, straight: dict, killed_at: int, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(Killed):
        _train(fashion, checkpoint=checkpoint, report=_kill_at(killed_at))
    assert checkpoint.exists() == (killed_at > 1)  # the first epoch's validation came before its save
    out = _train(fashion, checkpoint=checkpoint)
    assert {k: out[k] for k in METRICS} == {k: straight[k] for k in METRICS}
    assert out["resumed_epochs"] == killed_at - 1 and out["epochs"] == 3
    assert (out["prior_seconds"] > 0) == (killed_at > 1) and out["prior_cpu_seconds"] >= 0
    state = torch.load(checkpoint, weights_only=True)
    assert state["epoch"] == 3 and state["so_far"]["images"] == 3 * 256


def test_a_killed_run_recalibrating_batchnorm_continues_to_the_uninterrupted_result(
    fashion: DataSplit, tmp_path: Path
) -> None:
    """Recomputing the statistics before each validation draws nothing a continued run would miss: killed in
    its last epoch, the run continues from the second's checkpoint to the uninterrupted result."""
    config = replace(CONFIG, bn_recalibration=2)
    straight = train_proxy(TINY, PROFILE, fashion, seed=3, config=config)
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(Killed):
        train_proxy(TINY, PROFILE, fashion, seed=3, config=config, checkpoint=checkpoint, report=_kill_at(3))
    out = train_proxy(TINY, PROFILE, fashion, seed=3, config=config, checkpoint=checkpoint)
    assert out["resumed_epochs"] == 2
    assert {k: out[k] for k in METRICS} == {k: straight[k] for k in METRICS}


def test_a_checkpoint_saved_before_a_config_field_existed_continues_as_that_fields_old_value(
    fashion: DataSplit, straight: dict, tmp_path: Path
) -> None:
    """A training stopped under an older version (its checkpoint's config lacks ``bn_recalibration``)
    continues under today's default, which trains as it did; under another value it is refused."""
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(Killed):
        _train(fashion, checkpoint=checkpoint, report=_kill_at(3))
    state = torch.load(checkpoint, weights_only=True)
    config = {k: v for k, v in state["run"]["config"].items() if k not in ADDED_FIELDS}
    torch.save({**state, "run": {**state["run"], "config": config}}, checkpoint)
    out = _train(fashion, checkpoint=checkpoint)
    assert out["resumed_epochs"] == 2 and {k: out[k] for k in METRICS} == {k: straight[k] for k in METRICS}
    torch.save({**state, "run": {**state["run"], "config": config}}, checkpoint)
    recalibrating = replace(CONFIG, bn_recalibration=2)
    with pytest.raises(ValueError, match=r"is of another run \(config differ\)"):
        train_proxy(TINY, PROFILE, fashion, seed=3, config=recalibrating, checkpoint=checkpoint)


@pytest.mark.parametrize("recalibration", [0, 2])
def test_how_often_a_run_validates_changes_neither_its_result_nor_its_checkpoint(
    fashion: DataSplit, straight: dict, recalibration: int, tmp_path: Path
) -> None:
    """``eval_every`` sets when a run validates, not what it measures (``UNMEASURED``): validated after its
    last epoch only, a run ends at the metrics of one validated every epoch, BatchNorm recalibration
    included; it reports every epoch (the train loss, and the validation's metrics where it validated); and a
    checkpoint saved under one value continues under another."""
    config = replace(CONFIG, bn_recalibration=recalibration)
    every = straight if not recalibration else train_proxy(TINY, PROFILE, fashion, seed=3, config=config)
    reports: list[tuple[int, set[str]]] = []
    sparse = replace(config, eval_every=2)
    out = train_proxy(
        TINY, PROFILE, fashion, seed=3, config=sparse, report=lambda e, m: reports.append((e, set(m)))
    )
    assert {k: out[k] for k in METRICS} == {k: every[k] for k in METRICS}
    assert [(e, "top1" in m, "train_loss" in m) for e, m in reports] == [
        (1, False, True), (2, True, True), (3, True, True)
    ]  # fmt: skip
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(Killed):
        train_proxy(TINY, PROFILE, fashion, seed=3, config=config, checkpoint=checkpoint, report=_kill_at(3))
    last_only = replace(config, eval_every=PROFILE.epochs + 1)
    out = train_proxy(TINY, PROFILE, fashion, seed=3, config=last_only, checkpoint=checkpoint)
    assert out["resumed_epochs"] == 2 and {k: out[k] for k in METRICS} == {k: every[k] for k in METRICS}


def test_a_run_told_to_stop_stops_after_an_epoch_and_continues_to_the_same_result(
    fashion: DataSplit, straight: dict, tmp_path: Path
) -> None:
    checkpoint, asked = tmp_path / "run.pt", []

    def stop() -> bool:
        asked.append(torch.load(checkpoint, weights_only=True)["epoch"])  # asked once the epoch is saved
        return len(asked) == 2

    with pytest.raises(TrainingStopped, match=r"stopped after epoch 2 of 3; .*run.pt continues it") as err:
        _train(fashion, checkpoint=checkpoint, stop=stop)
    assert asked == [1, 2] and (err.value.epoch, err.value.epochs) == (2, 3)
    out = _train(fashion, checkpoint=checkpoint, stop=lambda: True)  # not asked after the last epoch
    assert out["resumed_epochs"] == 2 and {k: out[k] for k in METRICS} == {k: straight[k] for k in METRICS}
    with pytest.raises(ValueError, match="pass one with stop"):
        _train(fashion, stop=lambda: True)


def test_a_complete_checkpoint_returns_its_result_untrained(fashion: DataSplit, tmp_path: Path) -> None:
    checkpoint = tmp_path / "run.pt"
    first = _train(fashion, checkpoint=checkpoint)
    assert first["resumed_epochs"] == 0 and first["prior_seconds"] == 0
    again = _train(fashion, checkpoint=checkpoint)
    assert again["resumed_epochs"] == 3
    keys = (*METRICS, "train_seconds", "eval_seconds", "images_per_second")
    assert {k: again[k] for k in keys} == {k: first[k] for k in keys}
    assert again["prior_seconds"] >= first["train_seconds"] + first["eval_seconds"]


def test_without_a_checkpoint_the_result_names_no_resume(straight: dict) -> None:
    assert not {"resumed_epochs", "prior_seconds", "prior_cpu_seconds"} & set(straight)


@pytest.mark.parametrize(
    ("change", "differ"),
    [
        ({"seed": 4}, "seed"),
        ({"profile": replace(PROFILE, epochs=4)}, "schedule"),
        ({"config": replace(CONFIG, lr=2e-3)}, "config"),
        ({"arch": Arch(TINY.stem, (TINY.stages[0], replace(TINY.stages[1], mixer="ext")))}, "arch"),
    ],
)
def test_a_checkpoint_of_another_run_is_refused(
    fashion: DataSplit, tmp_path: Path, change: dict, differ: str
) -> None:
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(Killed):
        _train(fashion, checkpoint=checkpoint, report=_kill_at(3))
    run = {"arch": TINY, "profile": PROFILE, "seed": 3, "config": CONFIG, **change}
    with pytest.raises(ValueError, match=rf"is of another run \({differ} differ\): remove it") as err:
        train_proxy(
            run["arch"],
            run["profile"],
            fashion,
            seed=run["seed"],
            config=run["config"],
            checkpoint=checkpoint,
        )
    assert "\n" not in str(err.value)


def test_a_file_that_is_no_checkpoint_is_refused(fashion: DataSplit, tmp_path: Path) -> None:
    junk = tmp_path / "run.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot be read"):
        _train(fashion, checkpoint=junk)
    torch.save({"epoch": 1}, junk)
    with pytest.raises(ValueError, match="lacks 'run'"):
        _train(fashion, checkpoint=junk)
    torch.save(
        dict.fromkeys(
            ("run", "epoch", "model", "optimizer", "scaler", "stream", "rng", "cuda_rng", "so_far"), "x"
        ),
        junk,
    )
    with pytest.raises(
        ValueError, match=r"is of another run \(arch, config, schedule, seed, steps_per_epoch differ\)"
    ):
        _train(fashion, checkpoint=junk)


def test_a_tampered_checkpoint_of_this_run_is_refused(fashion: DataSplit, tmp_path: Path) -> None:
    checkpoint = tmp_path / "run.pt"
    with pytest.raises(Killed):
        _train(fashion, checkpoint=checkpoint, report=_kill_at(3))
    state = torch.load(checkpoint, weights_only=True)
    for key, value in (("so_far", {"images": 1}), ("model", {"stem.weight": torch.zeros(1)})):
        torch.save({**state, key: value}, checkpoint)
        with pytest.raises(ValueError, match=r"does not fit this run") as err:
            _train(fashion, checkpoint=checkpoint)
        assert "\n" not in str(err.value)


def test_a_ladder_span_takes_no_second_checkpoint(fashion: DataSplit, tmp_path: Path) -> None:
    span = Fidelity(images=128, top_images=256, save=tmp_path / "rung0.pt")
    with pytest.raises(ValueError, match="keeps its own checkpoint"):
        _train(fashion, fidelity=span, checkpoint=tmp_path / "run.pt")

"""Full training of one architecture (evaluators/train.py, `nas train`): learns, checkpoints every epoch,
resumes to exactly the weights of an uninterrupted run, and ends with a model file that reloads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from evaluators.data import DataSplit, load_dataset
from evaluators.train import FullTrainConfig, TrainStatus, train_arch
from nas import train_view
from nas.cli import app
from nas.create import create_model
from search_spaces import get_space

PROFILE = get_space("coatnet").profile("cpu")
CONFIG = FullTrainConfig(epochs=2, batch_size=32, train_samples=512, warmup_epochs=0.2)


@pytest.fixture(scope="module")
def fashion() -> DataSplit:
    return load_dataset("fashion-mnist", img_size=32, train_samples=600, val_size=300, seed=0)


ARCH = get_space("coatnet").baselines()["CoAtNet-0"].arch


class Killed(Exception):
    pass


def _same_weights(a: Path, b: Path) -> None:
    sa, sb = create_model(a / "model.pt").state_dict(), create_model(b / "model.pt").state_dict()
    for name, tensor in sa.items():
        torch.testing.assert_close(tensor, sb[name], atol=0, rtol=0, msg=name)


def test_trains_and_resumes_bit_for_bit(fashion: DataSplit, tmp_path: Path) -> None:
    epochs: list[int] = []
    statuses: list[TrainStatus] = []

    def batch(status: TrainStatus) -> None:  # the folder and a first checkpoint exist before the first batch
        assert (tmp_path / "whole" / "checkpoint.pt").exists()
        statuses.append(status)

    whole = train_arch(
        ARCH,
        PROFILE,
        fashion,
        tmp_path / "whole",
        config=CONFIG,
        report=lambda e, m: epochs.append(e),
        progress=batch,
    )
    assert epochs == [1, 2] and whole["top1"] > 30  # 10 classes: chance is 10 %
    steps = 512 // 32
    assert [(s.epoch, s.step) for s in statuses] == [(e, b) for e in (1, 2) for b in range(1, steps + 1)]
    assert all(s.images == 32 * s.step and s.images_per_second > 0 for s in statuses)
    assert statuses[0].seconds_left > statuses[0].epoch_seconds_left > 0 and statuses[-1].seconds_left == 0

    def die(epoch: int, metrics: dict[str, float]) -> None:
        raise Killed

    with pytest.raises(Killed):
        train_arch(ARCH, PROFILE, fashion, tmp_path / "cut", config=CONFIG, report=die)
    with pytest.raises(ValueError, match="--resume"):
        train_arch(ARCH, PROFILE, fashion, tmp_path / "cut", config=CONFIG)
    resumed = train_arch(ARCH, PROFILE, fashion, tmp_path / "cut", config=CONFIG, resume=True)
    assert resumed["top1"] == whole["top1"]
    _same_weights(tmp_path / "whole", tmp_path / "cut")


def test_a_run_killed_in_its_first_epoch_resumes_from_its_first_checkpoint(
    fashion: DataSplit, tmp_path: Path
) -> None:
    config = dataclasses.replace(CONFIG, epochs=1)
    whole = train_arch(ARCH, PROFILE, fashion, tmp_path / "whole", config=config)

    def die(status: TrainStatus) -> None:
        if status.step == 3:
            raise Killed

    with pytest.raises(Killed):
        train_arch(ARCH, PROFILE, fashion, tmp_path / "cut", config=config, progress=die)
    resumed = train_arch(ARCH, PROFILE, fashion, tmp_path / "cut", config=config, resume=True)
    assert resumed["top1"] == whole["top1"]
    _same_weights(tmp_path / "whole", tmp_path / "cut")


def test_cli_trains_an_arch_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    arch_file = tmp_path / "arch.json"
    arch_file.write_text(ARCH.to_json())
    out = tmp_path / "run"
    small = ["--epochs", "1", "--train-samples", "256", "--batch-size", "32", "--out", str(out)]
    monkeypatch.setattr(train_view, "PLAIN_SECONDS", 1e-6)  # off a terminal: a line per batch at most
    result = CliRunner().invoke(app, ["train", str(arch_file), *small])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("epoch 1/1 batch ")]
    assert len(lines) == 8 and lines[-1].startswith("epoch 1/1 batch 8/8: "), result.output
    assert all(" images/s, loss " in line and "; epoch ends in " in line for line in lines)
    assert "epoch 1/1: top-1 " in result.output
    assert (out / "model.pt").exists() and (out / "history.json").exists()
    again = CliRunner().invoke(app, ["train", str(arch_file), "--epochs", "1", "--out", str(out)])
    assert again.exit_code == 2 and "--resume" in again.output

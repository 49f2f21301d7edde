"""Full training of one architecture (evaluators/train.py, `nas train`): learns, checkpoints every epoch,
resumes to exactly the weights of an uninterrupted run, and ends with a model file that reloads."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from evaluators.data import DataSplit, load_dataset
from evaluators.train import FullTrainConfig, train_arch
from nas.cli import app
from nas.create import create_model
from search_spaces import get_space

PROFILE = get_space("coatnet").profile("cpu")
CONFIG = FullTrainConfig(epochs=2, batch_size=32, train_samples=512, warmup_epochs=0.2)


@pytest.fixture(scope="module")
def fashion() -> DataSplit:
    return load_dataset("fashion-mnist", img_size=32, train_samples=600, val_size=300, seed=0)


ARCH = get_space("coatnet").baselines()["CoAtNet-0"].arch


def test_trains_and_resumes_bit_for_bit(fashion: DataSplit, tmp_path: Path) -> None:
    epochs: list[int] = []
    whole = train_arch(
        ARCH, PROFILE, fashion, tmp_path / "whole", config=CONFIG, report=lambda e, m: epochs.append(e)
    )
    assert epochs == [1, 2] and whole["top1"] > 30  # 10 classes: chance is 10 %

    class Killed(Exception):
        pass

    def die(epoch: int, metrics: dict[str, float]) -> None:
        raise Killed

    with pytest.raises(Killed):
        train_arch(ARCH, PROFILE, fashion, tmp_path / "cut", config=CONFIG, report=die)
    with pytest.raises(ValueError, match="--resume"):
        train_arch(ARCH, PROFILE, fashion, tmp_path / "cut", config=CONFIG)
    resumed = train_arch(ARCH, PROFILE, fashion, tmp_path / "cut", config=CONFIG, resume=True)
    assert resumed["top1"] == whole["top1"]
    a = create_model(tmp_path / "whole" / "model.pt").state_dict()
    b = create_model(tmp_path / "cut" / "model.pt").state_dict()
    for name, tensor in a.items():
        torch.testing.assert_close(tensor, b[name], atol=0, rtol=0, msg=name)


def test_cli_trains_an_arch_file(tmp_path: Path) -> None:
    arch_file = tmp_path / "arch.json"
    arch_file.write_text(ARCH.to_json())
    out = tmp_path / "run"
    small = ["--epochs", "1", "--train-samples", "256", "--batch-size", "32", "--out", str(out)]
    result = CliRunner().invoke(app, ["train", str(arch_file), *small])
    assert result.exit_code == 0, result.output
    assert (out / "model.pt").exists() and (out / "history.json").exists()
    again = CliRunner().invoke(app, ["train", str(arch_file), "--epochs", "1", "--out", str(out)])
    assert again.exit_code == 2 and "--resume" in again.output

"""Full training of one architecture (evaluators/train.py, `nas train`): learns, checkpoints every epoch,
resumes to exactly the weights of an uninterrupted run, and ends with a model file that reloads."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from evaluators.augment import RandAugmentBatch
from evaluators.checkpoint import load_checkpoint
from evaluators.data import DataSplit, load_dataset
from evaluators.train import RECIPES, TRAIN_LOCK, FullTrainConfig, TrainStatus, train_arch
from nas.cli import train_view
from nas.cli.commands import app
from nas.core.create import create_model
from search_spaces import get_space

PROFILE = get_space("coatnet").profile("cpu")
CONFIG = FullTrainConfig(epochs=2, batch_size=32, train_samples=512, warmup_epochs=0.2)


@pytest.fixture(scope="module")
def fashion() -> DataSplit:
    return load_dataset("fashion-mnist", img_size=32, train_samples=600, val_size=300, seed=0)


ARCH = get_space("coatnet").baselines()["CoAtNet-0"].arch


class Killed(Exception):
    pass


def _same_weights(a: Path, b: Path, name: str = "model.pt") -> None:
    sa, sb = create_model(a / name).state_dict(), create_model(b / name).state_dict()
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
    config = dataclasses.replace(CONFIG, epochs=1, train_samples=128)
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
    # scored once, at the end, on the official test split (the held-out training images only watch the run)
    scored = json.loads((out / "history.json").read_text())["test"]
    assert scored["test_images"] == 10_000 and scored["test_set"]["test"] == 10_000
    said = " ".join(result.output.split())
    assert f"test top-1 {scored['test_top1']:.2f}% on the 10,000 images of the test split" in said
    again = CliRunner().invoke(app, ["train", str(arch_file), "--epochs", "1", "--out", str(out)])
    assert again.exit_code == 2 and "--resume" in again.output


def test_cli_scores_on_the_held_out_images_only_when_asked_and_says_what_they_are(tmp_path: Path) -> None:
    arch_file = tmp_path / "arch.json"
    arch_file.write_text(ARCH.to_json())
    small = ["--epochs", "1", "--train-samples", "64", "--batch-size", "32", "--dataset", "synthetic"]
    result = CliRunner().invoke(
        app, ["train", str(arch_file), *small, "--score-on", "val", "--out", str(tmp_path / "v")]
    )
    assert result.exit_code == 0, result.output
    assert "may have seen; --score-on test gives the unbiased figure" in " ".join(result.output.split())
    assert "test" not in json.loads((tmp_path / "v" / "history.json").read_text())
    for extra, says in (
        (["--score-on", "train"], "score-on: test or val, not 'train'"),
        (["--score-on", "val", "--test-folder", str(tmp_path)], "test-folder: it names the test split"),
        (["--test-folder", str(tmp_path)], "names the test images of an imagefolder:PATH dataset"),
    ):
        bad = CliRunner().invoke(app, ["train", str(arch_file), *small, *extra, "--out", str(tmp_path / "x")])
        assert bad.exit_code == 2 and says in " ".join(bad.output.split()), bad.output
        assert "Traceback" not in bad.output and not (tmp_path / "x").exists()


def test_an_exported_network_trains_under_its_own_spaces_profile(tmp_path: Path) -> None:
    """``nas train`` scaled every network by coatnet's profile unless told ``--space``: a sasa export
    trained as another network (depth 0.2 of the search's 0.5), with no word of it."""
    from nas.cli.commands import _space_of

    sasa = get_space("sasa").baselines()["ResNet-26 conv"].arch
    assert (_space_of(sasa), _space_of(ARCH)) == ("sasa", "coatnet")
    arch_file = tmp_path / "arch.json"
    arch_file.write_text(sasa.to_json())
    small = ["--epochs", "1", "--train-samples", "32", "--batch-size", "32", "--out", str(tmp_path / "run")]
    result = CliRunner().invoke(app, ["train", str(arch_file), *small])
    searched = get_space("sasa").profile("cpu").apply(sasa).key
    said = " ".join(result.output.split())  # as one line, however the console wrapped it
    assert result.exit_code == 0 and f"training {searched} (sasa cpu profile" in said, result.output


def test_coatnet_recipe_trains_and_resumes_bit_for_bit(fashion: DataSplit, tmp_path: Path) -> None:
    config = FullTrainConfig(
        **{**RECIPES["coatnet"], "ema_decay": 0.9},
        epochs=2,
        batch_size=32,
        train_samples=128,
        warmup_epochs=0.2,
    )
    whole = train_arch(ARCH, PROFILE, fashion, tmp_path / "whole", config=config)
    assert {"top1", "top1_ema"} <= whole.keys() and math.isfinite(whole["train_loss"])

    def die(epoch: int, metrics: dict[str, float]) -> None:
        raise Killed

    with pytest.raises(Killed):
        train_arch(ARCH, PROFILE, fashion, tmp_path / "cut", config=config, report=die)
    state = load_checkpoint(tmp_path / "cut" / "checkpoint.pt", ["ema"])  # weights only, as every checkpoint
    assert state["epoch"] == 1 and state["ema"] is not None
    resumed = train_arch(ARCH, PROFILE, fashion, tmp_path / "cut", config=config, resume=True)
    assert (resumed["top1"], resumed["top1_ema"]) == (whole["top1"], whole["top1_ema"])
    _same_weights(tmp_path / "whole", tmp_path / "cut")
    _same_weights(tmp_path / "whole", tmp_path / "cut", "model_ema.pt")
    # the EMA is not the trained weights: it averages them
    raw = create_model(tmp_path / "whole" / "model.pt").state_dict()
    ema = create_model(tmp_path / "whole" / "model_ema.pt").state_dict()
    assert any(not torch.equal(raw[k], ema[k]) for k in raw if raw[k].is_floating_point())


def test_randaugment_on_one_channel_batches(fashion: DataSplit) -> None:
    images = fashion.train.images[:16]  # uint8 (16, 1, 32, 32), as the batches hold them
    assert images.dtype == torch.uint8 and images.shape[1] == 1
    augment = RandAugmentBatch(RECIPES["coatnet"]["randaugment"], fashion.mean, fashion.img_size)
    out = augment(images, seed=1)
    assert out.shape == images.shape and out.dtype == torch.uint8
    assert torch.equal(out, augment(images, seed=1)) and not torch.equal(out, augment(images, seed=2))
    assert (out != images).flatten(1).any(1).float().mean() > 0.5  # most images changed
    # a geometric op fills what it uncovers with the dataset's mean on the 0..255 scale; magnitude 10 keeps
    # no bit when posterizing (which Pillow 11 refuses): 200 seeds of a black batch cover both
    black = torch.zeros(8, 1, 32, 32, dtype=torch.uint8)
    fill = round(255 * fashion.mean[0])
    seen = {int(v) for s in range(200) for v in augment(black, seed=s).unique()}
    assert fill in seen
    strongest = RandAugmentBatch("rand-m10-n4", fashion.mean, fashion.img_size)
    for s in range(50):
        strongest(images, seed=s)


def test_bad_recipe_input_is_one_sentence(tmp_path: Path) -> None:
    arch_file = tmp_path / "arch.json"
    arch_file.write_text(ARCH.to_json())
    for extra, message in (
        (["--recipe", "deit"], "recipe: unknown 'deit'; known: coatnet"),
        (["--randaugment", "rand-x9"], "randaugment: 'rand-x9' is not a RandAugment setting"),
        # timm itself skips a section it cannot read and applies any number of operations to each image
        (["--randaugment", "rand-m9-zz"], "(section 'zz' is none of m, n, mstd, mmax, inc or p"),
        (["--randaugment", "rand-mfoo"], "(section 'mfoo' is none of"),
        (["--randaugment", "rand-n1000000000"], "'n1000000000' asks for more than 16 operations per image"),
        (["--randaugment", "bogus"], "(it must start with 'rand', not 'bogus')"),
        (["--mixup", "0.8", "--batch-size", "33"], "batch-size: Mixup and CutMix pair images"),
        (["--ema-decay", "1.5"], "ema-decay: must be at least 0 and below 1"),
    ):
        result = CliRunner().invoke(app, ["train", str(arch_file), *extra, "--out", str(tmp_path / "x")])
        assert result.exit_code == 2 and message in result.output, (extra, result.output)
        assert "Traceback" not in result.output
    assert not (tmp_path / "x").exists()


def test_cli_trains_with_the_coatnet_recipe_and_resumes(tmp_path: Path) -> None:
    arch_file = tmp_path / "arch.json"
    arch_file.write_text(ARCH.to_json())
    out = tmp_path / "run"
    small = ["--recipe", "coatnet", "--train-samples", "256", "--batch-size", "32", "--out", str(out)]
    result = CliRunner().invoke(app, ["train", str(arch_file), "--epochs", "1", *small])
    assert result.exit_code == 0, result.output
    assert (out / "model.pt").exists() and (out / "model_ema.pt").exists() and "(EMA " in result.output
    more = CliRunner().invoke(app, ["train", str(arch_file), "--epochs", "1", "--resume", *small])
    assert more.exit_code == 0, more.output  # the run is complete: resuming it trains nothing more
    other = CliRunner().invoke(app, ["train", str(arch_file), "--epochs", "1", "--resume", *small[2:]])
    assert other.exit_code == 2 and "written with other settings" in other.output


def test_one_process_trains_in_a_folder(fashion: DataSplit, tmp_path: Path) -> None:
    """A second `nas train --resume` while the first trained in the same folder trained the run again beside
    it, both writing one checkpoint; it is refused at once, naming the holder. A run refused before its first
    checkpoint leaves no folder it made."""
    import os

    from nas.core.atomic import sole

    out = tmp_path / "run"
    out.mkdir()
    short = FullTrainConfig(epochs=1, train_samples=64, batch_size=32)
    with sole(out / TRAIN_LOCK), pytest.raises(ValueError, match=rf"by another process \(pid {os.getpid()} "):
        train_arch(ARCH, PROFILE, fashion, out, config=short, resume=True)
    assert [p.name for p in out.iterdir()] == [TRAIN_LOCK]
    other = dataclasses.replace(PROFILE, img_size=PROFILE.img_size * 2)
    with pytest.raises(ValueError, match="trains at"):
        train_arch(ARCH, other, fashion, tmp_path / "new" / "run", config=short)
    assert not (tmp_path / "new").exists()
    (tmp_path / "a-file").write_text("")
    for out in (tmp_path / "a-file", tmp_path / "a-file" / "run"):  # tracebacks before
        with pytest.raises(ValueError, match=f"out: cannot create the folder {out}: .* is a file"):
            train_arch(ARCH, PROFILE, fashion, out, config=short)

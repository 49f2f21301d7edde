"""Checkpoints are data, never code (evaluators/checkpoint.py): ``nas train --resume``, the one-shot
supernet and a proxy run's epoch checkpoint read ``checkpoint.pt`` / ``supernet.pt`` / the caller's file with
``torch.load(weights_only=True)``.

A pickle made to run code (its unpickling would create a marker file) never runs: the marker is never made.
That file, garbage bytes, a checkpoint lacking a key and a checkpoint holding another network's weights are
each refused: from the CLI with exit code 2 and one line ``error: ...`` naming the file, from the API with a
one-line ValueError; the file is left byte for byte as it was (a supernet may hold hours of training) and
nothing is trained. That a normal resume stays bit for bit is held by tests/test_train.py and
tests/test_oneshot.py, whose resumes now go through the same reader.
"""

from __future__ import annotations

import pickle
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from evaluators.data import DataSplit, load_dataset
from evaluators.oneshot import OneShotConfig, OneShotEvaluator
from evaluators.proxy import train_proxy
from evaluators.supernet import Supernet
from evaluators.train import TRAIN_LOCK, FullTrainConfig, train_arch
from nas.cli.commands import app
from nas.core.model import build_model
from search_spaces import get_space
from search_spaces.base import ProxyProfile

SPACE = get_space("coatnet")
ARCH = SPACE.baselines()["CoAtNet-0"].arch
OTHER = SPACE.baselines()["CoAtNet-1"].arch  # deeper: its weights fit no CoAtNet-0 network
PROFILE = SPACE.profile("cpu")
TRAIN = FullTrainConfig(epochs=2, batch_size=32, train_samples=64, warmup_epochs=0.2)
TINY = ProxyProfile(
    "tiny", img_size=32, width_mult=0.125, depth_mult=0.1, relax_strides=1, batch_size=32, val_samples=64
)
ONESHOT = OneShotConfig(epochs=2, train_samples=64, batch_size=32, bn_batches=1)


class _RunsCode:
    """Unpickled, it calls ``open(marker, "w")``: a stand-in for any code a crafted checkpoint would run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[..., object], tuple[str, str]]:
        return open, (str(self.marker), "w")


def _torch_save(obj: object, path: Path) -> None:
    torch.save(obj, path)


def _raw_pickle(obj: object, path: Path) -> None:
    path.write_bytes(pickle.dumps(obj, protocol=2))  # torch.load's legacy (non-zip) format starts so


# Each writes a file at ``path`` that is no checkpoint to resume; ``marker`` is what running code would make.
Crafted = Callable[[Path, Path], None]
CRAFTED: dict[str, Crafted] = {
    "code-zip": lambda path, marker: _torch_save({"settings": _RunsCode(marker), "epoch": 1}, path),
    "code-raw-pickle": lambda path, marker: _raw_pickle({"settings": _RunsCode(marker)}, path),
    "code-pickle-protocol-5": lambda path, marker: path.write_bytes(pickle.dumps(_RunsCode(marker), 5)),
    "garbage": lambda path, marker: path.write_bytes(bytes(range(256)) * 4),
    "empty": lambda path, marker: path.write_bytes(b""),
    "text": lambda path, marker: path.write_text("not a checkpoint\n"),
    "a-list": lambda path, marker: torch.save([torch.zeros(2)], path),
}

runner = CliRunner()


@pytest.fixture(scope="module")
def fashion() -> DataSplit:
    return load_dataset("fashion-mnist", img_size=32, train_samples=200, val_size=64, seed=0)


def _one_sentence(text: str, path: Path) -> None:
    assert "\n" not in text.strip() and "Traceback" not in text, text
    assert str(path) in text, text


def _cli(args: list[str]) -> str:
    """Run ``nas ARGS``: exit code 2, one line ``error: ...`` on stderr, no traceback, no warning; returns the
    line. (``nas train`` prints its banner and progress bar on stdout before it reads the checkpoint.)"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = runner.invoke(app, args)
    shown = [w for w in caught if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))]
    assert not shown, [f"{w.category.__name__}: {w.message}" for w in shown]
    error = result.stderr.strip()
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert error.startswith("error:") and len(error.splitlines()) == 1, result.output
    return error


# --- nas train --resume -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", CRAFTED)
def test_train_resume_refuses_a_crafted_checkpoint(kind: str, tmp_path: Path) -> None:
    out, marker = tmp_path / "run", tmp_path / "marker"
    out.mkdir()
    CRAFTED[kind](out / "checkpoint.pt", marker)
    before = (out / "checkpoint.pt").read_bytes()
    arch_file = tmp_path / "arch.json"
    arch_file.write_text(ARCH.to_json())
    small = ["--epochs", "1", "--train-samples", "64", "--batch-size", "32", "--profile", "cpu"]
    line = _cli(["train", str(arch_file), *small, "--out", str(out), "--resume"])
    assert not marker.exists(), "unpickling ran the crafted file's code"
    assert str(out / "checkpoint.pt") in line
    assert (out / "checkpoint.pt").read_bytes() == before
    # nothing trained, nothing written (the lock that one process trains there at a time aside)
    assert sorted(p.name for p in out.iterdir() if p.name != TRAIN_LOCK) == ["checkpoint.pt"]


@pytest.fixture(scope="module")
def trained_run(fashion: DataSplit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run of ``ARCH`` cut after its first epoch: its checkpoint is what the next cases tamper with."""

    class Killed(Exception):
        pass

    def die(epoch: int, metrics: dict[str, float]) -> None:
        raise Killed

    out = tmp_path_factory.mktemp("train") / "cut"
    with pytest.raises(Killed):
        train_arch(ARCH, PROFILE, fashion, out, config=TRAIN, report=die)
    return out


def _tampered(source: Path, folder: Path, change: Callable[[dict], None], name: str) -> Path:
    state = torch.load(source / name, weights_only=True)
    change(state)
    folder.mkdir()
    torch.save(state, folder / name)
    return folder


def _other_networks_weights(state: dict) -> None:
    other = build_model(PROFILE.apply(OTHER), num_classes=10, in_chans=1, img_size=PROFILE.img_size)
    state["model"] = other.state_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(lambda s: s.pop("optimizer"), "lacks 'optimizer'", id="missing-key"),
        pytest.param(_other_networks_weights, "does not fit this run", id="another-networks-weights"),
        pytest.param(
            lambda s: s.update(data_rng=torch.zeros(3)), "does not fit this run", id="bad-rng-state"
        ),
        pytest.param(lambda s: s.update(epoch="one"), "does not fit this run", id="epoch-not-a-number"),
    ],
)
def test_train_resume_refuses_a_tampered_checkpoint(
    fashion: DataSplit, trained_run: Path, tmp_path: Path, change: Callable[[dict], None], message: str
) -> None:
    out = _tampered(trained_run, tmp_path / "run", change, "checkpoint.pt")
    before = (out / "checkpoint.pt").read_bytes()
    with pytest.raises(ValueError) as err:
        train_arch(ARCH, PROFILE, fashion, out, config=TRAIN, resume=True)
    _one_sentence(str(err.value), out / "checkpoint.pt")
    assert message in str(err.value)
    assert (out / "checkpoint.pt").read_bytes() == before


# --- the one-shot supernet ----------------------------------------------------------------------------------


def _oneshot(data: DataSplit, run_dir: Path) -> OneShotEvaluator:
    return OneShotEvaluator(SPACE, TINY, data, seed=0, config=ONESHOT, run_dir=run_dir)


@pytest.mark.parametrize("kind", CRAFTED)
def test_oneshot_refuses_a_crafted_supernet_and_keeps_it(
    kind: str, fashion: DataSplit, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    CRAFTED[kind](tmp_path / "supernet.pt", marker)
    before = (tmp_path / "supernet.pt").read_bytes()
    evaluator = _oneshot(fashion, tmp_path)
    with pytest.raises(ValueError) as err:
        evaluator.train()
    assert not marker.exists(), "unpickling ran the crafted file's code"
    _one_sentence(str(err.value), tmp_path / "supernet.pt")
    assert (tmp_path / "supernet.pt").read_bytes() == before  # never overwritten by a fresh training


@pytest.mark.parametrize("kind", CRAFTED)
def test_a_proxy_run_refuses_a_crafted_epoch_checkpoint_and_keeps_it(
    kind: str, fashion: DataSplit, tmp_path: Path
) -> None:
    marker, path = tmp_path / "marker", tmp_path / "run.pt"
    CRAFTED[kind](path, marker)
    before = path.read_bytes()
    with pytest.raises(ValueError) as err:
        train_proxy(ARCH, TINY, fashion, checkpoint=path)
    assert not marker.exists(), "unpickling ran the crafted file's code"
    _one_sentence(str(err.value), path)
    assert path.read_bytes() == before


@pytest.fixture(scope="module")
def trained_supernet(fashion: DataSplit, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("supernet")
    _oneshot(fashion, run_dir).train()
    return run_dir


def _other_supernet(state: dict) -> None:
    wider = ProxyProfile("tiny", img_size=32, width_mult=0.25, depth_mult=0.1, relax_strides=1, batch_size=32)
    state["supernet"] = Supernet(SPACE, wider, num_classes=10, in_chans=1, img_size=32).state_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(lambda s: s.pop("optimizer"), "lacks 'optimizer'", id="missing-key"),
        pytest.param(_other_supernet, "does not fit this run", id="another-supernets-weights"),
        pytest.param(lambda s: s.update(rng=[3, 4]), "does not fit this run", id="bad-random-state"),
    ],
)
def test_oneshot_refuses_a_tampered_supernet(
    fashion: DataSplit, trained_supernet: Path, tmp_path: Path, change: Callable[[dict], None], message: str
) -> None:
    run_dir = _tampered(trained_supernet, tmp_path / "run", change, "supernet.pt")
    before = (run_dir / "supernet.pt").read_bytes()
    with pytest.raises(ValueError) as err:
        _oneshot(fashion, run_dir).train()
    _one_sentence(str(err.value), run_dir / "supernet.pt")
    assert message in str(err.value)
    assert (run_dir / "supernet.pt").read_bytes() == before


def test_search_refuses_a_crafted_supernet_in_a_new_study(tmp_path: Path) -> None:
    """``nas search --evaluator oneshot`` on a new study whose folder holds a crafted supernet.pt."""
    runs, marker = tmp_path / "runs", tmp_path / "marker"
    (runs / "s").mkdir(parents=True)
    CRAFTED["code-zip"](runs / "s" / "supernet.pt", marker)
    before = (runs / "s" / "supernet.pt").read_bytes()
    args = ["search", "--space", "sasa", "--evaluator", "oneshot", "--profile", "cpu", "--budget", "1trials"]
    line = _cli([*args, "--objectives", "top1:max,macs:min", "--study", "s", "--runs-dir", str(runs)])
    assert not marker.exists(), "unpickling ran the crafted file's code"
    assert str(runs / "s" / "supernet.pt") in line and "was refused" in line
    assert (runs / "s" / "supernet.pt").read_bytes() == before

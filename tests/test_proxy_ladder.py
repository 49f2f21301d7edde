"""Laddered proxy training: a run continued from its checkpoints, rung by rung, is the same training as one
run to the top (weights, optimizer state, metrics: bit for bit on the CPU), across data passes, with and
without augmentation; a span validated on fewer images trains the same and measures the first of them; a
checkpoint of something else is refused in one sentence."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evaluators.batches import loaders
from evaluators.data import DataSplit, load_dataset
from evaluators.proxy import Fidelity, TrainConfig, build_scaled_network, train_proxy
from nas.core.arch import Arch, Stage, Stem
from search_spaces.base import ProxyProfile

TINY = Arch(Stem("conv", 16), (Stage("mbconv", "conv", 1, 16), Stage("transformer", "rel", 1, 32)))
# 512 images a pass, 8 batches: the rungs below stop mid-pass (3 batches), in the second pass (9) and at
# the end of the second pass (16)
PROFILE = ProxyProfile("tiny", img_size=32, epochs=1, batch_size=64, train_samples=512, val_samples=256)
RUNGS = (192, 576, 1024)


@pytest.fixture(scope="module")
def fashion() -> DataSplit:
    return load_dataset("fashion-mnist", img_size=32, train_samples=1000, val_size=256, seed=0)


def _state(path: Path) -> dict:
    return torch.load(path, weights_only=True)


def _same_tensors(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_tensors(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@pytest.mark.parametrize(
    ("augment", "restarts", "bn_recalibration"),
    [(False, (), 0), (True, (), 0), (False, RUNGS[:-1], 0), (True, (), 2)],
    ids=["plain", "augmented", "restarted-at-every-rung", "bn-recalibrated-at-every-rung"],
)
def test_continuing_rung_by_rung_equals_one_run_to_the_top(
    fashion: DataSplit, tmp_path: Path, augment: bool, restarts: tuple[int, ...], bn_recalibration: int
) -> None:
    # drop-path draws from torch's generator too; a rung's validation, recalibrated, comes after its save
    config = TrainConfig(augment=augment, drop_path_rate=0.1, bn_recalibration=bn_recalibration)
    top = RUNGS[-1]
    direct = train_proxy(
        TINY,
        PROFILE,
        fashion,
        seed=3,
        config=config,
        fidelity=Fidelity(top, top, tmp_path / "direct.pt", restarts=restarts),
    )
    resume = None
    for rung, images in enumerate(RUNGS):
        save = tmp_path / f"rung{rung}.pt"
        laddered = train_proxy(
            TINY,
            PROFILE,
            fashion,
            seed=3,
            config=config,
            fidelity=Fidelity(images, top, save, resume, restarts),
        )
        assert laddered["images"] == images and laddered["resumed_images"] == (RUNGS[rung - 1] if rung else 0)
        resume = save
    assert (laddered["top1"], laddered["loss"]) == (direct["top1"], direct["loss"])
    one, chained = _state(tmp_path / "direct.pt"), _state(resume)
    for key in ("model", "optimizer", "stream", "rng", "step"):
        assert _same_tensors(one[key], chained[key]), key


def test_a_span_told_to_save_nothing_trains_the_same_and_writes_no_file(
    fashion: DataSplit, tmp_path: Path
) -> None:
    """The top rung of a search's ladder saves no checkpoint (nothing continues it)."""
    train_proxy(TINY, PROFILE, fashion, seed=0, fidelity=Fidelity(192, 576, tmp_path / "r0.pt"))
    saved = train_proxy(
        TINY, PROFILE, fashion, seed=0, fidelity=Fidelity(576, 576, tmp_path / "r1.pt", tmp_path / "r0.pt")
    )
    unsaved = train_proxy(
        TINY, PROFILE, fashion, seed=0, fidelity=Fidelity(576, 576, None, tmp_path / "r0.pt")
    )
    assert (unsaved["top1"], unsaved["loss"]) == (saved["top1"], saved["loss"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r0.pt", "r1.pt"]


def test_a_lower_rung_is_a_truncated_top_run_not_a_shorter_schedule(
    fashion: DataSplit, tmp_path: Path
) -> None:
    """The schedule spans the top rung: stopping at rung 0 leaves the learning rate high, where a single
    run of the same length would have decayed it; the two differ."""
    first = train_proxy(TINY, PROFILE, fashion, seed=0, fidelity=Fidelity(192, 1024, tmp_path / "a.pt"))
    short = train_proxy(TINY, PROFILE, fashion, seed=0, fidelity=Fidelity(192, 192, tmp_path / "b.pt"))
    assert first["images"] == short["images"] == 192
    assert not _same_tensors(_state(tmp_path / "a.pt")["model"], _state(tmp_path / "b.pt")["model"])


def test_restarted_at_every_rung_the_first_rung_is_a_run_of_its_own_length(
    fashion: DataSplit, tmp_path: Path
) -> None:
    """Under restarts rung 0 gets the whole schedule (warmup, then cosine down to the minimum rate) over
    its own images: the same training, bit for bit, as a run that stops there; rung 1 restarts the rate,
    so it is not the top-spanning schedule's rung 1 either."""
    restarted = Fidelity(192, 1024, tmp_path / "r0.pt", restarts=RUNGS[:-1])
    train_proxy(TINY, PROFILE, fashion, seed=0, fidelity=restarted)
    train_proxy(TINY, PROFILE, fashion, seed=0, fidelity=Fidelity(192, 192, tmp_path / "alone.pt"))
    assert _same_tensors(_state(tmp_path / "r0.pt")["model"], _state(tmp_path / "alone.pt")["model"])
    lrs = []
    for name, restarts in (("restarted", RUNGS[:-1]), ("spanning", ())):
        train_proxy(
            TINY,
            PROFILE,
            fashion,
            seed=0,
            fidelity=Fidelity(192, 1024, tmp_path / f"{name}0.pt", restarts=restarts),
        )
        fidelity = Fidelity(576, 1024, tmp_path / f"{name}1.pt", tmp_path / f"{name}0.pt", restarts)
        train_proxy(TINY, PROFILE, fashion, seed=0, fidelity=fidelity)
        lrs.append(_state(tmp_path / f"{name}1.pt")["optimizer"]["param_groups"][0]["lr"])
    # after rung 1's last update the restarted schedule is at its peak again (rung 2 begins), the spanning
    # one partway down its single cosine
    assert lrs[0] == pytest.approx(TrainConfig().lr) and lrs[1] < 0.9 * TrainConfig().lr


def test_a_span_validated_on_fewer_images_trains_the_same_and_measures_the_first(
    fashion: DataSplit, tmp_path: Path
) -> None:
    few = train_proxy(
        TINY, PROFILE, fashion, seed=0, fidelity=Fidelity(192, 1024, tmp_path / "few.pt", val_images=100)
    )
    full = train_proxy(TINY, PROFILE, fashion, seed=0, fidelity=Fidelity(192, 1024, tmp_path / "all.pt"))
    assert (few["val_images"], full["val_images"]) == (100, PROFILE.val_samples)
    one, other = _state(tmp_path / "few.pt"), _state(tmp_path / "all.pt")
    for key in ("model", "optimizer", "stream", "rng", "step"):  # validation comes after the checkpoint
        assert _same_tensors(one[key], other[key]), key
    # the trained network's hits over all the profile's validation images, counted here: the span's top-1 is
    # that of the first 100
    _, model = build_scaled_network(TINY, PROFILE, fashion, 0, 0.0, torch.device("cpu"))
    model.load_state_dict(one["model"])
    model.eval()
    _, val = loaders(fashion, PROFILE.batch_size, val_samples=PROFILE.val_samples)
    with torch.inference_mode():
        hits = torch.cat([model(x).argmax(1) == y for x, y in val]).double()
    assert len(hits) == PROFILE.val_samples
    assert few["top1"] == pytest.approx(100 * hits[:100].mean().item())
    assert full["top1"] == pytest.approx(100 * hits.mean().item())
    more = train_proxy(
        TINY, PROFILE, fashion, seed=0, fidelity=Fidelity(192, 1024, tmp_path / "m.pt", val_images=9999)
    )
    assert more["val_images"] == PROFILE.val_samples  # never more than the profile holds out
    with pytest.raises(ValueError, match="validation on 0 images"):
        Fidelity(192, 1024, tmp_path / "x.pt", val_images=0)


def test_restarts_must_increase_below_the_top() -> None:
    for restarts in ((576, 192), (192, 192), (1024,), (0, 192)):
        with pytest.raises(ValueError, match=r"are not increasing within 1\.\.1023"):
            Fidelity(192, 1024, Path("x.pt"), restarts=restarts)


def test_a_checkpoint_of_something_else_is_refused(fashion: DataSplit, tmp_path: Path) -> None:
    train_proxy(TINY, PROFILE, fashion, seed=0, fidelity=Fidelity(192, 1024, tmp_path / "r0.pt"))

    def resume(checkpoint: str, seed: int = 0, top: int = 1024) -> None:
        fidelity = Fidelity(576, top, tmp_path / "r1.pt", tmp_path / checkpoint)
        train_proxy(TINY, PROFILE, fashion, seed=seed, fidelity=fidelity)

    with pytest.raises(ValueError, match=r"checkpoint .*r0.pt is of .*'seed': 0.*not of .*'seed': 1"):
        resume("r0.pt", seed=1)
    with pytest.raises(ValueError, match=r"total_steps"):
        resume("r0.pt", top=2048)
    with pytest.raises(ValueError, match=r"'restart_steps': \[\].*not of .*'restart_steps': \[3\]"):
        train_proxy(
            TINY,
            PROFILE,
            fashion,
            seed=0,
            fidelity=Fidelity(576, 1024, tmp_path / "r1.pt", tmp_path / "r0.pt", restarts=(192,)),
        )
    with pytest.raises(ValueError, match="is missing: the rung below must be trained first"):
        resume("no.pt")
    (tmp_path / "bad.pt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="cannot be read"):
        resume("bad.pt")

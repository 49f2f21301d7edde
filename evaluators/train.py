"""Full training of one architecture: ``nas train ARCH.json --dataset ...``.

:func:`train_arch` trains ``profile.apply(arch)`` (the network itself under a space's ``full`` profile; the
CPU profile's shrunk network by default where there is no GPU) on a dataset with timm's optimizer and
scheduler factories (AdamW + cosine by default, stepped per update), crops and flips, label smoothing and
drop-path. It makes ``<out>/`` and writes a first ``<out>/checkpoint.pt`` (epoch 0) before the first batch,
calls ``progress(TrainStatus)`` after every batch (images per second, time left: what ``nas train`` shows),
and after every epoch validates on the held-out split (a part of the training images, for watching the run;
nothing is chosen by it), calls ``report(epoch, metrics)`` and writes the checkpoint again (model, optimizer
and grad-scaler state, the data-order, torch CPU and CUDA generator states as tensors, history;
atomically), so ``resume=True`` continues an interrupted run and ends with
exactly the weights an uninterrupted one would have (where the device computes deterministically: the CPU,
and the GPU for the networks the tests train). The checkpoint is read as data, never code
(:mod:`evaluators.checkpoint`): a file that is not this run's checkpoint is refused in one sentence.
Given a ``test`` set (:func:`evaluators.data.load_test`: the dataset's official test split, which no search
opens), the finished network is scored on it once, after the last epoch (``test_top1``, and
``test_top1_ema`` for the averaged weights): the figure a comparison reports. It ends by writing
``<out>/model.pt``, a model file :func:`nas.core.create.create_model` reloads, and
``<out>/history.json``. CUDA with AMP (bf16, else fp16 with a scaler) when present, fp32 on the CPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from timm.data import Mixup
from timm.loss import SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2
from timm.utils import ModelEmaV3

from evaluators.amp import amp_dtype, autocast, grad_scaler
from evaluators.augment import host_rng, rand_augment
from evaluators.batches import loaders
from evaluators.checkpoint import load_checkpoint, restoring, save_checkpoint
from evaluators.complexity import pick_device
from evaluators.data import DataSplit, TestSet
from evaluators.hyperparams import check_training
from evaluators.proxy import TrainingDiverged, build_scaled_network, forked_rng
from evaluators.steps import backward, update, validate
from nas.core.arch import Arch
from nas.core.atomic import Held, nearest_existing, scratch_folder, sole
from nas.core.create import save_model
from search_spaces.base import ProxyProfile

__all__ = ["RECIPES", "FullTrainConfig", "TrainStatus", "TrainingHeld", "train_arch"]

Report = Callable[[int, dict[str, float]], None]

_KEYS = ("settings", "epoch", "model", "optimizer", "scaler", "data_rng", "torch_rng", "history")
_REMEDY = "use another --out"


@dataclass(frozen=True)
class FullTrainConfig:
    """How long and how: the profile gives the network's scale and image size, this the schedule."""

    epochs: int = 10
    batch_size: int = 64
    train_samples: int | None = None  # None: the whole training split
    lr: float = 1e-3
    weight_decay: float = 0.05
    opt: str = "adamw"
    sched: str = "cosine"
    warmup_epochs: float = 1.0
    min_lr: float = 1e-5
    label_smoothing: float = 0.1
    drop_path_rate: float = 0.1
    augment: bool = True
    seed: int = 0
    # timm's recipe pieces (off by default; RECIPES names sets of them)
    randaugment: str = ""  # timm's RandAugment string, such as rand-m9-mstd0.5-inc1; '' for none
    mixup: float = 0.0  # Mixup's beta alpha; 0 for none
    cutmix: float = 0.0  # CutMix's beta alpha; 0 for none
    mix_switch_prob: float = 0.5  # with both: the chance a batch is cut-mixed rather than mixed up
    ema_decay: float = 0.0  # decay of the exponential moving average of the weights; 0 for none

    def __post_init__(self) -> None:
        check_training(self, label=lambda name: name.replace("_", "-"))
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema-decay: must be at least 0 and below 1, not {self.ema_decay!r}")
        if self.mixes and self.batch_size % 2:
            raise ValueError(
                f"batch-size: Mixup and CutMix pair images, so it must be even, not {self.batch_size}"
            )
        if self.randaugment:
            rand_augment(self.randaugment, (0.5,), 32)  # a string timm cannot read fails here, not mid-run

    @property
    def mixes(self) -> bool:
        return self.mixup > 0 or self.cutmix > 0

    def record(self) -> dict[str, Any]:
        """The config as a checkpoint records it; recipe fields at their defaults are left out, so that runs
        started before they existed still resume."""
        defaults = FullTrainConfig.__dataclass_fields__
        recipe = ("randaugment", "mixup", "cutmix", "mix_switch_prob", "ema_decay")
        return {
            k: v for k, v in dataclasses.asdict(self).items() if k not in recipe or v != defaults[k].default
        }


# The CoAtNet paper's training (Dai et al. 2021, ImageNet-1K: RandAugment, Mixup, label smoothing 0.1, EMA of
# the weights) with timm's standard pieces and their usual settings: RandAugment rand-m9-mstd0.5-inc1,
# Mixup 0.8 with CutMix 1.0 (switch probability 0.5), soft-target cross entropy, EMA decay 0.9999.
RECIPES: dict[str, dict[str, Any]] = {
    "coatnet": {
        "randaugment": "rand-m9-mstd0.5-inc1",
        "mixup": 0.8,
        "cutmix": 1.0,
        "mix_switch_prob": 0.5,
        "label_smoothing": 0.1,
        "ema_decay": 0.9999,
    },
}


@dataclass(frozen=True)
class TrainStatus:
    """Where a run stands after one batch: the epoch (of ``epochs``), the batch (of ``steps`` per epoch),
    this epoch's images, training seconds and mean loss so far."""

    epoch: int
    epochs: int
    step: int
    steps: int
    images: int
    seconds: float
    loss: float

    @property
    def images_per_second(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else math.nan

    @property
    def epoch_seconds_left(self) -> float:
        """This epoch's training time left at its rate so far (validation not counted)."""
        return (self.steps - self.step) * self.seconds / self.step

    @property
    def seconds_left(self) -> float:
        """The run's training time left at this epoch's rate: this epoch's and the later epochs'."""
        return self.epoch_seconds_left + (self.epochs - self.epoch) * self.steps * self.seconds / self.step


Progress = Callable[[TrainStatus], None]


TRAIN_LOCK = ".training.lock"  # in the run folder: held by the one process training there


class TrainingHeld(ValueError):
    """The run folder is being trained by another process (a bad-input error: one sentence, exit 2)."""


def train_arch(
    arch: Arch,
    profile: ProxyProfile,
    data: DataSplit,
    out_dir: str | Path,
    *,
    config: FullTrainConfig | None = None,
    resume: bool = False,
    device: torch.device | str | None = None,
    report: Report | None = None,
    progress: Progress | None = None,
    test: TestSet | None = None,
) -> dict[str, Any]:
    """Train ``profile.apply(arch)`` on ``data``; returns the last epoch's metrics (with the ``test`` set's
    score when one is given) and the run's totals.

    One process trains in ``out_dir`` at a time (a second, resuming the run while the first trains it,
    trained it again beside it, both writing the same checkpoint): it is refused at once. A run refused
    before its first checkpoint leaves no folder it made."""
    out = Path(out_dir)
    anchor = nearest_existing(out)  # the outermost folder made here is the child of it towards ``out``
    made = None if anchor == out.absolute() else anchor / out.absolute().relative_to(anchor).parts[0]
    os.rmdir(scratch_folder(out, "out"))  # one sentence for a path under a file or on a read-only system
    out.mkdir(parents=True, exist_ok=True)
    try:
        with sole(out / TRAIN_LOCK):
            try:
                return _train_arch(
                    arch, profile, data, out, config=config or FullTrainConfig(), resume=resume,
                    device=device, report=report, progress=progress, test=test,
                )  # fmt: skip
            finally:  # only the lock's holder may remove the folder: a refused process may not have made it
                if made is not None and not (out / "checkpoint.pt").exists():
                    _remove_made(out, made)
    except Held as held:
        raise TrainingHeld(
            f"{out} is being trained by another process ({held.holder}); wait for it to end, then pass "
            "--resume to continue it, or another --out"
        ) from None


def _remove_made(out: Path, made: Path) -> None:
    """``out``, and the folders above it up to ``made`` that are then empty (another run may share them)."""
    shutil.rmtree(out, ignore_errors=True)
    for folder in [p for p in out.absolute().parents if p.is_relative_to(made)]:
        try:
            folder.rmdir()
        except OSError:
            return


def _train_arch(
    arch: Arch,
    profile: ProxyProfile,
    data: DataSplit,
    out: Path,
    *,
    config: FullTrainConfig,
    resume: bool,
    device: torch.device | str | None,
    report: Report | None,
    progress: Progress | None,
    test: TestSet | None = None,
) -> dict[str, Any]:
    checkpoint_path = out / "checkpoint.pt"
    settings = {
        "arch": arch.key,
        "profile": dataclasses.asdict(profile),
        "config": config.record(),
    }
    settings["data"] = data.describe()
    if test is not None and test.img_size != data.img_size:
        raise ValueError(f"the test set is at {test.img_size} px but the training images at {data.img_size}")
    if checkpoint_path.exists() and not resume:
        raise ValueError(
            f"{out} already holds a training run; pass --resume to continue it, or another --out"
        )
    if data.img_size != profile.img_size:
        raise ValueError(
            f"data is at {data.img_size} px but profile {profile.name!r} trains at {profile.img_size}"
        )
    dev = pick_device(device)
    with forked_rng(dev):
        net_arch, model = build_scaled_network(arch, profile, data, config.seed, config.drop_path_rate, dev)
    train_batches, val_batches = loaders(
        data, config.batch_size, seed=config.seed, train_samples=config.train_samples, augment=config.augment,
        device=dev, randaugment=config.randaugment,
    )  # fmt: skip
    steps = len(train_batches)
    if steps == 0:
        raise ValueError(f"{len(data.train)} training samples make no full batch of {config.batch_size}")
    optimizer = create_optimizer_v2(model, opt=config.opt, lr=config.lr, weight_decay=config.weight_decay)
    scheduler, _ = create_scheduler_v2(
        optimizer,
        sched=config.sched,
        num_epochs=config.epochs,
        warmup_epochs=config.warmup_epochs,
        warmup_lr=1e-5,
        min_lr=config.min_lr,
        step_on_epochs=False,
        updates_per_epoch=steps,
    )
    amp = amp_dtype(dev)
    scaler = grad_scaler(amp)
    ema = ModelEmaV3(model, decay=config.ema_decay) if config.ema_decay else None
    mix = (
        Mixup(
            mixup_alpha=config.mixup,
            cutmix_alpha=config.cutmix,
            switch_prob=config.mix_switch_prob,
            label_smoothing=config.label_smoothing,
            num_classes=data.num_classes,
        )
        if config.mixes
        else None
    )
    soft_loss = SoftTargetCrossEntropy()
    history: list[dict[str, float]] = []
    start_epoch, torch_rng, cuda_rng = 1, None, None
    if resume and checkpoint_path.exists():
        state = load_checkpoint(checkpoint_path, _KEYS, _REMEDY)
        if state["settings"] != settings:
            raise ValueError(f"{checkpoint_path} was written with other settings; {_REMEDY}")
        with restoring(checkpoint_path, _REMEDY):
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            if scaler is not None and state["scaler"]:
                scaler.load_state_dict(state["scaler"])
            if ema is not None:
                if state.get("ema") is None:
                    raise ValueError("it holds no EMA weights")
                ema.module.load_state_dict(state["ema"])
            train_batches.generator.set_state(state["data_rng"])
            torch_rng = state["torch_rng"]
            cuda_rng = state.get("cuda_rng")  # None in runs on the CPU and in checkpoints written before it
            history, done = list(state["history"]), int(state["epoch"])
        start_epoch = done + 1
        scheduler.step_update(num_updates=done * steps)

    def in_precision() -> contextlib.AbstractContextManager[Any]:
        return autocast(dev, amp)

    def state(epoch: int) -> dict[str, Any]:
        return {
            "settings": settings,
            "epoch": epoch,
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict() if scaler is not None else None,
            "ema": ema.module.state_dict() if ema is not None else None,
            "data_rng": train_batches.generator.get_state(),
            "torch_rng": torch.get_rng_state(),
            # drop-path (and any draw on the GPU) uses the device's own generator
            "cuda_rng": torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None,
            "history": history,
        }

    with forked_rng(dev):  # drop-path draws from torch's global generators
        torch.manual_seed(config.seed)
        if torch_rng is not None:
            with restoring(checkpoint_path, _REMEDY):
                torch.set_rng_state(torch_rng)
                if cuda_rng is not None and dev.type == "cuda":
                    torch.cuda.set_rng_state(cuda_rng, dev)
        if start_epoch == 1 and not checkpoint_path.exists():  # the folder, and a run to resume, at once
            save_checkpoint(state(0), checkpoint_path)
        for epoch in range(start_epoch, config.epochs + 1):
            begin, total, seen = time.perf_counter(), 0.0, 0
            model.train()
            for step, (x, y) in enumerate(train_batches, start=1):
                x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
                target = None
                if mix is not None:  # its draws are seeded from torch's generator, which checkpoints keep
                    with host_rng(int(torch.randint(2**31 - 1, (1,)))):
                        x, target = mix(x, y)
                with in_precision():
                    logits = model(x)
                    if target is None:
                        loss = F.cross_entropy(logits, y, label_smoothing=config.label_smoothing)
                    else:
                        loss = soft_loss(logits, target)
                value = loss.item()
                if not math.isfinite(value):
                    raise TrainingDiverged(epoch, step, value, net_arch.key)
                optimizer.zero_grad(set_to_none=True)
                backward(loss, scaler)
                update(optimizer, scaler)
                scheduler.step_update(num_updates=(epoch - 1) * steps + step)
                if ema is not None:
                    ema.update(model, step=(epoch - 1) * steps + step)
                total += value * len(y)
                seen += len(y)
                if progress is not None:
                    spent = time.perf_counter() - begin
                    progress(TrainStatus(epoch, config.epochs, step, steps, seen, spent, total / seen))
            train_seconds = time.perf_counter() - begin
            metrics = validate(model, val_batches, dev, in_precision)
            if ema is not None:
                averaged = validate(ema.module, val_batches, dev, in_precision)
                metrics.update({f"{k}_ema": averaged[k] for k in ("top1", "loss")})
            metrics.update(
                epoch=epoch,
                train_loss=total / max(seen, 1),
                train_seconds=train_seconds,
                images_per_second=seen / train_seconds if train_seconds > 0 else math.nan,
                lr=optimizer.param_groups[0]["lr"],
            )
            history.append(metrics)
            save_checkpoint(state(epoch), checkpoint_path)
            if report is not None:
                report(epoch, dict(metrics))
    scored: dict[str, Any] = {}
    if test is not None:  # once, at the end: nothing during training looks at it
        _, test_batches = loaders(dataclasses.replace(data, val=test.images), config.batch_size, device=dev)
        for suffix, net in (("", model), ("_ema", ema.module if ema is not None else None)):
            if net is not None:
                got = validate(net, test_batches, dev, in_precision)
                scored.update({f"test_top1{suffix}": got["top1"], f"test_loss{suffix}": got["loss"]})
                scored["test_images"] = got["val_images"]
        scored["test_set"] = test.describe()
    meta = {"searched_arch": arch.key, "history": history, **data.normalization()}
    model_file = save_model(model, out / "model.pt", **meta)
    if ema is not None:  # the averaged weights, which the recipe's papers evaluate
        save_model(ema.module, out / "model_ema.pt", **meta)
    record = {"settings": settings, "history": history, **({"test": scored} if scored else {})}
    (out / "history.json").write_text(json.dumps(record, indent=1) + "\n")
    last = history[-1] if history else {}
    return {
        **last,
        **{k: v for k, v in scored.items() if k != "test_set"},
        "epochs": config.epochs,
        "params": sum(p.numel() for p in model.parameters()),
        "arch": net_arch.key,
        "model_file": str(model_file),
        "device": str(dev),
        "amp": str(amp).removeprefix("torch.") if amp else "fp32",
    }

"""Proxy training: a cheap, seeded estimate of how well one :class:`~nas.arch.Arch` learns.

:func:`train_proxy` shrinks the architecture with a search space's :class:`~search_spaces.base.ProxyProfile`
(``profile.apply``), builds it from scratch at the profile's image size, and trains it for ``profile.epochs``
epochs on ``profile.train_samples`` samples of a :class:`~evaluators.data.DataSplit` with timm's AdamW and
cosine schedule (linear warmup, stepped per optimizer update). After every epoch it measures top-1 on the
validation split held out of the training set and calls ``report(epoch, metrics)``: the hook a search driver
prunes through (an exception raised there propagates and ends the run). A loss that turns NaN or infinite
raises :class:`TrainingDiverged` at once, so a broken run never reads as a chance-level accuracy.

On CUDA it trains under ``torch.autocast`` (bf16 where supported, else fp16 with a ``GradScaler``); on the
CPU in fp32. With the same seed, data and thread count a CPU run is bit-for-bit repeatable: the seed fixes the
initial weights, the data order, augmentation and drop-path. :class:`ProxyEvaluator` binds profile, data and
settings so that a driver calls ``evaluate(arch, report=...)`` as the design's evaluator contract asks.
Nothing here knows about Optuna or Ray.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2

from evaluators.amp import amp_dtype, autocast, grad_scaler
from evaluators.complexity import pick_device
from evaluators.data import DataSplit, loaders
from nas.arch import Arch
from nas.create import save_model, weights_name
from nas.model import build_model
from search_spaces.base import ProxyProfile

__all__ = ["ProxyEvaluator", "TrainConfig", "TrainingDiverged", "train_proxy"]

Report = Callable[[int, dict[str, float]], None]


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite; ``epoch`` (1-based) and ``step`` (within it) say where."""

    def __init__(self, epoch: int, step: int, loss: float, arch_key: str = "") -> None:
        self.epoch, self.step, self.loss = epoch, step, loss
        where = f" for {arch_key}" if arch_key else ""
        super().__init__(f"training diverged{where}: loss {loss} at epoch {epoch}, step {step}")


@dataclass(frozen=True)
class TrainConfig:
    """Optimizer and regularization settings of a proxy run (the profile says how long and how big).

    ``lr`` is for AdamW at ``profile.batch_size``; no scaling rule is applied. ``warmup_epochs`` may be a
    fraction: the schedule is stepped per update, so a fifth of an epoch of warmup is meaningful.
    """

    lr: float = 1e-3
    weight_decay: float = 0.05
    opt: str = "adamw"
    sched: str = "cosine"
    warmup_epochs: float = 0.2
    warmup_lr: float = 1e-5
    min_lr: float = 1e-5
    label_smoothing: float = 0.1
    drop_path_rate: float = 0.0
    augment: bool = False  # crops and flips only pay off over more epochs than a proxy trains
    grad_clip: float | None = None
    eval_every: int = 1  # validate (and report) every n epochs and after the last; n > epochs: the last only
    opt_kwargs: dict[str, Any] = field(default_factory=dict)


def forked_rng(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """Seeding inside stays inside: torch's CPU generator and ``device``'s CUDA one are restored on exit,
    so a trainer never moves the caller's random state (a driver's own sampling)."""
    cuda = (
        [torch.cuda.current_device() if device.index is None else device.index]
        if device.type == "cuda"
        else []
    )
    return torch.random.fork_rng(devices=cuda)


def build_scaled_network(
    arch: Arch, profile: ProxyProfile, data: DataSplit, seed: int, drop_path_rate: float, device: torch.device
) -> tuple[Arch, nn.Module]:
    """(the profile-scaled arch, its network for ``data`` initialised from ``seed`` on ``device``); seeds
    torch's global generators, so call it inside :func:`forked_rng`."""
    scaled = profile.apply(arch)
    torch.manual_seed(seed)
    model = build_model(
        scaled,
        num_classes=data.num_classes,
        in_chans=data.in_chans,
        img_size=profile.img_size,
        drop_path_rate=drop_path_rate,
    )
    return scaled, model.to(device)


def train_proxy(
    arch: Arch,
    profile: ProxyProfile,
    data: DataSplit,
    *,
    seed: int = 0,
    config: TrainConfig | None = None,
    report: Report | None = None,
    device: torch.device | str | None = None,
    num_workers: int = 0,
    weights_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Train ``profile.apply(arch)`` from scratch; return the final validation metrics and the cost.

    With ``weights_dir`` the trained network is kept there as a model file (:func:`nas.create.save_model`)
    named by :func:`nas.create.weights_name` of ``arch``, and ``weights`` in the result names it.

    Returns ``top1`` (percent, 0..100), ``loss`` (validation cross-entropy, no smoothing), ``train_loss``
    (mean of the last epoch), ``train_seconds`` and ``eval_seconds`` (wall time of the training steps and of
    the validation passes), ``images_per_second`` (training images over ``train_seconds``), ``epochs``,
    ``params`` (of the proxy network), ``device``, ``amp`` (the autocast dtype or ``"fp32"``) and the proxy
    ``arch`` key. Raises :class:`TrainingDiverged` on a NaN / infinite loss; whatever ``report`` raises
    propagates.
    """
    config = config or TrainConfig()
    if data.img_size != profile.img_size:
        raise ValueError(
            f"data is at {data.img_size} px but profile {profile.name!r} trains at {profile.img_size}"
        )
    dev = pick_device(device)
    with forked_rng(dev):
        proxy, model = build_scaled_network(arch, profile, data, seed, config.drop_path_rate, dev)
        train_batches, val_batches = loaders(
            data,
            profile.batch_size,
            seed=seed,
            train_samples=profile.train_samples,
            val_samples=profile.val_samples,
            augment=config.augment,
            device=dev,
            num_workers=num_workers,
        )
        if len(train_batches) == 0:
            raise ValueError(f"{len(data.train)} training samples make no full batch of {profile.batch_size}")
        out = _Trainer(model, proxy, profile.epochs, config, dev, report).run(train_batches, val_batches)
    if weights_dir is not None:
        name = weights_name(arch)
        save_model(model, Path(weights_dir) / name, searched_arch=arch.key, top1=out["top1"], seed=seed)
        out["weights"] = name
    return out


class _Trainer:
    """One run's model, optimizer, schedule and mixed-precision state."""

    def __init__(
        self,
        model: nn.Module,
        arch: Arch,
        epochs: int,
        config: TrainConfig,
        device: torch.device,
        report: Report | None,
    ) -> None:
        self.model, self.arch, self.epochs, self.config = model, arch, epochs, config
        self.device, self.report = device, report
        self.optimizer = create_optimizer_v2(
            model, opt=config.opt, lr=config.lr, weight_decay=config.weight_decay, **config.opt_kwargs
        )
        self.amp_dtype = amp_dtype(device)
        self.scaler = grad_scaler(self.amp_dtype)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        return autocast(self.device, self.amp_dtype)

    def run(self, train_batches: Iterable[Any], val_batches: Iterable[Any]) -> dict[str, Any]:
        steps = len(train_batches)  # type: ignore[arg-type]
        scheduler, _ = create_scheduler_v2(
            self.optimizer,
            sched=self.config.sched,
            num_epochs=self.epochs,
            warmup_epochs=self.config.warmup_epochs,
            warmup_lr=self.config.warmup_lr,
            min_lr=self.config.min_lr,
            step_on_epochs=False,  # a proxy trains a few epochs: warmup and decay must move within one
            updates_per_epoch=steps,
        )
        train_seconds = eval_seconds = 0.0
        images = 0
        metrics: dict[str, float] = {}
        for epoch in range(1, self.epochs + 1):
            start = time.perf_counter()
            train_loss, seen = self._train_epoch(train_batches, epoch, scheduler, steps)
            train_seconds += self._elapsed(start)
            images += seen
            if epoch % self.config.eval_every and epoch != self.epochs:
                continue
            start = time.perf_counter()
            metrics = self._evaluate(val_batches, epoch)
            eval_seconds += self._elapsed(start)
            metrics["train_loss"] = train_loss
            if self.report is not None:
                self.report(epoch, dict(metrics))
        return {
            **metrics,
            "train_seconds": train_seconds,
            "eval_seconds": eval_seconds,
            "images_per_second": images / train_seconds if train_seconds > 0 else math.nan,
            "epochs": self.epochs,
            "params": sum(p.numel() for p in self.model.parameters()),
            "device": str(self.device),
            "amp": str(self.amp_dtype).removeprefix("torch.") if self.amp_dtype else "fp32",
            "arch": self.arch.key,
        }

    def _elapsed(self, start: float) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # kernels are asynchronous: count them in the phase they ran
        return time.perf_counter() - start

    def _train_epoch(
        self, batches: Iterable[Any], epoch: int, scheduler: Any, steps: int
    ) -> tuple[float, int]:
        self.model.train()
        total, seen = 0.0, 0
        for step, (x, y) in enumerate(batches, start=1):
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            with self._autocast():
                loss = F.cross_entropy(self.model(x), y, label_smoothing=self.config.label_smoothing)
            value = loss.item()  # one sync per step: the price of stopping at the first bad step
            if not math.isfinite(value):
                raise TrainingDiverged(epoch, step, value, self.arch.key)
            self._step(loss)
            scheduler.step_update(num_updates=(epoch - 1) * steps + step)
            total += value * len(y)
            seen += len(y)
        return total / max(seen, 1), seen

    def _step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        clip = self.config.grad_clip
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            if clip is not None:
                self.scaler.unscale_(self.optimizer)
                nn.utils.clip_grad_norm_(self.model.parameters(), clip)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            return
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(self.model.parameters(), clip)
        self.optimizer.step()

    @torch.inference_mode()
    def _evaluate(self, batches: Iterable[Any], epoch: int) -> dict[str, float]:
        self.model.eval()
        correct = total = 0
        loss_sum = torch.zeros((), device=self.device, dtype=torch.float64)
        for x, y in batches:
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            with self._autocast():
                logits = self.model(x)
            loss_sum += F.cross_entropy(logits.float(), y, reduction="sum")
            correct += int((logits.argmax(1) == y).sum())
            total += len(y)
        loss = loss_sum.item() / total
        if not math.isfinite(
            loss
        ):  # finite training loss but NaN logits: the weights are broken all the same
            raise TrainingDiverged(epoch, 0, loss, self.arch.key)
        return {"top1": 100.0 * correct / total, "loss": loss}


class ProxyEvaluator:
    """``evaluate(arch, report=...)`` with the profile, data, seed and settings fixed: what a driver calls."""

    def __init__(
        self,
        profile: ProxyProfile,
        data: DataSplit,
        *,
        seed: int = 0,
        config: TrainConfig | None = None,
        device: torch.device | str | None = None,
        num_workers: int = 0,
        weights_dir: str | Path | None = None,
    ) -> None:
        self.profile, self.data, self.seed = profile, data, seed
        self.config = config or TrainConfig()
        self.device, self.num_workers = device, num_workers
        self.weights_dir = weights_dir  # keep each trained network there (nas export reads them)

    def evaluate(self, arch: Arch, report: Report | None = None) -> dict[str, Any]:
        return train_proxy(
            arch,
            self.profile,
            self.data,
            seed=self.seed,
            config=self.config,
            report=report,
            device=self.device,
            num_workers=self.num_workers,
            weights_dir=self.weights_dir,
        )

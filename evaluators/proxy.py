"""Proxy training: a cheap, seeded estimate of how well one :class:`~nas.core.arch.Arch` learns.

:func:`train_proxy` shrinks the architecture with a search space's :class:`~search_spaces.base.ProxyProfile`
(``profile.apply``), builds it from scratch at the profile's image size, and trains it for ``profile.epochs``
epochs on ``profile.train_samples`` samples of a :class:`~evaluators.data.DataSplit` with timm's AdamW and
cosine schedule (linear warmup, stepped per optimizer update). Every ``TrainConfig.eval_every`` epochs and
after the last it measures top-1 on the validation split held out of the training set (a search validates
after the last only: its registry entry's default), and after every epoch it calls ``report(epoch,
metrics)`` (``train_loss``, and the validation's metrics where it validated): the hook a search driver
prunes through (an exception raised there propagates and ends the run). A loss that turns NaN or infinite
raises :class:`TrainingDiverged` at once, so a broken run never reads as a chance-level accuracy. With
``TrainConfig.bn_recalibration`` batches, each validation first recomputes BatchNorm's statistics over that
many of the first training images with the trained weights (:func:`~evaluators.steps.recalibrate_bn`): after
a proxy's few hundred steps the running averages belong to weights long changed, and they put a network whose
statistics move fast (``sasa``'s attention stem) tens of points below what its weights score.

On CUDA it trains under ``torch.autocast`` (bf16 where supported, else fp16 with a ``GradScaler``); on the
CPU in fp32. With the same seed, data and thread count a CPU run is bit-for-bit repeatable: the seed fixes the
initial weights, the data order, augmentation and drop-path. :class:`ProxyEvaluator` binds profile, data and
settings so that a driver calls ``evaluate(arch, report=...)`` as the design's evaluator contract asks.
Nothing here knows about Optuna or Ray.

A fidelity ladder (:mod:`nas.study.fidelity`) trains in spans: ``train_proxy(..., fidelity=Fidelity(...))``
trains up to ``fidelity.images`` images in all on a schedule that spans ``fidelity.top_images`` (or, with
``fidelity.restarts``, restarts at every rung boundary so that each rung ends annealed), continuing from the
checkpoint of the rung below when it names one, and saves its own checkpoint (weights, optimizer, grad scaler,
random state, and the position in the data stream: the seeded passes over the profile's ``train_samples``)
when it names where (the top rung does not: nothing continues it). A run continued rung by rung is the same
training as one run to the top: on the CPU, bit for bit. Checkpoints are written and read by
:mod:`evaluators.checkpoint`: tensors and plain values, never code, and a file that is not such a checkpoint
is refused in one sentence.

A single-fidelity run given ``checkpoint=PATH`` saves its state there after every epoch (the same state, plus
the metrics and the seconds so far) and, when the file exists, continues from it: a long training killed
mid-run (the evaluator-quality study's references, 11 epochs of half an hour and more) loses at most the
epoch it was in, and ends as the uninterrupted run would (on the CPU, bit for bit).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2

from evaluators.amp import amp_dtype, autocast, grad_scaler
from evaluators.batches import calibration_batches, check_batch, check_batches, check_profile_holds, loaders
from evaluators.checkpoint import load_checkpoint, restoring, save_checkpoint
from evaluators.complexity import pick_device
from evaluators.data import DataSplit
from evaluators.hyperparams import check_training
from evaluators.steps import backward, recalibrate_bn, update, validate
from nas.core.arch import Arch
from nas.core.create import save_model, weights_name
from nas.core.model import build_model
from search_spaces.base import ProxyProfile

__all__ = ["Fidelity", "ProxyEvaluator", "TrainConfig", "TrainingDiverged", "TrainingStopped", "train_proxy"]

Report = Callable[[int, dict[str, float]], None]

# the trainer's state (_Trainer.state), in a ladder span's checkpoint and in an epoch checkpoint
_STATE_KEYS = ("model", "optimizer", "scaler", "rng", "cuda_rng")
_KEYS = ("arch", "seed", "step", "total_steps", "stream", *_STATE_KEYS)
# an epoch checkpoint of a single-fidelity run: the run it is of, the trainer's state, what the run has so far
_RUN_KEYS = ("run", "epoch", "stream", "so_far", *_STATE_KEYS)
# what such a run has so far, at its start: seconds and images of its epochs, its last validation, and the
# wall and CPU seconds the processes before this one spent in it
_SO_FAR = {
    "train_seconds": 0.0,
    "eval_seconds": 0.0,
    "images": 0,
    "metrics": {},
    "seconds": 0.0,
    "cpu_seconds": 0.0,
}


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite; ``epoch`` (1-based) and ``step`` (within it) say where."""

    def __init__(self, epoch: int, step: int, loss: float, arch_key: str = "") -> None:
        self.epoch, self.step, self.loss = epoch, step, loss
        where = f" for {arch_key}" if arch_key else ""
        super().__init__(f"training diverged{where}: loss {loss} at epoch {epoch}, step {step}")


class TrainingStopped(Exception):
    """A run with an epoch checkpoint stopped after ``epoch`` because its ``stop`` said so; the checkpoint
    holds that epoch, and the same call continues from it."""

    def __init__(self, epoch: int, epochs: int, path: Path) -> None:
        self.epoch, self.epochs, self.path = epoch, epochs, path
        super().__init__(f"training stopped after epoch {epoch} of {epochs}; {path} continues it")


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
    eval_every: int = 1  # validate every n epochs and after the last; n > epochs: after the last only
    opt_kwargs: dict[str, Any] = field(default_factory=dict)
    # training batches over which BatchNorm's statistics are recomputed before each validation (0: validate
    # with the running averages training kept); see evaluators.steps.recalibrate_bn
    bn_recalibration: int = 0

    def __post_init__(self) -> None:
        check_training(self)


# TrainConfig fields added after studies, checkpoints and caches recorded configs without them, each with
# the value under which such a config was measured: a resumed study (nas.study.terms), a resumed training
# (its epoch checkpoint) and a cached result (benchmarks/evaluator_quality.py) read a missing field so
ADDED_FIELDS: dict[str, Any] = {"bn_recalibration": 0}
# TrainConfig fields that set when a run validates, not what it measures: a validation changes no state (a
# BatchNorm recalibration recomputes the statistics from scratch each time and draws no random numbers), so
# the last epoch's metrics are the same whatever their value, and the comparisons below leave them out.
UNMEASURED = frozenset({"eval_every"})


def as_measured(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A config ``recorded`` as a dict and today's ``now``, as they compare: each field ``now`` has that
    ``recorded`` predates (``ADDED_FIELDS``) read as the value it was measured with, and the ``UNMEASURED``
    fields left out of both."""

    def measured(config: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in config.items() if k not in UNMEASURED}

    return measured({**{k: v for k, v in ADDED_FIELDS.items() if k in now}, **recorded}), measured(now)


def check_split(config: TrainConfig | None, *, profile: ProxyProfile, data: DataSplit, **_: Any) -> None:
    """Refuse in one sentence a split that holds fewer images than every trial would train or validate on
    (each trial would fail, charged to the budget), before a search writes its study."""
    check_profile_holds(data, profile)
    check_batch(data, profile.train_samples, profile.batch_size, f"the {profile.name} profile's")
    wanted = (config or TrainConfig()).bn_recalibration
    check_batches(data, profile.train_samples, profile.batch_size, wanted, "bn_recalibration asks for")


@dataclass(frozen=True)
class Fidelity:
    """One span of a laddered training: up to ``images`` images in all (rounded up to whole batches), on a
    schedule spanning ``top_images``, from the checkpoint ``resume`` (None: from scratch), its own state saved
    to ``save`` (None: not saved, as at the top rung, which nothing continues). ``restarts`` (images,
    increasing, below ``top_images``) cut the schedule in pieces: each piece is the whole schedule (warmup in
    the first piece only, then cosine down to the minimum rate) over its own images, so training stopped at a
    restart has just finished annealing (warm restarts, SGDR); empty, one schedule spans the top.
    ``val_images``: validate on the first that many of the profile's validation images (None: all of them).
    ``from_images``: the images the rung below trained (0 at rung 0); the proxy reads its position from the
    checkpoint, a table (:mod:`evaluators.table`) charges the epochs from there."""

    images: int
    top_images: int
    save: Path | None
    resume: Path | None = None
    restarts: tuple[int, ...] = ()
    val_images: int | None = None
    from_images: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.images <= self.top_images:
            raise ValueError(f"fidelity: {self.images} images is not within 1..{self.top_images}")
        bounds = (0, *self.restarts, self.top_images)
        if any(a >= b for a, b in itertools.pairwise(bounds)):
            raise ValueError(
                f"fidelity: restarts {list(self.restarts)} are not increasing within 1..{self.top_images - 1}"
            )
        if self.val_images is not None and self.val_images < 1:
            raise ValueError(f"fidelity: validation on {self.val_images} images")


def forked_rng(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """Seeding inside stays inside: torch's CPU generator and ``device``'s CUDA one are restored on exit,
    so a trainer never moves the caller's random state (a driver's own sampling)."""
    cuda = (
        [torch.cuda.current_device() if device.index is None else device.index]
        if device.type == "cuda"
        else []
    )
    return torch.random.fork_rng(devices=cuda)


def training_memory_format(device: torch.device) -> torch.memory_format:
    """How a trained network keeps its maps on ``device``: channels-last on the CPU, where NCHW took a
    median 1.11x (``coatnet``) and 1.10x (``sasa``) the time of a training step at the cpu profile, 0.94-1.51x
    over their baselines and seeded samples (``benchmarks/bench_memory_format.py``); NCHW elsewhere (not
    measured on GPUs)."""
    return torch.channels_last if device.type == "cpu" else torch.contiguous_format


def build_scaled_network(
    arch: Arch, profile: ProxyProfile, data: DataSplit, seed: int, drop_path_rate: float, device: torch.device
) -> tuple[Arch, nn.Module]:
    """(the profile-scaled arch, its network for ``data`` initialised from ``seed`` on ``device`` in the
    device's :func:`training_memory_format`); seeds torch's global generators, so call it inside
    :func:`forked_rng`."""
    scaled = profile.apply(arch)
    torch.manual_seed(seed)
    model = build_model(
        scaled,
        num_classes=data.num_classes,
        in_chans=data.in_chans,
        img_size=profile.img_size,
        drop_path_rate=drop_path_rate,
    )
    return scaled, model.to(device).use_memory_format(training_memory_format(device))


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
    fidelity: Fidelity | None = None,
    checkpoint: str | Path | None = None,
    stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Train ``profile.apply(arch)`` from scratch (with ``fidelity``: one span of a ladder, the module
    docstring says how); return the final validation metrics and the cost.

    With ``checkpoint`` (single fidelity only) the state is saved there after every epoch, and a run whose
    file exists continues from it (a checkpoint of another network, seed, schedule or config is refused in
    one sentence); ``resumed_epochs`` says how many epochs it held, ``prior_seconds`` and
    ``prior_cpu_seconds`` the wall and CPU seconds the earlier processes spent training and validating (the
    cost columns count them too: ``train_seconds`` and ``eval_seconds`` are the whole run's). The caller
    removes the file once it has kept the result; a complete one returns that result again untrained.
    ``stop`` (with ``checkpoint``), asked after each epoch's checkpoint but the last, ends the run there by
    raising :class:`TrainingStopped` when it returns True: a caller's deadline that loses no work.

    With ``weights_dir`` the trained network is kept there as a model file
    (:func:`nas.core.create.save_model`)
    named by :func:`nas.core.create.weights_name` of ``arch``, and ``weights`` in the result names it.

    Returns ``top1`` (percent, 0..100) and ``loss`` (validation cross-entropy, no smoothing) measured on
    ``val_images`` images, ``train_loss`` (mean of the last epoch), ``train_seconds`` and ``eval_seconds``
    (wall time of the training steps and of the validation passes), ``images_per_second`` (training images
    over ``train_seconds``), ``epochs``, ``params`` (of the proxy network), ``device``, ``amp`` (the
    autocast dtype or ``"fp32"``) and the proxy ``arch`` key. Raises :class:`TrainingDiverged` on a NaN /
    infinite loss; whatever ``report`` raises propagates.
    """
    config = config or TrainConfig()
    if fidelity is not None and checkpoint is not None:
        raise ValueError("a ladder's span keeps its own checkpoint (fidelity.save): pass no checkpoint too")
    if stop is not None and checkpoint is None:
        raise ValueError("a run stopped between epochs continues from its checkpoint: pass one with stop")
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
            val_samples=_val_samples(profile, data, fidelity),
            augment=config.augment,
            device=dev,
            num_workers=num_workers,
        )
        if len(train_batches) == 0:
            raise ValueError(f"{len(data.train)} training samples make no full batch of {profile.batch_size}")
        calibration = (
            calibration_batches(
                data,
                profile.batch_size,
                config.bn_recalibration,
                train_samples=profile.train_samples,
                device=dev,
                num_workers=num_workers,
            )
            if config.bn_recalibration
            else None
        )
        trainer = _Trainer(model, proxy, profile.epochs, config, dev, report, calibration)
        if fidelity is None:
            saved = (
                None
                if checkpoint is None
                else _EpochCheckpoint(Path(checkpoint), seed, config, profile, stop)
            )
            out = trainer.run(train_batches, val_batches, saved)
        else:
            out = trainer.run_span(train_batches, val_batches, fidelity, profile.batch_size, seed)
    if weights_dir is not None:
        name = weights_name(arch)
        meta = {"searched_arch": arch.key, "top1": out["top1"], "seed": seed, **data.normalization()}
        save_model(model, Path(weights_dir) / name, **meta)
        out["weights"] = name
    return out


def _val_samples(profile: ProxyProfile, data: DataSplit, fidelity: Fidelity | None) -> int | None:
    """The validation images a run measures on: the profile's (None: the whole split), or a span's fewer."""
    if fidelity is None or fidelity.val_images is None:
        return profile.val_samples
    return min(fidelity.val_images, profile.val_samples or len(data.val))


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
        calibration: Iterable[Any] | None = None,
    ) -> None:
        self.model, self.arch, self.epochs, self.config = model, arch, epochs, config
        self.device, self.report, self.calibration = device, report, calibration
        self.optimizer = create_optimizer_v2(
            model, opt=config.opt, lr=config.lr, weight_decay=config.weight_decay, **config.opt_kwargs
        )
        self.amp_dtype = amp_dtype(device)
        self.scaler = grad_scaler(self.amp_dtype)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        return autocast(self.device, self.amp_dtype)

    def run(
        self, train_batches: Any, val_batches: Iterable[Any], checkpoint: _EpochCheckpoint | None = None
    ) -> dict[str, Any]:
        """Train every epoch (with ``checkpoint``: those it does not hold yet, saving it after each)."""
        steps = len(train_batches)
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
        so_far: dict[str, Any] = dict(_SO_FAR)
        done = 0
        if checkpoint is not None and checkpoint.path.exists():  # the learning rate is the optimizer's
            done, so_far = checkpoint.load(self, steps, train_batches.generator)
        prior = {key: so_far[key] for key in ("seconds", "cpu_seconds")}
        wall, cpu = time.perf_counter(), time.process_time()
        for epoch in range(done + 1, self.epochs + 1):
            start = time.perf_counter()
            train_loss, seen = self._train_epoch(train_batches, epoch, scheduler, (epoch - 1) * steps)
            so_far["train_seconds"] += self._elapsed(start)
            so_far["images"] += seen
            reported = {"train_loss": train_loss}  # every epoch; with the validation's where it validates
            if not epoch % self.config.eval_every or epoch == self.epochs:
                start = time.perf_counter()
                metrics = self._evaluate(val_batches, epoch)
                so_far["eval_seconds"] += self._elapsed(start)
                metrics["train_loss"] = train_loss
                so_far["metrics"] = reported = metrics
            if self.report is not None:
                self.report(epoch, dict(reported))
            if checkpoint is not None:
                spent = {
                    "seconds": prior["seconds"] + time.perf_counter() - wall,
                    "cpu_seconds": prior["cpu_seconds"] + time.process_time() - cpu,
                }
                checkpoint.save(self, epoch, steps, train_batches.generator, {**so_far, **spent})
                if epoch < self.epochs and checkpoint.stop is not None and checkpoint.stop():
                    raise TrainingStopped(epoch, self.epochs, checkpoint.path)
        train_seconds, images = so_far["train_seconds"], so_far["images"]
        resumed = (
            {}
            if checkpoint is None
            else {"resumed_epochs": done, **{f"prior_{k}": v for k, v in prior.items()}}
        )
        return {
            **so_far["metrics"],
            "train_seconds": train_seconds,
            "eval_seconds": so_far["eval_seconds"],
            "images_per_second": images / train_seconds if train_seconds > 0 else math.nan,
            "epochs": self.epochs,
            "params": sum(p.numel() for p in self.model.parameters()),
            "device": str(self.device),
            "amp": str(self.amp_dtype).removeprefix("torch.") if self.amp_dtype else "fp32",
            "arch": self.arch.key,
            **resumed,
        }

    def run_span(
        self, train_batches: Any, val_batches: Iterable[Any], fidelity: Fidelity, batch_size: int, seed: int
    ) -> dict[str, Any]:
        """Train from the checkpoint ``fidelity.resume`` (or from scratch) to ``fidelity.images``, save the
        state to ``fidelity.save`` (if it names one), validate once."""
        per_pass = len(train_batches)
        end = math.ceil(fidelity.images / batch_size)
        # in updates: where each piece of the schedule ends, the last at the top rung
        ends = tuple(
            dict.fromkeys(math.ceil(i / batch_size) for i in (*fidelity.restarts, fidelity.top_images))
        )
        start, stream_state = 0, None
        if fidelity.resume is not None:
            start, stream_state = self._load(fidelity.resume, ends, seed)
        if start > end:
            raise ValueError(f"checkpoint {fidelity.resume} is past {fidelity.images} images already")
        scheduler = _Restarts(
            [
                create_scheduler_v2(
                    self.optimizer,
                    sched=self.config.sched,
                    num_epochs=b - a,  # in updates
                    warmup_epochs=self.config.warmup_epochs * per_pass if a == 0 else 0,
                    warmup_lr=self.config.warmup_lr,
                    min_lr=self.config.min_lr,
                    step_on_epochs=False,
                    updates_per_epoch=1,
                )[0]
                for a, b in itertools.pairwise((0, *ends))
            ],
            ends,
        )
        # the rate for the update after `start` (a piece made without warmup resets the rate to the peak when
        # created, so the rate the pieces left is not the one the schedule wants)
        scheduler.step_update(num_updates=start)
        stream = _Stream(train_batches, start, end, stream_state)
        began = time.perf_counter()
        train_loss, seen = self._train_epoch(stream, math.ceil(end / per_pass), scheduler, start)
        train_seconds = self._elapsed(began)
        if fidelity.save is not None:
            self._save(fidelity.save, end, ends, seed, stream.state)
        began = time.perf_counter()
        metrics = self._evaluate(val_batches, math.ceil(end / per_pass))
        eval_seconds = self._elapsed(began)
        metrics["train_loss"] = train_loss
        if self.report is not None:
            self.report(math.ceil(end / per_pass), dict(metrics))
        return {
            **metrics,
            "train_seconds": train_seconds,
            "eval_seconds": eval_seconds,
            "images_per_second": seen / train_seconds if train_seconds > 0 else math.nan,
            "epochs": end / per_pass,
            "images": end * batch_size,
            "resumed_images": start * batch_size,
            "params": sum(p.numel() for p in self.model.parameters()),
            "device": str(self.device),
            "amp": str(self.amp_dtype).removeprefix("torch.") if self.amp_dtype else "fp32",
            "arch": self.arch.key,
        }

    def _save(
        self, path: Path, step: int, ends: tuple[int, ...], seed: int, stream_state: torch.Tensor
    ) -> None:
        state = {
            "arch": self.arch.key,
            "seed": seed,
            "step": step,
            "total_steps": ends[-1],
            "restart_steps": list(ends[:-1]),
            "stream": stream_state,
            **self.state(),
        }
        save_checkpoint(state, path)

    def state(self) -> dict[str, Any]:
        """What continuing this training needs of the trainer: weights, optimizer (its rate too), grad
        scaler, torch's generators (drop-path draws from them)."""
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Load :meth:`state`'s entries of ``state`` (inside :func:`~evaluators.checkpoint.restoring`)."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler is not None and state["scaler"] is not None:
            self.scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["rng"])
        if self.device.type == "cuda" and state["cuda_rng"] is not None:
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)

    def _load(self, path: Path, ends: tuple[int, ...], seed: int) -> tuple[int, torch.Tensor]:
        """Restore the state saved at ``path``; (steps done, stream state). A checkpoint of another network,
        seed or schedule is refused in one sentence."""
        if not path.exists():
            raise ValueError(f"checkpoint {path} is missing: the rung below must be trained first")
        state = load_checkpoint(path, _KEYS)
        mine = {
            "arch": self.arch.key,
            "seed": seed,
            "total_steps": ends[-1],
            "restart_steps": list(ends[:-1]),
        }
        theirs = {k: state.get(k, []) for k in mine}  # written before restarts existed: none
        if theirs != mine:
            raise ValueError(f"checkpoint {path} is of {theirs}, not of {mine}")
        with restoring(path):
            self.restore(state)
            return int(state["step"]), state["stream"]

    def _elapsed(self, start: float) -> float:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # kernels are asynchronous: count them in the phase they ran
        return time.perf_counter() - start

    def _train_epoch(
        self, batches: Iterable[Any], epoch: int, scheduler: Any, updates_before: int
    ) -> tuple[float, int]:
        """Train on ``batches``; the schedule's update count starts after ``updates_before``."""
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
            scheduler.step_update(num_updates=updates_before + step)
            total += value * len(y)
            seen += len(y)
        return total / max(seen, 1), seen

    def _step(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        backward(loss, self.scaler)
        update(self.optimizer, self.scaler, self.config.grad_clip, self.model.parameters)

    def _evaluate(self, batches: Iterable[Any], epoch: int) -> dict[str, float]:
        if self.calibration is not None:
            recalibrate_bn(self.model, self.calibration, self.device, self._autocast)
        metrics = validate(self.model, batches, self.device, self._autocast)
        if not math.isfinite(metrics["loss"]):  # finite training loss but NaN logits: broken all the same
            raise TrainingDiverged(epoch, 0, metrics["loss"], self.arch.key)
        return metrics


class _EpochCheckpoint:
    """Where a single-fidelity run keeps its state after each epoch, and what run it is of: the network,
    seed, schedule (the profile's training fields) and config. Data and device are not checked: a caller
    keys its files by what it trains on (as the evaluator-quality study does by its settings). ``stop`` is
    the caller's: asked after each saved epoch but the last, True ends the run there."""

    def __init__(
        self,
        path: Path,
        seed: int,
        config: TrainConfig,
        profile: ProxyProfile,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        self.path, self.stop = path, stop
        schedule = ("epochs", "train_samples", "batch_size", "val_samples")
        self.run = {
            "seed": seed,
            "schedule": {key: getattr(profile, key) for key in schedule},
            "config": asdict(config),
        }

    def _of(self, trainer: _Trainer, steps: int) -> dict[str, Any]:
        return {"arch": trainer.arch.key, "steps_per_epoch": steps, **self.run}

    def save(
        self, trainer: _Trainer, epoch: int, steps: int, generator: torch.Generator, so_far: dict[str, Any]
    ) -> None:
        state = {
            "run": self._of(trainer, steps),
            "epoch": epoch,
            "stream": generator.get_state(),  # the next pass's order and augmentation draw from it
            "so_far": so_far,
            **trainer.state(),
        }
        save_checkpoint(state, self.path)

    def load(self, trainer: _Trainer, steps: int, generator: torch.Generator) -> tuple[int, dict[str, Any]]:
        """Restore the state kept at ``self.path`` into ``trainer`` and ``generator``; (epochs done, what
        the run had so far)."""
        state = load_checkpoint(self.path, _RUN_KEYS)
        mine = self._of(trainer, steps)
        theirs = state["run"] if isinstance(state["run"], dict) else {}  # a hand-edited file: all differ
        if isinstance(theirs.get("config"), Mapping):  # as_measured: fields it predates, eval_every
            was, now = as_measured(theirs["config"], mine["config"])
            theirs, mine = {**theirs, "config": was}, {**mine, "config": now}
        if theirs != mine:
            differ = sorted(k for k in {*mine, *theirs} if mine.get(k) != theirs.get(k))
            raise ValueError(
                f"checkpoint {self.path} is of another run ({', '.join(differ)} differ): remove it to train "
                "from scratch"
            )
        with restoring(self.path):
            trainer.restore(state)
            generator.set_state(state["stream"])
            so_far = {key: state["so_far"][key] for key in _SO_FAR}
            return int(state["epoch"]), so_far


class _Restarts:
    """Schedules run one after the other: ``parts[k]`` over the updates up to ``ends[k]`` (from the end of
    the piece before), the last one holding its final rate past its end."""

    def __init__(self, parts: list[Any], ends: tuple[int, ...]) -> None:
        self.parts, self.ends = parts, ends

    def step_update(self, num_updates: int) -> None:
        begin = 0
        for part, end in zip(self.parts, self.ends, strict=True):
            if num_updates < end or end == self.ends[-1]:
                part.step_update(num_updates=num_updates - begin)
                return
            begin = end


class _Stream:
    """Batches ``start`` (0-based, a count of batches) up to ``end`` of the endless stream of seeded passes
    over ``batches`` (a :class:`~evaluators.batches.TensorBatches` or a DataLoader, both drawing from
    ``batches.generator``). ``state`` is the generator's state at the start of the pass ``start`` falls in;
    after iterating, ``self.state`` is the same for ``end``: what continuing needs."""

    def __init__(self, batches: Any, start: int, end: int, state: torch.Tensor | None = None) -> None:
        self.batches, self.start, self.end = batches, start, end
        if state is not None:
            batches.generator.set_state(state)
        self.state: torch.Tensor = batches.generator.get_state()

    def __iter__(self) -> Iterator[Any]:
        per_pass = len(self.batches)
        position, skip = self.start, self.start % per_pass
        while position < self.end:
            self.state = self.batches.generator.get_state()  # the pass starts: its permutation is next
            for batch in self.batches:
                if skip:  # drawn all the same: augmentation draws from the generator batch by batch
                    skip -= 1
                    continue
                yield batch
                position += 1
                if position == self.end:
                    break
        if position % per_pass == 0:  # the pass is complete: the next starts from the generator as it is
            self.state = self.batches.generator.get_state()


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

    def evaluate(
        self, arch: Arch, report: Report | None = None, fidelity: Fidelity | None = None
    ) -> dict[str, Any]:
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
            fidelity=fidelity,
        )

"""One-shot evaluation: train a weight-sharing supernet once, then score architectures by inherited weights.

:class:`OneShotEvaluator` builds a :class:`~evaluators.supernet.Supernet` over a search space under a proxy
profile
and trains it with uniform single-path sampling (Guo et al. 2020, "Single Path One-Shot"): each step draws one
architecture of the space uniformly, choice by choice, and trains that path. As an option it uses the sandwich
rule with in-place distillation (Yu et al. 2020, "BigNAS"): each step trains the largest path (widest and
deepest everywhere, random ops) on the labels, then the smallest and ``random_paths`` random ones on the
largest path's soft predictions. Training is timm's AdamW (or the config's ``opt``) + cosine schedule stepped
per update, seeded, with a checkpoint after every epoch under ``run_dir`` (``runs/<study>/supernet.pt``:
weights, optimizer and fp16 loss-scaler state, Python ``random``'s state as its tuple of ints, the data
order's generator state as a tensor): a later ``train()`` with the same settings resumes from it, or returns
at once if training had finished. The checkpoint is read as data, never code (:mod:`evaluators.checkpoint`);
a file there that is not a supernet checkpoint of the same settings is refused in one sentence and left as
it is. With ``workers`` > 1 the same loop (:meth:`OneShotEvaluator.fit`) runs data-parallel in Ray Train
workers (:mod:`evaluators.oneshot_ray`), which compute the weights of this process on the same global
batches. The supernet's paths, and the networks extracted from it, run their maps in the device's
:func:`~evaluators.proxy.training_memory_format` (channels-last on the CPU), as proxy training does.

``evaluate(arch)`` extracts the architecture's path as a standalone network, recalibrates its BatchNorm
statistics on ``bn_batches`` training batches (shared statistics belong to no single path; Guo et al.
2020, Sec. 3.3), optionally fine-tunes it for ``finetune_steps`` steps, and measures top-1 on the same
validation samples as the proxy evaluator. The supernet's training seconds are reported by ``train()`` so
that a driver can charge them to the search budget.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2

from evaluators.amp import amp_dtype, autocast, grad_scaler
from evaluators.batches import check_batch, check_batches, check_holds, check_profile_holds, loaders
from evaluators.checkpoint import load_checkpoint, restoring, save_checkpoint
from evaluators.complexity import pick_device
from evaluators.data import DataSplit
from evaluators.data_parallel import Shard
from evaluators.hyperparams import check_training
from evaluators.oneshot_ray import train_on_ray
from evaluators.proxy import TrainingDiverged, forked_rng, training_memory_format
from evaluators.steps import backward, recalibrate_bn, update, validate
from evaluators.supernet import Supernet
from nas.core.arch import Arch
from nas.core.atomic import Held, sole
from nas.core.create import save_model, weights_name
from search_spaces.base import ProxyProfile, RandomTrial, SearchSpace

__all__ = ["OneShotConfig", "OneShotEvaluator", "check_supernet"]

Report = Callable[[int, dict[str, float]], None]

_KEYS = (
    "settings", "epoch", "supernet", "optimizer", "rng", "data_rng", "train_seconds", "images", "steps",
    "train_loss",
)  # fmt: skip
_REMEDY = "move it away or use another run directory (--study)"
_WAIT_SECONDS = 1.0  # how often a process waiting for another's supernet training looks again


@dataclass(frozen=True)
class OneShotConfig:
    """How the supernet is trained and how an architecture is scored with its weights."""

    epochs: int = 4
    train_samples: int | None = 10000  # images per epoch (the first n of the training split)
    batch_size: int = 64
    lr: float = 2e-3
    weight_decay: float = 0.05
    opt: str = "adamw"  # timm's optimizer name (sgd: Nesterov momentum 0.9, as SPOS trains its supernet)
    warmup_epochs: float = 0.2
    min_lr: float = 1e-5
    label_smoothing: float = 0.1
    sandwich: bool = (
        False  # largest + smallest + random paths per step, the others distilled from the largest
    )
    random_paths: int = 1  # random paths per step (with the sandwich rule: besides largest and smallest)
    bn_batches: int = 8  # training batches that recalibrate BatchNorm before scoring
    finetune_steps: int = 0  # optional fine-tuning steps of the extracted network before scoring
    finetune_lr: float = 5e-4

    def __post_init__(self) -> None:
        check_training(self)


# How an architecture is scored with the trained weights, not how they are trained: a supernet checkpoint
# is not keyed by them, so scoring with more recalibration batches or fine-tuning reuses a trained supernet.
SCORING_FIELDS = ("bn_batches", "finetune_steps", "finetune_lr")


def _settings(
    space: SearchSpace, profile: ProxyProfile, data: DataSplit, seed: int, config: OneShotConfig
) -> dict[str, Any]:
    return {
        "space": space.name,
        **({"narrow": space.narrowing} if space.narrowing else {}),  # a whole space's as before narrowing
        "profile": dataclasses.asdict(profile),
        "data": data.describe(),
        "seed": seed,
        # the default optimizer is left out, so supernets trained before ``opt`` existed still resume
        "config": _training_fields(
            {k: v for k, v in dataclasses.asdict(config).items() if (k, v) != ("opt", "adamw")}
        ),
    }


def _training_fields(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in SCORING_FIELDS}


def _read_checkpoint(path: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """The supernet checkpoint at ``path``; refused in one sentence unless trained with ``settings``. A
    checkpoint written before scoring fields were left out of the settings names them: they do not count."""
    state = load_checkpoint(path, _KEYS, _REMEDY)
    trained = state["settings"]
    if isinstance(trained, dict) and isinstance(trained.get("config"), dict):
        trained = {**trained, "config": _training_fields(trained["config"])}
    if trained != settings:
        raise ValueError(
            f"{path} was trained with other settings (space, profile, data, seed or config); "
            "use another run directory or delete it"
        )
    return state


def check_setup(
    config: OneShotConfig | None, *, profile: ProxyProfile, data: DataSplit, **context: Any
) -> None:
    """Refuse in one sentence what the set-up would refuse later, before a search writes its study: a
    ``supernet.pt`` that is not this search's (:func:`check_supernet`), and a split that holds fewer images
    than the supernet trains on or the scoring validates on."""
    config = config or OneShotConfig()
    check_supernet(config, profile=profile, data=data, **context)
    fewer = f"use a larger dataset or set evaluator-config's train_samples to at most {len(data.train)}"
    check_holds(data, "training", config.train_samples, "evaluator-config's train_samples asks for", fewer)
    check_profile_holds(data, profile, training=False)  # the supernet trains on the config's images
    check_batch(data, config.train_samples, config.batch_size, "evaluator-config's batch_size")
    wanted = config.bn_batches + config.finetune_steps  # the scoring's, from one pass of the training images
    check_batches(
        data, config.train_samples, config.batch_size, wanted, "bn_batches + finetune_steps ask for"
    )


def check_supernet(
    config: OneShotConfig | None,
    *,
    space: SearchSpace,
    profile: ProxyProfile,
    data: DataSplit,
    seed: int,
    run_dir: str | Path,
    **_: Any,
) -> None:
    """Refuse ``run_dir``'s ``supernet.pt`` as :meth:`OneShotEvaluator.train` would, without building or
    training anything: a search checks it before it writes its study."""
    path = Path(run_dir) / "supernet.pt"
    if path.exists():
        _read_checkpoint(path, _settings(space, profile, data, seed, config or OneShotConfig()))


class _ExtremeTrial(RandomTrial):
    """Random ops, but every width and depth at its largest (or smallest): the sandwich rule's paths."""

    def __init__(self, rng: random.Random, largest: bool) -> None:
        super().__init__(rng)
        self.pick = max if largest else min

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        if name.endswith((".width", ".depth")):
            self.params[name] = value = self.pick(choices)
            return value
        return super().suggest_categorical(name, choices)

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        if name.endswith((".width", ".depth")):
            self.params[name] = value = high - (high - low) % step if self.pick is max else low
            return value
        return super().suggest_int(name, low, high, step, log)


class OneShotEvaluator:
    """Trains a supernet of ``space`` under ``profile`` once; ``evaluate(arch)`` scores inherited weights."""

    def __init__(
        self,
        space: SearchSpace,
        profile: ProxyProfile,
        data: DataSplit,
        *,
        seed: int = 0,
        config: OneShotConfig | None = None,
        run_dir: str | Path | None = None,
        device: torch.device | str | None = None,
        weights_dir: str | Path | None = None,
        workers: int = 1,
        cpus_per_worker: float = 1.0,
        use_gpu: bool | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if data.img_size != profile.img_size:
            raise ValueError(
                f"data is at {data.img_size} px but profile {profile.name!r} trains at {profile.img_size}"
            )
        self.space, self.profile, self.data, self.seed = space, profile, data, seed
        self.config = config or OneShotConfig()
        self.device = pick_device(device)
        self.checkpoint = Path(run_dir) / "supernet.pt" if run_dir is not None else None
        self.weights_dir = weights_dir  # keep each scored network there (nas export reads them)
        # > 1: the supernet trains data-parallel in Ray Train workers (evaluators.oneshot_ray), each on
        # cpus_per_worker CPUs and, if use_gpu (None: if this evaluator's device is a GPU), one GPU each
        self.workers, self.cpus_per_worker = workers, cpus_per_worker
        self.use_gpu = self.device.type == "cuda" if use_gpu is None else use_gpu
        # weights and inputs; float64 only to check data-parallel AdamW training against one process: in
        # float32 AdamW turns the rounding noise of a gradient that is zero in exact arithmetic (a BatchNorm
        # bias followed by a convolution and another BatchNorm) into steps of the learning rate's size, so
        # one process on 1 and on 2 threads already differs by 7.6e-4 (SGD agrees in float32; see
        # tests/test_oneshot_ray.py)
        self.dtype = dtype
        with forked_rng(self.device):
            torch.manual_seed(seed)
            self.supernet = Supernet(
                space,
                profile,
                num_classes=data.num_classes,
                in_chans=data.in_chans,
                img_size=profile.img_size,
            ).to(self.device, dtype)
        self.supernet.use_memory_format(training_memory_format(self.device))
        self.amp_dtype = amp_dtype(self.device) if dtype == torch.float32 else None
        self.trained = False
        self.info: dict[str, Any] = {}
        self.waited_seconds = 0.0  # train() waited this long for another process training this supernet

    # ------------------------------------------------------------------------------------------ training

    def settings(self) -> dict[str, Any]:
        """What a checkpoint must match to be resumed: space, profile, data, seed and the config."""
        settings = _settings(self.space, self.profile, self.data, self.seed, self.config)
        if self.dtype != torch.float32:
            settings["dtype"] = str(self.dtype)
        return settings

    def _inputs(self, batches: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """``batches`` on this evaluator's device, images in its dtype."""
        for x, y in batches:
            yield x.to(self.device, self.dtype, non_blocking=True), y.to(self.device, non_blocking=True)

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        return autocast(self.device, self.amp_dtype)

    def _paths(self, rng: random.Random) -> list[Arch]:
        cfg = self.config
        if not cfg.sandwich:
            return [self.space.sample(RandomTrial(rng)) for _ in range(cfg.random_paths)]
        extremes = [self.space.sample(_ExtremeTrial(rng, largest)) for largest in (True, False)]
        return extremes + [self.space.sample(RandomTrial(rng)) for _ in range(cfg.random_paths)]

    def train(self, report: Report | None = None) -> dict[str, Any]:
        """Train the supernet (or resume / load it from the checkpoint); returns ``train_seconds`` (this
        call's and all calls' so far), ``epochs``, ``steps``, ``images`` (path-images trained),
        ``train_loss`` and ``workers``. ``report(epoch, metrics)`` is called after every epoch; with
        ``workers`` > 1 the epochs run in Ray Train's workers, so no ``report`` is taken.

        One process at a time trains a run directory's supernet: another that holds it (a second session
        of the study in another terminal, or on another machine sharing the folder) is waited for, then its
        checkpoint is loaded or continued; :attr:`waited_seconds` says how long, which is not this
        process's work."""
        with self._alone():
            info = self._train(report)
        info["waited_seconds"] = self.waited_seconds
        self.info = info
        return dict(info)

    @contextlib.contextmanager
    def _alone(self) -> Iterator[None]:
        """Hold the supernet's lock (``supernet.pt.lock``) inside, first waiting while another process holds
        it (:attr:`waited_seconds`)."""
        start, told = time.perf_counter(), False
        if self.checkpoint is not None:
            self.checkpoint.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:
            while self.checkpoint is not None:
                try:
                    stack.enter_context(sole(self.checkpoint.with_name(self.checkpoint.name + ".lock")))
                    break
                except Held as held:
                    if not told:
                        print(
                            f"waiting for the supernet {self.checkpoint} that {held.holder} is training; "
                            "this process goes on from its checkpoint",
                            file=sys.stderr,
                        )
                        told = True
                    time.sleep(_WAIT_SECONDS)
            self.waited_seconds = time.perf_counter() - start if told else 0.0
            yield

    def _train(self, report: Report | None) -> dict[str, Any]:
        state = self._load_checkpoint()
        spent = float(state["train_seconds"]) if state is not None else 0.0
        if self.workers > 1 and (state is None or int(state["epoch"]) < self.config.epochs):
            if report is not None:
                raise ValueError("report: data-parallel supernet training (workers > 1) reports no epochs")

            state = train_on_ray(self, state)
            if self.checkpoint is not None:
                save_checkpoint(state, self.checkpoint)
        info = self.fit(state, report)
        info["train_seconds_this_call"] = info["train_seconds"] - spent
        info["workers"] = self.workers
        return info

    def fit(
        self,
        state: dict[str, Any] | None,
        report: Report | None = None,
        shard: Shard | None = None,
        save: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """The training loop, from ``state`` (a checkpoint's dict; None: from the start) to the last epoch.
        After every epoch the checkpoint's dict goes to ``save`` (default: the run directory's file). With a
        ``shard`` this process is one worker of a data-parallel run: it trains on its share of every global
        batch and averages gradients and losses with the others, so every worker takes the same steps."""
        cfg, net = self.config, self.supernet
        save = save or self._save_checkpoint
        optimizer = create_optimizer_v2(net, opt=cfg.opt, lr=cfg.lr, weight_decay=cfg.weight_decay)
        scaler = grad_scaler(self.amp_dtype)
        rng = random.Random(self.seed)  # every worker draws the same path sequence from the same seed
        start_epoch, spent, images, steps_done, loss_value = 1, 0.0, 0, 0, math.nan
        data_state = None
        if state is not None:
            with restoring(self.checkpoint, _REMEDY):
                net.load_state_dict(state["supernet"])
                optimizer.load_state_dict(state["optimizer"])
                if scaler is not None and state.get("scaler"):  # fp16's loss scale (older files: none)
                    scaler.load_state_dict(state["scaler"])
                rng.setstate(state["rng"])
                data_state = state["data_rng"]
                start_epoch = int(state["epoch"]) + 1
                spent, images = float(state["train_seconds"]), int(state["images"])
                steps_done, loss_value = int(state["steps"]), float(state["train_loss"])
        train_batches, _ = loaders(
            self.data,
            cfg.batch_size,
            seed=self.seed,
            train_samples=cfg.train_samples,
            device=self.device,
        )
        if data_state is not None:  # a resumed epoch sees the data order of an uninterrupted run
            with restoring(self.checkpoint, _REMEDY):
                train_batches.generator.set_state(data_state)
        steps = len(train_batches)
        if steps == 0:
            raise ValueError(
                f"{len(self.data.train)} training samples make no full batch of {cfg.batch_size}"
            )
        scheduler, _ = create_scheduler_v2(
            optimizer,
            sched="cosine",
            num_epochs=cfg.epochs,
            warmup_epochs=cfg.warmup_epochs,
            warmup_lr=1e-5,
            min_lr=cfg.min_lr,
            step_on_epochs=False,
            updates_per_epoch=steps,
        )
        if start_epoch > 1:  # the scheduler's constructor reset the learning rate to its warmup value
            scheduler.step_update(num_updates=(start_epoch - 1) * steps)
        net.train()
        for epoch in range(start_epoch, cfg.epochs + 1):
            begin, total, seen = time.perf_counter(), 0.0, 0
            for step, (x, y) in enumerate(self._inputs(train_batches), start=1):
                if shard is not None:  # every worker reads the same global batch and trains on its share
                    x, y = shard.take(x), shard.take(y)
                value = self._train_step(x, y, rng, optimizer, scaler, shard)
                if not math.isfinite(value):
                    raise TrainingDiverged(epoch, step, value, f"the {self.space.name} supernet")
                scheduler.step_update(num_updates=(epoch - 1) * steps + step)
                global_batch = len(y) * (shard.world if shard is not None else 1)
                total += value * global_batch
                seen += global_batch
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            elapsed = time.perf_counter() - begin
            spent += elapsed
            images += seen * (cfg.random_paths + 2 * cfg.sandwich)
            steps_done += steps
            loss_value = total / max(seen, 1)
            save(
                {
                    "settings": self.settings(),
                    "epoch": epoch,
                    "supernet": self.supernet.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "scaler": scaler.state_dict() if scaler is not None else None,
                    "rng": rng.getstate(),  # (version, tuple of 625 ints, gauss_next): plain values
                    "data_rng": train_batches.generator.get_state(),
                    "train_seconds": spent,
                    "images": images,
                    "steps": steps_done,
                    "train_loss": loss_value,
                }
            )
            if report is not None:
                report(epoch, {"train_loss": loss_value, "train_seconds": spent})
        self.trained = True
        return {
            "train_seconds": spent,
            "epochs": cfg.epochs,
            "steps": steps_done,
            "images": images,
            "train_loss": loss_value,
            "params": sum(p.numel() for p in net.parameters()),
            "device": str(self.device),
        }

    def _train_step(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        rng: random.Random,
        optimizer: torch.optim.Optimizer,
        scaler: torch.amp.GradScaler | None,
        shard: Shard | None = None,
    ) -> float:
        cfg, net = self.config, self.supernet
        optimizer.zero_grad(set_to_none=True)
        teacher: torch.Tensor | None = None
        first = 0.0
        for i, arch in enumerate(self._paths(rng)):
            net.set_active(arch)
            with self._autocast():
                logits = net(x)
                if teacher is None:
                    loss = F.cross_entropy(logits, y, label_smoothing=cfg.label_smoothing)
                else:  # in-place distillation: the largest path's predictions are the target
                    loss = F.cross_entropy(logits, teacher)
            if i == 0:
                first = loss.item()
                # a worker alone may stop at a non-finite loss; workers must all reach the all-reduce
                if shard is None and not math.isfinite(first):
                    return first
                if cfg.sandwich:
                    teacher = logits.detach().float().softmax(-1)
            backward(loss, scaler)
        if shard is not None:
            first = shard.average(net, first)
            if not math.isfinite(first):
                return first
        update(optimizer, scaler)
        return first

    def _save_checkpoint(self, state: dict[str, Any]) -> None:
        if self.checkpoint is not None:
            save_checkpoint(state, self.checkpoint)

    def read_checkpoint(self, path: Path) -> dict[str, Any]:
        """The supernet checkpoint at ``path``; refused in one sentence unless it has this run's settings."""
        return _read_checkpoint(path, self.settings())

    def _load_checkpoint(self) -> dict[str, Any] | None:
        if self.checkpoint is None or not self.checkpoint.exists():
            return None
        return self.read_checkpoint(self.checkpoint)

    # ------------------------------------------------------------------------------------------ scoring

    def evaluate(self, arch: Arch, report: Report | None = None) -> dict[str, Any]:
        """Top-1 (percent) of ``arch`` with the supernet's weights, after BatchNorm recalibration; with a
        ``weights_dir`` the scored network is kept there as a model file (``weights`` names it)."""
        if not self.trained:
            self.train()
        cfg = self.config
        start = time.perf_counter()
        model = self.supernet.extract(arch).to(self.device)
        train_batches, val_batches = loaders(
            self.data,
            cfg.batch_size,
            seed=self.seed + 1,
            train_samples=cfg.train_samples,
            val_samples=self.profile.val_samples,
            device=self.device,
        )
        batches = _take(self._inputs(train_batches), cfg.bn_batches + cfg.finetune_steps)
        if cfg.finetune_steps:
            self._finetune(model, batches[: cfg.finetune_steps])
        recalibrate_bn(model, batches[cfg.finetune_steps :], self.device, self._autocast)
        metrics = validate(model, self._inputs(val_batches), self.device, self._autocast)
        metrics["eval_seconds"] = time.perf_counter() - start
        metrics["arch"] = model.arch.key
        if self.weights_dir is not None:  # the inherited, recalibrated weights: what was scored
            name = weights_name(arch)
            meta = {"searched_arch": arch.key, "top1": metrics["top1"], **self.data.normalization()}
            save_model(model, Path(self.weights_dir) / name, **meta)
            metrics["weights"] = name
        if report is not None:
            report(1, dict(metrics))
        return metrics

    def _finetune(self, model: nn.Module, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        optimizer = create_optimizer_v2(model, opt="adamw", lr=self.config.finetune_lr, weight_decay=0.0)
        scaler = grad_scaler(self.amp_dtype)  # fp16 on a GPU without bf16: unscaled gradients underflow
        model.train()
        for x, y in batches:
            with self._autocast():
                loss = F.cross_entropy(model(x), y, label_smoothing=self.config.label_smoothing)
            optimizer.zero_grad(set_to_none=True)
            backward(loss, scaler)
            update(optimizer, scaler)


def _take(batches: Iterator[Any], n: int) -> list[Any]:
    out = []
    for batch in batches:
        if len(out) == n:
            break
        out.append(batch)
    return out

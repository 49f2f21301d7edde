"""The training settings of a config, refused in one sentence when it is made, not in every trial.

A proxy, one-shot or full-training config is checked as it is built (``__post_init__``), so a search refuses
a bad ``evaluator-config`` before it writes its study and ``nas train`` before it loads data. Without this a
negative learning rate, a scheduler timm does not know or an optimizer keyword it refuses passed the config
and failed every trial of the search, each one charged to the budget.

What is checked: the optimizer's name (timm's registry), the numbers of the schedule, the counts of
BatchNorm calibration batches and the epochs between validations against the bounds below; where the config
has them, the scheduler's name and the optimizer's extra keywords, each by building timm's scheduler or
optimizer for one throwaway parameter (timm holds no list of its schedulers, and only the optimizer's
constructor knows which keywords it takes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from nas.core.bounds import MAX_EPOCHS, number, shown, whole

__all__ = ["MAX_LR", "check_training"]

MAX_LR = 100.0  # the largest published rates are LARS's at batch 32k, about 30
MAX_WEIGHT_DECAY = 10.0  # AdamW uses 0.05-0.3, Lion 3-10x that
MAX_MIX_ALPHA = 100.0  # Mixup and CutMix draw from Beta(alpha, alpha): 0.2-1.0 in published recipes
MAX_GRAD_CLIP = 1e6
MAX_CALIBRATION_BATCHES = 10_000  # BatchNorm statistics settle within tens of batches

# name: (low, high, whether low itself is refused)
_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "lr": (0.0, MAX_LR, True),
    "finetune_lr": (0.0, MAX_LR, True),
    "warmup_lr": (0.0, MAX_LR, False),
    "min_lr": (0.0, MAX_LR, False),
    "weight_decay": (0.0, MAX_WEIGHT_DECAY, False),
    "warmup_epochs": (0.0, float(MAX_EPOCHS), False),
    "label_smoothing": (0.0, 1.0, False),
    "drop_path_rate": (0.0, 1.0, False),
    "grad_clip": (0.0, MAX_GRAD_CLIP, True),  # None: no clipping
    "mixup": (0.0, MAX_MIX_ALPHA, False),
    "cutmix": (0.0, MAX_MIX_ALPHA, False),
    "mix_switch_prob": (0.0, 1.0, False),
}

# name: (low, high) of a setting that counts batches or epochs
_WHOLE: dict[str, tuple[int, int]] = {
    "bn_recalibration": (0, MAX_CALIBRATION_BATCHES),
    "bn_batches": (0, MAX_CALIBRATION_BATCHES),
    "eval_every": (1, MAX_EPOCHS),  # validate every n epochs: 0 would divide by zero in every trial
}


def _check_optimizer(setting: str, name: str) -> None:
    """Refuse in one sentence an optimizer name timm's ``create_optimizer_v2`` would not know."""
    from timm.optim import list_optimizers

    base = name.lower().removeprefix("lookahead_")
    if base not in list_optimizers():
        raise ValueError(f"{setting}: timm has no optimizer {name!r} (such as adamw, sgd, lamb or lion)")


def check_training(config: Any, label: Callable[[str], str] = str) -> None:
    """Refuse, in one sentence naming the setting (``label(field name)``), a training setting of the
    dataclass ``config`` that training would refuse or that makes no sense: see the module's docstring."""
    _check_optimizer(label("opt"), config.opt)
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    for name, (low, high, above) in _BOUNDS.items():
        if values.get(name) is not None:
            number(label(name), values[name], low, high, above=above)
    for name, (low, high) in _WHOLE.items():
        if name in values:
            whole(label(name), values[name], low, high)
    if "sched" in values:
        _check_scheduler(label("sched"), values["sched"])
    if values.get("opt_kwargs"):
        _check_optimizer_keywords(label("opt_kwargs"), config)


def _throwaway_optimizer(opt: str, **kwargs: Any) -> Any:
    import torch
    from timm.optim import create_optimizer_v2

    return create_optimizer_v2(torch.nn.Linear(1, 1), opt=opt, **kwargs)


def _check_scheduler(setting: str, name: str) -> None:
    from timm.scheduler import create_scheduler_v2

    optimizer = _throwaway_optimizer("sgd", lr=0.1)
    try:
        create_scheduler_v2(optimizer, sched=name, num_epochs=2, updates_per_epoch=1)
    except ValueError:
        known = "such as cosine, step or poly"
        raise ValueError(f"{setting}: timm has no scheduler {shown(name)} ({known})") from None


def _check_optimizer_keywords(setting: str, config: Any) -> None:
    try:
        _throwaway_optimizer(config.opt, lr=config.lr, weight_decay=config.weight_decay, **config.opt_kwargs)
    except (TypeError, ValueError) as error:
        given = shown(config.opt_kwargs)
        raise ValueError(f"{setting}: timm's {config.opt} optimizer refuses {given} ({error})") from None

"""What every search space provides, and the pieces they share.

A :class:`SearchSpace` is written define-by-run against Optuna's ``Trial`` API (``suggest_categorical`` and
``suggest_int`` only), so the same ``sample`` runs under an Optuna study, ``optuna.trial.FixedTrial`` and Ray
Tune's ``OptunaSearch``. ``encode(arch)`` is its inverse: the trial params for which ``sample`` returns
``arch``; ``contains`` replays them through ``sample`` with a trial that refuses any value outside the
declared choices, so membership is decided by the one definition of the space.
"""

from __future__ import annotations

import math
import random
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from nas.core.arch import Arch, Stage

__all__ = ["Baseline", "PaperFigure", "ProxyProfile", "RandomTrial", "SearchSpace"]


@dataclass(frozen=True)
class PaperFigure:
    """A network's cost as its paper prints it. ``flops[img_size]`` is in the paper's own convention:
    ``"MACs"`` (one multiply-add = 1, as fvcore and CoAtNet) or ``"2xMACs"`` (multiply and add counted
    separately, as SASA's "FLOPS")."""

    source: str
    convention: str
    params: float | None = None
    flops: tuple[tuple[int, float], ...] = ()

    def __post_init__(self) -> None:
        if self.convention not in ("MACs", "2xMACs"):
            raise ValueError(f"convention: unknown value {self.convention!r}; allowed: MACs, 2xMACs")

    def flops_at(self, img_size: int) -> float | None:
        return dict(self.flops).get(img_size)

    def to_paper_convention(self, macs: float) -> float:
        return 2 * macs if self.convention == "2xMACs" else macs


@dataclass(frozen=True)
class Baseline:
    """A hand-designed network reproduced as a point of the space."""

    name: str
    arch: Arch
    paper: PaperFigure


@dataclass(frozen=True)
class ProxyProfile:
    """How to shrink an architecture, and train it, for a cheap proxy of its accuracy.

    Widths are scaled by ``width_mult`` (rounded to multiples of 8), depths by ``depth_mult`` (rounded up, at
    least 1), and the first ``relax_strides`` stages with stride 2 run at stride 1, so that small images
    (``img_size``) keep a useful map at the last stage. Training sees the first ``train_samples`` of the
    training split for ``epochs`` epochs, validation the first ``val_samples`` of the validation split
    (None = all of it).
    """

    name: str
    img_size: int
    width_mult: float = 1.0
    depth_mult: float = 1.0
    relax_strides: int = 0
    epochs: int = 1
    batch_size: int = 64
    train_samples: int | None = None
    val_samples: int | None = None
    description: str = ""

    def apply(self, arch: Arch) -> Arch:
        stem = replace(arch.stem, width=_scale_width(arch.stem.width, self.width_mult))
        stages, relax = [], self.relax_strides
        for stage in arch.stages:
            stride = stage.stride
            if relax and stride == 2:
                stride, relax = 1, relax - 1
            stages.append(
                _fit_heads(
                    stage,
                    width=_scale_width(stage.width, self.width_mult, stage),
                    depth=max(1, math.ceil(stage.depth * self.depth_mult)),
                    stride=stride,
                )
            )
        head = arch.head
        if head.width is not None:
            head = replace(head, width=_scale_width(head.width, self.width_mult))
        return Arch(stem, tuple(stages), head)


def _scale_width(width: int, mult: float, stage: Stage | None = None) -> int:
    quantum = 8 * (stage.expand if stage is not None and stage.block == "bottleneck" else 1)
    return max(quantum, round(width * mult / quantum) * quantum)


def _fit_heads(stage: Stage, **changes: Any) -> Stage:
    """``stage`` with ``changes``; a default head count follows the new width (one head per 32 channels for
    rel/ext), an explicit one is kept; either is lowered to the largest count the new width allows."""
    if stage.mixer == "conv":
        return replace(stage, **changes)
    resized = replace(stage, heads=1, **changes)  # one head fits the multiple-of-8 widths profiles produce
    wanted = resized.default_heads if stage.heads == stage.default_heads else stage.heads
    return replace(resized, heads=resized.max_heads(wanted))


class _ReplayTrial:
    """Answers ``suggest_*`` from fixed params like ``FixedTrial``, but refuses values outside the choices."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.used: set[str] = set()

    def _get(self, name: str) -> Any:
        if name not in self.params:
            raise ValueError(f"{name}: missing")
        self.used.add(name)
        return self.params[name]

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        value = self._get(name)
        if value not in choices:
            raise ValueError(
                f"{name}: {value!r} is not a choice of the space; allowed: {', '.join(map(str, choices))}"
            )
        return value

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        value = self._get(name)
        if not isinstance(value, int) or not low <= value <= high or (value - low) % step:
            raise ValueError(f"{name}: {value!r} is outside the space's range {low}..{high} (step {step})")
        return value


class RandomTrial:
    """Answers ``suggest_*`` uniformly at random from a seeded ``random.Random`` (each choice, each integer of
    a range equally likely); ``params`` records the answers. One-shot training samples paths with it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.params: dict[str, Any] = {}

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        self.params[name] = value = choices[self.rng.randrange(len(choices))]
        return value

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        self.params[name] = value = low + step * self.rng.randrange((high - low) // step + 1)
        return value


class SearchSpace(ABC):
    """A set of architectures, how to sample them define-by-run, and the baselines inside them."""

    name: str = ""
    description: str = ""
    profiles: ClassVar[dict[str, ProxyProfile]] = {}

    @abstractmethod
    def sample(self, trial: Any) -> Arch:
        """Draw one architecture through ``trial.suggest_categorical`` / ``trial.suggest_int``."""

    @abstractmethod
    def encode(self, arch: Arch) -> dict[str, Any]:
        """The trial params for which :meth:`sample` returns ``arch`` (ValueError if it cannot be encoded)."""

    @abstractmethod
    def choices(self) -> dict[str, str]:
        """Human-readable choices per decision, for ``nas spaces``."""

    @abstractmethod
    def decisions(self) -> dict[str, tuple[Any, ...] | range]:
        """Every decision :meth:`sample` may ask, by its trial parameter name, with all its values in the
        order the space offers them: a ``range`` for a decision asked with ``suggest_int``. These are what
        ``--narrow`` narrows (:mod:`search_spaces.narrowed`)."""

    @abstractmethod
    def count(self, domains: Mapping[str, Sequence[Any]]) -> int:
        """How many distinct architectures :meth:`sample` makes when each decision takes only the values
        ``domains[name]`` (all of :meth:`decisions`, or some of each)."""

    def cardinality(self) -> int:
        """Number of distinct architectures in the space."""
        return self.count(self.decisions())

    @property
    def narrowing(self) -> dict[str, list[Any]]:
        """The decisions this space keeps to some of their values (``{}``: a whole space)."""
        return {}

    @abstractmethod
    def baselines(self) -> dict[str, Baseline]:
        """The hand-designed networks of the papers, as points of this space."""

    def baseline_names(self) -> dict[str, str]:
        """Each distinct baseline network's ``key`` and name, in the order of :meth:`baselines`; where two
        baselines are one network (the layout study's C-C-T-T is CoAtNet-0) the first name stands for both.
        A search runs these, and names a sampled network that equals one of them by that name."""
        names: dict[str, str] = {}
        for name, baseline in self.baselines().items():
            names.setdefault(baseline.arch.key, name)
        return names

    def supernet_cover(self) -> list[Arch]:
        """Architectures of the space that together take every choice at its largest (every op with the
        largest k, depth and memory, every width, every stem): a weight-sharing supernet is the union of
        their blocks. A space without one has no supernet."""
        raise NotImplementedError(f"the {self.name} space defines no supernet cover")

    def stage_slots(self, arch: Arch) -> tuple[int, ...]:
        """For each stage of ``arch``, the 1-based index of the space's stage slot it fills (its ``s<i>``
        choices). Behind a patch stem the coatnet space fills only its later slots."""
        params = self.encode(arch)
        slots = tuple(int(m.group(1)) for name in params if (m := re.fullmatch(r"s(\d+)\.depth", name)))
        if len(slots) != len(arch.stages):
            raise ValueError(f"{arch.key}: {len(arch.stages)} stages but {len(slots)} stage slots")
        return slots

    def sample_random(self, rng: random.Random | int) -> Arch:
        """One architecture drawn uniformly choice by choice (``rng`` or a seed for a fresh one)."""
        return self.sample(RandomTrial(rng if isinstance(rng, random.Random) else random.Random(rng)))

    def why_not(self, arch: Arch) -> str | None:
        """``None`` if ``arch`` is in the space, else one sentence saying why not."""
        try:
            params = self.encode(arch)
            trial = _ReplayTrial(params)
            replayed = self.sample(trial)
        except ValueError as err:
            return str(err)
        if replayed != arch:
            return f"the space builds {replayed.key} from these choices, not {arch.key}"
        if trial.used != set(params):
            return f"choices not used by the space: {', '.join(sorted(set(params) - trial.used))}"
        return None

    def contains(self, arch: Arch) -> bool:
        return self.why_not(arch) is None

    def profile(self, name: str) -> ProxyProfile:
        try:
            return self.profiles[name]
        except KeyError:
            raise ValueError(
                f"unknown proxy profile {name!r} for space {self.name!r}; available: "
                f"{', '.join(sorted(self.profiles))}"
            ) from None

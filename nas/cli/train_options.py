"""The options of ``nas train`` and ``nas retrain``, each declared once (:func:`nas.core.declare.declare`):
the commands' parameters (:mod:`nas.cli.options`) and the reference page (:mod:`nas.cli.reference`) are
generated from these fields. Both commands share :class:`ScheduleOptions`, the training schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nas.core.bounds import MAX_BATCH, MAX_EPOCHS, MAX_IMAGES, MAX_SEED, whole
from nas.core.declare import declare

__all__ = ["RetrainOptions", "ScheduleOptions", "TrainOptions"]

_DATASETS = "fashion-mnist | cifar10 | cifar100 | imagefolder:PATH."
_DOWNLOAD = "Download the dataset with torchvision if no copy is found."


@dataclass(frozen=True)
class ScheduleOptions:
    """The training schedule of ``nas train`` and ``nas retrain``: a recipe's pieces, then those given."""

    epochs: int = declare(10, "Passes over the training images.")
    batch_size: int = declare(64, "Images per step.")
    train_samples: int | None = declare(None, "Training images used.", shown="all")
    lr: float = declare(1e-3, "AdamW learning rate.")
    recipe: str | None = declare(
        None, "coatnet: RandAugment, Mixup/CutMix, EMA as the CoAtNet paper; flags override it."
    )
    randaugment: str | None = declare(None, "timm RandAugment, e.g. rand-m9-mstd0.5-inc1.", shown="none")
    mixup: float | None = declare(None, "Mixup alpha (0: none).", shown="0")
    cutmix: float | None = declare(None, "CutMix alpha (0: none).", shown="0")
    ema_decay: float | None = declare(None, "EMA of the weights, e.g. 0.9999 (0: none).", shown="0")

    def config(self, **fields: Any) -> Any:
        """The :class:`~evaluators.train.FullTrainConfig` of this schedule (``fields`` on top: the seed);
        ValueError in one sentence for a count out of bounds or an unknown recipe."""
        from evaluators.train import RECIPES, FullTrainConfig  # heavy: torch, only to train

        whole("epochs", self.epochs, 1, MAX_EPOCHS)
        whole("batch-size", self.batch_size, 1, MAX_BATCH)
        if self.train_samples is not None:
            whole("train-samples", self.train_samples, 1, MAX_IMAGES)
        if self.recipe is not None and self.recipe not in RECIPES:
            raise ValueError(f"recipe: unknown {self.recipe!r}; known: {', '.join(RECIPES)}")
        given = {"randaugment": self.randaugment, "mixup": self.mixup, "cutmix": self.cutmix}
        given["ema_decay"] = self.ema_decay
        pieces = {**RECIPES.get(self.recipe or "", {}), **{k: v for k, v in given.items() if v is not None}}
        return FullTrainConfig(
            epochs=self.epochs,
            batch_size=self.batch_size,
            train_samples=self.train_samples,
            lr=self.lr,
            **pieces,
            **fields,
        )


@dataclass(frozen=True)
class TrainOptions:
    """``nas train``'s options beside the schedule: the data, the scale, the seed, the run folder."""

    dataset: str = declare("fashion-mnist", _DATASETS)
    data_dir: str | None = declare(None, "Where the dataset lives.")
    download: bool = declare(False, _DOWNLOAD)
    space: str | None = declare(
        None, "Space whose profile scales the network.", shown="the space that holds it, else coatnet"
    )
    profile: str | None = declare(None, "cpu | gpu | full.", shown="full with CUDA, else cpu")
    seed: int = declare(0, "Seed of the weights, the data split and order.")
    out: str | None = declare(None, "Run folder.", shown="runs/train/<arch file>")
    resume: bool = declare(False, "Continue the run in --out.")

    def __post_init__(self) -> None:
        whole("seed", self.seed, 0, MAX_SEED)


@dataclass(frozen=True)
class RetrainOptions:
    """``nas retrain``'s options beside the schedule: which networks, the seeds, the data, the folders."""

    trial: list[int] | None = declare(
        None, "Trial to retrain (repeatable).", shown="the Pareto front", cli=list[int]
    )
    top: int | None = declare(None, "Only the front's N best by the first objective.")
    baselines: bool = declare(
        True, "Do not retrain the baselines (and enqueued networks) the study ran.", flag="--no-baselines"
    )
    seeds: str = declare("0,1,2", "Seeds, each a training of every network.")
    profile: str | None = declare(None, "cpu | gpu | full.", shown="the study's profile")
    dataset: str | None = declare(None, _DATASETS, shown="the study's")
    data_dir: str | None = declare(None, "Where the dataset lives.")
    download: bool = declare(False, _DOWNLOAD)
    out: str | None = declare(None, "Folder.", shown="runs/<study>/retrain")
    runs_dir: str = declare("runs", "Folder of the run directories.")

    def seed_list(self) -> list[int]:
        """The seeds, each a whole number within bounds (ValueError in one sentence otherwise)."""
        items = [item.strip() for item in self.seeds.split(",")]
        if not all(item.isdigit() for item in items):
            raise ValueError(f"seeds: whole numbers separated by commas, such as 0,1,2; got {self.seeds!r}")
        return [whole("seeds", int(item), 0, MAX_SEED) for item in items]

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
_SCORE_ON = "test: the official test split, which no search opens | val: the held-out training images."
_TEST_FOLDER = "Folder of imagefolder's test split (class folders)."
_TEST_SHOWN = "PATH/test, else PATH/val"


def _check_score(score_on: str, test_folder: str | None) -> None:
    if score_on not in ("test", "val"):
        raise ValueError(f"score-on: test or val, not {score_on!r}")
    if test_folder is not None and score_on != "test":
        raise ValueError("test-folder: it names the test split, which --score-on val does not score on")


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
    score_on: str = declare("test", _SCORE_ON)
    test_folder: str | None = declare(None, _TEST_FOLDER, shown=_TEST_SHOWN)
    out: str | None = declare(None, "Run folder.", shown="runs/train/<arch file>")
    resume: bool = declare(False, "Continue the run in --out.")

    def __post_init__(self) -> None:
        whole("seed", self.seed, 0, MAX_SEED)
        _check_score(self.score_on, self.test_folder)


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
    max_cost_ratio: float | None = declare(
        None, "Compare only with baselines of at most R x a found network's MACs.", shown="every one"
    )
    controls: int = declare(3, "Random architectures per found network, no costlier than it (0: none).")
    control_seed: int = declare(0, "Seed of the random controls.")
    plateau: bool = declare(
        True, "Skip the plateau check (two networks trained twice as long).", flag="--no-plateau"
    )
    score_on: str = declare("test", _SCORE_ON)
    allow_seen_images: bool = declare(False, "With --score-on val: score on images the study saw.")
    test_folder: str | None = declare(None, _TEST_FOLDER, shown=_TEST_SHOWN)
    dataset: str | None = declare(None, _DATASETS, shown="the study's")
    data_dir: str | None = declare(None, "Where the dataset lives.")
    download: bool = declare(False, _DOWNLOAD)
    out: str | None = declare(None, "Folder.", shown="runs/<study>/retrain")
    runs_dir: str = declare("runs", "Folder of the run directories.")

    def __post_init__(self) -> None:
        whole("controls", self.controls, 0, 20)
        whole("control-seed", self.control_seed, 0, MAX_SEED)
        _check_score(self.score_on, self.test_folder)
        if self.allow_seen_images and self.score_on != "val":
            raise ValueError(
                "allow-seen-images: only with --score-on val (the test split holds no such images)"
            )

    def seed_list(self) -> list[int]:
        """The seeds, each a whole number within bounds (ValueError in one sentence otherwise)."""
        items = [item.strip() for item in self.seeds.split(",")]
        if not all(item.isdigit() for item in items):
            raise ValueError(f"seeds: whole numbers separated by commas, such as 0,1,2; got {self.seeds!r}")
        return [whole("seeds", int(item), 0, MAX_SEED) for item in items]

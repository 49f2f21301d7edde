"""Batches for training and validation, of a :class:`~evaluators.data.DataSplit` (:mod:`evaluators.data` finds
the images and holds out the validation split).

:func:`loaders` serves an in-memory set (:class:`~evaluators.data.TensorImages`) as normalized float batches
by indexing its one uint8 tensor (:class:`TensorBatches`), with seeded shuffling and optional batched
augmentation (random crop with padding and horizontal flip), instead of a per-sample PIL pipeline; timm's
RandAugment, when asked for, goes through PIL per image after them (:mod:`evaluators.augment`), seeded from
the batches' generator. Image files (``imagefolder:PATH``) go through torchvision's transforms and a
``DataLoader``.

Nothing here knows about models, Optuna or Ray.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from evaluators.augment import RandAugmentBatch, rand_augment
from evaluators.data import DataSplit, FileImages, TensorImages, match_channels
from nas.core.option_names import setting

__all__ = ["TensorBatches", "calibration_batches", "loaders"]


class TensorBatches:
    """Normalized float batches of a :class:`TensorImages`, by indexing; one seeded permutation per pass.

    Iterating again continues the same random stream, so epoch ``e`` of a run with a given seed always sees
    the same order. Augmentation (random crop from a zero-padded image, horizontal flip) is done per batch
    on tensors.
    """

    def __init__(
        self,
        data: TensorImages,
        batch_size: int,
        mean: Sequence[float],
        std: Sequence[float],
        *,
        shuffle: bool = False,
        augment: bool = False,
        drop_last: bool = False,
        seed: int = 0,
        device: torch.device | str | None = None,
        randaugment: RandAugmentBatch | None = None,
    ) -> None:
        self.device = torch.device(device or "cpu")
        self.randaugment = randaugment
        # Keep the uint8 images where the model runs: a small set fits on a GPU, and indexing there is free.
        self.images = data.images.to(self.device)
        self.labels = data.labels.to(self.device)
        self.batch_size, self.shuffle, self.augment, self.drop_last = batch_size, shuffle, augment, drop_last
        # Fold 1/255 into the affine normalization: x = u8 * scale + shift.
        std_t = torch.tensor(std, device=self.device).view(1, -1, 1, 1)
        self.scale = 1 / (255 * std_t)
        self.shift = -torch.tensor(mean, device=self.device).view(1, -1, 1, 1) / std_t
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        n = len(self.labels)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = len(self.labels)
        order = torch.randperm(n, generator=self.generator) if self.shuffle else torch.arange(n)
        order = order.to(self.device)
        for i in range(len(self)):
            idx = order[i * self.batch_size : (i + 1) * self.batch_size]
            x = self.images[idx]
            if self.augment:
                x = self._augment(x)
            if self.randaugment is not None:
                x = self.randaugment(x, int(torch.randint(2**31 - 1, (1,), generator=self.generator)))
            yield x.float() * self.scale + self.shift, self.labels[idx]

    def _augment(self, x: torch.Tensor, pad: int = 4) -> torch.Tensor:
        """Random crop of the zero-padded image plus horizontal flip, as one ``gather`` over the batch
        (five times faster on the CPU than advanced indexing with per-sample offsets)."""
        b, c, h, w = x.shape
        side = w + 2 * pad
        offsets = torch.randint(0, 2 * pad + 1, (2, b), generator=self.generator).to(self.device)
        flip = (torch.rand(b, generator=self.generator) < 0.5).to(self.device)
        rows = offsets[0, :, None] + torch.arange(h, device=self.device)  # (B, H) rows of the padded image
        cols = offsets[1, :, None] + torch.arange(w, device=self.device)
        cols = torch.where(flip[:, None], cols.flip(1), cols)
        index = (rows[:, :, None] * side + cols[:, None, :]).view(b, 1, h * w).expand(b, c, h * w)
        padded = F.pad(x, (pad, pad, pad, pad)).view(b, c, -1)
        return padded.gather(2, index).view(b, c, h, w)


def check_holds(data: DataSplit, part: str, wanted: int | None, asker: str, remedy: str) -> None:
    """ValueError in one sentence if the ``part`` (``"training"`` or ``"validation"``) of ``data`` holds
    fewer than the ``wanted`` images (None: all of them) that ``asker`` asks for; ``remedy`` ends it."""
    held = len(data.train if part == "training" else data.val)
    if wanted is not None and wanted > held:
        raise ValueError(f"dataset: {data.name} holds {held} {part} images and {asker} {wanted}; {remedy}")


def check_profile_holds(data: DataSplit, profile: Any, *, training: bool = True) -> None:
    """:func:`check_holds` for the images a proxy profile validates on, and with ``training`` trains on."""
    fewer = f"use a larger dataset or a profile that asks for fewer ({setting('profile', 'gpu')} takes all)"
    if training:
        check_holds(data, "training", profile.train_samples, f"the {profile.name} profile trains on", fewer)
    check_holds(data, "validation", profile.val_samples, f"the {profile.name} profile validates on", fewer)


def check_batch(data: DataSplit, train_samples: int | None, batch_size: int, asker: str) -> None:
    """ValueError in one sentence if the training images used make no full batch of ``batch_size``."""
    used = len(data.train) if train_samples is None else min(train_samples, len(data.train))
    if used < batch_size:
        raise ValueError(
            f"dataset: {data.name} gives {used} training images, not one batch of {asker} {batch_size}; "
            "use a larger dataset or a smaller batch"
        )


def check_batches(
    data: DataSplit, train_samples: int | None, batch_size: int, wanted: int, asker: str
) -> None:
    """ValueError in one sentence if ``wanted`` batches of the training images a run uses are more than
    those images make: they would be cut short to that, without a word."""
    used = len(data.train) if train_samples is None else min(train_samples, len(data.train))
    whole = used // batch_size
    if wanted > whole:
        raise ValueError(
            f"evaluator-config: {asker} {wanted:,} batches of {batch_size}, but the {used:,} training images "
            f"a run uses make {whole:,}; give at most {whole:,}"
        )


def loaders(
    split: DataSplit,
    batch_size: int,
    *,
    seed: int = 0,
    train_samples: int | None = None,
    val_samples: int | None = None,
    augment: bool = False,
    device: torch.device | str | None = None,
    num_workers: int = 0,
    randaugment: str = "",
) -> tuple[TensorBatches | DataLoader, TensorBatches | DataLoader]:
    """(train, val) iterables of ``(x, y)`` batches; train is shuffled with ``seed``, drops its last partial
    batch and uses the first ``train_samples`` samples of ``split.train``, val the first ``val_samples`` of
    ``split.val`` (None = all). ``randaugment`` (timm's string, '' for none) adds RandAugment to the
    training batches."""
    for what, n, held in (("training", train_samples, split.train), ("validation", val_samples, split.val)):
        if n is not None and n > len(held):
            raise ValueError(f"asked for {n} {what} samples; the split holds {len(held)}")
    train, val = split.train.head(train_samples), split.val.head(val_samples)
    if isinstance(train, TensorImages) and isinstance(val, TensorImages):
        common = {"mean": split.mean, "std": split.std, "device": device}
        ra = RandAugmentBatch(randaugment, split.mean, split.img_size) if randaugment else None
        return (
            TensorBatches(
                train,
                batch_size,
                shuffle=True,
                augment=augment,
                drop_last=True,
                seed=seed,
                randaugment=ra,
                **common,
            ),
            TensorBatches(val, batch_size, **common),
        )
    return _file_loaders(split, train, val, batch_size, seed, augment, device, num_workers, randaugment)


def _file_loaders(
    split: DataSplit,
    train: FileImages,
    val: FileImages,
    batch_size: int,
    seed: int,
    augment: bool,
    device: torch.device | str | None,
    num_workers: int,
    randaugment: str,
) -> tuple[DataLoader, DataLoader]:
    from torchvision.transforms import v2

    size = split.img_size
    tail, fixed = _to_tensor(split), _fixed_size(split)
    # files are read as RGB: RandAugment fills with the mean of each of the three channels
    ra = [rand_augment(randaugment, match_channels(split.mean, 3), size)] if randaugment else []
    train_tf = v2.Compose(
        ([v2.RandomResizedCrop(size), v2.RandomHorizontalFlip()] if augment else fixed) + ra + tail
    )
    pin = torch.device(device or "cpu").type == "cuda"
    common = {"batch_size": batch_size, "num_workers": num_workers, "pin_memory": pin}
    return (
        DataLoader(
            train.with_transform(train_tf),
            shuffle=True,
            drop_last=True,
            generator=torch.Generator().manual_seed(seed),
            **common,
        ),
        DataLoader(val.with_transform(v2.Compose(fixed + tail)), **common),
    )


def _fixed_size(split: DataSplit) -> list[Any]:
    """The transforms that bring an image file to the split's size without randomness (validation's)."""
    from torchvision.transforms import v2

    return [v2.Resize(split.img_size), v2.CenterCrop(split.img_size)]


def _to_tensor(split: DataSplit) -> list[Any]:
    """The transforms from a PIL image at size to the normalized float tensor the networks take."""
    from torchvision.transforms import v2

    tail = [v2.PILToTensor()]
    if split.in_chans == 1:
        tail.insert(0, v2.Grayscale(1))
    return [*tail, v2.ToDtype(torch.float32, scale=True), v2.Normalize(split.mean, split.std)]


def calibration_batches(
    split: DataSplit,
    batch_size: int,
    batches: int,
    *,
    train_samples: int | None = None,
    device: torch.device | str | None = None,
    num_workers: int = 0,
) -> TensorBatches | DataLoader:
    """``batches`` batches of training images (the first of the ``train_samples`` a run trains on: the split
    shuffled them, so a seeded subset), in a fixed order and prepared as validation images are (no
    augmentation): what recomputes a network's BatchNorm statistics before it is validated. They draw
    nothing from the training batches' generator, so a run's training is the same with or without them."""
    images = split.train.head(train_samples).head(batches * batch_size)
    if isinstance(images, TensorImages):
        return TensorBatches(images, batch_size, mean=split.mean, std=split.std, device=device)
    from torchvision.transforms import v2

    prepared = images.with_transform(v2.Compose(_fixed_size(split) + _to_tensor(split)))
    pin = torch.device(device or "cpu").type == "cuda"
    return DataLoader(prepared, batch_size=batch_size, num_workers=num_workers, pin_memory=pin)

"""timm's RandAugment (Cubuk et al. 2020) on the in-memory uint8 batches of :mod:`evaluators.data`, and the
seeded host generators that make it (and timm's Mixup / CutMix) repeatable.

``timm.data.auto_augment.rand_augment_transform`` works on PIL images: each image of a uint8 batch
``(B, C, H, W)`` becomes a PIL image (mode ``L`` for one channel, as Fashion-MNIST's; ``RGB`` for three),
goes through it, and comes back as uint8, so the ops see pixel values on their 0..255 scale and fill the
area a rotation, shear or translation uncovers with the dataset's mean (one value per channel). One op is
mended: Pillow 11 refuses ``posterize(img, 0)`` (keep no bit), which timm's ``PosterizeIncreasing`` asks for
at magnitude 10; keeping no bit is a black image, as older Pillow made it.

timm draws these augmentations from Python's ``random`` and NumPy's global generators. :func:`host_rng`
seeds both for one batch and restores them after; the seed is drawn from a torch generator whose state a
checkpoint keeps, so a resumed run repeats an uninterrupted one bit for bit.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from nas.core.bounds import shown

__all__ = ["RandAugmentBatch", "host_rng", "rand_augment"]


@contextmanager
def host_rng(seed: int) -> Iterator[None]:
    """Python's and NumPy's global generators seeded with ``seed`` inside the block, as they were after."""
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def _posterize(img: Any, bits_to_keep: int, **_: Any) -> Any:
    from timm.data.auto_augment import posterize

    return img.point(lambda _: 0) if bits_to_keep <= 0 else posterize(img, bits_to_keep)


class _Refused(ValueError):
    """A section of a RandAugment string that timm would skip silently or that asks for unbounded work."""


# timm's numeric sections: magnitude, operations per image, magnitude noise and cap, increasing ops, and the
# chance each op applies; ``t...`` names a set of ops. timm skips a section it cannot split into a key and
# a number (``rand-m9-zz``, ``rand-mfoo``) without a word, so a typo would train without the intended setting.
_SECTION = re.compile(r"(?P<key>mstd|mmax|inc|m|n|p)(?P<value>\d+(\.\d+)?)|t.+")
MAX_RAND_OPS = 16  # operations per image: RandAugment's paper uses 1-3; each one costs a PIL round trip


def _check_sections(config: str) -> None:
    head, *sections = config.split("-")
    if head != "rand":
        raise _Refused(f"it must start with 'rand', not {shown(head)}")
    for section in sections:
        match = _SECTION.fullmatch(section)
        if match is None:
            raise _Refused(
                f"section {shown(section)} is none of m, n, mstd, mmax, inc or p with a number, or t"
            )
        if match["key"] == "n" and float(match["value"]) > MAX_RAND_OPS:
            raise _Refused(f"section {shown(section)} asks for more than {MAX_RAND_OPS} operations per image")


def rand_augment(config: str, mean: Sequence[float], img_size: int) -> Any:
    """timm's RandAugment transform of PIL images for ``config`` (timm's string, such as
    ``rand-m9-mstd0.5-inc1``), filling with ``mean`` (per channel, on the 0..1 scale); ValueError in one
    sentence for a string timm cannot read."""
    from timm.data.auto_augment import rand_augment_transform

    hparams = {"translate_const": int(img_size * 0.45), "img_mean": tuple(round(255 * m) for m in mean)}
    try:
        _check_sections(config)
        transform = rand_augment_transform(config, hparams)
    except (AssertionError, KeyError, ValueError, IndexError) as err:
        reason = f"{err}" if isinstance(err, _Refused) else f"{type(err).__name__}: {err}".removesuffix(": ")
        raise ValueError(
            f"randaugment: {shown(config)} is not a RandAugment setting timm reads, such as "
            f"rand-m9-mstd0.5-inc1 ({reason})"
        ) from None
    for op in transform.ops:
        if op.name.startswith("Posterize"):
            op.aug_fn = _posterize
    return transform


class RandAugmentBatch:
    """RandAugment applied to each image of a uint8 batch ``(B, C, H, W)``, one or three channels; the batch's
    ops and magnitudes are drawn from ``seed``."""

    def __init__(self, config: str, mean: Sequence[float], img_size: int) -> None:
        self.transform = rand_augment(config, mean, img_size)

    def __call__(self, x: torch.Tensor, seed: int) -> torch.Tensor:
        from PIL import Image

        if x.dtype != torch.uint8 or x.dim() != 4 or x.shape[1] not in (1, 3):
            raise ValueError(
                f"RandAugment takes uint8 batches of 1 or 3 channels, not {x.dtype} {tuple(x.shape)}"
            )
        images = x.cpu().numpy()
        out = np.empty_like(images)
        with host_rng(seed):
            for i, image in enumerate(images):
                pil = (
                    Image.fromarray(image[0])
                    if image.shape[0] == 1
                    else Image.fromarray(image.transpose(1, 2, 0))
                )
                done = np.asarray(self.transform(pil))
                out[i] = done[None] if done.ndim == 2 else done.transpose(2, 0, 1)
        return torch.from_numpy(out).to(x.device)

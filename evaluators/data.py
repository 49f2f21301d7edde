"""Datasets for proxy training: where the images come from, the held-out validation split, and fast batches.

This module owns:

- finding a dataset on disk (:func:`load_dataset`): an explicit ``data_dir``, then ``$NAS_DATA``, then the
  system copy (Debian's ``dataset-fashion-mnist`` in ``/usr/share/datasets/fashion-mnist``), then
  torchvision's download only when the caller allows it; a missing dataset is one ``ValueError`` sentence
  naming every path looked at and how to get the data;
- the validation split: a fixed, seeded subset held out of the *training* set (the test set is never read, so
  a search never sees it); ``train_samples`` takes a seeded subset of the rest;
- preprocessing: the small in-memory sets (``fashion-mnist``, ``cifar10``, ``cifar100``, ``synthetic``) are
  resized once to the proxy's ``img_size`` and kept as one uint8 tensor; :func:`loaders` serves normalized
  batches by indexing it, with seeded shuffling and optional batched augmentation (random crop with padding
  and horizontal flip), instead of a per-sample PIL pipeline; timm's RandAugment, when asked for, goes
  through PIL per image after them (:mod:`evaluators.augment`), seeded from the batches' generator.
  ``imagefolder:PATH`` (ImageNet layout) is too big for that and goes through torchvision's ``ImageFolder``
  and a ``DataLoader``.

Nothing here knows about models, Optuna or Ray.
"""

from __future__ import annotations

import gzip
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from evaluators.augment import RandAugmentBatch, rand_augment
from nas.option_names import option

__all__ = [
    "DATASETS",
    "DataSplit",
    "FileImages",
    "TensorBatches",
    "TensorImages",
    "cache_dir",
    "load_dataset",
    "loaders",
]

DATASETS = ("fashion-mnist", "cifar10", "cifar100", "imagefolder:PATH", "synthetic")
SYSTEM_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")  # Debian's dataset-fashion-mnist
_FASHION_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte")
_FASHION_FILES += ("t10k-labels-idx1-ubyte",)  # torchvision checks all four before it reads any

# Per-channel statistics of each training set, on the [0, 1] scale.
_STATS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "fashion-mnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "imagefolder": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),  # ImageNet's, as timm
    "synthetic": ((0.5,), (0.25,)),
}


class TensorImages(Dataset):
    """Images preprocessed once: ``images`` uint8 (N, C, H, W) at the target size, ``labels`` int64 (N,)."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        if images.dtype != torch.uint8 or images.ndim != 4 or len(images) != len(labels):
            raise ValueError(f"expected uint8 (N, C, H, W) images and N labels, got {tuple(images.shape)}")
        self.images, self.labels = images, labels.long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.images[i], int(self.labels[i])

    def head(self, n: int | None) -> TensorImages:
        """The first ``n`` samples (all if None): the split shuffled them, so this is a seeded subset."""
        return self if n is None or n >= len(self) else TensorImages(self.images[:n], self.labels[:n])


class FileImages(Dataset):
    """Image files read and transformed per sample (``imagefolder``): ``samples`` are (path, class) pairs."""

    def __init__(self, samples: Sequence[tuple[str, int]], transform: object = None) -> None:
        self.samples, self.transform = list(samples), transform
        self.labels = torch.tensor([c for _, c in self.samples], dtype=torch.long)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        from torchvision.datasets.folder import default_loader

        path, label = self.samples[i]
        image = default_loader(path)
        return (self.transform(image) if self.transform else image), label

    def head(self, n: int | None) -> FileImages:
        return self if n is None or n >= len(self) else FileImages(self.samples[:n], self.transform)

    def with_transform(self, transform: object) -> FileImages:
        return FileImages(self.samples, transform)


@dataclass(frozen=True)
class DataSplit:
    """A training set and the validation set held out of it, at one image size.

    ``train_index`` / ``val_index`` are the samples' positions in the source training set (for an
    ``imagefolder`` with a ``train/`` folder, in ``train/``), so a manifest can record the split exactly.
    ``mean`` / ``std`` are per channel on the [0, 1] scale; :func:`loaders` applies them.
    """

    name: str
    train: TensorImages | FileImages
    val: TensorImages | FileImages
    num_classes: int
    in_chans: int
    img_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    source: str
    train_index: torch.Tensor
    val_index: torch.Tensor
    seed: int = 0

    def normalization(self) -> dict[str, list[float]]:
        """What a network trained on this split expects of its input, as a model file keeps it: per-channel
        ``mean`` and ``std`` on the [0, 1] scale (``(image / 255 - mean) / std``)."""
        return {"mean": [float(m) for m in self.mean], "std": [float(s) for s in self.std]}

    def describe(self) -> dict[str, object]:
        """What a run manifest records about its data."""
        return {
            "dataset": self.name,
            "source": self.source,
            "train": len(self.train),
            "val": len(self.val),
            "num_classes": self.num_classes,
            "in_chans": self.in_chans,
            "img_size": self.img_size,
            "split_seed": self.seed,
        }


def cache_dir() -> Path:
    """Where unpacked copies go: ``$NAS_DATA`` if set, else ``$XDG_CACHE_HOME/nas/data`` (``~/.cache``)."""
    if os.environ.get("NAS_DATA"):
        return Path(os.environ["NAS_DATA"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")).expanduser() / "nas" / "data"


def load_dataset(
    name: str,
    *,
    img_size: int,
    data_dir: str | os.PathLike[str] | None = None,
    in_chans: int | None = None,
    val_size: int | float = 0.1,
    seed: int = 0,
    train_samples: int | None = None,
    download: bool = False,
) -> DataSplit:
    """Load ``name``'s training set, hold ``val_size`` of it out (a fraction in (0, 1) or a count) with
    ``seed``, keep ``train_samples`` of the rest (None = all), resized to ``img_size``.

    ``in_chans`` converts channels (1 -> 3 repeats gray, 3 -> 1 takes luminance); None keeps the dataset's.
    """
    kind, _, arg = name.partition(":")
    if kind == "imagefolder":
        if not arg:
            raise ValueError("imagefolder needs a path: 'imagefolder:/path/to/imagenet'")
        return _imagefolder(Path(arg).expanduser(), img_size, in_chans, val_size, seed, train_samples)
    if kind == "synthetic":
        images, labels, source = _synthetic(img_size, in_chans or 3, seed, train_samples, val_size)
    elif kind == "fashion-mnist":
        images, labels, source = _fashion_mnist(data_dir, download)
    elif kind in ("cifar10", "cifar100"):
        images, labels, source = _cifar(kind, data_dir, download)
    else:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    train_index, val_index = split_indices(len(labels), val_size, seed, train_samples)
    mean, std = _STATS[kind]
    prepare = _prepare_fn(img_size, in_chans)
    train = TensorImages(prepare(images[train_index]), labels[train_index])
    val = TensorImages(prepare(images[val_index]), labels[val_index])
    chans = train.images.shape[1]
    mean, std = _match_channels(mean, chans), _match_channels(std, chans)
    num_classes = 100 if kind == "cifar100" else 10
    return DataSplit(
        kind, train, val, num_classes, chans, img_size, mean, std, source, train_index, val_index, seed
    )


def split_indices(
    n: int, val_size: int | float, seed: int, train_samples: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Seeded (train, val) positions in a training set of ``n``: val is the head of one permutation, train a
    head of the rest, so the val split does not depend on ``train_samples`` and smaller train sets nest."""
    n_val = round(n * val_size) if isinstance(val_size, float) and val_size < 1 else int(val_size)
    if not 0 < n_val < n:
        raise ValueError(f"val_size {val_size!r} leaves no training or no validation samples out of {n}")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    train = perm[n_val:] if train_samples is None else perm[n_val : n_val + train_samples]
    return train, perm[:n_val]


def _prepare_fn(img_size: int, in_chans: int | None) -> Callable[[torch.Tensor], torch.Tensor]:
    def prepare(images: torch.Tensor) -> torch.Tensor:
        return _resize_uint8(_convert_channels(images, in_chans), img_size)

    return prepare


def _resize_uint8(images: torch.Tensor, size: int, chunk: int = 4096) -> torch.Tensor:
    """Bilinear (antialiased) resize of uint8 NCHW images, in chunks so the float copy stays small."""
    if images.shape[-2:] == (size, size):
        return images.contiguous()
    out = torch.empty((*images.shape[:2], size, size), dtype=torch.uint8)
    for i in range(0, len(images), chunk):
        part = images[i : i + chunk].float()
        part = F.interpolate(part, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
        out[i : i + chunk] = part.round_().clamp_(0, 255).to(torch.uint8)
    return out


def _convert_channels(images: torch.Tensor, in_chans: int | None) -> torch.Tensor:
    have = images.shape[1]
    if in_chans is None or in_chans == have:
        return images
    if have == 1:
        return images.expand(-1, in_chans, -1, -1)
    if have == 3 and in_chans == 1:
        weights = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)  # ITU-R 601 luma, as PIL's "L"
        return (images.float() * weights).sum(1, keepdim=True).round_().to(torch.uint8)
    raise ValueError(f"cannot convert {have}-channel images to in_chans={in_chans}")


def _match_channels(stat: tuple[float, ...], chans: int) -> tuple[float, ...]:
    if len(stat) == chans:
        return stat
    return (sum(stat) / len(stat),) * chans  # gray from RGB, or gray repeated into RGB


# ----------------------------------------------------------------------------------------- dataset sources


def _candidate_roots(data_dir: str | os.PathLike[str] | None) -> list[Path]:
    """User roots in resolution order: the explicit argument, then ``$NAS_DATA``."""
    roots = [Path(data_dir).expanduser()] if data_dir is not None else []
    if os.environ.get("NAS_DATA"):
        roots.append(Path(os.environ["NAS_DATA"]).expanduser())
    return roots


def _missing(name: str, looked: Sequence[Path], how: str) -> ValueError:
    paths = ", ".join(str(p) for p in looked) or "(no path given)"
    return ValueError(f"{name} not found (looked in {paths}); to get it, {how}.")


def _fashion_mnist(
    data_dir: str | os.PathLike[str] | None, download: bool
) -> tuple[torch.Tensor, torch.Tensor, str]:
    from torchvision.datasets import FashionMNIST

    looked: list[Path] = []
    roots = _candidate_roots(data_dir)
    for root in roots:
        # a torchvision root (FashionMNIST/raw/ inside) or a folder holding the files as Debian ships them
        for raw in (root / "FashionMNIST" / "raw", root, root / "fashion-mnist"):
            looked.append(raw)
            if _has_files(raw, _FASHION_FILES, ""):
                torchvision_layout = raw == root / "FashionMNIST" / "raw"
                return _read_fashion(raw.parent if torchvision_layout else _unpack_fashion(raw), str(raw))
            if _has_files(raw, _FASHION_FILES, ".gz"):
                return _read_fashion(_unpack_fashion(raw), str(raw))
    looked.append(SYSTEM_FASHION_MNIST)
    if _has_files(SYSTEM_FASHION_MNIST, _FASHION_FILES, ".gz"):
        return _read_fashion(_unpack_fashion(SYSTEM_FASHION_MNIST), str(SYSTEM_FASHION_MNIST))
    cached = cache_dir() / "FashionMNIST" / "raw"  # an earlier download, or a copy unpacked before
    looked.append(cached)
    if _has_files(cached, _FASHION_FILES, ""):
        return _read_fashion(cached.parent, str(cached))
    if download:
        root = roots[0] if roots else cache_dir()  # the user's root, else the cache the next run reads
        with _downloading("Fashion-MNIST", root):
            FashionMNIST(str(root), train=True, download=True)
        return _read_fashion(root / "FashionMNIST", f"{root} (downloaded)")
    raise _missing(
        "Fashion-MNIST",
        looked,
        "run `apt-get install dataset-fashion-mnist`, set NAS_DATA or pass "
        f"{option('data_dir', 'PATH')} to a folder holding its *-ubyte.gz files, or allow torchvision's "
        f"download with {option('download')}",
    )


@contextmanager
def _downloading(name: str, root: Path) -> Iterator[None]:
    """torchvision's download, whose failure (no network, a refused host, a full disk) is one sentence."""
    try:
        yield
    except (OSError, RuntimeError) as err:  # URLError and HTTPError are OSErrors
        reason = " ".join(str(getattr(err, "reason", None) or err).split()) or type(err).__name__
        raise ValueError(f"{name}: the download into {root} failed ({reason})") from None


def _has_files(folder: Path, names: Sequence[str], suffix: str) -> bool:
    return all((folder / (n + suffix)).is_file() for n in names)


def _unpack_fashion(source: Path) -> Path:
    """Gunzip the four files into ``<cache>/FashionMNIST/raw/`` once; return ``<cache>/FashionMNIST``.

    Each file is written to a temporary name and renamed, so trials starting in parallel never read a half
    written file.
    """
    target = cache_dir() / "FashionMNIST" / "raw"
    target.mkdir(parents=True, exist_ok=True)
    for name in _FASHION_FILES:
        if (target / name).is_file():
            continue
        gz = (source / (name + ".gz")).is_file()
        opener = gzip.open if gz else open
        with opener(source / (name + (".gz" if gz else "")), "rb") as src:
            fd, tmp = tempfile.mkstemp(dir=target, prefix=name + ".")
            with os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst)
        os.replace(tmp, target / name)
    return target.parent


def _read_fashion(folder: Path, source: str) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Read the training half through torchvision; ``folder`` is ``<root>/FashionMNIST``."""
    from torchvision.datasets import FashionMNIST

    ds = FashionMNIST(str(folder.parent), train=True, download=False)
    return ds.data.unsqueeze(1).contiguous(), ds.targets.long(), source


def _cifar(
    kind: str, data_dir: str | os.PathLike[str] | None, download: bool
) -> tuple[torch.Tensor, torch.Tensor, str]:
    from torchvision.datasets import CIFAR10, CIFAR100

    cls, folder = (CIFAR10, "cifar-10-batches-py") if kind == "cifar10" else (CIFAR100, "cifar-100-python")
    roots = [*_candidate_roots(data_dir), cache_dir()]
    for root in roots:
        if (root / folder).is_dir():
            return _read_cifar(cls(str(root), train=True, download=False), str(root / folder))
    if download:
        root = roots[0]
        with _downloading(kind.upper(), root):
            ds = cls(str(root), train=True, download=True)
        return _read_cifar(ds, f"{root / folder} (downloaded)")
    raise _missing(
        kind.upper(),
        [r / folder for r in roots],
        f"set NAS_DATA or pass {option('data_dir', 'PATH')} to a torchvision CIFAR root, or allow "
        f"torchvision's download with {option('download')}",
    )


def _read_cifar(ds: Dataset, source: str) -> tuple[torch.Tensor, torch.Tensor, str]:
    images = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()  # NHWC uint8 -> NCHW
    return images, torch.tensor(ds.targets, dtype=torch.long), source


def _synthetic(
    img_size: int, in_chans: int, seed: int, train_samples: int | None, val_size: int | float
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Noise plus a per-class smooth pattern: learnable, deterministic in ``seed``, for unit tests only."""
    n_val = int(val_size) if not isinstance(val_size, float) or val_size >= 1 else 0
    n_train = train_samples or 1000
    n = n_train + n_val if n_val else math.ceil(n_train / (1 - float(val_size)))
    gen = torch.Generator().manual_seed(seed)
    patterns = F.interpolate(torch.randn(10, in_chans, 4, 4, generator=gen), size=img_size, mode="bilinear")
    labels = torch.randint(0, 10, (n,), generator=gen)
    images = (
        0.5 + 0.15 * patterns[labels] + 0.15 * torch.randn(n, in_chans, img_size, img_size, generator=gen)
    )
    return (images * 255).round_().clamp_(0, 255).to(torch.uint8), labels, f"synthetic(seed={seed})"


def _imagefolder(
    path: Path,
    img_size: int,
    in_chans: int | None,
    val_size: int | float,
    seed: int,
    train_samples: int | None,
) -> DataSplit:
    """ImageNet layout: class folders under ``PATH/train/`` (``PATH/val/`` is the test set and is left
    alone) or directly under ``PATH``; the validation split is held out of the training folder."""
    from torchvision.datasets import ImageFolder

    root = path / "train" if (path / "train").is_dir() else path
    if not root.is_dir():
        raise _missing("image folder", [path], "pass imagefolder:PATH with class folders under PATH/train/")
    folder = ImageFolder(str(root))
    labels = torch.tensor(folder.targets, dtype=torch.long)
    train_index, val_index = split_indices(len(labels), val_size, seed, train_samples)
    chans = in_chans or 3
    mean, std = (_match_channels(s, chans) for s in _STATS["imagefolder"])
    samples = folder.samples
    train = FileImages([samples[i] for i in train_index.tolist()])
    val = FileImages([samples[i] for i in val_index.tolist()])
    return DataSplit(
        f"imagefolder:{path}", train, val, len(folder.classes), chans, img_size, mean, std, str(root),
        train_index, val_index, seed,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------ batches


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
    tail = [v2.PILToTensor()]
    if split.in_chans == 1:
        tail.insert(0, v2.Grayscale(1))
    tail += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(split.mean, split.std)]
    fixed = [v2.Resize(size), v2.CenterCrop(size)]
    # files are read as RGB: RandAugment fills with the mean of each of the three channels
    ra = [rand_augment(randaugment, _match_channels(split.mean, 3), size)] if randaugment else []
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

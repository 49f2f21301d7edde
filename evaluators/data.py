"""Datasets for proxy training: where the images come from, and the held-out validation split.

This module owns:

- finding a dataset on disk (:func:`load_dataset`): an explicit ``data_dir``, then ``$NAS_DATA``, then the
  system copy (Debian's ``dataset-fashion-mnist`` in ``/usr/share/datasets/fashion-mnist``), then
  torchvision's download only when the caller allows it; a missing dataset is one ``ValueError`` sentence
  naming every path looked at and how to get the data;
- the validation split: a fixed, seeded subset held out of the *training* set (the test set is never read, so
  a search never sees it); ``train_samples`` takes a seeded subset of the rest;
- preprocessing: the small in-memory sets (``fashion-mnist``, ``cifar10``, ``cifar100``, ``synthetic``) are
  resized once to the proxy's ``img_size`` and kept as one uint8 tensor (:class:`TensorImages`);
  ``imagefolder:PATH`` (ImageNet layout) is too big for that and stays as files (:class:`FileImages`).
  :mod:`evaluators.batches` serves batches of either.

Nothing here knows about models, Optuna or Ray.
"""

from __future__ import annotations

import gzip
import math
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from nas.core.option_names import option

__all__ = [
    "DATASETS",
    "DataSplit",
    "FileImages",
    "TensorImages",
    "UnreadableImage",
    "cache_dir",
    "load_dataset",
    "locate_fashion_mnist",
    "match_channels",
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


class UnreadableImage(ValueError):
    """An image file of a dataset that cannot be read or decoded: bad input, one sentence naming the file.

    Raised in a ``DataLoader`` worker, it reaches the caller re-made by the loader with the worker's whole
    traceback as its message; ``str()`` gives back the sentence (the traceback's last line)."""

    def __str__(self) -> str:
        text = super().__str__()
        # how a traceback's last line starts
        raised_as = f"{type(self).__module__}.{type(self).__qualname__}: "
        return text.rsplit(raised_as, 1)[-1].strip() if raised_as in text else text


class FileImages(Dataset):
    """Image files read and transformed per sample (``imagefolder``): ``samples`` are (path, class) pairs."""

    def __init__(self, samples: Sequence[tuple[str, int]], transform: object = None) -> None:
        self.samples, self.transform = list(samples), transform
        self.labels = torch.tensor([c for _, c in self.samples], dtype=torch.long)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        from PIL import Image, UnidentifiedImageError
        from torchvision.datasets.folder import default_loader

        path, label = self.samples[i]
        try:
            image = default_loader(path)  # opens and decodes (PIL's convert)
        except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
            why = "no image format PIL knows" if isinstance(err, UnidentifiedImageError) else f"{err}"
            raise UnreadableImage(
                f"{path} cannot be read as an image ({why}); remove or replace the file"
            ) from None
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


def locate_fashion_mnist(data_dir: str | os.PathLike[str] | None = None, download: bool = False) -> str:
    """Where Fashion-MNIST is read from (as :func:`load_dataset` finds it, reading it once to be sure it is
    whole); ValueError in one sentence where it is missing (``not found``) or damaged."""
    return _fashion_mnist(data_dir, download)[2]


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
    mean, std = match_channels(mean, chans), match_channels(std, chans)
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


def match_channels(stat: tuple[float, ...], chans: int) -> tuple[float, ...]:
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
        # the files as shipped (gzip) name the data before an unpacked copy beside them: with $NAS_DATA
        # holding them, the copy :func:`_unpack_fashion` makes lands in this root, and the source a run
        # reports (which the benchmarks' caches key results by) must not change once it is there
        shipped = next(
            (r for r in (root, root / "fashion-mnist") if _has_files(r, _FASHION_FILES, ".gz")), None
        )
        if shipped is not None:
            looked.append(shipped)
            return _read_fashion(_unpack_fashion(shipped), str(shipped))
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


@contextmanager
def _reading(name: str, where: Path | str) -> Iterator[None]:
    """Reading a copy of a dataset (the user's, the system's or the cache's): a damaged or truncated file is
    one sentence naming the copy, not the traceback of torchvision's reader."""
    try:
        yield
    except (OSError, RuntimeError, AssertionError, ValueError, EOFError, IndexError) as err:
        reason = " ".join(str(err).split()) or "not in the format expected"
        raise ValueError(
            f"{name} at {where} cannot be read, a file is damaged or incomplete ({reason}); replace the "
            f"copy, or remove it and allow torchvision's download with {option('download')}"
        ) from None


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
        with _reading("Fashion-MNIST", source), opener(source / (name + (".gz" if gz else "")), "rb") as src:
            # at most 47 MB; read whole, so that a write error is not taken for a read one
            payload = src.read()
        fd, tmp = tempfile.mkstemp(dir=target, prefix=name + ".")
        with os.fdopen(fd, "wb") as dst:
            dst.write(payload)
        os.replace(tmp, target / name)
    return target.parent


def _read_fashion(folder: Path, source: str) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Read the training half through torchvision; ``folder`` is ``<root>/FashionMNIST``."""
    from torchvision.datasets import FashionMNIST

    with _reading("Fashion-MNIST", source):
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
            with _reading(kind.upper(), root / folder):
                try:
                    ds = cls(str(root), train=True, download=False)
                except RuntimeError:  # "not found or corrupted": a file missing, or not torchvision's
                    raise RuntimeError("a file is missing or not byte for byte the published one") from None
            return _read_cifar(ds, str(root / folder))
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
    mean, std = (match_channels(s, chans) for s in _STATS["imagefolder"])
    samples = folder.samples
    train = FileImages([samples[i] for i in train_index.tolist()])
    val = FileImages([samples[i] for i in val_index.tolist()])
    return DataSplit(
        f"imagefolder:{path}", train, val, len(folder.classes), chans, img_size, mean, std, str(root),
        train_index, val_index, seed,
    )  # fmt: skip

"""Datasets: where the images come from, the validation split held out of the training images, and the
official test split that only training and retraining read.

This module owns:

- finding a dataset on disk (:func:`load_dataset`): an explicit ``data_dir``, then ``$NAS_DATA``, then the
  system copy (Debian's ``dataset-fashion-mnist`` in ``/usr/share/datasets/fashion-mnist``), then
  torchvision's download only when the caller allows it; a missing dataset is one ``ValueError`` sentence
  naming every path looked at and how to get the data;
- the two halves kept apart: reading the training half opens only its files (Fashion-MNIST's ``train-*``,
  CIFAR's training batches, ``imagefolder``'s ``train/``), never a file of the test half, so a search cannot
  see the test images; :func:`load_test` reads the test half (``t10k-*``, ``test_batch`` / ``test``,
  ``PATH/test/`` or ``PATH/val/``) for ``nas train`` / ``nas retrain``'s final score. The IDX and CIFAR
  files are parsed here: a CIFAR batch is unpickled with only numpy's array reconstruction allowed, since a
  dataset file is data and never code;
- the validation split: a fixed, seeded subset held out of the *training* set; ``train_samples`` takes a
  seeded subset of the rest. :meth:`DataSplit.split_record` fingerprints it for a run's manifest, and
  :func:`study_overlap` tells from such a record which images of another split a study evaluated on;
- preprocessing: the small in-memory sets (``fashion-mnist``, ``cifar10``, ``cifar100``, ``synthetic``) are
  resized once to the proxy's ``img_size`` and kept as one uint8 tensor (:class:`TensorImages`);
  ``imagefolder:PATH`` (ImageNet layout) is too big for that and stays as files (:class:`FileImages`).
  :mod:`evaluators.batches` serves batches of either.

Nothing here knows about models, Optuna or Ray.
"""

from __future__ import annotations

import codecs
import gzip
import hashlib
import math
import os
import pickle
import struct
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from nas.core.option_names import option

__all__ = [
    "DATASETS",
    "DataSplit",
    "FileImages",
    "TensorImages",
    "TestSet",
    "UnreadableImage",
    "cache_dir",
    "load_dataset",
    "load_test",
    "locate_fashion_mnist",
    "match_channels",
    "split_indices",
    "study_overlap",
]

DATASETS = ("fashion-mnist", "cifar10", "cifar100", "imagefolder:PATH", "synthetic")
SYSTEM_FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")  # Debian's dataset-fashion-mnist
# each half's files, images then labels: reading one half opens only its two
_FASHION_HALVES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_FASHION_FILES = _FASHION_HALVES["train"] + _FASHION_HALVES["test"]
# CIFAR: torchvision's folder, the training batches, the test batch, the labels' key
_CIFAR = {
    "cifar10": (
        "cifar-10-batches-py",
        tuple(f"data_batch_{i}" for i in range(1, 6)),
        ("test_batch",),
        "labels",
    ),
    "cifar100": ("cifar-100-python", ("train",), ("test",), "fine_labels"),
}
SYNTHETIC_TEST = 500  # the synthetic set's test images

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
    ``imagefolder`` with a ``train/`` folder, in ``train/``) of ``source_size`` images, so a manifest can
    record the split exactly (:meth:`split_record`). ``mean`` / ``std`` are per channel on the [0, 1] scale;
    :func:`loaders` applies them.
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
    source_size: int = 0  # the source training set's images (0: train + val, as without train_samples)

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

    def source_images(self) -> int:
        """The size of the source training set the split was drawn from (before the hold-out)."""
        return self.source_size or len(self.train_index) + len(self.val_index)

    def split_record(self) -> dict[str, object]:
        """The split exactly, for a run's manifest: ``images`` (the source training set's size, before the
        hold-out), ``val_size`` (the images held out), ``split_seed``, and ``val_fingerprint`` /
        ``train_fingerprint`` (the first 16 hex digits of a SHA-256 over the dataset's kind, ``images`` and
        the sorted positions). :func:`study_overlap` recomputes the split from it."""
        images, kind = self.source_images(), _kind(self.name)
        return {
            "images": images,
            "val_size": len(self.val_index),
            "split_seed": self.seed,
            "val_fingerprint": _index_fingerprint(kind, images, self.val_index),
            "train_fingerprint": _index_fingerprint(kind, images, self.train_index),
        }


@dataclass(frozen=True)
class TestSet:
    """A dataset's official test split (:func:`load_test`), preprocessed as its training split is at
    ``img_size``: what ``nas train`` / ``nas retrain`` score a finished network on, and no search reads.
    ``fingerprint`` is the first 16 hex digits of a SHA-256 over its images (or files) and labels."""

    __test__ = False  # a class of the package, not one pytest should collect

    name: str
    images: TensorImages | FileImages
    source: str
    img_size: int
    fingerprint: str = ""

    def describe(self) -> dict[str, object]:
        """What a training record says about the images it was scored on."""
        return {
            "dataset": self.name,
            "source": self.source,
            "test": len(self.images),
            "fingerprint": self.fingerprint,
        }


def study_overlap(record: dict[str, Any], split: DataSplit) -> dict[str, int] | None:
    """How a study's split (``record``, as :meth:`DataSplit.split_record` wrote it, or a manifest's ``data``
    holding one) meets ``split``'s validation images: ``evaluated``, those the study validated (and so chose)
    on, and ``trained``, those in the study's training split; by positions in the same source training set.

    The study's split is recomputed (:func:`split_indices` with the record's ``images``, ``val_size`` and
    ``split_seed``; a search takes no ``train_samples``); None where its fingerprints do not match (the
    record is not of a split this code makes, so its images cannot be told). A record of another dataset kind
    or source size shares no positions with ``split``: both counts are 0."""
    if not isinstance(record, dict):
        return None
    try:
        images, val_size, seed = (int(record[key]) for key in ("images", "val_size", "split_seed"))
        fingerprints = (record["val_fingerprint"], record["train_fingerprint"])
        kind = _kind(str(record.get("dataset", split.name)))
        train, val = split_indices(images, val_size, seed)
    except (KeyError, TypeError, ValueError):
        return None
    if fingerprints != (_index_fingerprint(kind, images, val), _index_fingerprint(kind, images, train)):
        return None
    if kind != _kind(split.name) or images != split.source_images():
        return {"evaluated": 0, "trained": 0}
    return {
        "evaluated": int(torch.isin(split.val_index, val).sum()),
        "trained": int(torch.isin(split.val_index, train).sum()),
    }


def _kind(name: str) -> str:
    """A dataset's kind: its name up to a colon (``imagefolder:PATH`` is ``imagefolder``)."""
    return name.partition(":")[0]


def _index_fingerprint(kind: str, images: int, index: torch.Tensor) -> str:
    digest = hashlib.sha256(f"{kind}\n{images}\n".encode())
    digest.update(torch.sort(index.to(torch.int64)).values.numpy().astype("<i8").tobytes())
    return digest.hexdigest()[:16]


def _content_fingerprint(name: str, labels: torch.Tensor, *parts: bytes) -> str:
    digest = hashlib.sha256(f"{name}\n{len(labels)}\n".encode())
    digest.update(labels.to(torch.int64).numpy().astype("<i8").tobytes())
    for part in parts:
        digest.update(part)
    return digest.hexdigest()[:16]


def cache_dir() -> Path:
    """Where unpacked copies go: ``$NAS_DATA`` if set, else ``$XDG_CACHE_HOME/nas/data`` (``~/.cache``)."""
    if os.environ.get("NAS_DATA"):
        return Path(os.environ["NAS_DATA"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")).expanduser() / "nas" / "data"


def locate_fashion_mnist(data_dir: str | os.PathLike[str] | None = None, download: bool = False) -> str:
    """Where Fashion-MNIST's training half is read from (as :func:`load_dataset` finds it), after reading
    both halves once to be sure they are whole (retraining scores on the test half); ValueError in one
    sentence where either is missing (``not found``) or damaged."""
    source = _fashion_mnist(data_dir, download, "train")[2]
    _fashion_mnist(data_dir, download, "test")
    return source


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
    No file of the dataset's test split is opened (:func:`load_test` reads it).
    """
    kind, _, arg = name.partition(":")
    if kind == "imagefolder":
        if not arg:
            raise ValueError("imagefolder needs a path: 'imagefolder:/path/to/imagenet'")
        return _imagefolder(Path(arg).expanduser(), img_size, in_chans, val_size, seed, train_samples)
    if kind == "synthetic":
        images, labels, source = _synthetic(img_size, in_chans or 3, seed, train_samples, val_size)
    elif kind == "fashion-mnist":
        images, labels, source = _fashion_mnist(data_dir, download, "train")
    elif kind in _CIFAR:
        images, labels, source = _cifar(kind, data_dir, download, "train")
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
        kind, train, val, num_classes, chans, img_size, mean, std, source, train_index, val_index, seed,
        len(labels),
    )  # fmt: skip


def load_test(
    name: str,
    *,
    img_size: int,
    data_dir: str | os.PathLike[str] | None = None,
    in_chans: int | None = None,
    test_folder: str | os.PathLike[str] | None = None,
    download: bool = False,
    seed: int = 0,
) -> TestSet:
    """``name``'s official test split, found as :func:`load_dataset` finds the training half and
    preprocessed as it is (resized to ``img_size``, ``in_chans`` converted): Fashion-MNIST's ``t10k`` files,
    CIFAR's test batch; for ``imagefolder:PATH``, ``test_folder`` if given, else ``PATH/test/``, else
    ``PATH/val/`` where ``PATH/train/`` holds the training images (ImageNet's layout), its class folders
    matched by name to the training folder's classes; for ``synthetic``, :data:`SYNTHETIC_TEST` images of
    ``seed``'s class patterns with noise of their own."""
    kind, _, arg = name.partition(":")
    if kind not in ("imagefolder", "synthetic", "fashion-mnist", *_CIFAR):
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    if test_folder is not None and kind != "imagefolder":
        raise ValueError(
            f"{option('test_folder', 'PATH')} names the test images of an imagefolder:PATH dataset, and "
            f"{name} has its own test split"
        )
    if kind == "imagefolder":
        if not arg:
            raise ValueError("imagefolder needs a path: 'imagefolder:/path/to/imagenet'")
        path = Path(arg).expanduser()
        folder, samples = _imagefolder_test(path, None if test_folder is None else Path(test_folder))
        labels = torch.tensor([c for _, c in samples], dtype=torch.long)
        files = "\n".join(str(Path(f).relative_to(folder)) for f, _ in samples).encode()
        fingerprint = _content_fingerprint(kind, labels, files)
        return TestSet(f"imagefolder:{path}", FileImages(samples), str(folder), img_size, fingerprint)
    if kind == "synthetic":
        images, labels, source = _synthetic_test(img_size, in_chans or 3, seed)
    elif kind == "fashion-mnist":
        images, labels, source = _fashion_mnist(data_dir, download, "test")
    else:
        images, labels, source = _cifar(kind, data_dir, download, "test")
    fingerprint = _content_fingerprint(kind, labels, images.contiguous().numpy().tobytes())
    test = TensorImages(_prepare_fn(img_size, in_chans)(images), labels)
    return TestSet(kind, test, source, img_size, fingerprint)


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
    data_dir: str | os.PathLike[str] | None, download: bool, half: str
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """One half (``train`` or ``test``) of Fashion-MNIST: only that half's two files are looked for, copied
    and opened."""
    files = _FASHION_HALVES[half]
    looked: list[Path] = []
    roots = _candidate_roots(data_dir)
    for root in roots:
        # the files as shipped (gzip) name the data before an unpacked copy beside them: with $NAS_DATA
        # holding them, the copy :func:`_unpack_fashion` makes lands in this root, and the source a run
        # reports (which the benchmarks' caches key results by) must not change once it is there
        shipped = next((r for r in (root, root / "fashion-mnist") if _has_files(r, files, ".gz")), None)
        if shipped is not None:
            return _read_fashion(_unpack_fashion(shipped, files), files, str(shipped))
        # a torchvision root (FashionMNIST/raw/ inside) or a folder holding the files as Debian ships them
        for raw in (root / "FashionMNIST" / "raw", root, root / "fashion-mnist"):
            looked.append(raw)
            if _has_files(raw, files, ""):
                return _read_fashion(raw, files, str(raw))  # read in place
            if _has_files(raw, files, ".gz"):
                return _read_fashion(_unpack_fashion(raw, files), files, str(raw))
    looked.append(SYSTEM_FASHION_MNIST)
    if _has_files(SYSTEM_FASHION_MNIST, files, ".gz"):
        return _read_fashion(_unpack_fashion(SYSTEM_FASHION_MNIST, files), files, str(SYSTEM_FASHION_MNIST))
    cached = cache_dir() / "FashionMNIST" / "raw"  # an earlier download, or a copy unpacked before
    looked.append(cached)
    if _has_files(cached, files, ""):
        return _read_fashion(cached, files, str(cached))
    if download:
        root = roots[0] if roots else cache_dir()  # the user's root, else the cache the next run reads
        raw = root / "FashionMNIST" / "raw"
        with _downloading("Fashion-MNIST", root):
            _download_fashion(raw, files)
        return _read_fashion(raw, files, f"{root} (downloaded)")
    raise _missing(
        "Fashion-MNIST" if half == "train" else "Fashion-MNIST's test split (its t10k-*-ubyte files)",
        looked,
        "run `apt-get install dataset-fashion-mnist`, set NAS_DATA or pass "
        f"{option('data_dir', 'PATH')} to a folder holding its *-ubyte.gz files, or allow torchvision's "
        f"download with {option('download')}",
    )


def _download_fashion(raw: Path, files: Sequence[str]) -> None:
    """torchvision's download of ``files`` (one half) into ``raw``: each from the first mirror that has it,
    checked against its published MD5 and unpacked beside it."""
    from urllib.error import URLError

    from torchvision.datasets import FashionMNIST
    from torchvision.datasets.utils import download_and_extract_archive

    for filename, md5 in FashionMNIST.resources:
        if filename.removesuffix(".gz") not in files:
            continue
        errors: list[Exception] = []
        for mirror in FashionMNIST.mirrors:
            try:
                download_and_extract_archive(
                    f"{mirror}{filename}", download_root=str(raw), filename=filename, md5=md5
                )
                break
            except (RuntimeError, URLError) as err:
                errors.append(err)
        else:
            raise errors[-1] if errors else RuntimeError("torchvision names no mirror to download from")


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
    one sentence naming the copy, not the traceback of a reader."""
    try:
        yield
    except (OSError, RuntimeError, ValueError, EOFError, IndexError, pickle.UnpicklingError) as err:
        reason = " ".join(str(err).split()) or "not in the format expected"
        raise ValueError(
            f"{name} at {where} cannot be read, a file is damaged or incomplete ({reason}); replace the "
            f"copy, or remove it and allow torchvision's download with {option('download')}"
        ) from None


def _has_files(folder: Path, names: Sequence[str], suffix: str) -> bool:
    return all((folder / (n + suffix)).is_file() for n in names)


def _unpack_fashion(source: Path, files: Sequence[str]) -> Path:
    """Gunzip ``files`` (one half's, ``NAME.gz`` in ``source``) into ``<cache>/FashionMNIST/raw/`` once;
    return that folder.

    The files are read and checked whole before any is written, and each is written to a temporary name and
    renamed, so a damaged copy leaves nothing in the cache and trials starting in parallel never read a half
    written file.
    """
    target = cache_dir() / "FashionMNIST" / "raw"
    todo = [name for name in files if not (target / name).is_file()]
    payloads: dict[str, bytes] = {}
    with _reading("Fashion-MNIST", source):
        for name in todo:
            with gzip.open(source / (name + ".gz"), "rb") as src:
                # at most 47 MB; read whole, so that a write error is not taken for a read one
                payloads[name] = src.read()
        parsed = {name: _parse_idx(payload, name) for name, payload in payloads.items()}
        if len(parsed) == 2:
            _check_pair(*(parsed[name] for name in files), files)
    if todo:
        target.mkdir(parents=True, exist_ok=True)
    for name, payload in payloads.items():
        fd, tmp = tempfile.mkstemp(dir=target, prefix=name + ".")
        with os.fdopen(fd, "wb") as dst:
            dst.write(payload)
        os.replace(tmp, target / name)
    return target


def _read_fashion(folder: Path, files: Sequence[str], source: str) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Read one half's unpacked IDX files (``files``: images, labels) from ``folder``."""
    with _reading("Fashion-MNIST", source):
        images, labels = (_parse_idx(_read_bytes(folder / name), name) for name in files)
        _check_pair(images, labels, files)
    return images.unsqueeze(1).contiguous(), labels.long(), source


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _parse_idx(data: bytes, name: str) -> torch.Tensor:
    """An IDX file of uint8 (``...-images-idx3-ubyte``: N x H x W, ``...-labels-idx1-ubyte``: N)."""
    ndim = 3 if "-images-" in name else 1
    start = 4 + 4 * ndim
    if len(data) < start or data[:4] != bytes((0, 0, 8, ndim)):
        raise ValueError(f"{name} is not an IDX file of {ndim}-dimensional uint8 data")
    shape = struct.unpack(f">{ndim}I", data[4:start])
    if len(data) - start != math.prod(shape):
        raise ValueError(
            f"{name} holds {len(data) - start} bytes of data where its header says {math.prod(shape)}"
        )
    if not math.prod(shape):
        raise ValueError(f"{name} holds no samples")
    return torch.frombuffer(bytearray(data), dtype=torch.uint8, offset=start).view(*shape)


def _check_pair(images: torch.Tensor, labels: torch.Tensor, files: Sequence[str]) -> None:
    if len(images) != len(labels):
        raise ValueError(f"{files[0]} holds {len(images)} images but {files[1]} {len(labels)} labels")
    if int(labels.max()) > 9:
        raise ValueError(f"{files[1]} holds labels outside 0-9")


def _cifar(
    kind: str, data_dir: str | os.PathLike[str] | None, download: bool, half: str
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """One half (``train`` or ``test``) of CIFAR-10/100 in torchvision's folder: only that half's batch
    files are opened."""
    folder, train_files, test_files, _ = _CIFAR[kind]
    files = train_files if half == "train" else test_files
    roots = [*_candidate_roots(data_dir), cache_dir()]
    for root in roots:
        if (root / folder).is_dir():
            return _read_cifar(kind, root / folder, files, str(root / folder))
    if download:
        root = roots[0]
        with _downloading(kind.upper(), root):
            _download_cifar(kind, root)
        return _read_cifar(kind, root / folder, files, f"{root / folder} (downloaded)")
    raise _missing(
        kind.upper(),
        [r / folder for r in roots],
        f"set NAS_DATA or pass {option('data_dir', 'PATH')} to a torchvision CIFAR root, or allow "
        f"torchvision's download with {option('download')}",
    )


def _download_cifar(kind: str, root: Path) -> None:
    """torchvision's download of the CIFAR archive, checked against its published MD5 and unpacked in
    ``root``."""
    from torchvision.datasets import CIFAR10, CIFAR100
    from torchvision.datasets.utils import download_and_extract_archive

    cls = CIFAR10 if kind == "cifar10" else CIFAR100
    download_and_extract_archive(cls.url, str(root), filename=cls.filename, md5=cls.tgz_md5)


class _NotData(Exception):
    """A pickle that asks for something a dataset file never holds (a function, a class): refused."""


def _read_cifar(
    kind: str, folder: Path, files: Sequence[str], source: str
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Read CIFAR batch ``files`` from ``folder``: NCHW uint8 images and int64 labels."""
    name = kind.upper()
    classes = 100 if kind == "cifar100" else 10
    images, labels = [], []
    try:
        with _reading(name, source):
            for file in files:
                batch_images, batch_labels = _cifar_batch(folder / file, _CIFAR[kind][3], classes)
                images.append(batch_images)
                labels.append(batch_labels)
    except _NotData as refused:
        raise ValueError(
            f"{name} at {source} is refused: {refused}, and a dataset file is read as data, never run as "
            f"code; replace the copy, or remove it and allow torchvision's download with {option('download')}"
        ) from None
    return torch.cat(images), torch.cat(labels), source


def _cifar_batch(path: Path, key: str, classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One pickled CIFAR batch: a dict whose ``data`` is an N x 3072 uint8 array (three 32 x 32 planes per
    image) and ``key`` N labels; unpickled with only numpy's array reconstruction allowed."""
    import numpy as np

    if not path.is_file():
        raise ValueError(f"{path.name} is missing")
    with open(path, "rb") as file:
        try:
            entry = _DataUnpickler(file, path.name).load()
        except (KeyError, TypeError, AttributeError, struct.error) as err:  # a pickle, but not a sound one
            raise ValueError(f"{path.name} is not a pickled CIFAR batch ({err})") from None
    if not isinstance(entry, dict):
        raise ValueError(f"{path.name} holds a {type(entry).__name__}, not a CIFAR batch")
    data, got = (entry.get(k.encode(), entry.get(k)) for k in ("data", key))
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise ValueError(f"{path.name} holds no N x 3072 uint8 images under 'data'")
    try:
        labels = torch.as_tensor(np.asarray(got, dtype=np.int64))
    except (TypeError, ValueError):
        raise ValueError(f"{path.name} holds no list of labels under {key!r}") from None
    if labels.ndim != 1 or len(labels) != len(data):
        raise ValueError(f"{path.name} holds {len(data)} images but {labels.numel()} labels under {key!r}")
    if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < classes:
        raise ValueError(f"{path.name} holds labels outside 0-{classes - 1}")
    return torch.from_numpy(data.reshape(-1, 3, 32, 32).copy()), labels


class _DataUnpickler(pickle.Unpickler):
    """Unpickles plain containers and numpy arrays, nothing else: the only globals a pickle may name are
    numpy's array reconstruction (both numpy 1's and 2's module names) and the latin-1 ``encode`` that
    protocol 2 writes bytes with. Any other is refused (:class:`_NotData`) before it is looked up."""

    def __init__(self, file: Any, name: str) -> None:
        super().__init__(file, encoding="bytes")  # Python 2's pickles (the published files): str as bytes
        self.name = name

    def find_class(self, module: str, name: str) -> Any:
        allowed = _pickle_globals().get((module, name))
        if allowed is None:
            raise _NotData(f"{self.name} names {module}.{name}, which a CIFAR batch never holds")
        return allowed

    def persistent_load(self, pid: Any) -> Any:
        raise _NotData(f"{self.name} refers to an object outside the file, which a CIFAR batch never does")


def _pickle_globals() -> dict[tuple[str, str], Any]:
    import numpy as np

    try:
        from numpy._core import multiarray, numeric
    except ImportError:  # numpy 1
        from numpy.core import multiarray, numeric  # type: ignore[no-redef]
    allowed: dict[tuple[str, str], Any] = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _latin1,
    }
    for package in ("numpy.core", "numpy._core"):
        allowed[(f"{package}.multiarray", "_reconstruct")] = multiarray._reconstruct
        if hasattr(numeric, "_frombuffer"):  # protocol 5's arrays
            allowed[(f"{package}.numeric", "_frombuffer")] = numeric._frombuffer
    return allowed


def _latin1(text: str, encoding: str = "latin1") -> bytes:
    """How protocol 2 pickles bytes: ``_codecs.encode(text, "latin1")``; no other codec is run."""
    if encoding not in ("latin1", "latin-1") or not isinstance(text, str):
        raise _NotData(f"a pickled text asks for the {encoding!r} codec, which a CIFAR batch never uses")
    return codecs.encode(text, "latin1")


def _synthetic_patterns(img_size: int, in_chans: int, gen: torch.Generator) -> torch.Tensor:
    return F.interpolate(torch.randn(10, in_chans, 4, 4, generator=gen), size=img_size, mode="bilinear")


def _synthetic_images(patterns: torch.Tensor, labels: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    n, (chans, size) = len(labels), patterns.shape[1:3]
    images = 0.5 + 0.15 * patterns[labels] + 0.15 * torch.randn(n, chans, size, size, generator=gen)
    return (images * 255).round_().clamp_(0, 255).to(torch.uint8)


def _synthetic(
    img_size: int, in_chans: int, seed: int, train_samples: int | None, val_size: int | float
) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Noise plus a per-class smooth pattern: learnable, deterministic in ``seed``, for unit tests only."""
    n_val = int(val_size) if not isinstance(val_size, float) or val_size >= 1 else 0
    n_train = train_samples or 1000
    n = n_train + n_val if n_val else math.ceil(n_train / (1 - float(val_size)))
    gen = torch.Generator().manual_seed(seed)
    patterns = _synthetic_patterns(img_size, in_chans, gen)
    labels = torch.randint(0, 10, (n,), generator=gen)
    return _synthetic_images(patterns, labels, gen), labels, f"synthetic(seed={seed})"


def _synthetic_test(img_size: int, in_chans: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, str]:
    """:data:`SYNTHETIC_TEST` images of ``seed``'s class patterns (the training set's) whose labels and
    noise come from a stream of their own, so no training or validation image is among them."""
    patterns = _synthetic_patterns(img_size, in_chans, torch.Generator().manual_seed(seed))
    stream = hashlib.sha256(f"synthetic test images, seed {seed}".encode()).digest()
    gen = torch.Generator().manual_seed(int.from_bytes(stream[:8], "big") >> 1)
    labels = torch.randint(0, 10, (SYNTHETIC_TEST,), generator=gen)
    return _synthetic_images(patterns, labels, gen), labels, f"synthetic(seed={seed}, test)"


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

    root = _imagefolder_root(path)
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
        train_index, val_index, seed, len(labels),
    )  # fmt: skip


def _imagefolder_root(path: Path) -> Path:
    """The training images' folder of ``imagefolder:PATH``: ``PATH/train/``, else ``PATH``."""
    root = path / "train" if (path / "train").is_dir() else path
    if not root.is_dir():
        raise _missing("image folder", [path], "pass imagefolder:PATH with class folders under PATH/train/")
    return root


def _imagefolder_test(path: Path, given: Path | None) -> tuple[Path, list[tuple[str, int]]]:
    """The test folder of ``imagefolder:PATH`` (``given``, else ``PATH/test/``, else ``PATH/val/`` beside a
    ``PATH/train/``) and its (file, class) samples, each class numbered as the training folder numbers it."""
    from torchvision.datasets.folder import IMG_EXTENSIONS, find_classes, make_dataset

    root = _imagefolder_root(path)
    if given is not None:
        folder = given.expanduser()
        if not folder.is_dir():
            raise ValueError(f"the test folder {folder} is not a folder")
    else:
        looked = [path / "test", *([path / "val"] if root != path else [])]
        found = next((p for p in looked if p.is_dir()), None)
        if found is None:
            raise ValueError(
                f"imagefolder:{path} has no test images (looked in {', '.join(map(str, looked))}); pass "
                f"{option('test_folder', 'PATH')} to a folder holding the test images in class folders"
            )
        folder = found
    inside, outer = folder.resolve(), root.resolve()
    if inside == outer or outer in inside.parents:
        raise ValueError(
            f"the test folder {folder} is inside the training folder {root}, so its images are training "
            f"images; put the training class folders under {path / 'train'}, or give a test folder outside"
        )
    _, class_index = find_classes(str(root))
    try:
        classes, _ = find_classes(str(folder))
    except FileNotFoundError:
        raise ValueError(f"the test folder {folder} holds no class folders") from None
    unknown = [c for c in classes if c not in class_index]
    if unknown:
        raise ValueError(
            f"the test folder {folder} holds class {unknown[0]!r}, which the training folder {root} lacks "
            "(test classes are matched to training classes by their folders' names)"
        )
    wanted = {c: class_index[c] for c in classes}
    samples = make_dataset(str(folder), wanted, extensions=IMG_EXTENSIONS, allow_empty=True)
    if not samples:
        raise ValueError(f"the test folder {folder} holds no images in its class folders")
    return folder, samples

"""A sound evaluation protocol (evaluators/data.py): a search never opens the official test split, training
and retraining can score on it (:func:`evaluators.data.load_test`), and a study records which images it
evaluated on (``DataSplit.split_record``, :func:`evaluators.data.study_overlap`).

The datasets here are stand-ins written in the real formats (gzip IDX files, pickled CIFAR batches, image
folders), small enough for a search of two trials on the CPU."""

from __future__ import annotations

import builtins
import gzip
import io
import os
import struct
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from cheap_search import cheap_settings

from nas.api import run_search
from search_spaces.sasa import SasaSpace

TRAIN_IMAGES, TEST_IMAGES = 1200, 200


def _idx(magic: int, shape: tuple[int, ...], body: bytes) -> bytes:
    return struct.pack(">I", magic) + b"".join(struct.pack(">I", n) for n in shape) + body


def write_fashion(folder: Path, train: int = TRAIN_IMAGES, test: int = TEST_IMAGES) -> Path:
    """Fashion-MNIST's four files as Debian ships them (gzip, IDX): ``train`` and ``test`` images of 28x28,
    each class a brightness band plus noise, so a network can learn something from them."""
    folder.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(0)
    for half, n in (("train", train), ("t10k", test)):
        labels = torch.arange(n) % 10
        images = (labels.view(-1, 1, 1) * 20 + torch.randint(0, 60, (n, 28, 28), generator=gen)).clamp(0, 255)
        body = images.to(torch.uint8).numpy().tobytes()
        (folder / f"{half}-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(2051, (n, 28, 28), body)))
        label_bytes = labels.to(torch.uint8).numpy().tobytes()
        (folder / f"{half}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(2049, (n,), label_bytes)))
    return folder


class OpenedFiles:
    """Every path this process opens (``open``, ``io.open``, ``gzip.open``, ``os.open``) while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        real_open, real_gzip, real_os_open = builtins.open, gzip.open, os.open

        def record(file: object) -> None:
            if isinstance(file, (str, bytes, os.PathLike)):
                self.paths.append(os.fsdecode(os.fspath(file)))

        def opening(file: object, *args: object, **kwargs: object) -> object:
            record(file)
            return real_open(file, *args, **kwargs)  # type: ignore[call-overload]

        def gzip_opening(file: object, *args: object, **kwargs: object) -> object:
            record(file)
            return real_gzip(file, *args, **kwargs)  # type: ignore[arg-type]

        def os_opening(path: object, *args: object, **kwargs: object) -> int:
            record(path)
            return real_os_open(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(builtins, "open", opening)
        monkeypatch.setattr(io, "open", opening)
        monkeypatch.setattr(gzip, "open", gzip_opening)
        monkeypatch.setattr(os, "open", os_opening)

    def named(self, part: str) -> list[str]:
        return [p for p in self.paths if part in Path(p).name]


@pytest.fixture
def tiny_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The sasa space's cpu profile shrunk to 128 training and 64 validation images of one epoch."""
    tiny = replace(SasaSpace.profiles["cpu"], train_samples=128, batch_size=64, val_samples=64, epochs=1)
    monkeypatch.setitem(SasaSpace.profiles, "cpu", tiny)
    yield


def test_a_search_never_opens_the_test_files_and_load_test_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_proxy: None
) -> None:
    """The acceptance test of the protocol: a whole in-process search on Fashion-MNIST (data found, unpacked
    into the cache, read, split, two trials trained and validated) opens no ``t10k`` file; loading the test
    split afterwards opens exactly those."""
    given = write_fashion(tmp_path / "fashion")
    monkeypatch.setenv("NAS_DATA", str(tmp_path / "cache"))
    settings = cheap_settings(
        tmp_path / "runs",
        evaluator="proxy",
        objectives=("top1:max",),
        dataset="fashion-mnist",
        data_dir=str(given),
        budget="2trials",
    )
    opened = OpenedFiles(monkeypatch)
    outcome = run_search(settings)
    assert len(outcome.trials) == 2 and outcome.trials["top1"].notna().all()
    assert opened.named("train-images"), "the search read its training images through the recorded calls"
    assert opened.named("t10k") == []  # the search opened no file of the test split

    from evaluators.data import load_test  # after the search: the test split, read for a final score

    test = load_test("fashion-mnist", img_size=32, data_dir=given)
    assert {Path(p).name for p in opened.named("t10k")} >= {"t10k-images-idx3-ubyte.gz"}
    assert len(test.images) == TEST_IMAGES and test.images.images.shape[1:] == (1, 32, 32)
    # the manifest records the split the search evaluated on
    import json

    data = json.loads((settings.run_dir / "manifest.json").read_text())["data"]
    assert data["images"] == TRAIN_IMAGES and data["val_size"] == TRAIN_IMAGES // 10
    assert len(data["val_fingerprint"]) == len(data["train_fingerprint"]) == 16


def test_each_half_needs_and_opens_only_its_own_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy holding only the training files trains; ``nas data`` (``locate_fashion_mnist``) asks for both
    halves, since retraining scores on the test half; a damaged test file is the reader's one sentence."""
    from evaluators import data as data_mod
    from evaluators.data import load_dataset, load_test, locate_fashion_mnist

    monkeypatch.setattr(data_mod, "SYSTEM_FASHION_MNIST", tmp_path / "system")
    monkeypatch.setenv("NAS_DATA", str(tmp_path / "cache"))
    only_train = write_fashion(tmp_path / "only-train", train=100, test=20)
    for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        (only_train / name).unlink()
    split = load_dataset("fashion-mnist", img_size=28, data_dir=only_train, val_size=10)
    assert (len(split.train), len(split.val), split.source) == (90, 10, str(only_train))
    assert sorted(p.name for p in (tmp_path / "cache" / "FashionMNIST" / "raw").iterdir()) == [
        "train-images-idx3-ubyte",
        "train-labels-idx1-ubyte",
    ]  # only the half read was unpacked
    for find in (lambda: locate_fashion_mnist(only_train), lambda: load_test("fashion-mnist", img_size=28)):
        with pytest.raises(ValueError) as err:
            find()
        message = str(err.value)
        assert "Fashion-MNIST's test split (its t10k-*-ubyte files) not found (looked in " in message
        assert message.count(". ") == 0 and len(message.splitlines()) == 1
    whole = write_fashion(tmp_path / "whole", train=100, test=20)
    assert locate_fashion_mnist(whole) == str(whole)
    test = load_test("fashion-mnist", img_size=28, data_dir=whole)
    assert test.describe() == {
        "dataset": "fashion-mnist",
        "source": str(whole),
        "test": 20,
        "fingerprint": test.fingerprint,
    }
    assert test.images.labels.tolist() == [i % 10 for i in range(20)] and len(test.fingerprint) == 16
    damaged = write_fashion(tmp_path / "damaged", train=100, test=20)
    labels = damaged / "t10k-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(gzip.decompress(labels.read_bytes())[:-5]))
    monkeypatch.setenv("NAS_DATA", str(tmp_path / "cache2"))
    with pytest.raises(ValueError) as err:
        load_test("fashion-mnist", img_size=28, data_dir=damaged)
    message = str(err.value)
    assert message.startswith(f"Fashion-MNIST at {damaged} cannot be read, a file is damaged or incomplete (")
    assert "t10k-labels-idx1-ubyte holds 15 bytes of data where its header says 20" in message
    assert not (tmp_path / "cache2" / "FashionMNIST" / "raw").exists()  # nothing unpacked from it
    with pytest.raises(ValueError, match=r"^test_folder='PATH' names the test images of an imagefolder"):
        load_test("fashion-mnist", img_size=28, data_dir=whole, test_folder=tmp_path)


# ---------------------------------------------------------------------------------------------------- CIFAR


class _RunsCode:
    """What a hostile batch file would hold: unpickling it with the full pickle module runs ``touch``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.system, (f"touch {self.marker}",)


def _write_cifar(root: Path, kind: str = "cifar10", protocol: int = 2) -> dict[str, tuple[object, list[int]]]:
    """torchvision's CIFAR folder with small batches as the published files hold them: a dict of bytes keys,
    ``data`` an N x 3072 uint8 numpy array and the labels a list; returns each file's (data, labels)."""
    import pickle

    import numpy as np

    folder = root / ("cifar-10-batches-py" if kind == "cifar10" else "cifar-100-python")
    folder.mkdir(parents=True)
    names = (
        [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"] if kind == "cifar10" else ["train", "test"]
    )
    key = b"labels" if kind == "cifar10" else b"fine_labels"
    classes = 10 if kind == "cifar10" else 100
    rng = np.random.default_rng(0)
    written = {}
    for name in names:
        n = 12 if "test" in name else 8
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = [int(x) for x in rng.integers(0, classes, n)]
        batch = {b"batch_label": name.encode(), key: labels, b"data": data, b"filenames": [b"x.png"] * n}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=protocol))
        written[name] = (data, labels)
    (folder / "batches.meta").write_bytes(pickle.dumps({b"label_names": [b"a"] * classes}, protocol=2))
    return written


@pytest.mark.parametrize(("kind", "protocol"), [("cifar10", 2), ("cifar10", 5), ("cifar100", 2)])
def test_cifar_halves_are_read_apart_without_the_full_pickle_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, protocol: int
) -> None:
    import numpy as np

    from evaluators.data import load_dataset, load_test

    written = _write_cifar(tmp_path, kind, protocol)
    test_name = "test_batch" if kind == "cifar10" else "test"
    opened = OpenedFiles(monkeypatch)
    split = load_dataset(kind, img_size=32, data_dir=tmp_path, val_size=4)
    assert opened.named(test_name) == [] and opened.named("meta") == []
    train_names = [n for n in written if n != test_name]
    assert sorted({Path(p).name for p in opened.paths}) == sorted(train_names)
    images = np.concatenate([written[n][0] for n in train_names]).reshape(-1, 3, 32, 32)
    labels = [label for n in train_names for label in written[n][1]]
    assert len(split.train) + len(split.val) == len(labels) == split.split_record()["images"]
    assert torch.equal(split.val.images, torch.from_numpy(images)[split.val_index])
    assert split.val.labels.tolist() == [labels[i] for i in split.val_index.tolist()]
    assert split.num_classes == (10 if kind == "cifar10" else 100)

    opened.paths.clear()
    test = load_test(kind, img_size=16, data_dir=tmp_path, in_chans=1)
    assert {Path(p).name for p in opened.paths} == {test_name}
    assert (
        test.images.images.shape == (12, 1, 16, 16) and test.images.labels.tolist() == written[test_name][1]
    )
    assert test.source == str(tmp_path / Path(split.source).name) and test.name == kind


def test_a_cifar_batch_naming_code_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    import pickle

    from evaluators.data import load_dataset, load_test

    _write_cifar(tmp_path)
    folder = tmp_path / "cifar-10-batches-py"
    marker = tmp_path / "ran"
    hostile = {b"data": _RunsCode(marker), b"labels": [0]}
    for name in ("data_batch_2", "test_batch"):
        (folder / name).write_bytes(pickle.dumps(hostile, protocol=2))
    for load in (load_dataset, load_test):
        with pytest.raises(ValueError) as err:
            load("cifar10", img_size=32, data_dir=tmp_path)
        message = str(err.value)
        assert message.startswith(f"CIFAR10 at {folder} is refused: ")
        assert f"names {os.system.__module__}.system, which a CIFAR batch never holds" in message
        assert "read as data, never run as code" in message
        assert message.count(". ") == 0 and len(message.splitlines()) == 1
    assert not marker.exists()  # nothing was executed
    (folder / "data_batch_2").unlink()
    with pytest.raises(ValueError, match=r"damaged or incomplete \(data_batch_2 is missing\)"):
        load_dataset("cifar10", img_size=32, data_dir=tmp_path)


# ---------------------------------------------------------------------------------------------- imagefolder


def _images(folder: Path, classes: dict[str, int]) -> None:
    from PIL import Image

    for cls, n in classes.items():
        (folder / cls).mkdir(parents=True)
        for i in range(n):
            Image.new("RGB", (12, 12), (20 * i, 100, 200)).save(folder / cls / f"{i}.png")


def test_imagefolder_test_split_is_found_and_matched_to_the_training_classes(tmp_path: Path) -> None:
    from evaluators.data import load_dataset, load_test

    path = tmp_path / "imagenet"
    _images(path / "train", {"ant": 4, "bee": 4, "cat": 4})
    # ImageNet's layout: PATH/val/ is the test split, its classes numbered as train/'s by name
    _images(path / "val", {"bee": 2, "cat": 1})
    split = load_dataset(f"imagefolder:{path}", img_size=16, val_size=3)
    test = load_test(f"imagefolder:{path}", img_size=16)
    assert (test.source, test.name, len(test.images)) == (str(path / "val"), split.name, 3)
    assert test.images.labels.tolist() == [1, 1, 2]
    assert all(Path(f).is_relative_to(path / "val") for f, _ in test.images.samples)
    # PATH/test/ comes before PATH/val/
    _images(path / "test", {"ant": 1})
    test = load_test(f"imagefolder:{path}", img_size=16)
    assert test.source == str(path / "test") and test.images.labels.tolist() == [0]
    # a folder given comes first
    _images(tmp_path / "elsewhere", {"cat": 2})
    test = load_test(f"imagefolder:{path}", img_size=16, test_folder=tmp_path / "elsewhere")
    assert test.source == str(tmp_path / "elsewhere") and test.images.labels.tolist() == [2, 2]
    # a class the training folder lacks is one sentence
    _images(tmp_path / "zoo", {"cat": 1, "zebra": 1})
    with pytest.raises(ValueError) as err:
        load_test(f"imagefolder:{path}", img_size=16, test_folder=tmp_path / "zoo")
    train = path / "train"
    assert str(err.value).startswith(
        f"the test folder {tmp_path / 'zoo'} holds class 'zebra', which the training folder {train} lacks"
    )


def test_imagefolder_without_a_test_split_says_where_it_looked(tmp_path: Path) -> None:
    from evaluators.data import load_test

    path = tmp_path / "imagenet"
    _images(path / "train", {"ant": 2, "bee": 2})
    with pytest.raises(ValueError) as err:
        load_test(f"imagefolder:{path}", img_size=16)
    message = str(err.value)
    assert message == (
        f"imagefolder:{path} has no test images (looked in {path / 'test'}, {path / 'val'}); pass "
        "test_folder='PATH' to a folder holding the test images in class folders"
    )
    from nas.core.option_names import flags

    with flags(), pytest.raises(ValueError, match="; pass --test-folder to a folder holding"):
        load_test(f"imagefolder:{path}", img_size=16)
    # class folders right under PATH: a test/ there would be one of the training classes
    flat = tmp_path / "flat"
    _images(flat, {"ant": 2, "bee": 2})
    _images(flat / "test", {"ant": 1})
    with pytest.raises(
        ValueError, match=r"is inside the training folder .* so its images are training images"
    ):
        load_test(f"imagefolder:{flat}", img_size=16)


# ------------------------------------------------------------------------------------------------ synthetic


def test_synthetic_test_images_are_fixed_and_none_is_a_training_image() -> None:
    from evaluators.data import SYNTHETIC_TEST, load_dataset, load_test

    split = load_dataset("synthetic", img_size=16, seed=3)
    test, again = load_test("synthetic", img_size=16, seed=3), load_test("synthetic", img_size=16, seed=3)
    assert len(test.images) == SYNTHETIC_TEST and torch.equal(test.images.images, again.images.images)
    assert test.fingerprint == again.fingerprint != load_test("synthetic", img_size=16, seed=4).fingerprint
    seen = {bytes(x.numpy()) for part in (split.train, split.val) for x in part.images}
    assert not any(bytes(x.numpy()) in seen for x in test.images.images)
    # the class patterns are the training set's: each test image is nearest its own class's training mean
    means = torch.stack([split.train.images[split.train.labels == c].float().mean(0) for c in range(10)])
    distance = ((test.images.images.float()[:, None] - means[None]) ** 2).flatten(2).sum(-1)
    assert (distance.argmin(1) == test.images.labels).float().mean() > 0.9


# ------------------------------------------------------------------------------------ split record, overlap


def test_split_record_and_study_overlap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from evaluators.data import load_dataset, study_overlap

    monkeypatch.setenv("NAS_DATA", str(tmp_path / "cache"))
    given = write_fashion(tmp_path / "fashion")
    study = load_dataset("fashion-mnist", img_size=28, data_dir=given, seed=0)  # as a search loads it
    record = study.split_record()
    assert record == {
        "images": TRAIN_IMAGES,
        "val_size": TRAIN_IMAGES // 10,
        "split_seed": 0,
        "val_fingerprint": record["val_fingerprint"],
        "train_fingerprint": record["train_fingerprint"],
    }
    assert record["val_fingerprint"] != record["train_fingerprint"]
    assert load_dataset("fashion-mnist", img_size=32, data_dir=given, seed=0).split_record() == record
    # the study's own split: every validation image is one it evaluated on
    assert study_overlap(record, study) == {"evaluated": TRAIN_IMAGES // 10, "trained": 0}
    # another seed's split, as retraining might hold out: counted by sets of positions here
    other = load_dataset("fashion-mnist", img_size=28, data_dir=given, seed=1, train_samples=300)
    val, study_val, study_train = (
        set(t.tolist()) for t in (other.val_index, study.val_index, study.train_index)
    )
    expected = {"evaluated": len(val & study_val), "trained": len(val & study_train)}
    assert 0 < expected["evaluated"] < len(val) and expected["evaluated"] + expected["trained"] == len(val)
    assert study_overlap(record, other) == expected
    # a manifest's data (the description and the record) serves as well
    assert study_overlap({**study.describe(), **record}, other) == expected
    # a record this code did not make, or made of a split with train_samples: its images cannot be told
    for changed in (
        {**record, "val_fingerprint": "0" * 16},
        {**record, "split_seed": 1},
        {**record, "val_size": 100},
        {k: v for k, v in record.items() if k != "train_fingerprint"},
        {**record, "images": "many"},
        other.split_record(),
    ):
        assert study_overlap(changed, other) is None
    # another dataset kind or source size shares no positions
    synthetic = load_dataset("synthetic", img_size=8, seed=0)
    assert study_overlap({**synthetic.describe(), **synthetic.split_record()}, other) == {
        "evaluated": 0,
        "trained": 0,
    }
    smaller = write_fashion(tmp_path / "smaller", train=1000)
    monkeypatch.setenv("NAS_DATA", str(tmp_path / "cache-smaller"))
    small = load_dataset("fashion-mnist", img_size=28, data_dir=smaller, seed=0)
    assert study_overlap(small.split_record(), other) == {"evaluated": 0, "trained": 0}

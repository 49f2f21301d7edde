"""Data for proxy training (evaluators/data.py) on the real Fashion-MNIST training set and on synthetic data.

Fashion-MNIST comes from Debian's ``dataset-fashion-mnist`` (CI installs it); when it is missing these tests
fail with the loader's message saying where it looked, they are never skipped.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from evaluators import data as data_mod
from evaluators.batches import TensorBatches, calibration_batches, loaders
from evaluators.data import SYSTEM_FASHION_MNIST, TensorImages, load_dataset

TRAIN, VAL = 2000, 500


@pytest.fixture(scope="module")
def fashion() -> data_mod.DataSplit:
    return load_dataset("fashion-mnist", img_size=32, train_samples=TRAIN, val_size=VAL, seed=0)


def test_fashion_mnist_shapes_dtypes_labels(fashion: data_mod.DataSplit) -> None:
    assert (fashion.num_classes, fashion.in_chans, fashion.img_size) == (10, 1, 32)
    assert fashion.train.images.shape == (TRAIN, 1, 32, 32) and fashion.train.images.dtype == torch.uint8
    assert fashion.val.images.shape == (VAL, 1, 32, 32)
    for labels in (fashion.train.labels, fashion.val.labels):
        assert labels.dtype == torch.int64 and labels.min() >= 0 and labels.max() < 10
    assert set(fashion.train.labels.tolist()) == set(range(10))
    assert fashion.describe()["train"] == TRAIN and Path(fashion.source).exists()


def test_batches_are_normalized_float(fashion: data_mod.DataSplit) -> None:
    train, val = loaders(fashion, 128, seed=0)
    assert len(train) == TRAIN // 128  # the partial last training batch is dropped
    x, y = next(iter(train))
    assert x.shape == (128, 1, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.int64
    xs = torch.cat([x for x, _ in val])
    assert len(xs) == VAL  # every validation sample, once
    assert abs(xs.mean().item()) < 0.1 and abs(xs.std().item() - 1) < 0.1  # the dataset's mean / std


def test_calibration_batches_are_the_first_training_images_unaugmented_in_a_fixed_order(
    fashion: data_mod.DataSplit,
) -> None:
    train, _ = loaders(fashion, 128, seed=0, train_samples=1000, augment=True)
    first = [x for x, _ in train]
    calibration = calibration_batches(fashion, 128, 3)
    xs = [x for x, _ in calibration]
    assert [len(x) for x in xs] == [128] * 3 and [len(x) for x, _ in calibration] == [128] * 3  # read again
    plain = TensorBatches(fashion.train.head(384), 128, fashion.mean, fashion.std)
    assert all(torch.equal(a, b) for a, b in zip(xs, [x for x, _ in plain], strict=True))
    again, _ = loaders(fashion, 128, seed=0, train_samples=1000, augment=True)
    assert all(torch.equal(a, b) for a, b in zip(first, [x for x, _ in again], strict=True))
    # never more than the images a run trains on: 200 of them make one full batch and one of 72
    assert [len(y) for _, y in calibration_batches(fashion, 128, 8, train_samples=200)] == [128, 72]


def test_val_split_disjoint_and_stable(fashion: data_mod.DataSplit) -> None:
    assert not set(fashion.train_index.tolist()) & set(fashion.val_index.tolist())
    again = load_dataset("fashion-mnist", img_size=32, train_samples=TRAIN, val_size=VAL, seed=0)
    assert torch.equal(again.val_index, fashion.val_index)
    assert torch.equal(again.val.images, fashion.val.images)
    other = load_dataset("fashion-mnist", img_size=32, train_samples=TRAIN, val_size=VAL, seed=1)
    assert not torch.equal(other.val_index, fashion.val_index)
    # the val split does not move with train_samples, and smaller training subsets nest in larger ones
    small = load_dataset("fashion-mnist", img_size=32, train_samples=500, val_size=VAL, seed=0)
    assert torch.equal(small.val_index, fashion.val_index)
    assert torch.equal(small.train_index, fashion.train_index[:500])


def test_resizes_to_profile_size_and_converts_channels() -> None:
    native = load_dataset("fashion-mnist", img_size=28, train_samples=64, val_size=32)
    big = load_dataset("fashion-mnist", img_size=48, train_samples=64, val_size=32, in_chans=3)
    assert native.train.images.shape[1:] == (1, 28, 28)
    assert big.train.images.shape[1:] == (3, 48, 48) and big.in_chans == 3 and len(big.mean) == 3
    # resizing keeps the picture: the 48 px copy shrunk back is close to the original
    back = torch.nn.functional.interpolate(big.train.images[:, :1].float(), size=28, mode="area")
    assert (back - native.train.images.float()).abs().mean() < 12


def test_missing_fashion_mnist_names_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data_mod, "SYSTEM_FASHION_MNIST", tmp_path / "system")
    monkeypatch.setenv("NAS_DATA", str(tmp_path / "env"))
    with pytest.raises(ValueError) as err:
        load_dataset("fashion-mnist", img_size=32, data_dir=tmp_path / "given")
    message = str(err.value)
    for path in ("given", "env", "system"):
        assert str(tmp_path / path) in message
    assert "apt-get install dataset-fashion-mnist" in message and "NAS_DATA" in message
    assert message.count(". ") == 0 and message.endswith(".")  # one sentence
    # the options it names are the caller's: keywords from Python, flags on the command line
    assert "pass data_dir='PATH' to a folder" in message and "download with download=True" in message
    from typer.testing import CliRunner

    from nas.cli.commands import app

    args = ["search", "--runs-dir", str(tmp_path / "runs"), "--data-dir", str(tmp_path / "given")]
    result = CliRunner().invoke(app, args)
    said = " ".join(result.stderr.split())
    assert result.exit_code == 2 and said.count("error:") == 1, said
    assert "pass --data-dir to a folder" in said and "download with --download" in said
    assert not (tmp_path / "runs").exists()


def test_data_dir_comes_first_and_is_unpacked_to_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = tmp_path / "given"
    given.mkdir()
    for gz in SYSTEM_FASHION_MNIST.glob("*-ubyte.gz"):
        shutil.copy(gz, given / gz.name)
    monkeypatch.setenv("NAS_DATA", str(tmp_path / "cache"))
    split = load_dataset("fashion-mnist", img_size=28, data_dir=given, train_samples=10, val_size=10)
    assert split.source == str(given)
    raw = tmp_path / "cache" / "FashionMNIST" / "raw"
    assert (raw / "train-images-idx3-ubyte").is_file()
    # next time $NAS_DATA holds torchvision's layout and is read in place
    again = load_dataset("fashion-mnist", img_size=28, train_samples=10, val_size=10)
    assert again.source == str(raw) and torch.equal(again.train.images, split.train.images)


def test_nas_data_holding_the_gzip_files_names_them_as_the_source_after_unpacking_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$NAS_DATA is both where the files are and where their unpacked copy goes: the second run reads the
    copy but still names the files it came from (the evaluator-quality cache keys results by it)."""
    env = tmp_path / "env"
    env.mkdir()
    for gz in SYSTEM_FASHION_MNIST.glob("*-ubyte.gz"):
        shutil.copy(gz, env / gz.name)
    monkeypatch.setenv("NAS_DATA", str(env))
    first = load_dataset("fashion-mnist", img_size=28, train_samples=10, val_size=10)
    assert (env / "FashionMNIST" / "raw" / "train-images-idx3-ubyte").is_file()
    again = load_dataset("fashion-mnist", img_size=28, train_samples=10, val_size=10)
    assert first.source == again.source == str(env)
    assert first.describe() == again.describe() and torch.equal(first.train.images, again.train.images)


@pytest.mark.parametrize("damage", ["truncated", "junk"])
def test_a_damaged_copy_is_one_sentence_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    import gzip

    monkeypatch.setenv("NAS_DATA", str(tmp_path / "cache"))
    # Debian's layout: gzip files, unpacked into the cache; one cut short, or not gzip at all
    debian = tmp_path / "debian"
    debian.mkdir()
    for gz in SYSTEM_FASHION_MNIST.glob("*-ubyte.gz"):
        shutil.copy(gz, debian / gz.name)
    images = debian / "train-images-idx3-ubyte.gz"
    images.write_bytes(images.read_bytes()[:5000] if damage == "truncated" else b"junk")
    # torchvision's layout, read in place; a CIFAR copy whose files are not the published ones
    torchvision = tmp_path / "tv" / "FashionMNIST" / "raw"
    torchvision.mkdir(parents=True)
    for name in data_mod._FASHION_FILES:
        (torchvision / name).write_bytes(gzip.decompress((SYSTEM_FASHION_MNIST / f"{name}.gz").read_bytes()))
    cut = torchvision / "train-labels-idx1-ubyte"
    cut.write_bytes(cut.read_bytes()[:100] if damage == "truncated" else b"junk")
    cifar = tmp_path / "cifar" / "cifar-10-batches-py"
    cifar.mkdir(parents=True)
    for name in ("data_batch_1", "batches.meta"):
        (cifar / name).write_bytes(b"junk")
    for name, data_dir, where in (
        ("fashion-mnist", debian, debian),
        ("fashion-mnist", tmp_path / "tv", torchvision),
        ("cifar10", tmp_path / "cifar", cifar),
    ):
        with pytest.raises(ValueError) as err:
            load_dataset(name, img_size=28, data_dir=data_dir)
        message = str(err.value)
        assert message.startswith(f"{name.upper().replace('FASHION-MNIST', 'Fashion-MNIST')} at {where} ")
        assert (
            "cannot be read, a file is damaged or incomplete (" in message and len(message.splitlines()) == 1
        )
        assert message.endswith("allow torchvision's download with download=True")
    assert not list((tmp_path / "cache" / "FashionMNIST" / "raw").glob("*ubyte*"))  # no half-unpacked file


def test_unknown_and_missing_datasets() -> None:
    with pytest.raises(ValueError, match=r"known: fashion-mnist, cifar10, cifar100, imagefolder:PATH"):
        load_dataset("mnist", img_size=32)
    with pytest.raises(ValueError, match=r"CIFAR10 not found \(looked in .*nowhere"):
        load_dataset("cifar10", img_size=32, data_dir="/nowhere")


def test_synthetic_is_seeded_and_learnable_shape() -> None:
    a = load_dataset("synthetic", img_size=16, train_samples=100, val_size=20, seed=3)
    b = load_dataset("synthetic", img_size=16, train_samples=100, val_size=20, seed=3)
    assert a.train.images.shape == (100, 3, 16, 16) and len(a.val) == 20
    assert torch.equal(a.train.images, b.train.images) and torch.equal(a.val.labels, b.val.labels)


def test_shuffling_is_seeded_and_changes_per_epoch() -> None:
    data = TensorImages(torch.zeros(64, 1, 4, 4, dtype=torch.uint8), torch.arange(64))

    def orders(seed: int) -> list[list[int]]:
        batches = TensorBatches(data, 16, (0.0,), (1.0,), shuffle=True, seed=seed)
        return [torch.cat([y for _, y in batches]).tolist() for _ in range(2)]

    first, second = orders(0)
    assert orders(0) == [first, second] and first != second and sorted(first) == list(range(64))
    assert orders(1)[0] != first


def test_augmentation_is_a_padded_crop_or_its_flip() -> None:
    images = torch.randint(1, 256, (8, 2, 6, 6), dtype=torch.uint8)  # no zeros: padding is recognizable
    batches = TensorBatches(TensorImages(images, torch.arange(8)), 8, (0.0, 0.0), (1 / 255, 1 / 255))
    out = batches._augment(images, pad=2)
    padded = torch.nn.functional.pad(images, (2, 2, 2, 2))
    for i in range(8):
        crops = [padded[i, :, r : r + 6, c : c + 6] for r in range(5) for c in range(5)]
        assert any(torch.equal(out[i], crop) or torch.equal(out[i], crop.flip(-1)) for crop in crops)


def test_imagefolder_holds_val_out_of_train(tmp_path: Path) -> None:
    from PIL import Image

    for cls in ("cat", "dog"):
        (tmp_path / "train" / cls).mkdir(parents=True)
        for i in range(6):
            Image.new("RGB", (20, 24), (40 * i, 100, 200)).save(tmp_path / "train" / cls / f"{i}.png")
    split = load_dataset(f"imagefolder:{tmp_path}", img_size=16, val_size=4)
    assert (len(split.train), len(split.val), split.num_classes) == (8, 4, 2)
    train, val = loaders(split, 4, augment=True)
    x, y = next(iter(train))
    assert x.shape == (4, 3, 16, 16) and x.dtype == torch.float32 and y.max() < 2
    assert sum(len(y) for _, y in val) == 4
    calibration = list(calibration_batches(split, 3, 2))  # as validation prepares them: no random crop
    assert [tuple(x.shape) for x, _ in calibration] == [(3, 3, 16, 16), (3, 3, 16, 16)]
    again = list(calibration_batches(split, 3, 2))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(calibration, again, strict=True))


@pytest.mark.parametrize("workers", [0, 1])
def test_an_unreadable_image_is_one_sentence_naming_it(tmp_path: Path, workers: int) -> None:
    from PIL import Image

    from evaluators.data import UnreadableImage
    from nas.system.failures import failure_reason

    (tmp_path / "train" / "cat").mkdir(parents=True)
    for i in range(4):
        Image.new("RGB", (20, 24), (40 * i, 100, 200)).save(tmp_path / "train" / "cat" / f"{i}.png")
    broken = tmp_path / "train" / "cat" / "broken.png"
    broken.write_bytes(b"not an image")  # found by its name, read only when a batch needs it
    split = load_dataset(f"imagefolder:{tmp_path}", img_size=16, val_size=1)
    train, val = loaders(split, 1, num_workers=workers)  # batches of 1: the broken file is in one of them
    with pytest.raises(UnreadableImage) as caught:
        for _ in [*train, *val]:
            pass
    expected = f"{broken} cannot be read as an image (no image format PIL knows); remove or replace the file"
    assert str(caught.value) == expected  # a worker's traceback is not part of it
    assert failure_reason(caught.value) == f"error: UnreadableImage: {expected}"


def test_nas_train_on_an_unreadable_image_says_so_in_one_sentence(tmp_path: Path) -> None:
    from PIL import Image
    from typer.testing import CliRunner

    from nas.cli.commands import app
    from search_spaces import get_space

    for half in ("train", "test"):  # nas train scores on the test split: PATH/test/ holds it
        for cls in ("cat", "dog"):
            (tmp_path / half / cls).mkdir(parents=True)
            for i in range(3):
                Image.new("RGB", (20, 24), (40 * i, 100, 200)).save(tmp_path / half / cls / f"{i}.png")
    (tmp_path / "train" / "dog" / "broken.jpg").write_bytes(b"\xff\xd8 truncated")
    arch = tmp_path / "arch.json"
    arch.write_text(get_space("coatnet").baselines()["C-C-C-C"].arch.to_json())
    args = ["train", str(arch), "--dataset", f"imagefolder:{tmp_path}", "--epochs", "1", "--batch-size", "2"]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"error: {tmp_path / 'train' / 'dog' / 'broken.jpg'} cannot be read as an image")

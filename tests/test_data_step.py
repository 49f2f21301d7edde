"""`nas data`, the first step of `make demo` and `make test`: a copy is found, else Debian's package is
installed (root with apt-get), else torchvision downloads it, else one sentence names the ways (exit 2) and
nothing is left behind. Each way is exercised on stand-ins: small Fashion-MNIST files in the real format, an
`apt-get` that installs them, and a download mirror that refuses the connection."""

from __future__ import annotations

import gzip
import os
import struct
import sys
from pathlib import Path

import pytest
from torchvision.datasets import FashionMNIST
from typer.testing import CliRunner

import evaluators.data
from nas.cli.commands import app

NAMES = {
    "train-images-idx3-ubyte": (2051, (12, 28, 28)),
    "train-labels-idx1-ubyte": (2049, (12,)),
    "t10k-images-idx3-ubyte": (2051, (4, 28, 28)),
    "t10k-labels-idx1-ubyte": (2049, (4,)),
}


def _write_fashion(folder: Path) -> None:
    """The four files as Debian ships them (gzip, IDX format), with a few images each."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, (magic, shape) in NAMES.items():
        header = struct.pack(">I", magic) + b"".join(struct.pack(">I", n) for n in shape)
        count = 1
        for n in shape:
            count *= n
        body = bytes(i % 10 for i in range(count))  # labels 0-9; pixel values alike
        (folder / f"{name}.gz").write_bytes(gzip.compress(header + body))


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine without the data: no system copy, an empty cache, no NAS_DATA, no network, no apt-get."""
    system = tmp_path / "usr-share-datasets-fashion-mnist"
    monkeypatch.setattr(evaluators.data, "SYSTEM_FASHION_MNIST", system)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("NAS_DATA", raising=False)
    monkeypatch.setattr(FashionMNIST, "mirrors", ["http://127.0.0.1:9/"])  # refused at once: no network
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    return tmp_path


def _fake_apt(machine: Path) -> Path:
    """An apt-get that knows the package only after `apt-get update` (a fresh machine's empty lists), and
    then installs it where Debian does (here, the stand-in system folder); it logs each call."""
    script = machine / "bin" / "apt-get"
    system = machine / "usr-share-datasets-fashion-mnist"
    source = machine / "debian-package"
    _write_fashion(source)
    script.write_text(
        f"#!{sys.executable}\n"
        "import shutil, sys\n"
        "from pathlib import Path\n"
        f"machine, system, source = Path({str(machine)!r}), Path({str(system)!r}), Path({str(source)!r})\n"
        "with open(machine / 'apt.log', 'a') as log:\n"
        "    print(*sys.argv[1:], file=log)\n"
        "if sys.argv[1] == 'update':\n"
        "    (machine / 'updated').touch()\n"
        "    sys.exit(0)\n"
        "if not (machine / 'updated').exists():\n"
        "    sys.exit(100)\n"
        "shutil.copytree(source, system)\n"
    )
    script.chmod(0o755)
    return script


def test_a_copy_present_is_found(machine: Path) -> None:
    _write_fashion(machine / "mine")
    result = CliRunner().invoke(app, ["data", "--data-dir", str(machine / "mine")])
    assert result.exit_code == 0, result.output
    assert f"Fashion-MNIST: {machine / 'mine'}" in " ".join(result.output.split())
    assert "apt-get" not in result.output and "download" not in result.output


def test_as_root_with_apt_the_debian_package_is_installed(
    machine: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_apt(machine)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    result = CliRunner().invoke(app, ["data"])
    assert result.exit_code == 0, result.output
    calls = (machine / "apt.log").read_text().splitlines()
    install = "install -y -q --no-install-recommends dataset-fashion-mnist"
    assert calls == [install, "update -q", install]  # refused on stale lists, then updated and installed
    output = " ".join(result.output.split())
    assert "installing Debian's dataset-fashion-mnist" in output
    assert f"Fashion-MNIST: {machine / 'usr-share-datasets-fashion-mnist'}" in output
    assert evaluators.data.locate_fashion_mnist() == str(machine / "usr-share-datasets-fashion-mnist")


@pytest.mark.parametrize("why", ["no apt-get", "not root"])
def test_without_apt_as_root_or_network_one_sentence_names_the_ways(
    machine: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    if why == "not root":
        _fake_apt(machine)
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
    before = _tree(machine)
    result = CliRunner().invoke(app, ["data"])
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in result.output
    message = " ".join(result.output[result.output.index("error:") :].split())
    assert ("apt-get is not available" if why == "no apt-get" else "apt-get needs root") in message
    assert "the download into" in message  # torchvision's attempt, and why it failed
    assert "apt-get install dataset-fashion-mnist" in message and "NAS_DATA" in message
    assert _tree(machine) == before  # nothing left behind: no partial download, no apt call

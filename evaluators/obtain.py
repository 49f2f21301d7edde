"""The demo's data on a machine that has none: ``nas data``, which ``make demo`` and ``make test`` run first.

Fashion-MNIST is looked for where :func:`evaluators.data.load_dataset` looks (``--data-dir``, ``$NAS_DATA``,
Debian's copy, the download cache). When no copy is there it is fetched, in this order:

1. Debian's ``dataset-fashion-mnist`` package, where ``apt-get`` is available and the user is root
   (``apt-get install``; ``apt-get update`` first if the package lists do not know it yet);
2. torchvision's download into the cache (``$NAS_DATA``, else ``~/.cache/nas/data``).

Where neither works (no root or no apt, and no network), one sentence names both ways and ``NAS_DATA``, and a
failed download leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from evaluators.data import cache_dir, locate_fashion_mnist

__all__ = ["obtain_fashion_mnist"]

PACKAGE = "dataset-fashion-mnist"  # Debian's package: the four *-ubyte.gz files in /usr/share/datasets


def obtain_fashion_mnist(data_dir: str | None = None, say: Callable[[str], None] = print) -> str:
    """Where Fashion-MNIST is, found or fetched (the module docstring's order); ValueError in one sentence
    when it is not here and neither way can fetch it, or when the copy found is damaged."""
    try:
        return locate_fashion_mnist(data_dir)
    except ValueError as err:
        if "not found" not in str(err):
            raise  # a damaged copy: its own sentence says which and what to do
    tried = []
    if shutil.which("apt-get") is None:
        tried.append("apt-get is not available")
    elif os.geteuid() != 0:
        tried.append("apt-get needs root")
    else:
        say(f"Fashion-MNIST not found: installing Debian's {PACKAGE} (apt-get)")
        if _apt_install():
            return locate_fashion_mnist(data_dir)
        tried.append(f"apt-get install {PACKAGE} failed")
    root = Path(data_dir).expanduser() if data_dir is not None else cache_dir()
    say(f"Fashion-MNIST not found: downloading it with torchvision into {root}")
    before = _entries(root)
    try:
        return locate_fashion_mnist(data_dir, download=True)
    except ValueError as err:
        _remove_new(root, before)  # a partial download is not a copy
        tried.append(str(err).rstrip("."))
    raise ValueError(
        f"Fashion-MNIST is not on this machine and could not be fetched ({'; '.join(tried)}); install "
        f"Debian's package as root (`apt-get install {PACKAGE}`), or run `nas data` where torchvision can "
        "download it, or put its four *-ubyte.gz files in a folder and set NAS_DATA to that folder"
    )


def _apt_install() -> bool:
    """Install the package; where apt's lists do not know it yet (a fresh machine), update them and retry."""
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", PACKAGE]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for step in ([install], [["apt-get", "update", "-q"], install]):
        if all(subprocess.run(command, env=env, check=False).returncode == 0 for command in step):
            return True
    return False


def _entries(root: Path) -> tuple[Path | None, set[Path]]:
    """What stands now: the highest folder on the way to ``root`` that does not exist yet (None: ``root``
    exists), and every path under ``root``."""
    missing = [p for p in (root, *root.parents) if not p.exists()]
    return (missing[-1] if missing else None), (set(root.rglob("*")) if root.exists() else set())


def _remove_new(root: Path, before: tuple[Path | None, set[Path]]) -> None:
    """Remove what appeared under ``root`` since ``before``, with the folders made for it."""
    made, existing = before
    if made is not None:
        shutil.rmtree(made, ignore_errors=True)
        return
    for path in sorted(set(root.rglob("*")) - existing, key=lambda p: len(p.parts), reverse=True):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

"""Traced part costs kept on disk, so that a network part is traced by fvcore once per machine, not once per
process.

:func:`evaluators.complexity.count` traces every distinct part of a network (stem, block, head) on an input of
its shape. A trace used to run the part's forward pass for real, at the target resolution (seconds on a CPU
for a block of 56 x 56 global attention); parts are now traced on the meta device, about 20 ms each, and this
store saves even that: a sample whose parts are known is checked in about 14 ms. The count of a part
depends only on what the part is (every field of its build and its input shape: :func:`part_key`), on the
counting convention, and on the code that builds and counts it. So a part's ``(params, MACs)`` is stored
under its key and convention in ``<root>/<fingerprint>.json``, where the fingerprint hashes the torch, fvcore
and timm versions and the source of every module a count depends on (:data:`_COUNTED_SOURCES`): a change to
any of them starts a new file rather than reusing counts the new code might not give. A search keeps its
store in ``<runs>/counts/``, beside the latency tables of :mod:`evaluators.latency` (whose part keys are
these).

Several worker processes may share one file: a new part is merged into the file under ``fcntl.flock`` on
``<file>.lock`` (an entry already in the file wins: counts are exact, so both are the same) and the file is
replaced atomically. A file that is not valid JSON or not a part-cost store of this fingerprint is refused
with a ValueError naming it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import torch

from nas.core import userfiles
from nas.core.atomic import merge_json

__all__ = ["PartCosts", "fingerprint", "part_key"]

_FILE_FORMAT = "nas-part-costs"
_FILE_VERSION = 1
_REPO = Path(__file__).resolve().parent.parent
# what a part's count depends on besides its key: the builders of every part and the counting itself
_COUNTED_SOURCES = ("nas/core/arch.py", "nas/core/model.py", "nas/core/ops", "evaluators/complexity.py")


def part_key(kind: str, value: Any, skip: tuple[str, ...] = (), **extra: Any) -> str:
    """``kind``, then every field of the dataclass ``value`` but ``skip`` (nested dataclasses flattened),
    then ``extra``: exact, so two parts share a key only if they build the same module for the same input."""

    def flat(prefix: str, obj: Any) -> Iterator[str]:
        for f in fields(obj):
            item = getattr(obj, f.name)
            if f.name in skip and not prefix:
                continue
            if is_dataclass(item):
                yield from flat(f"{prefix}{f.name}.", item)
            else:
                yield f"{prefix}{f.name}={item}".replace(" ", "")

    return " ".join([kind, *flat("", value), *(f"{k}={v}" for k, v in extra.items())])


def package_version(package: str) -> str:
    """The installed version of ``package``; its ``__version__`` where it is importable without its
    metadata (copied or vendored into a folder on the path, as on a machine that cannot run pip)."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return str(getattr(importlib.import_module(package), "__version__", "unknown"))


@functools.cache
def fingerprint() -> str:
    """A short hash of the library versions and the source files a part's count depends on."""
    digest = hashlib.sha256()
    for package in ("torch", "fvcore", "timm"):
        digest.update(f"{package}={package_version(package)}\n".encode())
    for name in _COUNTED_SOURCES:
        path = _REPO / name
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(str(source.relative_to(_REPO)).encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


class PartCosts:
    """``(params, MACs)`` of traced parts per convention and :func:`part_key`, in memory and in
    ``<root>/<fingerprint>.json`` (read once, written on each :meth:`add`)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.path = self.root / f"{fingerprint()}.json"
        self._costs: dict[str, dict[str, list[int]]] = _read_costs(self.path)

    def get(self, convention: str, key: str) -> tuple[int, int] | None:
        cost = self._costs.get(convention, {}).get(key)
        return None if cost is None else (cost[0], cost[1])

    def add(self, convention: str, key: str, cost: tuple[int, int]) -> None:
        """Keep ``cost`` and merge it into the file under its lock (an entry already there wins)."""
        self._costs.setdefault(convention, {})[key] = [int(cost[0]), int(cost[1])]

        def merged() -> dict[str, Any]:
            for name, theirs in _read_costs(self.path).items():
                self._costs[name] = {**self._costs.get(name, {}), **theirs}
            return {
                "format": _FILE_FORMAT,
                "version": _FILE_VERSION,
                "fingerprint": fingerprint(),
                "torch": torch.__version__,
                "costs": self._costs,
            }

        merge_json(self.path, merged)

    def __len__(self) -> int:
        return sum(len(costs) for costs in self._costs.values())

    def __repr__(self) -> str:
        return f"PartCosts({str(self.path)!r}, {len(self)} parts)"


def _read_costs(path: Path) -> dict[str, dict[str, list[int]]]:
    """The costs in the store file at ``path`` (none if there is no file), after checking it is a
    part-cost store of this fingerprint holding pairs of non-negative integers; a ValueError naming the file
    otherwise."""
    try:
        data = userfiles.load_store(path)
    except FileNotFoundError:
        return {}
    except ValueError as err:  # not JSON, too deep or large, not a regular file (a FIFO would block)
        data, problem = None, str(err)
    else:
        problem = _document_problem(data)
    if problem:
        raise ValueError(f"part-cost store {path} {problem}; delete it to count again")
    return data["costs"]


def _document_problem(data: Any) -> str | None:
    if not isinstance(data, dict) or data.get("format") != _FILE_FORMAT:
        return "is not a part-cost store"
    if data.get("version") != _FILE_VERSION or data.get("fingerprint") != fingerprint():
        return f"is not of version {_FILE_VERSION} and fingerprint {fingerprint()}"
    costs = data.get("costs")
    if not isinstance(costs, dict) or not all(isinstance(c, dict) for c in costs.values()):
        return "has no costs per convention"
    for by_key in costs.values():
        for cost in by_key.values():
            pair = isinstance(cost, list) and len(cost) == 2
            if not pair or not all(type(n) is int and n >= 0 for n in cost):
                return f"holds a cost that is not two non-negative integers ({cost!r})"
    return None

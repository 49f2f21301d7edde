"""search_spaces: one module per search space (its choices, ``sample(trial)``, baselines, proxy profiles).

A space describes which :class:`nas.core.arch.Arch` values exist and how to sample them; it never builds
layers.
``get_space(name)`` and ``list_spaces()`` are the registry; ``get_space(name, narrow)`` narrows a space to
some values of its decisions (:mod:`search_spaces.narrowed`).

Spaces of other packages (plugins) join the registry through the ``nas.search_spaces`` entry-point group:
a distribution installed beside this one that declares ``isotropic = "mypackage.spaces:IsotropicSpace"``
there makes ``get_space("isotropic")`` (and ``nas search --space isotropic``, in every process of a search:
workers and Ray nodes that have it installed) build that :class:`SearchSpace` subclass, whose ``name`` must
be the entry point's. A plugin is imported only when its space is asked for, so a broken one fails in one
sentence where it is named and nowhere else; a plugin cannot take a built-in space's name (the built-in
stands, and :func:`plugin_problems` says so). ``examples/space_plugin`` is such a package.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from importlib import metadata
from typing import Any

from search_spaces.base import Baseline, PaperFigure, ProxyProfile, SearchSpace
from search_spaces.coatnet import CoAtNetSpace
from search_spaces.micro import MicroSpace
from search_spaces.narrowed import narrow_space
from search_spaces.sasa import SasaSpace

__all__ = [
    "ENTRY_POINTS",
    "Baseline",
    "PaperFigure",
    "ProxyProfile",
    "SearchSpace",
    "get_space",
    "list_spaces",
    "origin",
    "plugin_problems",
]

ENTRY_POINTS = "nas.search_spaces"

_SPACES: dict[str, type[SearchSpace]] = {space.name: space for space in (CoAtNetSpace, MicroSpace, SasaSpace)}


def _plugins() -> dict[str, metadata.EntryPoint]:
    """The installed ``nas.search_spaces`` entry points that name no built-in space, by name (the first
    installed where two distributions declare one name)."""
    return _plugins_on(tuple(sys.path))


@functools.lru_cache(maxsize=4)
def _plugins_on(path: tuple[str, ...]) -> dict[str, metadata.EntryPoint]:
    # scanning the installed distributions takes milliseconds, and a search asks for its space per trial:
    # scanned once per sys.path
    found: dict[str, metadata.EntryPoint] = {}
    for point in _entry_points():
        if point.name not in _SPACES:
            found.setdefault(point.name, point)
    return found


def _entry_points() -> metadata.EntryPoints:
    return metadata.entry_points(group=ENTRY_POINTS)


def _distribution(point: metadata.EntryPoint) -> str | None:
    """The name and version of the distribution that declares ``point`` (None where none is known)."""
    return None if point.dist is None else f"{point.dist.metadata['Name']} {point.dist.version}"


def _origin(point: metadata.EntryPoint) -> str:
    dist = _distribution(point)
    return f"the {ENTRY_POINTS} entry point {point.name} = {point.value}" + (f" of {dist}" if dist else "")


def _said(err: Exception) -> str:
    """A plugin's exception on one line and cut short: part of one sentence, whatever the plugin raised."""
    text = " ".join(f"{type(err).__name__}: {err}".split())
    return text if len(text) <= 300 else text[:297] + "..."


def _plugin_class(point: metadata.EntryPoint) -> type[SearchSpace]:
    """The plugin's class (its module imported once, as any module), checked; a ValueError of one sentence
    naming the entry point where it cannot be imported or is not a space of that name."""
    try:
        cls = point.load()
    except Exception as err:  # a plugin's import may fail in any way: the user's code, not ours
        raise ValueError(f"{_origin(point)} cannot be imported: {_said(err)}") from None
    if not (isinstance(cls, type) and issubclass(cls, SearchSpace)):
        raise ValueError(f"{_origin(point)} is not a subclass of search_spaces.SearchSpace")
    if cls.name != point.name:
        raise ValueError(f"{_origin(point)} names its space {cls.name!r}, not {point.name!r}")
    return cls


def origin(name: str) -> str:
    """Where the space ``name`` comes from, in words: ``built in``, or the plugin's distribution and entry
    point (``nas-isotropic-space 0.1.0, isotropic_space:IsotropicSpace``)."""
    if name in _SPACES:
        return "built in"
    point = _plugin_point(name)
    dist = _distribution(point)
    return f"{dist}, {point.value}" if dist else point.value


def _plugin_point(name: str) -> metadata.EntryPoint:
    """The entry point of the plugin space ``name``; a ValueError naming the spaces there are otherwise."""
    point = _plugins().get(name)
    if point is None:
        raise ValueError(f"unknown search space {name!r}; available: {', '.join(list_spaces())}")
    return point


def list_spaces() -> list[str]:
    """The built-in spaces' names and the installed plugins', sorted (no plugin is imported)."""
    return sorted({*_SPACES, *_plugins()})


def get_space(name: str, narrow: Mapping[str, Any] | None = None) -> SearchSpace:
    """The space ``name``, narrowed by ``narrow`` (``{decision: values}``, :mod:`search_spaces.narrowed`)
    where given; a ValueError of one sentence for an unknown name, a plugin that does not load, or a bad
    narrowing."""
    if name in _SPACES:
        space = _SPACES[name]()
    else:
        point = _plugin_point(name)
        cls = _plugin_class(point)
        try:
            space = cls()
        except Exception as err:  # the plugin's own constructor
            raise ValueError(f"{_origin(point)} cannot be built: {_said(err)}") from None
    return narrow_space(space, narrow) if narrow else space


def plugin_problems() -> list[str]:
    """One sentence per installed plugin that names a built-in space (and is ignored) or does not load."""
    problems = [
        f"{_origin(point)} is ignored: {point.name} is a built-in space"
        for point in _entry_points()
        if point.name in _SPACES
    ]
    for name in _plugins():
        try:
            get_space(name)
        except ValueError as err:
            problems.append(str(err))
    return problems

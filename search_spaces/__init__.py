"""search_spaces: one module per search space (its choices, ``sample(trial)``, baselines, proxy profiles).

A space describes which :class:`nas.arch.Arch` values exist and how to sample them; it never builds layers.
``get_space(name)`` and ``list_spaces()`` are the registry; ``get_space(name, narrow)`` narrows a space to
some values of its decisions (:mod:`search_spaces.narrowed`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from search_spaces.base import Baseline, PaperFigure, ProxyProfile, SearchSpace
from search_spaces.coatnet import CoAtNetSpace
from search_spaces.sasa import SasaSpace

__all__ = ["Baseline", "PaperFigure", "ProxyProfile", "SearchSpace", "get_space", "list_spaces"]

_SPACES: dict[str, type[SearchSpace]] = {space.name: space for space in (CoAtNetSpace, SasaSpace)}


def list_spaces() -> list[str]:
    return sorted(_SPACES)


def get_space(name: str, narrow: Mapping[str, Any] | None = None) -> SearchSpace:
    """The space ``name``, narrowed by ``narrow`` (``{decision: values}``, :mod:`search_spaces.narrowed`)
    where given; a ValueError of one sentence for an unknown name or a bad narrowing."""
    try:
        space = _SPACES[name]()
    except KeyError:
        raise ValueError(f"unknown search space {name!r}; available: {', '.join(list_spaces())}") from None
    return space.narrowed(narrow) if narrow else space

"""search_spaces: one module per search space (its choices, ``sample(trial)``, baselines, proxy profiles).

A space describes which :class:`nas.arch.Arch` values exist and how to sample them; it never builds layers.
``get_space(name)`` and ``list_spaces()`` are the registry.
"""

from __future__ import annotations

from search_spaces.base import Baseline, PaperFigure, ProxyProfile, SearchSpace
from search_spaces.coatnet import CoAtNetSpace
from search_spaces.sasa import SasaSpace

__all__ = ["Baseline", "PaperFigure", "ProxyProfile", "SearchSpace", "get_space", "list_spaces"]

_SPACES: dict[str, type[SearchSpace]] = {space.name: space for space in (CoAtNetSpace, SasaSpace)}


def list_spaces() -> list[str]:
    return sorted(_SPACES)


def get_space(name: str) -> SearchSpace:
    try:
        return _SPACES[name]()
    except KeyError:
        raise ValueError(f"unknown search space {name!r}; available: {', '.join(list_spaces())}") from None

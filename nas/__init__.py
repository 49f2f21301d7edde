"""nas: neural architecture search over hybrid convolution / attention vision networks.

Owns the architecture encoding (:mod:`nas.core.arch`), the token mixers, blocks and stems
(:mod:`nas.core.ops`), the
model builder (:mod:`nas.core.model`) and the command line (:mod:`nas.cli.commands`). It knows no specific
search
space's choices.

``import nas`` is cheap: the encoding is pure Python, and torch-backed names (``build_model``, ``NasNet``,
``create_model``) load on first use. ``import search_spaces.timm_models`` registers the networks with timm.
"""

from __future__ import annotations

import importlib
from typing import Any

from nas.core.arch import Arch, Head, Stage, Stem

__all__ = ["Arch", "Head", "NasNet", "Stage", "Stem", "build_model", "create_model"]
__version__ = "0.1.0"

_LAZY = {"build_model": "nas.core.model", "NasNet": "nas.core.model", "create_model": "nas.core.create"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nas' has no attribute {name!r}")

"""evaluators: what an architecture costs and how well it learns, knowing nothing of Optuna or Ray.

Cost models (params, MACs via fvcore, measured latency), data, proxy training, one-shot supernet training and
zero-cost baselines live here; each takes an :class:`nas.core.arch.Arch` and returns numbers. The registry of
evaluators a search can use (:mod:`evaluators.registry`) imports no torch, so the cost-model names below are
loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Complexity", "StageCost", "count", "latency_ms", "macs_of"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("evaluators.complexity"), name)
    raise AttributeError(f"module 'evaluators' has no attribute {name!r}")

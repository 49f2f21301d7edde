"""Optuna samplers by name, as ``--sampler`` chooses them; the Optuna and Ray drivers both build theirs here.

``tpe`` (the default for any number of objectives: multivariate, grouped, constant liar), ``nsga2``,
``random`` and ``gp`` (needs scipy). Each worker of a study gets its own seed, ``seed + worker``.
"""

from __future__ import annotations

import warnings

import optuna

from nas.search.settings import SAMPLERS

__all__ = ["make_sampler"]


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    """The sampler ``name`` (one of :data:`SAMPLERS`) seeded with ``seed``; ValueError in one sentence."""
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    if name == "tpe":
        with warnings.catch_warnings():  # optuna calls these options experimental: noise for a user
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, constant_liar=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name != "gp":
        raise ValueError(f"sampler: unknown {name!r}; allowed: {', '.join(SAMPLERS)}")
    try:
        import scipy  # noqa: F401 - the GP sampler's optimizer
    except ImportError:
        raise ValueError("sampler: gp needs scipy; pip install scipy, or use nsga2, tpe or random") from None
    return optuna.samplers.GPSampler(seed=seed)

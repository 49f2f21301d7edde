"""Optuna samplers by name, as ``--sampler`` chooses them; the Optuna and Ray drivers both build theirs here.

``tpe`` (the default for any number of objectives: multivariate, grouped, constant liar), ``nsga2``,
``random`` and ``gp`` (needs scipy).

Seeds (:func:`sampler_seed`): a study's first session seeds its workers ``seed + worker``, so a fresh search
with one worker is repeatable from ``--seed``. A later session (``--resume``, or a worker that joins from
another machine) seeds from ``seed`` and its session id: seeded like the first, it would re-propose the
architectures the first session proposed, and the study would train them again.
"""

from __future__ import annotations

import hashlib
import warnings

import optuna

from nas.search.settings import SAMPLERS

__all__ = ["make_sampler", "sampler_seed"]


def sampler_seed(seed: int, worker: int = 0, session: str | None = None) -> int:
    """The seed of ``worker``'s sampler: ``seed + worker`` in a study's first session (``session`` None),
    else one derived from ``seed``, the session id and the worker (a 31-bit integer)."""
    if session is None:
        return seed + worker
    digest = hashlib.sha256(f"{seed}:{session}:{worker}".encode()).digest()
    return int.from_bytes(digest[:4], "little") >> 1


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

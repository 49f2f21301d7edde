"""Optuna samplers by name, as ``--sampler`` chooses them; the Optuna and Ray drivers both build theirs here.

``tpe`` (the default for any number of objectives: multivariate, grouped, constant liar), ``nsga2``,
``random`` and ``gp`` (needs scipy).

Seeds (:func:`sampler_seed`): a study's first session seeds its workers ``seed + worker``, so a fresh search
with one worker is repeatable from ``--seed``. A later session (``--resume``, or a worker that joins from
another machine) seeds from ``seed`` and its session id: seeded like the first, it would re-propose the
architectures the first session proposed, and the study would train them again.

On a fidelity ladder (:func:`on_rung_zero`) the sampler models on rung-0 results only: each architecture
once, every value at one fidelity. A promotion is a trial of its own with its lineage's parameters and a
higher rung's top-1; seen by TPE (or NSGA-II, GP), the promoted architectures would appear two or three
times, their later values dominating every rung-0 value, and the sampler would split good from bad by how
far a trial was trained rather than by what it is. The Ray driver's inner searcher is told rung-0 trials
only for the same reason.
"""

from __future__ import annotations

import copy
import hashlib
import warnings
from typing import Any

import optuna
from optuna.samplers import BaseSampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from nas.study.optuna_private import SamplerView
from nas.study.settings import SAMPLERS

__all__ = ["make_sampler", "on_rung_zero", "sampler_seed"]


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


def on_rung_zero(sampler: BaseSampler) -> BaseSampler:
    """``sampler`` as a ladder's search uses it: it samples, and is told, as if the study held no trial of
    a rung above 0 (see the module's docstring)."""
    return _RungZeroSampler(sampler)


def _promoted(trial: FrozenTrial) -> bool:
    return bool(trial.user_attrs.get("rung"))  # a promotion: rung 1 or higher, set when it is enqueued


def _rung_zero(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """The trials as a ladder's sampler sees them: its promotions as failed trials, which every sampler
    skips, each in its place."""
    return [_as_failed(t) if _promoted(t) else t for t in trials]


def _as_failed(trial: FrozenTrial) -> FrozenTrial:
    """A copy of ``trial`` in state FAIL, without values (the study's own trial is left as it is)."""
    shown = copy.copy(trial)
    shown.state = TrialState.FAIL
    shown.values = None
    return shown


class _RungZeroSampler(BaseSampler):
    """``base`` given the study without its promotions, for every decision it makes."""

    def __init__(self, base: BaseSampler) -> None:
        self.base = base

    def __str__(self) -> str:
        return f"{self.base} on rung 0"

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, Any]:
        return self.base.infer_relative_search_space(SamplerView(study, _rung_zero), trial)  # type: ignore[arg-type]

    def sample_relative(self, study: Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict:
        return self.base.sample_relative(SamplerView(study, _rung_zero), trial, search_space)  # type: ignore[arg-type]

    def sample_independent(self, study: Study, trial: FrozenTrial, name: str, distribution: Any) -> Any:
        return self.base.sample_independent(SamplerView(study, _rung_zero), trial, name, distribution)  # type: ignore[arg-type]

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self.base.before_trial(SamplerView(study, _rung_zero), trial)  # type: ignore[arg-type]

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        self.base.after_trial(SamplerView(study, _rung_zero), trial, state, values)  # type: ignore[arg-type]

    def reseed_rng(self) -> None:
        self.base.reseed_rng()

"""Which of the space's choices matter for each objective: PED-ANOVA importances (Watanabe et al. 2023,
"PED-ANOVA: Efficiently Quantifying Hyperparameter Importance in Arbitrary Subspaces", Eq. 6: the Pearson
divergence between the choice's distribution among the top trials and among all of them), by Optuna's
:class:`~optuna.importance.PedAnovaImportanceEvaluator`, which also weighs conditional choices (``s1.k``
exists only for local attention; ``stem.patch`` only for a patch stem).

One code path for both engines: the trials table (an Optuna study's or a Ray run's) is turned into an
in-memory Optuna study of every objective, evaluated once per objective (that objective's values as the
target) and once for the front. Each row's choices are its ``arch_json``
replayed through the space (``space.encode`` and ``sample`` on a ``FixedTrial``: the parameters and their
declared distributions, as the sampler saw them). Rows used: completed, met the limits, on a ladder of the
top rung, and no repeats (a repeat is the same architecture counted twice). A choice that every row made
alike (one ``--narrow`` fixed) is left out: it cannot matter.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from nas.core.arch import Arch
from nas.study.objectives import Objective
from search_spaces import get_space

__all__ = ["FRONT", "MIN_TRIALS", "ChoiceImportance", "choice_importance"]

MIN_TRIALS = 8  # fewer completed trials tell nothing: the top quantile would be one or two of them
FRONT = "the front"  # the column of importances for reaching the Pareto front of all objectives at once


@dataclass(frozen=True)
class ChoiceImportance:
    """Per target (each objective's name, then :data:`FRONT` with two or more objectives), each choice's
    importance (non-negative, summing to 1 per target), over ``trials`` trials; ``reason`` says why there
    are none (too few trials, an unknown space)."""

    importances: dict[str, dict[str, float]]
    trials: int
    reason: str = ""

    def choices(self) -> list[str]:
        """The choices, most important first (by their largest importance for any target)."""
        names = {c for per in self.importances.values() for c in per}
        return sorted(names, key=lambda c: (-max(per.get(c, 0.0) for per in self.importances.values()), c))


def choice_importance(
    frame: pd.DataFrame, objectives: Sequence[Objective], space_name: str | None, rows: Sequence[int]
) -> ChoiceImportance:
    """The importances over the table's ``rows`` (indices of ``frame``) of the space named ``space_name``."""
    try:
        space = get_space(space_name)
    except ValueError:
        return ChoiceImportance({}, 0, f"the space {space_name!r} is not known here")
    trials = [t for t in (_trial(space, frame.loc[i], objectives) for i in rows) if t is not None]
    if len(trials) < MIN_TRIALS:
        return ChoiceImportance({}, len(trials), f"{len(trials)} trials; importances need {MIN_TRIALS}")
    quantile = min(0.5, max(0.1, 5 / len(trials)))  # >= 5 trials in the top quantile (the paper)
    out = _importances(trials, objectives, quantile)
    return ChoiceImportance({target: _varied(per, trials) for target, per in out.items()}, len(trials))


def _varied(importances: dict[str, float], trials: Sequence[Any]) -> dict[str, float]:
    """``importances`` without the choices every trial made alike (a decision ``--narrow`` fixed, or one the
    sampler never varied), the rest scaled to sum to 1 again. Such a choice cannot matter; PED-ANOVA still
    gives it a little (its Parzen estimators smooth over the choice's other values, which no trial took)."""
    seen: dict[str, set[str]] = {}
    for trial in trials:
        for name, value in trial.params.items():
            seen.setdefault(name, set()).add(repr(value))
    kept = {c: v for c, v in importances.items() if len(seen.get(c, ())) > 1}
    total = sum(kept.values())
    return {c: v / total for c, v in kept.items()} if total > 0 else kept


def _trial(space: Any, row: pd.Series, objectives: Sequence[Objective]) -> Any:
    """The row as a finished Optuna trial of the space (None if a value is missing or it left the space)."""
    import optuna

    values = [pd.to_numeric(row.get(o.name), errors="coerce") for o in objectives]
    if not all(v is not None and math.isfinite(v) for v in values) or not row.get("arch_json"):
        return None
    try:
        replay = optuna.trial.FixedTrial(space.encode(Arch.from_json(row["arch_json"])))
        space.sample(replay)
    except ValueError:  # an architecture of a space variant, or a table edited by hand
        return None
    return optuna.trial.create_trial(
        params=replay.params, distributions=replay.distributions, values=[float(v) for v in values]
    )


def _importances(
    trials: Sequence[Any], objectives: Sequence[Objective], quantile: float
) -> dict[str, dict[str, float]]:
    """PED-ANOVA over one in-memory study of ``trials``: per objective (its values as the target, negated
    where it is maximized: the evaluator takes lower as better), and with several, for reaching their Pareto
    front (non-domination rank with a hypervolume tie-break: Optuna's multi-objective top quantile). One
    study for every target: building one costs more than an evaluation (a deep copy per trial added)."""
    import optuna

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # not "A new study created in memory"
    try:
        study = optuna.create_study(directions=[o.direction for o in objectives])
    finally:
        optuna.logging.set_verbosity(verbosity)
    study.add_trials(trials)
    evaluator = optuna.importance.PedAnovaImportanceEvaluator(target_quantile=quantile)

    def objective(k: int) -> Any:
        sign = -1.0 if objectives[k].direction == "maximize" else 1.0
        return lambda trial: sign * trial.values[k]

    out = {}
    # "importances will be equal" when every trial ties (they are, all 0); "lower target is better" (it is)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, o in enumerate(objectives):
            out[o.name] = optuna.importance.get_param_importances(
                study, evaluator=evaluator, target=objective(k)
            )
        if len(objectives) > 1:
            out[FRONT] = optuna.importance.get_param_importances(study, evaluator=evaluator)
    return out

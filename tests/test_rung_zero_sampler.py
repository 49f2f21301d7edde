"""On a fidelity ladder the Optuna driver's sampler models on rung-0 trials only: a promotion (the same
parameters again, at a higher rung's top-1) must not weigh in what the sampler proposes next."""

from __future__ import annotations

import random
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import create_trial

from nas.search.optuna_driver import open_study
from nas.search.samplers import make_sampler, on_rung_zero
from nas.study.settings import SearchSettings

DISTRIBUTIONS = {"op": CategoricalDistribution(["C", "L", "R", "E"]), "depth": IntDistribution(1, 8)}
DIRECTIONS = ["maximize", "minimize"]
GENERATION = optuna.samplers.NSGAIISampler._get_generation_key()
POPULATION = 4  # NSGA-II's: the 14 rung-0 trials make three generations and part of a fourth


def _sampler(name: str) -> optuna.samplers.BaseSampler:
    """``name`` seeded; NSGA-II with a population small enough that the history below breeds it (at its
    default 50 it would sample at random throughout, and the check would not reach its selection)."""
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=7, population_size=POPULATION)
    return make_sampler(name, 7)


def _rung_zero_trials(n: int = 14) -> list[optuna.trial.FrozenTrial]:
    rng = random.Random(3)
    trials = []
    for number in range(n):
        params = {"op": rng.choice("CLRE"), "depth": rng.randint(1, 8)}
        values = [rng.uniform(0.3, 0.6), params["depth"] * 10.0 + rng.uniform(0, 5)]
        attrs = {"rung": 0, "lineage": number}
        generation = {GENERATION: number // POPULATION}  # as NSGA-II's before_trial would have set it
        trials.append(
            create_trial(
                params=params,
                distributions=DISTRIBUTIONS,
                values=values,
                user_attrs=attrs,
                system_attrs=generation,
            )
        )
    return trials


def _promotions(rung_zero: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """The two lineages with the highest rung-0 top-1 promoted twice, each rung a better top-1, enqueued
    while the third generation ran."""
    best = sorted(range(len(rung_zero)), key=lambda i: -rung_zero[i].values[0])[:2]
    trials = []
    for lineage in best:
        first = rung_zero[lineage]
        for rung in (1, 2):
            values = [first.values[0] + 0.2 * rung, first.values[1]]
            attrs = {"rung": rung, "lineage": lineage}
            trials.append(
                create_trial(
                    params=first.params,
                    distributions=DISTRIBUTIONS,
                    values=values,
                    user_attrs=attrs,
                    system_attrs={GENERATION: 2},
                )
            )
    return trials


def _interleaved(rung_zero: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """The study's history as a ladder writes it: the promotions among the rung-0 trials."""
    return rung_zero[:8] + _promotions(rung_zero) + rung_zero[8:]


def _proposals(sampler: optuna.samplers.BaseSampler, history: list, asks: int = 6) -> list[dict]:
    """What ``sampler`` proposes for ``asks`` trials in a row after ``history`` (each told a fixed value)."""
    study = optuna.create_study(directions=DIRECTIONS, sampler=sampler)
    study.add_trials(history)
    proposed = []
    for i in range(asks):
        trial = study.ask()
        params = {
            "op": trial.suggest_categorical("op", list("CLRE")),
            "depth": trial.suggest_int("depth", 1, 8),
        }
        trial.set_user_attr("rung", 0)
        study.tell(trial, [0.4 + 0.01 * i, params["depth"] * 10.0])
        proposed.append(params)
    return proposed


@pytest.mark.parametrize("name", ["tpe", "nsga2", "random"])
def test_the_ladders_sampler_proposes_as_if_there_were_no_promotions(name: str) -> None:
    rung_zero = _rung_zero_trials()
    alone = _proposals(_sampler(name), rung_zero)
    assert _proposals(on_rung_zero(_sampler(name)), _interleaved(rung_zero)) == alone


@pytest.mark.parametrize("name", ["tpe", "nsga2"])
def test_a_model_based_sampler_unwrapped_is_swayed_by_the_promotions(name: str) -> None:
    """The check above can fail: TPE or NSGA-II unwrapped, shown the same promotions, proposes otherwise
    (and NSGA-II's proposals are bred, not random: they differ from the random sampler's)."""
    rung_zero = _rung_zero_trials()
    alone = _proposals(_sampler(name), rung_zero)
    assert _proposals(_sampler(name), _interleaved(rung_zero)) != alone
    assert alone != _proposals(make_sampler("random", 7), rung_zero)


def test_the_optuna_driver_samples_a_ladders_study_on_rung_zero(tmp_path: Path) -> None:
    base = {"space": "coatnet", "evaluator": "proxy", "runs_dir": str(tmp_path), "baselines": False}
    study = open_study(SearchSettings(study="l", fidelity="ladder", min_fidelity=128, **base))[0]
    assert "on rung 0" in str(study.sampler)
    single = open_study(SearchSettings(study="s", **base))[0]
    assert isinstance(single.sampler, optuna.samplers.TPESampler)

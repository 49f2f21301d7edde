"""results.importance: PED-ANOVA importances of the space's choices, from a trials table (either engine's)."""

from __future__ import annotations

import random

import pandas as pd

from nas.study.objectives import parse_objectives
from nas.study.trials_table import frame_from_rows, trial_row
from results.importance import FRONT, MIN_TRIALS, choice_importance
from search_spaces import get_space

OBJECTIVES = parse_objectives("top1,macs")


def _table(n: int, narrow: dict | None = None) -> pd.DataFrame:
    """A hand-made table of ``n`` sampled coatnet architectures (of the space ``narrow`` narrows) whose top-1
    is decided by the op of stage 3 alone and whose MACs by the depth of stage 2 alone, built as the drivers
    build theirs."""
    space = get_space("coatnet", narrow)
    rng = random.Random(0)
    rows = []
    for number in range(n):
        arch = space.sample_random(rng)
        params = space.encode(arch)
        top1 = 80.0 if params.get("s3.op") == "rel" else 60.0
        macs = 1e8 * params.get("s2.depth", 1)
        attrs = {"arch": arch.key, "arch_json": arch.to_json(), "metrics": {"top1": top1, "macs": macs}}
        rows.append(trial_row(number, "COMPLETE", attrs, {"top1": top1, "macs": macs}))
    return frame_from_rows(rows, ["top1", "macs"])


def test_the_choice_that_decides_an_objective_matters_most_for_it() -> None:
    frame = _table(60)
    result = choice_importance(frame, OBJECTIVES, "coatnet", list(frame.index))
    assert result.trials == 60 and not result.reason
    assert set(result.importances) == {"top1", "macs", FRONT}
    top1, macs = result.importances["top1"], result.importances["macs"]
    assert max(top1, key=top1.get) == "s3.op"
    assert max(macs, key=macs.get) == "s2.depth"
    for per in result.importances.values():
        assert abs(sum(per.values()) - 1) < 1e-9 and all(v >= 0 for v in per.values())
    assert "s3.k" in top1  # a conditional choice (local attention's extent) is weighed where it exists
    assert result.choices()[0] in {"s3.op", "s2.depth"}


def test_too_few_trials_or_an_unknown_space_say_why() -> None:
    frame = _table(MIN_TRIALS - 1)
    few = choice_importance(frame, OBJECTIVES, "coatnet", list(frame.index))
    assert not few.importances and str(MIN_TRIALS) in few.reason
    unknown = choice_importance(frame, OBJECTIVES, "nosuchspace", list(frame.index))
    assert not unknown.importances and "nosuchspace" in unknown.reason


def test_a_choice_every_trial_made_alike_is_left_out() -> None:
    """A decision --narrow fixed cannot matter: it is not ranked (it would be, at 0)."""
    frame = _table(40, {"stem": "conv", "s4.op": "rel"})
    result = choice_importance(frame, OBJECTIVES, "coatnet", list(frame.index))
    for per in result.importances.values():
        assert "stem" not in per and "s4.op" not in per and "stem.patch" not in per
        assert {"s3.op", "s2.depth", "s4.depth"} <= set(per) and abs(sum(per.values()) - 1) < 1e-9
    assert max(result.importances["top1"], key=result.importances["top1"].get) == "s3.op"


def _alone(trials: list, objectives, picked: list[int], quantile: float) -> dict[str, float]:
    """Optuna's PED-ANOVA on a study of the ``picked`` objectives alone, in their directions (reference)."""
    import warnings

    import optuna

    study = optuna.create_study(directions=[objectives[k].direction for k in picked])
    for t in trials:
        values = [t.values[k] for k in picked]
        study.add_trial(
            optuna.trial.create_trial(params=t.params, distributions=t.distributions, values=values)
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluator = optuna.importance.PedAnovaImportanceEvaluator(target_quantile=quantile)
        return optuna.importance.get_param_importances(study, evaluator=evaluator)


def test_each_target_reads_as_a_study_of_its_own_objectives() -> None:
    """One study serves every target: each objective's importances are those of a study of it alone, in its
    direction (top-1 maximized, MACs minimized), and the front's those of both."""
    from results import importance

    frame = _table(60)
    space = get_space("coatnet")
    trials = [importance._trial(space, frame.loc[i], OBJECTIVES) for i in frame.index]
    quantile = min(0.5, max(0.1, 5 / len(trials)))
    result = choice_importance(frame, OBJECTIVES, "coatnet", list(frame.index))
    for target, picked in (("top1", [0]), ("macs", [1]), (FRONT, [0, 1])):
        expected = importance._varied(_alone(trials, OBJECTIVES, picked, quantile), trials)
        assert result.importances[target] == expected, target

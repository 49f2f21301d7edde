"""Work is not repeated: a resumed session samples other architectures than the study's first one, and an
architecture the study already evaluated is answered from the study, not trained again (on both engines)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pandas as pd
import pytest
from cheap_search import cheap_settings
from typer.testing import CliRunner

from nas.api import run_search
from nas.cli.commands import app
from nas.core.arch import Arch
from nas.search.samplers import sampler_seed
from nas.search.trial import Earlier, TrialRunner, run_trial
from nas.study import constraints
from nas.study.storage import open_storage
from search_spaces import get_space


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys of the architectures evaluated from now on."""
    real, trained = TrialRunner.evaluate, []

    def spy(self: TrialRunner, arch: Arch, report=None, **extra):
        trained.append(arch.key)
        return real(self, arch, report, **extra)

    monkeypatch.setattr(TrialRunner, "evaluate", spy)
    return trained


def test_seeds_keep_the_first_session_and_differ_per_later_session_and_worker() -> None:
    assert sampler_seed(7) == 7 and sampler_seed(7, worker=2) == 9  # a fresh search repeats from --seed
    later = {sampler_seed(7, w, s) for w in (0, 1) for s in ("a1b2c3d4", "0f0f0f0f")}
    assert len(later) == 4 and 7 not in later and all(0 <= s < 2**31 for s in later)
    assert sampler_seed(7, 0, "a1b2c3d4") == sampler_seed(7, 0, "a1b2c3d4")


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_a_resumed_search_trains_no_architecture_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sampler: str
) -> None:
    trained = _spy(monkeypatch)
    settings = {"sampler": sampler, "baselines": False, "seed": 3}
    first = run_search(cheap_settings(tmp_path, budget="5trials", **settings))
    assert len(trained) == 5
    second = run_search(cheap_settings(tmp_path, budget="10trials", resume=True, **settings))
    assert len(set(trained)) == len(trained) == 10, trained  # seeded as the first session, it re-drew all 5
    # the second session drew new architectures, not the first session's again (answered or not)
    new = second.trials[second.trials["number"] >= 5]
    assert set(new["arch"]).isdisjoint(first.trials["arch"])


def test_an_architecture_the_study_has_is_answered_from_it_not_trained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = cheap_settings(tmp_path, budget="3trials", baselines=False)
    first = run_search(settings).trials
    storage, _ = open_storage(settings)
    study = optuna.load_study(study_name="t", storage=storage)
    study.enqueue_trial(study.trials[1].params)  # the sampler proposes trial 1's architecture again
    trained = _spy(monkeypatch)
    table = run_search(cheap_settings(tmp_path, budget="4trials", baselines=False, resume=True)).trials
    repeat = table[table["state"] == "REPEAT"]
    assert list(repeat["number"]) == [3] and list(repeat["repeat_of"]) == [1]
    assert repeat["arch"].iloc[0] == first["arch"][1]
    assert repeat[["macs", "params"]].values.tolist() == first.loc[[1], ["macs", "params"]].values.tolist()
    # a repeat trained nothing and is no trial of a trials budget: one new trial ran after it
    assert len(trained) == 1 and trained[0] != first["arch"][1]
    assert (table["state"] == "COMPLETE").sum() == 4
    told = optuna.load_study(study_name="t", storage=storage).trials[3]
    assert told.state.name == "COMPLETE" and told.values == study.trials[1].values  # the sampler learns it
    assert (tmp_path / "t" / "trials.csv").read_text().count("REPEAT") == 1


def test_a_sampler_that_only_repeats_stops_with_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    space = get_space("sasa")
    fixed = space.baselines()[next(iter(space.baseline_names().values()))].arch
    monkeypatch.setattr(type(space), "sample", lambda self, trial: fixed)
    monkeypatch.setattr(constraints, "REJECTED_IN_A_ROW", 5)
    result = CliRunner().invoke(
        app,
        ["search", "--space", "sasa", "--evaluator", "complexity", "--budget", "1h", "--no-baselines",
         "--macs-img-size", "32", "--runs-dir", str(tmp_path), "--study", "t"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    message = " ".join(result.output.split())
    assert "stopped: the last 5 samples were all architectures the study had evaluated" in message
    assert "5 repeated architectures answered from the study" in message and "Traceback" not in message
    table = pd.read_csv(tmp_path / "t" / "trials.csv")
    assert list(table["state"]) == ["COMPLETE"] + ["REPEAT"] * 5
    assert set(table["repeat_of"].dropna()) == {0}


def test_the_ray_searcher_answers_an_architecture_its_ledger_has(tmp_path: Path) -> None:
    from nas.search import ray_driver

    settings = cheap_settings(tmp_path, study="seen", backend="ray", budget="30trials")
    space = get_space("sasa")
    first = space.baselines()[next(iter(space.baseline_names().values()))].arch  # the first suggestion
    path = ray_driver.ledger_path(settings)
    ray_driver._append(path, {"budget": settings.budget})
    metrics = {"macs": 1.5e7, "params": 2.5e5}
    attrs = {"arch": first.key, "arch_json": first.to_json(), "metrics": metrics, "constraints": {},
             "cost": {"seconds": 1.0}}  # fmt: skip
    ray_driver._append(path, {"trial": "old", "number": 0, "session": "s", "session_start": 0.0, "end": 1.0,
                              "attrs": attrs, "values": metrics})  # fmt: skip
    searcher = ray_driver.make_searcher(settings).searcher
    config = searcher.suggest("t1")
    assert config["__repeat"] == {"number": 0, "metrics": metrics, "constraints": {}}
    # what ray_trial does with it: the trial is answered, not evaluated
    runner = TrialRunner(settings)
    monkeypatched = []
    runner.evaluate = lambda *a, **k: monkeypatched.append(a)  # type: ignore[method-assign]
    params = {k: v for k, v in config.items() if not k.startswith("__")}
    record = run_trial(
        runner,
        lambda: runner.space.sample(optuna.trial.FixedTrial(params)),
        number=config["__number"],
        known=lambda arch: Earlier(**config["__repeat"]),
    )
    assert record.repeat_of == 0 and record.metrics == metrics and not monkeypatched
    assert record.cost.overhead and record.attrs()["repeat_of"] == 0
    entry = ray_driver._record_of(record.attrs(), 1, ("macs", "params"), ("minimize",) * 2, None)
    assert entry.repeat_of == 0

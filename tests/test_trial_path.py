"""The one trial path: evaluators declare what they produce, a study's wall time survives resumes, the
manifest keeps the sections it does not own, the report reads stages from the architecture's JSON, and
baselines are recognised one way (the Ray side of each is in tests/test_search_ray.py)."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import pytest
from cheap_search import cheap_settings
from typer.testing import CliRunner

from evaluators.registry import EVALUATORS, ON_REQUEST, TRIAL_METRICS, EvaluatorSpec
from nas.api import run_search
from nas.cli.commands import app
from nas.core.arch import Arch
from nas.search.trial import TrialRunner, run_trial
from nas.study import budget
from nas.study.budget import wall_seconds
from nas.study.manifest import read_manifest, write_manifest
from nas.study.objectives import KNOWN_DIRECTIONS
from nas.study.settings import SearchSettings
from results.analysis import analyse, front_table, load_run
from search_spaces import get_space


@pytest.mark.parametrize(
    ("evaluator", "objective"),
    [
        (e, o)
        for e, spec in sorted(EVALUATORS.items())
        for o in sorted(KNOWN_DIRECTIONS)
        if o not in spec.objectives
    ],
)
def test_an_objective_the_evaluator_does_not_produce_is_refused_before_any_trial(
    tmp_path: Path, evaluator: str, objective: str
) -> None:
    result = CliRunner().invoke(
        app,
        ["search", "--space", "sasa", "--evaluator", evaluator, "--objectives", f"{objective},macs",
         "--budget", "3trials", "--runs-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    message = result.output.strip()
    assert objective in message and "\n" not in message and "Traceback" not in message
    assert not any(tmp_path.iterdir())  # no study, no run directory: nothing started


def test_evaluators_declare_what_they_produce(tmp_path: Path) -> None:
    for spec in EVALUATORS.values():
        assert not spec.objectives - spec.produces - TRIAL_METRICS - ON_REQUEST, spec.name
        assert spec.objectives >= TRIAL_METRICS
        if spec.config is not None:
            config = spec.make_config({})
            assert type(config).__name__ in spec.config
    complexity = EVALUATORS["complexity"]
    runner = TrialRunner(cheap_settings(tmp_path))  # its part costs are kept under tmp_path/counts
    arch = get_space("sasa").sample_random(0)
    record = run_trial(runner, lambda: arch, number=0)
    assert record.ok and complexity.objectives - ON_REQUEST <= record.metrics.keys()


def test_an_evaluator_is_asked_whether_it_reads_data_not_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Preflight loads the dataset for an evaluator with a builder, and not for one that only counts, by
    what the registry declares (a new counting evaluator needs no edit of the search's code)."""
    import evaluators.data
    from nas.search.preflight import preflight

    loaded: list[str] = []

    def load_dataset(name: str, **_: Any) -> Any:
        loaded.append(name)
        raise RuntimeError("stop after the dataset")

    monkeypatch.setattr(evaluators.data, "load_dataset", load_dataset)
    counter = EvaluatorSpec("counter", "counts", frozenset(), default_objectives=("macs:min",))
    monkeypatch.setitem(EVALUATORS, "counter", counter)
    assert preflight(cheap_settings(tmp_path / "a", evaluator="counter", objectives="macs")) is None
    assert not loaded
    with pytest.raises(RuntimeError, match="stop after the dataset"):
        preflight(cheap_settings(tmp_path / "b", evaluator="proxy", objectives="top1,macs"))
    assert loaded
    assert [n for n, spec in EVALUATORS.items() if spec.counts_only] == ["complexity", "counter"]


def test_an_objective_declared_but_not_reported_fails_the_trial_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Forgetful:
        def evaluate(self, arch, report=None):
            return {"loss": 1.0}  # top1 declared, not reported

    spec = EvaluatorSpec("forgetful", "forgets", frozenset({"top1"}), builder="builtins:object")
    monkeypatch.setitem(EVALUATORS, "forgetful", spec)
    monkeypatch.setattr(EvaluatorSpec, "build", lambda self, config, **_: Forgetful())
    settings = cheap_settings(tmp_path, evaluator="forgetful", objectives=("top1:max", "macs"))
    record = run_trial(TrialRunner(settings), lambda: get_space("sasa").sample_random(1), number=0)
    assert record.reason == "error: RuntimeError: the forgetful evaluator declares top1 but reported None"


def test_set_up_spent_waiting_for_another_session_is_not_charged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-shot session that waited for another's supernet (evaluators/oneshot.py) was charged the wait,
    so the supernet's training counted twice on the study's budget."""

    class Waited:
        waited_seconds = 0.4  # of the 0.5 s its set-up took

    def build(self: EvaluatorSpec, config: Any, **_: Any) -> Waited:
        time.sleep(0.5)
        return Waited()

    spec = EvaluatorSpec("waits", "waits", frozenset({"top1"}), builder="builtins:object", needs_setup=True)
    monkeypatch.setitem(EVALUATORS, "waits", spec)
    monkeypatch.setattr(EvaluatorSpec, "build", build)
    cost = TrialRunner(cheap_settings(tmp_path, evaluator="waits", objectives=("top1:max",))).prepare()
    assert cost is not None and cost.overhead and 0.1 - 0.05 <= cost.seconds < 0.1 + 0.3


@pytest.mark.parametrize("backend", ["optuna", "ray"])
def test_a_trial_that_holds_no_gpu_trains_and_is_charged_on_the_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """On a GPU machine a Ray trial of ``--gpus-per-trial 0`` still sees the GPUs (Ray 2.x leaves a
    num_gpus=0 task's CUDA_VISIBLE_DEVICES alone): it trained on cuda:0, unreserved, and was charged one GPU,
    which a CPU budget refused at its first charge."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    held = cheap_settings(tmp_path, backend=backend, budget="1h", gpus_per_trial=1)
    assert TrialRunner(held).device.type == "cuda" and TrialRunner(held).gpus == 1
    none = cheap_settings(tmp_path, backend=backend, budget="1cpu-hours", gpus_per_trial=0)
    runner = TrialRunner(none)
    assert runner.device == torch.device("cpu") and runner.gpus == 0 and not runner.supernet_gpus
    budget.BudgetTracker(none.budget).charge(runner.cost(2.0))  # refused before: "ran on GPU"
    assert TrialRunner(none, device="cuda:0").device.type == "cuda"  # a device given is kept


def test_the_manifest_records_the_evaluator_config_the_trials_ran_with(tmp_path: Path) -> None:
    settings = cheap_settings(
        tmp_path, evaluator="proxy", objectives=("top1:max",), evaluator_config={"lr": 5e-3}
    )
    assert TrialRunner(settings).config.lr == 5e-3
    write_manifest(settings, storage="s", budget={}, data=None, trials={}, session={"id": "x"})
    evaluator = read_manifest(settings.run_dir)["evaluator"]
    assert evaluator["config"]["lr"] == 5e-3 and evaluator["config"]["weight_decay"] == 0.05
    assert "top1" in evaluator["produces"]
    (tmp_path / "search.yaml").write_text(
        "evaluator: proxy\nobjectives: top1:max\nevaluator-config: {lr: 0.002}\n"
    )
    assert SearchSettings.from_sources(tmp_path / "search.yaml").evaluator_config_used.lr == 0.002
    with pytest.raises(ValueError, match="unknown proxy setting"):
        cheap_settings(tmp_path, evaluator="proxy", objectives=("top1:max",), evaluator_config={"lrr": 1})
    with pytest.raises(ValueError, match="lr must be"):
        cheap_settings(tmp_path, evaluator="proxy", objectives=("top1:max",), evaluator_config={"lr": "x"})


def test_proxy_epochs_set_what_every_trial_trains_and_the_manifest_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--proxy-epochs`` replaces the profile's epochs in every place that reads the proxy's schedule: the
    trainings, the manifest and a ladder's rungs (which scale with what the proxy trains on)."""
    from dataclasses import replace

    from search_spaces.sasa import SasaSpace

    tiny = replace(SasaSpace.profiles["cpu"], train_samples=128, batch_size=64, val_samples=64)
    monkeypatch.setitem(SasaSpace.profiles, "cpu", tiny)
    settings = cheap_settings(tmp_path, evaluator="proxy", objectives=("top1:max",), proxy_epochs=3)
    record = run_trial(TrialRunner(settings), lambda: get_space("sasa").sample_random(0), number=0)
    assert record.ok and record.metrics["epochs"] == 3
    write_manifest(settings, storage="s", budget={}, data=None, trials={}, session={"id": "x"})
    assert read_manifest(settings.run_dir)["evaluator"]["profile"]["epochs"] == 3
    ladder = {"evaluator": "proxy", "objectives": ("top1:max",), "fidelity": "ladder", "budget": "20trials"}
    plain, longer = cheap_settings(tmp_path, **ladder), cheap_settings(tmp_path, **ladder, proxy_epochs=12)
    assert plain.proxy_profile == tiny and tiny.epochs != 12
    assert TrialRunner(longer).ladder.min_images == 12 * 128 // (2 * 3)  # 1/(2 eta) of the proxy's images


def test_wall_seconds_count_overlapping_sessions_once() -> None:
    assert wall_seconds([(0, 10), (5, 12), (20, 21), (30, 30)]) == 13
    assert wall_seconds([]) == 0


def test_a_wall_budget_keeps_spending_across_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the sessions' clock moves only in trials, 0.25 s each, and each trial is charged 0.25 s: what the
    # budget decides is then the same on a fast machine and a busy one
    now = [1_000_000.0]
    monkeypatch.setattr(budget, "session_clock", lambda: now[0])
    real, real_cost = TrialRunner.evaluate, TrialRunner.cost

    def slow(self: TrialRunner, arch: Arch, report=None):
        now[0] += 0.25
        return real(self, arch, report)

    monkeypatch.setattr(TrialRunner, "evaluate", slow)
    monkeypatch.setattr(TrialRunner, "cost", lambda self, seconds, **kw: real_cost(self, 0.25, **kw))
    first = run_search(cheap_settings(tmp_path, budget="1.5wall-seconds"))
    ran = len(first.trials)
    assert 2 <= ran <= 6
    spent = json.loads((first.run_dir / "manifest.json").read_text())["budget"]["spent"]["elapsed"]
    assert spent >= 0.25 * ran  # the study's wall time covers its trials
    # the study's wall time is spent: a resume under the same budget starts no trial ...
    again = run_search(cheap_settings(tmp_path, budget="1.5wall-seconds", resume=True))
    assert len(again.trials) == ran and first.idle is None
    assert again.idle is not None and again.idle.startswith(  # and says why, with what to do
        "this session ran no trial: the budget leaves no room for one (budget 1.5wall-seconds"
    )
    assert again.idle.endswith("continue with a larger budget='2h'")
    # ... and one given 1.5 s more spends only what was added: at most 1.5 / 0.25 trials
    more = run_search(cheap_settings(tmp_path, budget="3wall-seconds", resume=True))
    assert ran < len(more.trials) <= ran + 6 and more.idle is None


def test_a_resume_keeps_the_reports_reference_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # no baselines: the reference is then drawn from every trial, so later, worse ones would move it
    first = run_search(cheap_settings(tmp_path, budget="6trials", baselines=False))
    reference = read_manifest(first.run_dir)["report"]["reference_point"]
    real = TrialRunner.evaluate

    def worse(self: TrialRunner, arch: Arch, report=None):  # trials past the reference: it must not move
        metrics = real(self, arch, report)
        return {**metrics, "macs": metrics["macs"] * 100}

    monkeypatch.setattr(TrialRunner, "evaluate", worse)
    run_search(cheap_settings(tmp_path, budget="9trials", baselines=False, resume=True))
    manifest = read_manifest(first.run_dir)
    assert manifest["report"]["reference_point"] == reference
    assert len(manifest["sessions"]) == 2


def test_the_front_table_reads_stages_from_the_architecture_json(tmp_path: Path) -> None:
    outcome = run_search(cheap_settings(tmp_path, budget="10trials"))
    table = front_table(analyse(*load_run(outcome.run_dir)))
    arch_json = outcome.trials.set_index("number")["arch_json"]
    assert len(table)
    for row in table.to_dict("records"):
        arch = Arch.from_json(arch_json[row["number"]])
        assert [row[c] for c in table.columns if c.startswith("stage")] == [s.key for s in arch.stages]
        assert row["head"] == "fc"  # sasa networks end in a plain classifier: no stage is taken for it


def test_baselines_that_are_one_network_run_once_under_the_first_name(tmp_path: Path) -> None:
    space = get_space("coatnet")
    names = space.baseline_names()
    assert len(names) < len(space.baselines())  # coatnet has a baseline that is another's network
    table = run_search(
        cheap_settings(tmp_path, space="coatnet", budget=f"{len(names)}trials", macs_img_size=32)
    ).trials
    assert list(table["baseline"]) == list(names.values())
    assert table["arch"].is_unique


def test_a_baseline_that_failed_runs_again_in_the_next_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A baseline that failed (a --trial-timeout too short for it, a cause since fixed) counted as run: no
    later session ran it again, and every report said that no baseline was run."""
    names = set(get_space("sasa").baseline_names().values())  # 9 networks
    real = TrialRunner.evaluate

    def failing(self: TrialRunner, arch: Arch, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if arch.key in self.baselines:
            raise RuntimeError("too slow for its timeout")
        return real(self, arch, *args, **kwargs)

    monkeypatch.setattr(TrialRunner, "evaluate", failing)
    first = run_search(cheap_settings(tmp_path, budget="12trials")).trials
    assert set(first.loc[first["baseline"].isin(names), "state"]) == {"FAIL"}
    monkeypatch.setattr(TrialRunner, "evaluate", real)
    again = run_search(cheap_settings(tmp_path, budget="24trials", resume=True)).trials
    done = again[again["state"] == "COMPLETE"]
    assert set(done["baseline"]) & names == names
    assert set(again.loc[again["number"] >= 12, "baseline"]) >= names  # in the second session


def test_batched_trial_writes_store_what_unbatched_writes_store(tmp_path: Path) -> None:
    import optuna

    from nas.search.samplers import make_sampler
    from nas.study.optuna_private import batched_writes
    from nas.study.storage import open_storage

    space = get_space("coatnet")
    stored = []
    for batched in (False, True):
        settings = cheap_settings(tmp_path / str(batched), space="coatnet")
        storage = open_storage(settings)[0]
        sampler = make_sampler("nsga2", 0)
        study = optuna.create_study(storage=storage, directions=["minimize"], sampler=sampler)
        for i in range(3):
            trial = study.ask()
            with batched_writes(storage) if batched else contextlib.nullcontext():
                arch = space.sample(trial)
                trial.set_user_attr("arch", arch.key)
                trial.set_user_attr("arch", arch.key + "!")  # the last write of a key wins
                trial.set_user_attr("n", i)
            study.tell(trial, float(i))
        again = optuna.load_study(study_name=study.study_name, storage=open_storage(settings)[0])
        stored.append([(t.params, t.user_attrs, t.system_attrs, t.values) for t in again.trials])
    assert stored[0] == stored[1]
    assert stored[1][0][1]["arch"].endswith("!") and any("generation" in k for k in stored[1][0][2])


def test_the_ray_ledger_keeps_whole_lines_first_records_and_each_sessions_span(tmp_path: Path) -> None:
    from nas.search.ray_driver import _append, read_ledger

    path = tmp_path / "ray_ledger.jsonl"
    cost = {"seconds": 2.0, "devices": 1, "device": "cpu", "label": "trial", "overhead": False}

    def trial(tid: str, number: int, session: str, start: float, end: float) -> dict:
        attrs = {"cost": cost, "arch": f"a{number}"}
        return {"trial": tid, "number": number, "session": session, "session_start": start, "end": end,
                "attrs": attrs, "values": {"macs": 1.0}}  # fmt: skip

    _append(path, {"budget": "10trials"})
    _append(path, {"overhead": {**cost, "overhead": True, "seconds": 5.0}})
    _append(path, trial("x", 0, "s1", 100.0, 110.0))
    _append(path, trial("y", 1, "s1", 100.0, 130.0))
    _append(path, trial("x", 7, "s2", 200.0, 205.0))  # x run again after a restore: the first record stays
    _append(path, {"budget": "1wall-minute"})
    with path.open("a") as f:
        f.write('{"trial": "z", "numb')  # a line cut by a kill mid-write
    ledger = read_ledger(path)
    assert ledger.budget == "1wall-minute" and [t["number"] for t in ledger.trials.values()] == [0, 1]
    assert ledger.sessions == {"s1": [100.0, 130.0], "s2": [200.0, 205.0]}
    tracker = ledger.tracker(ledger.budget)
    assert tracker.trials == 2 and tracker.device_seconds == 9.0
    assert tracker.spent == 35.0  # wall seconds: the two sessions' spans


def _same(ours: list[Any], optunas: list[Any]) -> bool:
    """The same trials, field by field; a dict's order aside (an unordered read's order differs by database)
    but the parameters' (Optuna orders them); compared as text, so that a NaN step equals itself."""

    def fields(trial: Any) -> str:
        own = {
            k: sorted(v.items(), key=str) if isinstance(v, dict) and k != "_params" else v
            for k, v in vars(trial).items()
        }
        return repr(own)

    return [fields(t) for t in ours] == [fields(t) for t in optunas]


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def test_the_lean_trial_reads_equal_optunas(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Every kind of trial (complete with an infinite value, failed, pruned with intermediate values,
    running, waiting), read by BatchedRDBStorage's reads and by Optuna's own, is the same FrozenTrial, on
    SQLite and on a real PostgreSQL server (whose value-type enums are distinct types)."""
    import math

    import optuna

    from nas.study.optuna_private import trial_id
    from nas.study.storage import open_storage

    url = request.getfixturevalue("postgres").url if database == "postgresql" else None
    storage = open_storage(cheap_settings(tmp_path, storage=url))[0]
    study = optuna.create_study(storage=storage, directions=["minimize", "maximize"])
    space = get_space("coatnet")
    for i in range(6):
        trial = study.ask()
        space.sample(trial)
        trial.set_user_attr("n", {"i": i})
        storage.set_trial_system_attr(trial_id(trial), "s", [i])
        if i == 0:
            study.tell(trial, [math.inf, -1.5])
        elif i == 1:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        elif i == 2:
            storage.set_trial_intermediate_value(trial_id(trial), 3, math.nan)
            storage.set_trial_intermediate_value(trial_id(trial), 1, 0.25)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        elif i < 5:
            study.tell(trial, [float(i), float(-i)])
    study.enqueue_trial({"stem": "conv"})
    study_id = storage.get_study_id_from_name(study.study_name)
    optuna_read = optuna.storages.RDBStorage  # Optuna's own reads, on the same database
    for states in (None, (optuna.trial.TrialState.RUNNING, optuna.trial.TrialState.WAITING)):
        for included, greater in ((set(), -1), ({3, 5}, 3), (set(), 2)):
            lean = storage._get_trials(study_id, states, included, greater)
            plain = optuna_read._get_trials(storage, study_id, states, included, greater)
            assert _same(lean, plain) and len(plain) >= 1
    for frozen in storage.get_all_trials(study_id):
        assert _same(
            [storage.get_trial(trial_id(frozen))], [optuna_read.get_trial(storage, trial_id(frozen))]
        )
    with pytest.raises(KeyError):
        storage.get_trial(10_000)
    # its pooled connections closed now: left to the garbage collector, a PostgreSQL one warns inside
    # whichever later test collects it (tests/test_bad_input.py counts warnings)
    storage.engine.dispose()

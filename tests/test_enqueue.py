"""`nas search --enqueue FILE`: the user's own architectures are evaluated first, on both engines, labelled by
their file names as the baselines are (in the table, the report, and wherever a sampled network equals one),
evaluated whatever the limits say, once a study; a file that is no architecture of the space is refused in
one sentence before anything is written."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from cheap_search import cheap_settings
from typer.testing import CliRunner

from nas.api import run_search
from nas.cli.commands import app
from nas.search.run import refresh_trials
from search_spaces import get_space

pytestmark = pytest.mark.integration

SPACE = get_space("sasa")


def _arch_file(folder: Path, name: str, seed: int) -> Path:
    path = folder / f"{name}.json"
    SPACE.sample_random(seed).save(path)
    return path


def _search(tmp_path: Path, *args: str) -> str:
    result = CliRunner().invoke(
        app,
        ["search", "--space", "sasa", "--evaluator", "complexity", "--objectives", "macs,params",
         "--runs-dir", str(tmp_path / "runs"), "--study", "t", *args],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


def test_enqueued_architectures_run_first_labelled_once_a_study(tmp_path: Path) -> None:
    mine, big = _arch_file(tmp_path, "mine", 1), _arch_file(tmp_path, "big", 2)
    _search(tmp_path, "--budget", "2trials", "--no-baselines", "--enqueue", str(mine))
    table = pd.read_csv(tmp_path / "runs" / "t" / "trials.csv", keep_default_na=False)
    assert table.loc[0, "arch"] == SPACE.sample_random(1).key and list(table["baseline"]) == ["mine", ""]
    assert "mine" in (tmp_path / "runs" / "t" / "report.html").read_text()
    # resumed with one more: the new one runs first, the old one not again
    _search(tmp_path, "--budget", "4trials", "--no-baselines", "--resume", "--enqueue", str(mine),
            "--enqueue", str(big))  # fmt: skip
    table = pd.read_csv(tmp_path / "runs" / "t" / "trials.csv", keep_default_na=False)
    assert list(table["baseline"]) == ["mine", "", "big", ""]
    assert table.loc[2, "arch"] == SPACE.sample_random(2).key
    manifest = json.loads((tmp_path / "runs" / "t" / "manifest.json").read_text())
    assert set(manifest["settings"]["enqueue"]) == {"mine", "big"}  # the architectures, not the paths


def test_an_enqueued_architecture_is_evaluated_over_the_limits(tmp_path: Path) -> None:
    """As a baseline is: the user asked for it by name (and it is marked infeasible)."""
    _search(tmp_path, "--budget", "1trials", "--enqueue", str(_arch_file(tmp_path, "mine", 1)),
            "--no-baselines", "--max-params", "1")  # fmt: skip
    table = pd.read_csv(tmp_path / "runs" / "t" / "trials.csv", keep_default_na=False)
    assert list(table["baseline"]) == ["mine"] and table.loc[0, "params"] > 1
    assert str(table.loc[0, "feasible"]) == "False"


def test_an_enqueued_baseline_network_runs_once_under_the_baselines_name(tmp_path: Path) -> None:
    baseline = SPACE.baselines()["ResNet-26 full-attention"].arch
    baseline.save(tmp_path / "same.json")
    _search(tmp_path, "--budget", "8trials", "--enqueue", str(tmp_path / "same.json"))
    table = pd.read_csv(tmp_path / "runs" / "t" / "trials.csv", keep_default_na=False)
    assert list(table["arch"]).count(baseline.key) == 1 and "same" not in set(table["baseline"])


def test_ray_runs_enqueued_architectures_first_and_a_resume_adds_more(tmp_path: Path) -> None:
    import ray

    flat, big = SPACE.sample_random(3).to_flat(), SPACE.sample_random(7).to_flat()
    settings = cheap_settings(
        tmp_path, backend="ray", budget="2trials", baselines=False, enqueue={"mine": flat}
    )
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        outcome = run_search(settings)
        table = outcome.trials.set_index("number")
        assert table.loc[0, "arch"] == SPACE.sample_random(3).key and table.loc[0, "baseline"] == "mine"
        refresh_trials(outcome.run_dir)  # `nas report` reads the study with the settings its manifest records
        # a resume may add networks, as on Optuna: the new one runs first, the one run already does not
        again = cheap_settings(
            tmp_path, backend="ray", budget="4trials", baselines=False, resume=True,
            enqueue={"mine": flat, "big": big},
        )  # fmt: skip
        outcome = run_search(again)
    finally:
        ray.shutdown()
    table = outcome.trials.set_index("number")
    assert len(table) == 4 and table.loc[2, "baseline"] == "big"
    assert table.loc[2, "arch"] == SPACE.sample_random(7).key
    assert list(table["baseline"].fillna("")).count("mine") == 1
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    assert set(manifest["settings"]["enqueue"]) == {"mine", "big"}


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"mine.json": "coatnet"}, "enqueue: mine is not in the sasa space: "),
        (
            {"ResNet-26 full-attention.json": "sasa"},
            "enqueue: ResNet-26 full-attention is the name of a sasa",
        ),
        ({"-x.json": "sasa"}, "enqueue: '-x' is not a valid name"),
        ({"mine.json": "{not json"}, "arch file 'mine.json'"),
        ({"mine.json": '{"stem.kind": "conv"}'}, "enqueue: mine: "),
    ],
)
def test_a_bad_enqueued_file_is_one_sentence_and_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, what in files.items():
        if what in ("coatnet", "sasa"):
            get_space(what).sample_random(0).save(tmp_path / name)
        else:
            (tmp_path / name).write_text(what)
    args = [a for name in files for a in ("--enqueue", name)]
    result = CliRunner().invoke(
        app, ["search", "--space", "sasa", "--evaluator", "complexity", "--budget", "2trials", *args]
    )
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert output.startswith("error:") and message in output, output
    assert not (tmp_path / "runs").exists()


def test_two_files_of_one_name_are_refused(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        _arch_file(tmp_path / folder, "mine", 0)
    result = CliRunner().invoke(
        app,
        ["search", "--space", "sasa", "--evaluator", "complexity", "--budget", "2trials", "--runs-dir",
         str(tmp_path / "runs"), "--enqueue", str(tmp_path / "a" / "mine.json"), "--enqueue",
         str(tmp_path / "b" / "mine.json")],
    )  # fmt: skip
    assert result.exit_code == 2 and "enqueue: two files are named mine" in result.output, result.output


@pytest.mark.parametrize("given", ["mine.json", "[mine.json]"])
def test_a_config_file_enqueues_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str) -> None:
    from nas.study.settings import SearchSettings

    monkeypatch.chdir(tmp_path)
    _arch_file(tmp_path, "mine", 4)
    (tmp_path / "search.yaml").write_text(f"space: sasa\nenqueue: {given}\n")
    settings = SearchSettings.from_sources(tmp_path / "search.yaml")
    assert settings.enqueue == {"mine": SPACE.sample_random(4).to_flat()}
    assert list(settings.first_points)[-1] == "mine"


def test_at_most_so_many_architectures_are_enqueued(tmp_path: Path) -> None:
    from nas.study.settings import MAX_ENQUEUED

    flat = SPACE.sample_random(0).to_flat()
    many = {f"a{i}": flat for i in range(MAX_ENQUEUED + 1)}
    with pytest.raises(ValueError, match=f"enqueue: at most {MAX_ENQUEUED} architectures, got 1,001"):
        cheap_settings(tmp_path, enqueue=many)


def test_python_callers_give_files_too(tmp_path: Path) -> None:
    path = _arch_file(tmp_path, "mine", 5)
    for given in (path, str(path), [path]):
        assert cheap_settings(tmp_path, enqueue=given).enqueue == {"mine": SPACE.sample_random(5).to_flat()}


def test_a_ray_resume_queues_again_a_baseline_whose_trials_all_failed(tmp_path: Path) -> None:
    """The restored searcher took a baseline with a failed trial for one the study had run (and Optuna's
    ``skip_if_exists`` matched the failed trial's parameters), so it never ran again; one still queued from
    the first session is queued once. A failed trial is FAIL in the inner searcher's study, as on Optuna
    (told its NaN objectives, OptunaSearch left it RUNNING, which TPE's constant liar reads as running)."""
    import pickle

    import optuna

    from nas.search import ray_driver

    settings = cheap_settings(tmp_path, study="again", backend="ray", budget="30trials")
    ray_driver._append(ray_driver.ledger_path(settings), {"budget": settings.budget})
    searcher = ray_driver.make_searcher(settings).searcher
    config = searcher.suggest("t0")  # the first baseline: the first session's first point
    space = settings.search_space
    arch = space.sample(optuna.trial.FixedTrial({k: v for k, v in config.items() if not k.startswith("__")}))
    name = settings.point_names[arch.key]
    cost = {"seconds": 1.0, "devices": 1, "device": "cpu", "label": "trial 0", "overhead": False}
    failed = {"arch": arch.key, "arch_json": arch.to_json(), "baseline": name, "fail_reason": "error: slow",
              "macs": float("nan"), "params": float("nan"), "number": 0,
              **{f"cost/{k}": v for k, v in cost.items()}}  # fmt: skip
    searcher.on_trial_complete("t0", result=failed)
    points = {n: space.encode(a) for n, a in settings.first_points.items()}
    ray_driver._DRIVING[settings.study_name] = ray_driver._Driving(None, enqueued=points)  # as on a resume
    try:
        restored = pickle.loads(pickle.dumps(searcher))  # as Tune restores it
    finally:
        ray_driver._DRIVING.pop(settings.study_name)
    assert restored.inner._ot_study.trials[0].state == optuna.trial.TrialState.FAIL
    waiting = restored.inner._ot_study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    queued = [t.system_attrs["fixed_params"] for t in waiting]
    assert len(queued) == len(points) and all(queued.count(p) == 1 for p in points.values())

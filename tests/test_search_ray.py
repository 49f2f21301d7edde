"""The Ray Tune driver: the Optuna driver's table and resume with Tuner.restore (on a local Ray; the cluster
path, `ray job submit` to real nodes, is tests/test_ray_cluster.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cheap_search import cheap_settings

from nas.api import run_search
from nas.study.settings import SearchSettings

pytestmark = pytest.mark.integration


def _settings(tmp_path: Path, **changes: object) -> SearchSettings:
    return cheap_settings(tmp_path, **{"budget": "30trials", **changes})


@pytest.fixture(scope="module")
def local_ray():
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_thirty_trials_give_the_optuna_table_on_ray_and_resume_continues(local_ray, tmp_path: Path) -> None:
    optuna_table = run_search(_settings(tmp_path, study="o")).trials
    ray_table = run_search(_settings(tmp_path, study="r", backend="ray")).trials
    assert list(ray_table.columns) == list(optuna_table.columns)
    assert len(ray_table) == len(optuna_table) == 30
    assert sorted(ray_table["number"]) == list(range(30))
    assert (ray_table["state"] == "COMPLETE").all()
    baselines = ray_table.sort_values("number")["baseline"]
    assert list(baselines[:9]) == list(optuna_table["baseline"][:9])  # the same baselines, first

    more = run_search(_settings(tmp_path, study="r", backend="ray", budget="33trials", resume=True)).trials
    # the 30 kept, numbering continued; a sample of an architecture the study had is answered (REPEAT) and
    # is no trial of the budget
    assert sorted(more["number"]) == list(range(len(more)))
    assert (more["state"] == "COMPLETE").sum() == 33 and set(more["state"]) <= {"COMPLETE", "REPEAT"}
    kept = more.set_index("number").loc[list(range(30)), "arch"]
    assert list(kept) == list(ray_table.set_index("number").sort_index()["arch"])
    # resumed with the budget spent: no trial, and a sentence that says so
    idle = run_search(_settings(tmp_path, study="r", backend="ray", budget="33trials", resume=True))
    assert len(idle.trials) == len(more) and idle.idle is not None
    assert idle.idle.startswith("this session ran no trial: the budget leaves no room for one (budget 33")


def test_a_trial_past_its_timeout_fails_with_the_reason_on_ray_too(local_ray, tmp_path: Path) -> None:
    """Ray runs a function trial in a thread of its worker: the deadline must reach that thread."""
    table = run_search(
        _settings(
            tmp_path, study="slow", backend="ray", budget="3trials", macs_img_size=224, trial_timeout=0.01
        )
    ).trials
    assert len(table) == 3 and (table["state"] == "FAIL").all()
    assert (
        table["fail_reason"].str.fullmatch(r"timeout: TrialTimeout: trial exceeded its 0.01 s timeout").all()
    )


def test_a_oneshot_search_on_ray_charges_its_supernet_as_on_optuna(local_ray, tmp_path: Path) -> None:
    """The supernet's training is the evaluator's set-up: done once before the first trial and charged as
    overhead on both engines; each Ray worker process keeps one runner (one supernet load) across trials."""
    tiny = {"epochs": 1, "train_samples": 64, "batch_size": 32, "bn_batches": 1}
    common = {
        "evaluator": "oneshot",
        "objectives": ("top1:max", "macs"),
        "dataset": "synthetic",
        "budget": "4trials",
        "baselines": False,
        "evaluator_config": tiny,
    }
    outcomes = {
        backend: run_search(_settings(tmp_path, study=backend, backend=backend, **common))
        for backend in ("optuna", "ray")
    }
    for backend, outcome in outcomes.items():
        assert (outcome.trials["state"] == "COMPLETE").all() and len(outcome.trials) == 4, backend
        spent = json.loads((outcome.run_dir / "manifest.json").read_text())["budget"]["spent"]
        overhead = [c for c in spent["charges"] if c["overhead"]]
        assert [c["label"] for c in overhead] == ["oneshot set-up"], backend
        assert overhead[0]["seconds"] > 0
        assert len(spent["charges"]) == 5  # the set-up and the 4 trials
    table = outcomes["ray"].trials
    assert (table.groupby("pid")["runner"].nunique() == 1).all()  # one runner per worker process
    assert table["runner"].nunique() < len(table)  # reused across trials, not rebuilt for each


def test_under_a_limit_ray_rejects_as_optuna_does_and_tells_its_sampler(local_ray, tmp_path: Path) -> None:
    limit = 65e6  # sasa at 32 px: about half the samples are under it
    table = run_search(
        _settings(tmp_path, study="lim", backend="ray", budget="14trials", max_macs=limit)
    ).trials
    baselines = table["baseline"].fillna("") != ""
    sampled = table[(table["state"] == "COMPLETE") & ~baselines]
    rejected = table[table["state"] == "INFEASIBLE"]
    assert (table["state"] == "COMPLETE").sum() == 14 and len(rejected) >= 1
    assert (sampled["macs"] <= limit).all() and sampled["feasible"].all()
    assert (rejected["macs"] > limit).all() and not rejected["feasible"].any()
    assert (rejected["constraint_macs"] > 0).all() and rejected[
        "top1" if "top1" in table else "macs"
    ].notna().all()


def test_the_ray_searcher_tells_its_optuna_sampler_the_constraint_values(tmp_path: Path) -> None:
    from nas.search import ray_driver

    settings = _settings(tmp_path, study="told", backend="ray", max_macs=65e6, baselines=False)
    ray_driver._append(ray_driver.ledger_path(settings), {"budget": settings.budget})
    searcher = ray_driver.make_searcher(settings).searcher
    config = searcher.suggest("t1")
    assert config is not None
    # as Tune hands a result to its searcher: nested records flattened
    result = {"constraints/macs": 0.5, "rejected": True, "macs": 9.75e7, "params": 1e6, "cost/seconds": 0.1,
              "cost/devices": 1, "cost/device": "cpu", "cost/label": "rejected trial 0",
              "cost/overhead": True, "metrics/macs": 9.75e7, "metrics/params": 1e6}  # fmt: skip
    searcher.on_trial_complete("t1", result)
    (told,) = searcher.inner._ot_study.trials
    assert told.constraints == {"macs": 0.5}


def test_ray_workers_get_absolute_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tune runs each function trial in a working directory of its own: a relative runs/ would be there."""
    from nas.search.ray_driver import _settings_dict

    monkeypatch.chdir(tmp_path)
    settings = cheap_settings("runs", data_dir="data", dataset="imagefolder:images")
    sent = _settings_dict(settings)
    assert sent["runs_dir"] == str(tmp_path / "runs") and sent["data_dir"] == str(tmp_path / "data")
    assert sent["dataset"] == f"imagefolder:{tmp_path / 'images'}"


@pytest.mark.slow  # about 50 s here: the supernet's two Ray Train workers start, train and stop
def test_a_supernet_on_two_workers_is_charged_per_worker(local_ray, tmp_path: Path) -> None:
    """--supernet-workers 2 --cpus-per-worker 1: the set-up task holds no CPU, so the two workers fit the
    2-CPU Ray; the set-up is one overhead charge of 2 devices, and the trials score the supernet it wrote."""
    outcome = run_search(
        _settings(
            tmp_path,
            study="ddp",
            backend="ray",
            evaluator="oneshot",
            objectives=("top1:max", "macs"),
            dataset="synthetic",
            budget="2trials",
            baselines=False,
            evaluator_config={"epochs": 1, "train_samples": 64, "batch_size": 32, "bn_batches": 1},
            supernet_workers=2,
            cpus_per_worker=1,
        )
    )
    assert (outcome.trials["state"] == "COMPLETE").all() and len(outcome.trials) == 2
    spent = json.loads((outcome.run_dir / "manifest.json").read_text())["budget"]["spent"]
    overhead = [c for c in spent["charges"] if c["overhead"]]
    assert [(c["label"], c["devices"]) for c in overhead] == [("oneshot set-up (2 workers)", 2)]
    assert (outcome.run_dir / "supernet.pt").exists()

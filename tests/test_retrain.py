"""`nas retrain STUDY`: a study's front and its baselines retrained alike over seeds (results/retrain.py),
each run a `nas train` run folder that a rerun skips or continues, found networks compared with each
baseline at no more cost by a paired t-test, and the search's ranking checked against the retrained one."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
from cheap_search import cheap_settings
from typer.testing import CliRunner

from evaluators.data import load_dataset
from evaluators.train import TRAIN_LOCK, FullTrainConfig, train_arch
from nas.api import run_search
from nas.cli.commands import app
from nas.core.arch import Arch
from nas.core.atomic import sole
from nas.study.front import front_numbers
from nas.study.objectives import parse_objectives
from results.retrain import Member, RetrainPlan, RunResult, plan_retrain, run_retrain, summarize
from results.stats import paired
from search_spaces import get_space

SPACE = get_space("sasa")
PROFILE = SPACE.profile("cpu")
# the study's one baseline, a network of the user's (enqueued): ResNet-50's skeleton, local attention in S4
MINE = Arch.from_flat({**SPACE.baselines()["ResNet-50 conv"].arch.to_flat(), "s4.mixer": "local", "s4.k": 3})
TINY = FullTrainConfig(epochs=1, batch_size=32, train_samples=64, warmup_epochs=0.2)


def _member(label: str, number: int, baseline: str = "", **searched: float) -> Member:
    return Member(label, number, baseline, SPACE.sample_random(number), searched)


def _plan(members: list[Member], objectives: str = "top1,macs,params") -> RetrainPlan:
    return RetrainPlan(
        study="t",
        out=Path("unused"),
        members=tuple(members),
        seeds=(0, 1, 2),
        profile=PROFILE,
        dataset="synthetic",
        data_dir=None,
        config=TINY,
        objectives=parse_objectives(objectives.split(",")),
    )


def _runs(top1: dict[str, list[float]]) -> list[RunResult]:
    return [
        RunResult(label, seed, value, 1, 1.0, "")
        for label, values in top1.items()
        for seed, value in enumerate(values)
    ]


def test_each_baseline_meets_the_best_found_network_at_no_more_cost() -> None:
    base = _member("ResNet-26 conv", 0, "ResNet-26 conv", top1=70.0, macs=100.0, params=10.0)
    cheap = _member("trial_3", 3, top1=72.0, macs=90.0, params=9.0)
    cheaper = _member("trial_4", 4, top1=71.0, macs=50.0, params=5.0)
    costly = _member("trial_5", 5, top1=80.0, macs=101.0, params=5.0)  # best, but over the baseline's MACs
    fat = _member("trial_6", 6, top1=60.0, macs=10.0, params=11.0)  # over its params
    plan = _plan([base, cheap, cheaper, costly, fat])
    top1 = {
        "ResNet-26 conv": [80.0, 81.0, 79.5],
        "trial_3": [82.0, 82.5, 81.0],
        "trial_4": [81.0, 82.0, 81.5],
        "trial_5": [90.0, 90.0, 90.0],
        "trial_6": [95.0, 95.0, 95.0],
    }
    summary = summarize(plan, _runs(top1))
    (comparison,) = summary.comparisons
    assert comparison.found == "trial_3"  # the best retrained mean among those no costlier on both costs
    assert comparison.costs == ("macs", "params")
    expected = paired(dict(enumerate(top1["trial_3"])), dict(enumerate(top1["ResNet-26 conv"])))
    assert comparison.stats == expected
    row = summary.members.set_index("label").loc["trial_4"]
    assert row["top1_mean"] == pytest.approx(81.5) and row["top1_std"] == pytest.approx(0.5)
    assert row["seeds"] == 3 and row["searched_macs"] == 50.0
    # the search's ranking (70, 72, 71, 80, 60) against the retrained means (80.2, 81.8, 81.5, 90, 95), by
    # hand: rank differences 1, 1, 1, 1, -4 give Spearman 1 - 6 * 20 / (5 * 24) = 0; of the 10 pairs 6 are
    # concordant and 4 discordant, Kendall (6 - 4) / 10
    assert summary.agreement == pytest.approx({"spearman": 0.0, "kendall": 0.2, "n": 5})


def test_a_baseline_with_no_found_network_at_its_cost_says_so_and_costs_default_to_macs() -> None:
    base = _member("mine", 0, "mine", top1=70.0, macs=10.0, params=10.0)
    found = _member("trial_1", 1, top1=75.0, macs=20.0, params=1.0)
    summary = summarize(_plan([base, found], "top1"), _runs({"mine": [1.0], "trial_1": [2.0]}))
    (comparison,) = summary.comparisons
    assert comparison.costs == summary.costs == ("macs",)  # a top-1 study: MACs are its cost
    assert comparison.found is None and comparison.stats is None
    assert summary.agreement is None  # two networks do not make a ranking
    # a found network that has not finished a seed is no candidate
    cheap = _member("trial_2", 2, top1=75.0, macs=5.0, params=1.0)
    (comparison,) = summarize(_plan([base, cheap], "top1"), _runs({"mine": [1.0]})).comparisons
    assert comparison.found is None


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cheap study (complexity evaluator, MACs and params) with one enqueued network, ``mine``, as its
    baseline."""
    runs = tmp_path_factory.mktemp("retrain")
    mine = MINE.to_flat()
    run_search(cheap_settings(runs, budget="8trials", baselines=False, enqueue={"mine": mine}))
    return runs / "t"


def test_the_plan_takes_the_front_or_the_trials_asked_and_the_baselines(study: Path) -> None:
    frame = pd.read_csv(study / "trials.csv")
    front = front_numbers(frame, ["macs", "params"])
    plan = plan_retrain(study, config=TINY, seeds=[0])
    mine = int(frame.loc[frame["baseline"] == "mine", "number"].iloc[0])
    assert {m.number for m in plan.members} == {*front, mine}
    assert plan.out == study / "retrain" and plan.profile == PROFILE and plan.dataset == "fashion-mnist"
    assert [m.label for m in plan.members if m.baseline] == ["mine"]
    (best,) = plan_retrain(study, config=TINY, top=1, baselines=False).members
    macs = pd.to_numeric(frame.set_index("number").loc[front, "macs"])
    assert best.number == int(macs.idxmin())  # the first objective, minimized
    done = frame[(frame["state"] == "COMPLETE") & frame["baseline"].isna()]
    asked = [int(n) for n in done["number"][:2]]
    assert [
        m.number for m in plan_retrain(study, config=TINY, trials=asked, baselines=False).members
    ] == asked


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"trials": [999]}, "study 't' has no trial 999 (its trials are numbered 0 to"),
        ({"trials": [0], "top": 1}, "give --trial or --top, not both"),
        ({"top": 0}, "top: must be at least 1"),
        ({"seeds": []}, "seeds: between 1 and 20 seeds, got 0"),
        ({"seeds": [-1]}, "seeds: each a whole number from 0 to"),
        ({"profile": "huge"}, "huge"),
    ],
)
def test_a_bad_choice_is_refused_before_anything_trains(study: Path, changes: dict, says: str) -> None:
    with pytest.raises(ValueError, match=None) as err:
        plan_retrain(study, config=TINY, **changes)
    assert says in str(err.value)
    assert not (study / "retrain").exists()


def test_nas_retrain_trains_each_network_per_seed_continues_and_keeps_one_schedule(
    study: Path, tmp_path: Path
) -> None:
    out = tmp_path / "retrain"
    frame = pd.read_csv(study / "trials.csv")
    mine = frame[frame["baseline"] == "mine"].iloc[0]
    cheaper = (frame["macs"] <= mine["macs"]) & (frame["params"] <= mine["params"])
    found = int(
        frame.loc[(frame["state"] == "COMPLETE") & frame["baseline"].isna() & cheaper, "number"].iloc[0]
    )
    args = ["retrain", str(study), "--trial", str(found), "--epochs", "1", "--train-samples", "64",
            "--batch-size", "32", "--dataset", "synthetic", "--out", str(out)]  # fmt: skip
    first = CliRunner().invoke(app, [*args, "--seeds", "0,1"])
    assert first.exit_code == 0, first.output
    assert "found networks against the baselines" in first.output and "retrain.html" in first.output
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(zip(runs["label"], runs["seed"], strict=True)) == [
        ("mine", 0), ("mine", 1), (f"trial_{found}", 0), (f"trial_{found}", 1)
    ]  # fmt: skip
    members = pd.read_csv(out / "members.csv").set_index("label")
    assert list(members["seeds"]) == [2, 2]
    (comparison,) = pd.read_csv(out / "comparisons.csv").to_dict("records")
    assert comparison["baseline"] == "mine" and comparison["found"] == f"trial_{found}"
    assert comparison["seeds"] == 2 and comparison["difference"] == pytest.approx(
        members.loc[f"trial_{found}", "top1_mean"] - members.loc["mine", "top1_mean"]
    )
    # a run is a `nas train` run: the same training outside the retraining gives the same top-1
    run = runs[(runs["label"] == "mine") & (runs["seed"] == 1)].iloc[0]
    data = load_dataset("synthetic", img_size=PROFILE.img_size, seed=1)
    config = dataclasses.replace(TINY, warmup_epochs=FullTrainConfig().warmup_epochs, seed=1)
    alone = train_arch(MINE, PROFILE, data, tmp_path / "alone", config=config)
    assert alone["top1"] == pytest.approx(run["top1"], abs=1e-9)
    # a rerun trains only what has not finished: here a third seed
    history = out / "mine" / "seed0" / "history.json"
    stamp = history.stat().st_mtime_ns
    again = CliRunner().invoke(app, [*args, "--seeds", "0,1,2"])
    assert again.exit_code == 0, again.output
    assert history.stat().st_mtime_ns == stamp
    assert len(pd.read_csv(out / "runs.csv")) == 6
    assert "[5/6]" in again.output and "[1/6]" not in again.output  # the finished runs are not announced
    # another schedule in the same folder would mix figures that do not compare: refused, nothing changed
    other = CliRunner().invoke(app, [*args, "--seeds", "0", "--epochs", "2"])
    assert other.exit_code == 2
    assert "holds a retraining under another schedule (config.epochs 1 (now 2))" in other.output
    assert len(pd.read_csv(out / "runs.csv")) == 6
    schedule = json.loads((out / "retrain.json").read_text())["schedule"]
    assert schedule["config"]["epochs"] == 1 and schedule["dataset"] == "synthetic"


def test_a_run_another_process_trains_is_skipped_and_said(study: Path, tmp_path: Path) -> None:
    plan = plan_retrain(study, config=TINY, top=1, seeds=[0, 1], dataset="synthetic", out=tmp_path / "r")
    members = {m.label: m for m in plan.members}
    held = plan.folder(members["mine"], 0)
    held.mkdir(parents=True)
    with sole(held / TRAIN_LOCK):
        results, skipped = run_retrain(plan)
    assert len(results) == 3 and ("mine", 0) not in {(r.label, r.seed) for r in results}
    assert skipped == [f"mine seed 0: another process is training it ({held})"]
    # once the other process is gone, a rerun trains it
    results, skipped = run_retrain(plan)
    assert len(results) == 4 and not skipped
    assert all(math.isfinite(r.top1) for r in results)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["no-such-study"], "no manifest.json"),
        (["--seeds", "0,x"], "seeds: whole numbers separated by commas"),
        (["--epochs", "0"], "epochs"),
        (["--recipe", "nope"], "recipe: unknown 'nope'"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(study: Path, args: list[str], says: str) -> None:
    target = args if args[0] == "no-such-study" else [str(study), *args]
    result = CliRunner().invoke(app, ["retrain", *target, "--runs-dir", str(study.parent)])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output


def test_the_study_report_shows_the_retraining_beside_it(study: Path, tmp_path: Path) -> None:
    from results.report import write_report
    from results.retrain import finished_runs
    from results.retrain_page import write_retraining

    copy = tmp_path / "t"
    # without the retrainings other tests of the shared study wrote, here or elsewhere (--out)
    shutil.copytree(study, copy, ignore=shutil.ignore_patterns("retrain", "retrainings.json"))
    assert "Retrained (nas retrain)" not in write_report(copy).read_text()
    plan = plan_retrain(copy, config=TINY, top=1, seeds=[0], dataset="synthetic")
    assert plan.out == copy / "retrain"
    run_retrain(plan)
    write_retraining(summarize(plan, finished_runs(plan)))
    page = write_report(copy).read_text()
    assert "Retrained (nas retrain)" in page and "href='retrain/retrain.html'" in page
    assert "<td>mine</td>" in page


def test_the_study_report_shows_a_retraining_written_elsewhere(study: Path, tmp_path: Path) -> None:
    from results.report import write_report
    from results.retrain import finished_runs, retraining_folders
    from results.retrain_page import write_retraining

    copy = tmp_path / "t"
    # without the retrainings other tests of the shared study wrote, here or elsewhere (--out)
    shutil.copytree(study, copy, ignore=shutil.ignore_patterns("retrain", "retrainings.json"))
    elsewhere = tmp_path / "longer"
    plan = plan_retrain(copy, config=TINY, top=1, seeds=[0], dataset="synthetic", out=elsewhere)
    run_retrain(plan)
    write_retraining(summarize(plan, finished_runs(plan)))
    assert retraining_folders(copy) == [elsewhere.resolve()]
    page = write_report(copy).read_text()
    assert f"Retrained (nas retrain --out {elsewhere.resolve()})" in page
    assert "href='../longer/retrain.html'" in page and "Trained 1 epoch of" in page
    # the default folder's retraining comes first; a folder since removed is left out
    default = plan_retrain(copy, config=TINY, top=1, seeds=[0], dataset="synthetic")
    run_retrain(default)
    write_retraining(summarize(default, finished_runs(default)))
    assert retraining_folders(copy) == [copy / "retrain", elsewhere.resolve()]
    shutil.rmtree(elsewhere)
    page = write_report(copy).read_text()
    assert retraining_folders(copy) == [copy / "retrain"] and "--out" not in page

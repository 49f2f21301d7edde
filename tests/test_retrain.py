"""`nas retrain STUDY` (results/retrain.py): a study's front retrained beside every baseline it does not
exceed in cost and random controls, alike over seeds, scored on the test split; each run a `nas train`
run folder that a rerun skips or continues; paired differences with t and bootstrap intervals,
Holm-corrected across the run; costs at both scales; a plateau check; `--score-on val` refused on
images the study saw."""

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

from evaluators.complexity import count
from evaluators.data import load_dataset, load_test, split_indices
from evaluators.train import TRAIN_LOCK, FullTrainConfig, train_arch
from nas.api import run_search
from nas.cli.commands import app
from nas.core.arch import Arch
from nas.core.atomic import sole
from nas.study.constraints import format_count
from nas.study.front import front_numbers
from nas.study.objectives import parse_objectives
from results.retrain import (
    Member,
    RetrainPlan,
    RunResult,
    combine_plans,
    equal_cost,
    plan_retrain,
    run_retrain,
    summarize,
)
from results.stats import holm, paired
from search_spaces import get_space

SPACE = get_space("sasa")
PROFILE = SPACE.profile("cpu")
# the study's one enqueued network, the user's: ResNet-50's skeleton, local attention in S4
MINE = Arch.from_flat({**SPACE.baselines()["ResNet-50 conv"].arch.to_flat(), "s4.mixer": "local", "s4.k": 3})
TINY = FullTrainConfig(epochs=1, batch_size=32, train_samples=64, warmup_epochs=0.2)


def _member(label: str, role: str, seed: int, costs: tuple[float, ...], control_of: str = "") -> Member:
    names = ("macs", "params", "macs_trained", "params_trained")
    return Member(
        label, role, SPACE.sample_random(seed), None, {}, dict(zip(names, costs, strict=True)), control_of
    )


def _plan(members: list[Member], **changes: object) -> RetrainPlan:
    values: dict[str, object] = {
        "study": "t",
        "out": Path("unused"),
        "members": tuple(members),
        "seeds": (0, 1, 2),
        "profile": PROFILE,
        "dataset": "synthetic",
        "data_dir": None,
        "config": TINY,
        "objectives": parse_objectives(["top1", "macs"]),
    }
    return RetrainPlan(**{**values, **changes})  # type: ignore[arg-type]


def _runs(top1: dict[str, list[float]]) -> list[RunResult]:
    return [
        RunResult(label, seed, value, 1, 1.0, "")
        for label, values in top1.items()
        for seed, value in enumerate(values)
    ]


def test_each_found_network_meets_every_baseline_it_does_not_exceed_and_its_controls_holm_corrected() -> None:
    found = _member("trial_3", "found", 3, (100.0, 10.0, 5.0, 1.0))
    costlier = _member("big", "baseline", 10, (120.0, 12.0, 6.0, 1.2))
    # no costlier at the search's scale, but cheaper at the scale trained: compared, and said
    shrinks = _member("shrinks", "baseline", 11, (100.0, 10.0, 4.0, 0.8))
    cheaper = _member("small", "baseline", 12, (90.0, 12.0, 9.0, 9.0))  # fewer MACs: not compared
    control = _member("random1_trial_3", "control", 13, (80.0, 9.0, 4.0, 0.9), control_of="trial_3")
    plan = _plan([found, costlier, shrinks, cheaper, control])
    top1 = {
        "trial_3": [82.0, 82.5, 81.0],
        "big": [80.0, 81.5, 79.5],  # differences 2, 1, 1.5: p 0.035 alone, 0.07 once corrected for three
        "shrinks": [82.5, 83.0, 81.0],
        "small": [95.0, 95.0, 95.0],
        "random1_trial_3": [70.0, 72.0, 71.0],
    }
    summary = summarize(plan, _runs(top1))
    got = [(c.found, c.reference, c.kind, c.equal_cost) for c in summary.comparisons]
    assert got == [
        ("trial_3", "big", "baseline", "both"),
        ("trial_3", "shrinks", "baseline", "fails at the scale trained (macs +25%, params +25%)"),
        ("trial_3", "random1_trial_3", "control", "both"),  # drawn no costlier than the found network
    ]  # fmt: skip
    expected = [
        paired(dict(enumerate(top1["trial_3"])), dict(enumerate(top1[r])), ("found", kind))
        for r, kind in (("big", "baseline"), ("shrinks", "baseline"), ("random1_trial_3", "control"))
    ]
    assert [c.stats for c in summary.comparisons] == expected
    raw = [e["difference"]["p"] for e in expected]
    assert [c.p_holm for c in summary.comparisons] == pytest.approx(holm(raw))
    assert summary.tested == 3
    big = summary.comparisons[0]
    assert raw[0] < 0.05 < big.p_holm == pytest.approx(2 * raw[0])  # the second smallest of three: x 2
    assert big.verdict.startswith("found does not win: no significant")
    row = summary.members.set_index("label").loc["big"]
    assert (
        row["macs_trained"] == 6.0 and row["params"] == 12.0 and row["top1_mean"] == pytest.approx(80.3333333)
    )
    assert summary.plateau["reached"] is None and summary.plateau["networks"] == []


def test_equal_cost_says_which_scale_fails_and_by_how_much() -> None:
    mine = {"macs": 118.0, "params": 10.0, "macs_trained": 5.0, "params_trained": 1.22}
    assert equal_cost(mine, {**mine}) == "both"
    theirs = {"macs": 100.0, "params": 10.0, "macs_trained": 5.0, "params_trained": 1.0}
    assert equal_cost(mine, theirs) == (
        "fails at the search's scale (macs +18%); fails at the scale trained (params +22%)"
    )


def test_the_plateau_check_compares_doubled_trainings_on_the_first_seed() -> None:
    found = _member("trial_3", "found", 3, (100.0, 10.0, 5.0, 1.0))
    base = _member("big", "baseline", 10, (120.0, 12.0, 6.0, 1.2))
    plan = _plan([found, base], plateau=("trial_3", "big"))
    trainings = plan.trainings()
    assert [(t.member.label, t.seed, t.epochs, t.plateau) for t in trainings[-2:]] == [
        ("trial_3", 0, 2, True), ("big", 0, 2, True)
    ]  # fmt: skip
    assert len(trainings) == 2 * 3 + 2
    runs = _runs({"trial_3": [80.0, 81.0, 82.0], "big": [70.0, 71.0, 72.0]})
    longer = [
        RunResult("trial_3", 0, 80.2, 2, 1.0, "", plateau=True),
        RunResult("big", 0, 70.5, 2, 1.0, "", plateau=True),
    ]
    check = summarize(plan, [*runs, *longer]).plateau
    assert [n["change"] for n in check["networks"]] == pytest.approx([0.2, 0.5])
    assert check["reached"] is False  # 0.5 points is not below 0.3
    assert summarize(plan, [*runs, longer[0]]).plateau["reached"] is None
    # the doubled trainings do not enter the comparisons
    (comparison,) = summarize(plan, [*runs, *longer]).comparisons
    assert comparison.stats["found"]["mean"] == pytest.approx(81.0)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cheap study (complexity evaluator, MACs and params) with one enqueued network, ``mine``, as its
    baseline."""
    runs = tmp_path_factory.mktemp("retrain")
    mine = MINE.to_flat()
    run_search(cheap_settings(runs, budget="8trials", baselines=False, enqueue={"mine": mine}))
    return runs / "t"


def _costs(arch: Arch, in_chans: int = 1) -> dict[str, float]:
    """Both scales' costs, counted here as the cheap study counts (32 px) and as the cpu profile trains."""
    searched = count(arch, img_size=32, in_chans=3, num_classes=1000)
    trained = count(PROFILE.apply(arch), img_size=PROFILE.img_size, in_chans=in_chans, num_classes=10)
    return {
        "macs": searched.macs,
        "params": searched.params,
        "macs_trained": trained.macs,
        "params_trained": trained.params,
    }


def test_the_plan_takes_the_front_and_every_baseline_some_found_network_does_not_exceed(study: Path) -> None:
    frame = pd.read_csv(study / "trials.csv")
    front = front_numbers(frame, ["macs", "params"])
    plan = plan_retrain(study, config=TINY, seeds=[0], controls=0)
    mine = int(frame.loc[frame["baseline"] == "mine", "number"].iloc[0])
    found = [m for m in plan.members if m.role == "found"]
    assert {m.number for m in found} == set(front) - {mine}
    assert plan.out == study / "retrain" and plan.profile == PROFILE and plan.dataset == "fashion-mnist"
    for m in plan.members:  # fashion-mnist: one channel at the scale trained
        assert m.costs == pytest.approx(_costs(m.arch))
    candidates = {**{n: SPACE.baselines()[n].arch for n in SPACE.baseline_names().values()}, "mine": MINE}
    costs = {name: _costs(arch) for name, arch in candidates.items()}
    eligible = {
        name
        for name, c in costs.items()
        if any(f.costs["macs"] <= c["macs"] and f.costs["params"] <= c["params"] for f in found)
    }
    assert {m.label for m in plan.members if m.role == "baseline"} == eligible
    assert set(plan.not_compared) == set(candidates) - eligible
    assert plan.plateau == (found[0].label, next(m.label for m in plan.members if m.role == "baseline"))
    # a declared band instead of a hand-picked subset: baselines of at most 1.5x a found network's MACs
    banded = plan_retrain(study, config=TINY, seeds=[0], controls=0, max_cost_ratio=1.5)
    within = {
        name
        for name, c in costs.items()
        if any(
            f.costs["macs"] <= c["macs"] <= 1.5 * f.costs["macs"] and f.costs["params"] <= c["params"]
            for f in found
        )
    }
    assert {m.label for m in banded.members if m.role == "baseline"} == within
    assert set(banded.not_compared) == set(candidates) - within
    for f in banded.found():
        assert all(r.costs["macs"] <= 1.5 * f.costs["macs"] for r, _ in banded.references(f))
    (best,) = plan_retrain(study, config=TINY, top=1, baselines=False, controls=0).members
    macs = pd.to_numeric(frame.set_index("number").loc[front, "macs"])
    assert best.number == int(macs.idxmin())  # the first objective, minimized
    done = frame[(frame["state"] == "COMPLETE") & frame["baseline"].isna()]
    asked = [int(n) for n in done["number"][:2]]
    members = plan_retrain(study, config=TINY, trials=asked, baselines=False, controls=0).members
    assert [m.number for m in members] == asked


def test_random_controls_cost_no_more_than_their_found_network_at_both_scales(study: Path) -> None:
    frame = pd.read_csv(study / "trials.csv")
    done = frame[(frame["state"] == "COMPLETE") & frame["baseline"].isna()]
    costliest = int(done.loc[pd.to_numeric(done["macs"]).idxmax(), "number"])
    plan = plan_retrain(study, config=TINY, trials=[costliest], baselines=False, controls=3, control_seed=5)
    (found,) = [m for m in plan.members if m.role == "found"]
    controls = [m for m in plan.members if m.role == "control"]
    assert len(controls) == 3 and not plan.control_shortfall
    assert len({c.arch.key for c in controls} | {found.arch.key}) == 4  # distinct, and not the found one
    for c in controls:
        assert c.control_of == found.label and SPACE.contains(c.arch)
        assert c.costs == pytest.approx(_costs(c.arch))
        assert all(c.costs[k] <= found.costs[k] for k in c.costs)
    again = plan_retrain(study, config=TINY, trials=[costliest], baselines=False, controls=3, control_seed=5)
    assert [m.arch for m in again.members] == [m.arch for m in plan.members]  # recorded seed, same draws
    other = plan_retrain(study, config=TINY, trials=[costliest], baselines=False, controls=3, control_seed=6)
    assert [m.arch for m in other.members] != [m.arch for m in plan.members]


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"trials": [999]}, "study 't' has no trial 999 (its trials are numbered 0 to"),
        ({"trials": [0], "top": 1}, "give --trial or --top, not both"),
        ({"top": 0}, "top: must be at least 1"),
        ({"seeds": []}, "seeds: between 1 and 20 seeds, got 0"),
        ({"seeds": [-1]}, "seeds: each a whole number from 0 to"),
        ({"profile": "huge"}, "huge"),
        ({"max_cost_ratio": 0.5}, "max-cost-ratio: a number of at least 1, got 0.5"),
        ({"controls": 21}, "controls: a whole number from 0 to 20"),
        ({"score_on": "train"}, "score-on: test or val, not 'train'"),
    ],
)
def test_a_bad_choice_is_refused_before_anything_trains(study: Path, changes: dict, says: str) -> None:
    with pytest.raises(ValueError, match=None) as err:
        plan_retrain(study, config=TINY, **changes)
    assert says in str(err.value)
    assert not (study / "retrain").exists()


def test_nas_retrain_trains_each_network_per_seed_scores_the_test_split_and_keeps_one_schedule(
    study: Path, tmp_path: Path
) -> None:
    out = tmp_path / "retrain"
    frame = pd.read_csv(study / "trials.csv")
    mine = frame[frame["baseline"] == "mine"].iloc[0]
    cheaper = (frame["macs"] <= mine["macs"]) & (frame["params"] <= mine["params"])
    candidates = frame[(frame["state"] == "COMPLETE") & frame["baseline"].isna() & cheaper]
    found = int(
        candidates.loc[pd.to_numeric(candidates["macs"]).idxmax(), "number"]
    )  # few baselines above it
    args = ["retrain", str(study), "--trial", str(found), "--epochs", "1", "--train-samples", "64",
            "--batch-size", "32", "--dataset", "synthetic", "--out", str(out), "--controls", "1",
            "--no-plateau"]  # fmt: skip
    first = CliRunner().invoke(app, [*args, "--seeds", "0,1"])
    assert first.exit_code == 0, first.output
    said = " ".join(first.output.split())  # as wrapped to the terminal's width
    assert "every eligible baseline and their random controls" in said
    assert "Holm's correction" in said and "retrain.html" in said
    plan = plan_retrain(study, config=TINY, trials=[found], seeds=[0, 1], dataset="synthetic",
                        out=tmp_path / "same plan", controls=1, plateau=False)  # fmt: skip
    labels = [m.label for m in plan.members]
    assert "mine" in labels and sum(m.role == "control" for m in plan.members) == 1
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(zip(runs["label"], runs["seed"], strict=True)) == sorted(
        (x, s) for x in labels for s in (0, 1)
    )
    members = pd.read_csv(out / "members.csv").set_index("label")
    assert list(members["seeds"]) == [2] * len(labels)
    mine_costs = _costs(MINE, in_chans=3)  # synthetic data: three channels
    assert members.loc["mine", "macs_trained"] == pytest.approx(mine_costs["macs_trained"])
    row = next(line for line in first.output.splitlines() if line.startswith("│ mine "))  # the networks table
    assert [
        format_count(mine_costs[k]) in row for k in ("macs", "params", "macs_trained", "params_trained")
    ] == [True] * 4
    comparisons = pd.read_csv(out / "comparisons.csv")
    assert list(comparisons["reference"]) == labels[1:]  # every eligible baseline, then the control
    assert list(comparisons["kind"]) == ["baseline"] * (len(labels) - 2) + ["control"]
    assert comparisons["difference"].tolist() == pytest.approx(
        [members.loc[f"trial_{found}", "top1_mean"] - members.loc[r, "top1_mean"] for r in labels[1:]]
    )
    assert comparisons["p_holm"].tolist() == pytest.approx(holm(comparisons["p"].tolist()), nan_ok=True)
    # scored on the test split: a run is a `nas train` run, and the same training alone scores the same
    test = load_test("synthetic", img_size=PROFILE.img_size, in_chans=3, seed=1)  # seed 1's patterns
    run = runs[(runs["label"] == "mine") & (runs["seed"] == 1)].iloc[0]
    scored = json.loads((Path(run["folder"]) / "history.json").read_text())["test"]
    assert scored["test_images"] == len(test.images) and scored["test_top1"] == pytest.approx(run["top1"])
    data = load_dataset("synthetic", img_size=PROFILE.img_size, seed=1)
    config = dataclasses.replace(TINY, warmup_epochs=FullTrainConfig().warmup_epochs, seed=1)
    alone = train_arch(MINE, PROFILE, data, tmp_path / "alone", config=config, test=test)
    assert alone["test_top1"] == pytest.approx(run["top1"], abs=1e-9)
    assert alone["top1"] == pytest.approx(run["val_top1"], abs=1e-9)
    # a rerun trains only what has not finished: here a third seed
    history = out / "mine" / "seed0" / "history.json"
    stamp = history.stat().st_mtime_ns
    again = CliRunner().invoke(app, [*args, "--seeds", "0,1,2"])
    assert again.exit_code == 0, again.output
    assert history.stat().st_mtime_ns == stamp
    n = len(labels)
    assert len(pd.read_csv(out / "runs.csv")) == 3 * n
    assert f"[{2 * n + 1}/{3 * n}]" in again.output and f"[1/{3 * n}]" not in again.output
    # another schedule in the same folder would mix figures that do not compare: refused, nothing changed
    other = CliRunner().invoke(app, [*args, "--seeds", "0", "--epochs", "2"])
    assert other.exit_code == 2
    assert "holds a retraining under another schedule (config.epochs 1 (now 2))" in other.output
    assert len(pd.read_csv(out / "runs.csv")) == 3 * n
    record = json.loads((out / "retrain.json").read_text())
    assert record["schedule"]["config"]["epochs"] == 1 and record["schedule"]["dataset"] == "synthetic"
    assert record["schedule"]["score_on"] == "test" and record["protocol"]["controls"] == 1


def test_the_plateau_check_trains_two_networks_twice_as_long(study: Path, tmp_path: Path) -> None:
    plan = plan_retrain(study, config=TINY, top=1, seeds=[0], dataset="synthetic", out=tmp_path / "r",
                        controls=0)  # fmt: skip
    (found,) = plan.found()
    members = tuple(m for m in plan.members if m.role == "found" or m.label == "mine")  # two, to be quick
    plan = dataclasses.replace(plan, members=members, plateau=(found.label, "mine"))
    results, skipped = run_retrain(plan)
    assert not skipped
    longer = {r.label: r for r in results if r.plateau}
    assert set(longer) == set(plan.plateau) and {r.epochs for r in longer.values()} == {2}
    check = summarize(plan, results).plateau
    for network in check["networks"]:
        short = next(r for r in results if r.label == network["label"] and not r.plateau)
        assert network["change"] == pytest.approx(longer[network["label"]].top1 - short.top1)
    assert check["reached"] == all(abs(n["change"]) < 0.3 for n in check["networks"])


def _with_split_record(study: Path, copy: Path, **changes: object) -> Path:
    """``study`` copied, its manifest saying it searched synthetic data with a proxy evaluator, on the split
    of seed 0 (as a search records it), ``changes`` on the record."""
    shutil.copytree(study, copy, ignore=shutil.ignore_patterns("retrain", "retrainings.json"))
    manifest = json.loads((copy / "manifest.json").read_text())
    split = load_dataset("synthetic", img_size=PROFILE.img_size, seed=0)
    manifest["data"] = {**split.describe(), **split.split_record(), **changes}
    manifest["settings"].update(dataset="synthetic", evaluator="proxy")
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def test_scoring_on_images_the_study_saw_is_refused_unless_asked(study: Path, tmp_path: Path) -> None:
    copy = _with_split_record(study, tmp_path / "t")
    split = load_dataset("synthetic", img_size=PROFILE.img_size, seed=0)
    with pytest.raises(ValueError) as err:
        plan_retrain(copy, config=TINY, top=1, seeds=[0], score_on="val", controls=0)
    n = len(split.val)  # seed 0's held-out split is the study's own: every image of it was evaluated on
    assert str(err.value) == (
        f"score-on: the held-out split of seed 0 holds {n:,} of its {n:,} images that study 't' evaluated "
        "architectures on and 0 it trained them on; score on the test split (the default) or pass "
        "--allow-seen-images to score on them anyway"
    )
    # another seed's split: counted by sets of positions here
    other = load_dataset("synthetic", img_size=PROFILE.img_size, seed=3)
    study_train, study_val = split_indices(len(split.train) + n, n, 0)
    evaluated = len(set(other.val_index.tolist()) & set(study_val.tolist()))
    trained = len(set(other.val_index.tolist()) & set(study_train.tolist()))
    said = f"holds {evaluated:,} of its {len(other.val):,} images that study 't' evaluated architectures on"
    with pytest.raises(ValueError, match=f"{said} and {trained:,} it trained them on"):
        plan_retrain(copy, config=TINY, top=1, seeds=[3], score_on="val", controls=0)
    asked = plan_retrain(copy, config=TINY, top=1, seeds=[0], score_on="val", allow_seen=True, controls=0)
    assert asked.seen.startswith("Scored on images the study saw") and "biased upward" in asked.seen
    # a record that does not recompute (or a study from before split records) is refused too
    stale = _with_split_record(study, tmp_path / "stale", val_fingerprint="0" * 16)
    with pytest.raises(ValueError, match="did not record which images it evaluated on"):
        plan_retrain(stale, config=TINY, top=1, seeds=[0], score_on="val", controls=0)
    # the test split is the default, and needs no permission
    assert plan_retrain(copy, config=TINY, top=1, seeds=[0], controls=0).score_on == "test"


def test_a_run_another_process_trains_is_skipped_and_said(study: Path, tmp_path: Path) -> None:
    plan = plan_retrain(study, config=TINY, top=1, seeds=[0, 1], dataset="synthetic", out=tmp_path / "r",
                        controls=0, plateau=False)  # fmt: skip
    plan = dataclasses.replace(
        plan, members=tuple(m for m in plan.members if m.role == "found" or m.label == "mine")
    )
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
    plan = plan_retrain(copy, config=TINY, top=1, seeds=[0], dataset="synthetic", controls=0, plateau=False)
    plan = dataclasses.replace(
        plan, members=tuple(m for m in plan.members if m.role == "found" or m.label == "mine")
    )
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
    plan = plan_retrain(copy, config=TINY, top=1, seeds=[0], dataset="synthetic", out=elsewhere, controls=0,
                        plateau=False, baselines=False)  # fmt: skip
    run_retrain(plan)
    write_retraining(summarize(plan, finished_runs(plan)))
    assert retraining_folders(copy) == [elsewhere.resolve()]
    page = write_report(copy).read_text()
    assert f"Retrained (nas retrain --out {elsewhere.resolve()})" in page
    assert "href='../longer/retrain.html'" in page and "Trained 1 epoch of" in page
    # the default folder's retraining comes first; a folder since removed is left out
    default = plan_retrain(copy, config=TINY, top=1, seeds=[0], dataset="synthetic", controls=0,
                           plateau=False, baselines=False)  # fmt: skip
    run_retrain(default)
    write_retraining(summarize(default, finished_runs(default)))
    assert retraining_folders(copy) == [copy / "retrain", elsewhere.resolve()]
    shutil.rmtree(elsewhere)
    page = write_report(copy).read_text()
    assert retraining_folders(copy) == [copy / "retrain"] and "--out" not in page


def test_several_studies_combine_into_one_retraining_each_baseline_once(study: Path, tmp_path: Path) -> None:
    other = tmp_path / "u"
    shutil.copytree(study, other, ignore=shutil.ignore_patterns("retrain", "retrainings.json"))
    manifest = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**manifest, "study": "u"}))
    frame = pd.read_csv(study / "trials.csv")
    done = frame[(frame["state"] == "COMPLETE") & frame["baseline"].isna()]
    costliest = int(done.loc[pd.to_numeric(done["macs"]).idxmax(), "number"])
    plans = [
        plan_retrain(s, config=TINY, trials=[costliest], controls=1, out=tmp_path / name)
        for s, name in ((study, "a"), (other, "b"))
    ]
    combined = combine_plans(plans, tmp_path / "both")
    assert combined.study == "t + u" and combined.out == tmp_path / "both"
    found = [m.label for m in combined.found()]
    assert found == [f"t:trial_{costliest}", f"u:trial_{costliest}"]
    baselines = [m.label for m in combined.members if m.role == "baseline"]
    assert baselines == [m.label for m in plans[0].members if m.role == "baseline"]  # once, not twice
    for f in combined.found():
        references = [r.label for r, _ in combined.references(f)]
        (control,) = [r for r in references if r not in baselines]
        assert control.startswith(f.label.split(":")[0] + ":random1_")
    assert combined.plateau == (found[0], baselines[0])
    runs = _runs({m.label: [80.0 + i, 81.0 + i, 79.0 + 2 * i] for i, m in enumerate(combined.members)})
    summary = summarize(combined, runs)
    assert len(summary.comparisons) == 2 * (len(baselines) + 1)
    raw = [c.stats["difference"].get("p") for c in summary.comparisons]
    assert [c.p_holm for c in summary.comparisons] == pytest.approx(holm(raw), nan_ok=True)
    with pytest.raises(ValueError, match="combine: the plans of 't' and 'u' differ in seeds"):
        combine_plans([plans[0], dataclasses.replace(plans[1], seeds=(0,))], tmp_path / "c")

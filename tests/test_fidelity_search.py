"""Searches on a fidelity ladder, end to end with real proxy training (tiny rungs: 128, 256, 512 images):
promotions continue their lineage's checkpoint and follow the rule, the front is of the top rung, two
workers promote asynchronously without running a promotion twice, a kill mid-ladder loses no finished
rung, and settings that cannot climb a ladder are refused in one sentence."""

from __future__ import annotations

import json
import math
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from processes import stop

from nas.api import run_search
from nas.study.fidelity import Ladder, RungResult, next_promotion
from nas.study.settings import SearchSettings
from search_spaces import get_space

LADDER = {"fidelity": "ladder", "min_fidelity": 128, "eta": 2, "rungs": 3}
IMAGES = {0: 128, 1: 256, 2: 512}


def _settings(runs: Path, **changes) -> SearchSettings:
    values = {
        "space": "coatnet",
        "evaluator": "proxy",
        "budget": "12trials",
        "baselines": False,
        "runs_dir": str(runs),
        "study": "ladder",
        **LADDER,
        **changes,
    }
    return SearchSettings(**values)


def _check_ladder(table: pd.DataFrame) -> pd.DataFrame:
    """The invariants of any laddered study's table; returns its completed rows."""
    done = table[table["state"] == "COMPLETE"].sort_values("number")
    assert done["rung"].notna().all() and done["lineage"].notna().all()
    assert not done.duplicated(["lineage", "rung"]).any()  # no rung of a lineage ran twice
    for _, row in done.iterrows():
        rung, lineage = int(row["rung"]), int(row["lineage"])
        assert row["images"] == IMAGES[rung]
        if rung == 0:
            assert lineage == row["number"] and row["resumed_images"] == 0
            continue
        below = done[(done["lineage"] == lineage) & (done["rung"] == rung - 1)]
        assert len(below) == 1 and int(below["number"].iloc[0]) < row["number"]
        assert row["resumed_images"] == IMAGES[rung - 1]  # continued from the checkpoint, not from scratch
        assert row["arch"] == below["arch"].iloc[0]
    return done


def _check_checkpoints(outcome) -> None:
    """A lineage keeps the checkpoint of its highest rung, while that is below the top and trained; the top
    rung saves none, and a promotion deletes the checkpoint it continued."""
    table = outcome.trials[outcome.trials["state"].isin(["COMPLETE", "FAIL"])].sort_values("rung")
    last = table.groupby("lineage").tail(1)
    kept = last[(last["state"] == "COMPLETE") & (last["rung"] < max(IMAGES))]
    assert len(kept) and len(kept) < len(last)  # some lineages reached the top, others stopped below
    checkpoints = {
        p.relative_to(outcome.run_dir / "ladder").as_posix() for p in (outcome.run_dir / "ladder").rglob("*")
    }
    assert checkpoints == {f"{int(r.lineage)}/rung{int(r.rung)}.pt" for r in kept.itertuples()} | {
        str(int(r.lineage)) for r in kept.itertuples()
    }  # an emptied lineage's folder goes too


@pytest.mark.parametrize("promotion", ["asha", "quota"])
def test_a_laddered_search_promotes_by_the_rule_and_fronts_the_top_rung(
    tmp_path: Path, promotion: str
) -> None:
    # 8 of 128-512 images reach the top rung
    outcome = run_search(_settings(tmp_path, budget="8trials", promotion=promotion))
    table = outcome.trials
    done = _check_ladder(table)
    assert len(done) == 8 and (done["rung"] == 2).any()
    if promotion == "quota":  # never more than 1 in eta of a rung
        per_rung = done["rung"].value_counts()
        assert per_rung[1] <= per_rung[0] // 2 and per_rung[2] <= per_rung[1] // 2
    # replaying the study in trial order, each promotion is the one the rule chose when it was decided
    # (one worker: decided right before it ran)
    results: list[RungResult] = []
    ladder = Ladder(eta=2, rungs=3, min_images=128, promotion=promotion)
    for _, row in done.iterrows():
        if row["rung"] > 0:
            chosen = next_promotion(results, ladder, ("maximize", "minimize"))
            assert (chosen.lineage, chosen.rung) == (row["lineage"], row["rung"])
        results.append(RungResult(int(row["lineage"]), int(row["rung"]), (row["top1"], row["macs"])))
    # each trial is charged its own rung's training only: a promotion costs less than the full climb
    assert (done["cost_seconds"] > 0).all()
    front = pd.read_csv(outcome.run_dir / "pareto.csv")
    assert len(front) and (front["rung"] == 2).all()
    report = (outcome.run_dir / "report.html").read_text()
    assert "rank agreement between rungs" in report and "completed trials per rung" in report
    _check_checkpoints(outcome)


def test_the_rung_schedule_reaches_every_rungs_training(tmp_path: Path) -> None:
    """With ``rung_schedule="rung"`` each rung's checkpoint records the schedule restarted at every rung
    below the top (in updates), and a promotion continues under it."""
    outcome = run_search(_settings(tmp_path, budget="7trials", rung_schedule="rung"))
    done = _check_ladder(outcome.trials)
    assert (done["rung"] == 1).any()
    batch = get_space("coatnet").profile("cpu").batch_size
    paths = list((outcome.run_dir / "ladder").rglob("*.pt"))
    assert paths
    for path in paths:
        state = torch.load(path, weights_only=True)
        assert state["restart_steps"] == [math.ceil(IMAGES[r] / batch) for r in (0, 1)]
        assert state["total_steps"] == math.ceil(IMAGES[2] / batch)


def test_two_workers_promote_asynchronously(tmp_path: Path) -> None:
    outcome = run_search(_settings(tmp_path, workers=2, budget="10trials"))
    done = _check_ladder(outcome.trials)
    assert done["pid"].nunique() == 2  # both workers trained
    assert (done["rung"] > 0).any()
    promoted = done[done["rung"] > 0]
    assert promoted["pid"].nunique() >= 1
    pruned = outcome.trials[outcome.trials["state"] == "PRUNED"]
    assert pruned["fail_reason"].str.contains("duplicate").all()  # a race is pruned unrun, never run twice
    _check_checkpoints(outcome)


@pytest.mark.integration
def test_ray_climbs_the_same_ladder(tmp_path: Path) -> None:
    """Two trials at once on a local Ray: the searcher promotes by the shared rule, the workers continue
    the lineages' checkpoints, the table holds the same columns as on Optuna."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        outcome = run_search(_settings(tmp_path, backend="ray", concurrency=2, budget="10trials"))
    finally:
        ray.shutdown()
    refused = "climbs a ladder with eta 2; it cannot be resumed with eta 3"
    with pytest.raises(ValueError, match=refused):  # before Ray starts
        run_search(_settings(tmp_path, backend="ray", concurrency=2, budget="13trials", resume=True, eta=3))
    done = _check_ladder(outcome.trials)
    assert len(done) == 10 and (done["rung"] > 0).any()
    front = pd.read_csv(outcome.run_dir / "pareto.csv")
    assert (front["rung"] == 2).all()
    _check_checkpoints(outcome)
    # the top 1/eta of rung 0, as ranked at the end, was promoted (asynchronously, perhaps with others)
    rung0 = [RungResult(int(r.lineage), 0, (r.top1, r.macs)) for r in done[done["rung"] == 0].itertuples()]
    from nas.study.fidelity import rung_order

    top = rung_order(rung0, ("maximize", "minimize"))[: len(rung0) // 2]
    promoted = set(done.loc[done["rung"] == 1, "lineage"].astype(int))
    assert len(top) - 1 <= len({r.lineage for r in top} & promoted)  # the last result may not be acted on


def _running_promotion(db: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as con:
            rows = con.execute(
                "SELECT a.value_json FROM trials t JOIN trial_user_attributes a ON a.trial_id = t.trial_id "
                "WHERE t.state = 'RUNNING' AND a.key = 'rung'"
            ).fetchall()
    except sqlite3.OperationalError:
        return False
    return any(json.loads(v) > 0 for (v,) in rows)


@pytest.mark.slow  # 136 s in the full run; test_kill_resume covers kills by default
@pytest.mark.integration
@pytest.mark.timeout(2400)  # 46 s on a quiet 2-core machine, 650 s beside another suite: room for both waits
def test_a_kill_mid_ladder_loses_no_finished_rung(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "nas", "search", "--space", "coatnet", "--budget", "16trials", "--no-baselines",
        "--fidelity", "ladder", "--min-fidelity", "128", "--eta", "2", "--rungs", "3",
        "--runs-dir", str(tmp_path), "--study", "kill",
    ]  # fmt: skip
    db = tmp_path / "kill" / "study.db"
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 600  # a search that never promotes, not a busy machine
        while not _running_promotion(db):
            assert proc.poll() is None, "the search ended before any promotion ran"
            assert time.time() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        stop(proc, signal.SIGKILL)
    with sqlite3.connect(db) as con:
        before = dict(con.execute("SELECT number, state FROM trials WHERE state = 'COMPLETE'").fetchall())
    assert before
    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=1500)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    table = pd.read_csv(tmp_path / "kill" / "trials.csv")
    done = _check_ladder(table)
    assert set(before) <= set(done["number"])  # every rung finished before the kill is kept
    lost = table[(table["state"] == "FAIL") & table["rung"].gt(0)]
    assert len(lost) == 1
    rerun = done[(done["lineage"] == lost["lineage"].iloc[0]) & (done["rung"] == lost["rung"].iloc[0])]
    assert len(rerun) == 1 and rerun["resumed_images"].iloc[0] == IMAGES[int(lost["rung"].iloc[0]) - 1]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"evaluator": "complexity", "objectives": "macs,params"}, "has no rungs to climb"),
        ({"evaluator": "oneshot"}, "has no rungs to climb"),
        ({"fidelity": "halving"}, "fidelity: unknown 'halving'"),
        ({"eta": 1}, "eta: must be a whole number between 2 and"),
        ({"rungs": 1}, "rungs: must be a whole number between 2 and"),
        ({"min_fidelity": 0}, "min-fidelity: must be a whole number between 1 and"),
        ({"rung_schedule": "cyclic"}, "rung-schedule: unknown 'cyclic'; allowed: top, rung"),
        ({"promotion": "halving"}, "promotion: unknown 'halving'; allowed: asha, quota"),
        ({"rung_val_images": 0}, "rung-val-images: must be a whole number between 1 and"),
        ({"rung_val_images": "most"}, "rung-val-images: must be a whole number or all, got 'most'"),
        ({"rung_val_images": "-5"}, "rung-val-images: must be a whole number or all, got '-5'"),
        # eta 2, 3 rungs: the first top-rung result comes after 6 trials at the soonest, 7 at the latest
        ({"budget": "5trials"}, "after 6 trials at the soonest, 7 if the first results stay the best"),
        ({"budget": "8trials", "eta": 3}, "8 trials end before .*give a budget of at least 13 trials"),
        # under the quota a promotion waits for eta results at its rung whatever they are: 4 + 2 + 1
        ({"budget": "6trials", "promotion": "quota"}, "the first gets there after 7 trials; give a budget"),
    ],
)
def test_settings_that_cannot_climb_are_refused(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _settings(tmp_path, **changes)


def test_cli_refuses_a_ladder_without_training_in_one_sentence(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "nas", "search", "--evaluator", "complexity", "--fidelity", "ladder",
         "--runs-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 2
    assert "has no rungs to climb" in result.stderr + result.stdout and "Traceback" not in result.stderr


def test_a_study_resumes_only_on_its_own_ladder(tmp_path: Path) -> None:
    run_search(_settings(tmp_path, budget="7trials"))  # the fewest trials that reach the top rung
    with pytest.raises(ValueError, match="cannot be resumed with"):
        run_search(_settings(tmp_path, budget="13trials", resume=True, eta=3))
    with pytest.raises(ValueError, match="rung schedule top; it cannot be resumed with rung schedule rung"):
        run_search(_settings(tmp_path, budget="8trials", resume=True, rung_schedule="rung"))
    refused = "rung val images 500; it cannot be resumed with rung val images all"
    with pytest.raises(ValueError, match=refused):
        run_search(_settings(tmp_path, budget="8trials", resume=True, rung_val_images="all"))


@pytest.mark.parametrize(
    ("error", "kept"), [(RuntimeError("diverged"), False), (KeyboardInterrupt(), True), (None, False)]
)
def test_a_promotion_spends_the_checkpoint_it_continued_unless_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException | None, kept: bool
) -> None:
    """Trained or failed, a promotion is never run from that rung again, so the checkpoint below goes; an
    interrupted one is queued again and continues it then."""
    from nas.search.trial import TrialRunner, run_trial

    def evaluate(self, arch, report=None, step=None):
        if error is not None:
            raise error
        return {"top1": 0.5, "macs": 1.0e9}

    monkeypatch.setattr(TrialRunner, "evaluate", evaluate)
    runner = TrialRunner(_settings(tmp_path))
    below = runner.checkpoint(7, 0)
    below.parent.mkdir(parents=True)
    below.write_bytes(b"state")
    arch = get_space("coatnet").sample_random(0)
    record = run_trial(runner, lambda: arch, number=9, step=(7, 1))
    assert (record.reason is None) == (error is None)
    assert below.exists() == kept and below.parent.exists() == kept  # an emptied lineage folder goes too

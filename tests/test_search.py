"""`nas search` with the Optuna driver: settings, baselines first, resume, failures and the budget."""

from __future__ import annotations

import itertools
import json
import os
import re
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from cheap_search import cheap_settings
from typer.testing import CliRunner

from evaluators.data import load_dataset
from evaluators.registry import EVALUATORS
from nas.api import run_search
from nas.cli.commands import app
from nas.search.trial import TrialRunner
from nas.study.settings import SearchSettings
from search_spaces import get_space

SASA_BASELINES = list(get_space("sasa").baselines())


def _settings(tmp_path: Path, **changes: object) -> SearchSettings:
    return cheap_settings(tmp_path, **changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"space": "nope"}, "unknown"),
        ({"evaluator": "magic"}, "evaluator: unknown"),
        ({"backend": "spark"}, "backend: unknown"),
        ({"sampler": "cmaes"}, "sampler: unknown"),
        ({"budget": "0trials"}, "budget"),
        ({"budget": "soon"}, "budget"),
        ({"objectives": ("top1", "macs")}, "complexity evaluator trains nothing"),
        ({"objectives": ("accuracy",)}, "unknown metric"),
        ({"study": "../escape"}, "not a valid name"),
        ({"workers": 0}, "workers: must be a whole number between 1 and"),
        ({"address": "auto"}, "needs --backend ray"),
        ({"profile": "tpu"}, "unknown proxy profile"),
    ],
)
def test_bad_settings_are_one_sentence(tmp_path: Path, changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        _settings(tmp_path, **changes)
    assert "\n" not in str(err.value)


def test_config_file_with_flags_on_top(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "space: sasa\nbudget: 3trials\nmacs-img-size: 32\nobjectives: macs,params\n"
    )
    (tmp_path / "b.toml").write_text('[search]\nspace = "sasa"\nbudget = "4trials"\nobjectives = ["macs"]\n')
    a = SearchSettings.from_sources(tmp_path / "a.yaml", evaluator="complexity", budget="5trials")
    assert (a.space, a.budget, a.macs_img_size, a.objectives) == ("sasa", "5trials", 32, ("macs", "params"))
    b = SearchSettings.from_sources(tmp_path / "b.toml", evaluator="complexity")
    assert (b.budget, b.objectives, b.sampler_name) == ("4trials", ("macs",), "tpe")
    (tmp_path / "c.yaml").write_text("spaec: sasa\n")
    with pytest.raises(ValueError, match="unknown setting"):
        SearchSettings.from_sources(tmp_path / "c.yaml")


def test_search_runs_baselines_first_and_writes_table_and_manifest(tmp_path: Path) -> None:
    outcome = run_search(_settings(tmp_path, budget="11trials"))
    table = outcome.trials
    assert list(table["number"]) == list(range(11))
    assert (table["state"] == "COMPLETE").all()
    assert list(table["baseline"][:9]) == SASA_BASELINES and not any(table["baseline"][9:])
    for column in (
        "arch",
        "arch_json",
        "macs",
        "params",
        "cost_seconds",
        "devices",
        "device",
        "charge",
        "host",
    ):
        assert table[column].notna().all(), column
    assert (tmp_path / "t" / "trials.parquet").exists() and (tmp_path / "t" / "study.db").exists()
    with sqlite3.connect(tmp_path / "t" / "study.db") as db:  # the write-ahead log: cheap, kill-safe commits
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    again = pd.read_csv(tmp_path / "t" / "trials.csv")
    assert list(again["arch"]) == list(table["arch"])
    manifest = (tmp_path / "t" / "manifest.json").read_text()
    assert '"torch"' in manifest and '"budget"' in manifest and '"optuna"' in manifest


def test_resume_after_an_interruption_keeps_every_trial_and_the_numbering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run_search(_settings(tmp_path, budget="4trials"))
    assert len(first.trials) == 4
    with pytest.raises(ValueError, match=r"pass resume=True to continue it, or choose another study=.NAME."):
        run_search(_settings(tmp_path, budget="8trials"))

    real_run, calls = TrialRunner.evaluate, []

    def interrupted_at_second(self: TrialRunner, arch, report=None):
        calls.append(arch.key)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_run(self, arch, report)

    monkeypatch.setattr(TrialRunner, "evaluate", interrupted_at_second)
    second = run_search(_settings(tmp_path, budget="8trials", resume=True))
    assert second.interrupted
    assert list(second.trials["state"]) == ["COMPLETE"] * 5 + ["FAIL"]
    assert "interrupted" in second.trials["fail_reason"].iloc[-1]
    monkeypatch.setattr(TrialRunner, "evaluate", real_run)

    third = run_search(_settings(tmp_path, budget="10trials", resume=True))
    table = third.trials
    assert list(table["number"]) == list(range(len(table)))  # no number used twice, none lost
    # 11 but for the repeats a resumed session's sampler may draw (answered from the study, not budgeted)
    assert len(table) - (table["state"] == "REPEAT").sum() == 11
    assert list(table["arch"][:5]) == list(second.trials["arch"][:5])
    # the interrupted trial (a baseline) is run again, behind the baselines queued before it, and is not
    # one of the budget's trials
    assert table["state"][5] == "FAIL" and table["arch"][9] == table["arch"][5]
    assert table["baseline"][9] == table["baseline"][5] != ""
    assert (table["state"] == "COMPLETE").sum() == 10


def test_a_failing_trial_is_recorded_and_the_search_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_run = TrialRunner.evaluate

    def flaky(self: TrialRunner, arch, report=None):
        if "attn" in arch.key:
            raise RuntimeError("CUDA out of memory (simulated)")
        return real_run(self, arch, report)

    monkeypatch.setattr(TrialRunner, "evaluate", flaky)
    table = run_search(_settings(tmp_path, budget="6trials")).trials
    failed = table[table["state"] == "FAIL"]
    assert len(table) == 6 and len(failed) >= 1
    assert failed["fail_reason"].str.contains("out of memory").all()
    assert failed["arch"].str.startswith("attn").all()


def test_time_budget_stops_within_one_trial_of_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each trial is charged seconds the test draws, not the machine's: the stop is the budget's decision alone
    seconds = itertools.cycle([0.7, 1.3, 0.9, 1.6])
    real_cost = TrialRunner.cost
    monkeypatch.setattr(TrialRunner, "cost", lambda self, _, **kw: real_cost(self, next(seconds), **kw))
    table = run_search(_settings(tmp_path, budget="6s", baselines=False)).trials
    spent, largest = table["charge"].sum(), table["charge"].max()
    assert len(table) >= 3
    assert 6 - largest < spent <= 6 + largest


def test_cli_search_bad_input_leaves_the_study_untouched(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["search", "--space", "sasa", "--evaluator", "complexity", "--objectives", "macs,params"]
    base += ["--macs-img-size", "32", "--runs-dir", str(tmp_path), "--study", "cli"]
    ok = runner.invoke(app, [*base, "--budget", "3trials"])
    assert ok.exit_code == 0, ok.output
    assert re.search(r"front: [1-3] architectures", ok.output), ok.output
    before = (tmp_path / "cli" / "trials.csv").read_bytes()
    for extra in (
        ["--budget", "3trials"],  # exists, no --resume
        ["--budget", "3 lightyears", "--resume"],
        ["--budget", "3trials", "--resume", "--sampler", "annealing"],
        ["--budget", "3trials", "--resume", "--storage", "postgresql://nobody@127.0.0.1:1/none"],
    ):
        bad = runner.invoke(app, [*base, *extra])
        assert bad.exit_code == 2, (extra, bad.output)
        assert "error:" in bad.output and "Traceback" not in bad.output
        assert (tmp_path / "cli" / "trials.csv").read_bytes() == before


@pytest.mark.parametrize("held, other", [("optuna", "ray"), ("ray", "optuna")])
def test_a_study_is_continued_only_on_the_backend_that_searched_it(
    tmp_path: Path, held: str, other: str
) -> None:
    """Each engine keeps its trials where the other cannot read them (Optuna's storage, Ray's ledger): a
    search under the other backend started a second study in the folder and overwrote the first one's trials
    table, report and manifest. The backend is the manifest's, else the one whose files are in the folder
    (a first session killed before it wrote its manifest)."""
    run_dir = tmp_path / "t"
    run_dir.mkdir()
    (run_dir / ("study.db" if held == "optuna" else "ray_ledger.jsonl")).write_bytes(b"")
    for resume in (False, True):
        with pytest.raises(
            ValueError, match=rf"was searched on the {held} backend, which keeps its trials "
        ) as err:
            run_search(cheap_settings(tmp_path, backend=other, resume=resume))
        assert f"continue it with backend='{held}', resume=True, or choose" in str(err.value)  # from Python
    for path in run_dir.iterdir():  # the manifest alone says which backend
        path.unlink()
    (run_dir / "manifest.json").write_text(json.dumps({"settings": {"backend": held}}))
    result = CliRunner().invoke(app, ["search", "--config", str(_config(tmp_path, other)), "--resume"])
    assert result.exit_code == 2, result.output
    assert f"continue it with --backend {held} --resume, or choose another --study" in " ".join(
        result.output.split()
    )
    assert [p.name for p in run_dir.iterdir()] == ["manifest.json"]


def _config(tmp_path: Path, backend: str) -> Path:
    path = tmp_path / "search.yaml"
    path.write_text(
        f"space: sasa\nevaluator: complexity\nobjectives: macs,params\nbudget: 6trials\nmacs-img-size: 32\n"
        f"runs-dir: {tmp_path}\nstudy: t\nbackend: {backend}\n"
    )
    return path


def test_a_ray_study_takes_one_driver(tmp_path: Path) -> None:
    """Two Ray sessions on one study (a second `--resume` while the first ran) each restored the experiment
    and ran the budget's trials again under the same numbers: 7 trials under a 4-trial budget, numbers 1 to 3
    twice in the table. The driver holds the run folder's session lock; a second is refused at once."""
    from nas.core.atomic import sole
    from nas.search.ray_driver import SESSION_LOCK

    run_dir = tmp_path / "t"
    run_dir.mkdir()
    refused = rf"being searched by another Ray session \(pid {os.getpid()} on "
    # this process holds the lock: another driver, as far as the search can tell
    with sole(run_dir / SESSION_LOCK), pytest.raises(ValueError, match=refused):
        run_search(cheap_settings(tmp_path, backend="ray"))
    assert [p.name for p in run_dir.iterdir()] == [SESSION_LOCK]


@pytest.mark.parametrize(
    "changes, says",
    [
        ({}, "holds 108 training images and the cpu profile trains on 6000; use a larger dataset"),
        ({"profile": "gpu"}, "gives 108 training images, not one batch of the gpu profile's 256"),
        (
            {"evaluator": "oneshot", "evaluator_config": {"batch_size": 8}, "profile": "gpu"},
            "holds 108 training images and evaluator-config's train_samples asks for 10000; use a larger "
            "dataset or set evaluator-config's train_samples to at most 108",
        ),
    ],
)
def test_a_dataset_smaller_than_training_asks_is_refused(tmp_path: Path, changes: dict, says: str) -> None:
    """An image folder of 120 images under the cpu profile (6000 training images a trial): every trial failed
    with 'asked for 6000 training samples; the split holds 108', charged to the budget."""
    from PIL import Image

    for cls in ("cat", "dog", "eel"):
        (tmp_path / "images" / "train" / cls).mkdir(parents=True)
        for i in range(40):
            Image.new("RGB", (8, 8), (6 * i, 80, 200)).save(tmp_path / "images" / "train" / cls / f"{i}.png")
    settings = cheap_settings(
        tmp_path / "runs",
        dataset=f"imagefolder:{tmp_path / 'images'}",
        **{"evaluator": "proxy", "objectives": ("top1", "macs"), **changes},
    )
    with pytest.raises(ValueError, match=re.escape(f"dataset: imagefolder:{tmp_path / 'images'} {says}")):
        run_search(settings)
    assert not (tmp_path / "runs").exists()
    # each evaluator asks for its own: the one-shot supernet trains on its config's images, not the profile's
    oneshot = EVALUATORS["oneshot"]
    config = oneshot.make_config({"train_samples": 100, "batch_size": 8})
    split, profile = load_dataset(settings.dataset, img_size=32), get_space("sasa").profile("cpu")
    oneshot.check(config, space=None, profile=profile, data=split, seed=0, run_dir=tmp_path)

"""The study's SQLite file removed (or replaced) while a search runs: no finished trial is lost. The search
stops at its next trial with one sentence, the study restored from the connection that still holds it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from cheap_search import evaluated_trials
from typer.testing import CliRunner

from nas.cli.commands import app
from nas.core.arch import Arch
from nas.search.trial import TrialRunner


def _search(tmp_path: Path, *extra: str):
    result = CliRunner().invoke(
        app,
        ["search", "--space", "sasa", "--evaluator", "complexity", "--macs-img-size", "32", "--no-baselines",
         "--runs-dir", str(tmp_path), "--study", "t", *extra],
    )  # fmt: skip
    return result.exit_code, " ".join(result.stdout.split()), " ".join(result.stderr.split())


def _during_third_trial(monkeypatch: pytest.MonkeyPatch, act) -> None:
    real, calls = TrialRunner.evaluate, []

    def evaluate(self: TrialRunner, arch: Arch, report=None, **extra):
        calls.append(arch.key)
        if len(calls) == 3:
            act()
        return real(self, arch, report, **extra)

    monkeypatch.setattr(TrialRunner, "evaluate", evaluate)


def test_a_removed_study_file_is_restored_with_every_finished_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "t" / "study.db"
    _during_third_trial(monkeypatch, db.unlink)
    code, out, err = _search(tmp_path, "--budget", "10trials")
    assert code == 1, out + err
    assert err.count("error:") == 1 and f"{db} was removed while the search ran" in err
    assert "restored to it; continue with --resume" in err
    assert evaluated_trials(db) == 3  # the trial that ran while it was removed included
    assert list(pd.read_csv(tmp_path / "t" / "trials.csv")["state"]) == ["COMPLETE"] * 3
    monkeypatch.undo()
    code, out, err = _search(tmp_path, "--budget", "10trials", "--resume")
    assert code == 0, out + err
    assert evaluated_trials(db) == 10


def test_a_replaced_study_file_is_kept_and_the_study_saved_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "t" / "study.db"

    def replace() -> None:
        db.unlink()
        db.write_bytes(b"someone else's file")

    _during_third_trial(monkeypatch, replace)
    code, out, err = _search(tmp_path, "--budget", "10trials")
    assert code == 1 and "Traceback" not in out + err
    assert err.count("error:") == 1 and "was replaced while the search ran" in err
    assert db.read_bytes() == b"someone else's file"
    (saved,) = (tmp_path / "t").glob("study.db.restored-*")
    assert f"saved as {saved}" in err and evaluated_trials(saved) == 3

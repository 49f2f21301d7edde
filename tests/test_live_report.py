"""`nas report` and `nas export` read a running study: a search writes its trials table only as a session
ends, and a first session's manifest only then, so a report asked for mid-search was refused ("no
manifest.json ... is it a run directory of `nas search`?") or, on a resumed study, silently of the last
session's table. The table is now read from the study's storage first (``refresh_trials``), and a first
session writes its manifest as soon as its study exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
from cheap_search import cheap_settings
from typer.testing import CliRunner

from evaluators.registry import EVALUATORS, EvaluatorSpec
from nas.api import run_search
from nas.cli.commands import app
from nas.core.arch import Arch
from nas.search.run import refresh_trials
from nas.study.manifest import read_manifest
from nas.study.trials_table import save_trials

pytestmark = pytest.mark.integration


class Peek:
    """Looks at the run folder as `nas report` would, from inside each trial: mid-search."""

    seen: ClassVar[list[tuple[bool, list[str]]]] = []

    def __init__(self, run_dir: Path) -> None:
        self.run_dir, self.calls = run_dir, 0

    def evaluate(self, arch: Arch, report: Any = None) -> dict[str, Any]:
        has_manifest = (self.run_dir / "manifest.json").exists()
        refresh_trials(self.run_dir)
        table = pd.read_csv(self.run_dir / "trials.csv")
        Peek.seen.append((has_manifest, list(table["state"])))
        self.calls += 1
        return {"top1": float(self.calls), "loss": 1.0}


def build_peek(config: Any, *, run_dir: Path, **_: Any) -> Peek:
    return Peek(Path(run_dir))


def test_a_running_first_session_is_read_from_its_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    Peek.seen = []
    spec = EvaluatorSpec("peek", "peeks", frozenset({"top1", "loss"}), builder=f"{__name__}:build_peek")
    monkeypatch.setitem(EVALUATORS, "peek", spec)
    settings = cheap_settings(
        tmp_path, evaluator="peek", objectives=("top1:max", "macs:min"), budget="3trials", baselines=False
    )
    outcome = run_search(settings)
    assert Peek.seen == [
        (True, ["RUNNING"]),
        (True, ["COMPLETE", "RUNNING"]),
        (True, ["COMPLETE", "COMPLETE", "RUNNING"]),
    ]
    sessions = read_manifest(outcome.run_dir)["sessions"]
    # one session: the entry the first manifest wrote, completed as the session ended
    assert len(sessions) == 1 and "seconds" in sessions[0]

    # the study file gone: the report says it reads the table as the search wrote it, and is written
    for name in ("study.db", "study.db-wal", "study.db-shm"):
        (outcome.run_dir / name).unlink(missing_ok=True)
    result = CliRunner().invoke(app, ["report", "t", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "the trials table was read as the search last wrote it" in result.output
    assert "study.db is missing" in result.output
    assert not (outcome.run_dir / "study.db").exists()  # not made empty by opening it


def _stale(run_dir: Path, rows: int) -> None:
    """The run folder as a search left it after its first ``rows`` trials (what a running one shows)."""
    save_trials(pd.read_parquet(run_dir / "trials.parquet").head(rows), run_dir)


@pytest.mark.parametrize("backend", ["optuna", "ray"])
def test_report_and_export_bring_the_table_up_to_date(tmp_path: Path, backend: str) -> None:
    settings = cheap_settings(tmp_path, backend=backend, budget="5trials", baselines=False)
    if backend == "ray":
        import ray

        ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
        try:
            outcome = run_search(settings)
        finally:
            ray.shutdown()
    else:
        outcome = run_search(settings)
    full = pd.read_parquet(outcome.run_dir / "trials.parquet")
    assert len(full) == 5
    _stale(outcome.run_dir, 2)
    result = CliRunner().invoke(app, ["report", "t", "--runs-dir", str(tmp_path)])
    assert result.exit_code == 0 and "note" not in result.output, result.output
    pd.testing.assert_frame_equal(pd.read_parquet(outcome.run_dir / "trials.parquet"), full)
    assert "COMPLETE 5" in (outcome.run_dir / "report.html").read_text()

    _stale(outcome.run_dir, 2)
    front = pd.read_csv(outcome.run_dir / "pareto.csv")
    result = CliRunner().invoke(
        app, ["export", "t", "--runs-dir", str(tmp_path), "--pareto", "--format", "none"]
    )
    assert result.exit_code == 0, result.output
    exported = sorted(p.name for p in (outcome.run_dir / "export").iterdir())
    assert exported == sorted(f"trial_{n}" for n in front["number"])

"""What a search shows while it runs (nas/search/progress.py): the whole study's front, one row per
architecture, best first, cut with "+N more"; and, off a terminal, throttled plain lines about the running
trials."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from cheap_search import cheap_settings
from rich.console import Console
from typer.testing import CliRunner

from nas.cli.commands import app
from nas.search import progress as progress_module
from nas.search.optuna_driver import open_study, run_optuna
from nas.search.progress import FRONT_ROWS, SearchProgress
from nas.search.trial import TrialRunner
from nas.study.objectives import parse_objectives
from nas.study.trials_table import trials_frame


def _row(number: int, arch: str, top1: float, macs: float, state: str = "COMPLETE") -> dict:
    return {"number": number, "state": state, "arch": arch, "baseline": "", "feasible": True, "top1": top1,
            "macs": macs}  # fmt: skip


def _text(view: SearchProgress) -> str:
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False).print(view.render())
    return out.getvalue()


def test_front_is_the_whole_study_deduplicated_best_first_with_more() -> None:
    view = SearchProgress("s", parse_objectives(["top1:max", "macs:min"]), Console(file=io.StringIO()))
    # earlier sessions: a front of FRONT_ROWS + 3 architectures (more accurate costs more), one of them twice,
    # a dominated network and a failed trial
    front = [_row(i, f"arch{i}", 50.0 + i, 1e9 * (i + 1)) for i in range(FRONT_ROWS + 3)]
    twin = _row(FRONT_ROWS + 3, "arch0", 50.0, 1e9)
    dominated = _row(FRONT_ROWS + 4, "big", 40.0, 9e9)
    failed = _row(FRONT_ROWS + 5, "broken", float("nan"), float("nan"), state="FAIL")
    view.add_rows([*front, twin, dominated, failed])
    best, more = view.front()
    assert [r.arch for r in best] == [f"arch{i}" for i in range(FRONT_ROWS + 2, 2, -1)]  # most accurate first
    assert more == 3  # arch2, arch1, arch0 (once: its twin is the same architecture)
    text = _text(view)
    assert "+3 more on the front" in text and "big" not in text
    assert f"{FRONT_ROWS + 5} trials done, 1 failed (0 of them in this session)" in text
    # minimizing the first objective orders the other way
    view2 = SearchProgress("s", parse_objectives(["macs:min", "top1:max"]), Console(file=io.StringIO()))
    view2.add_rows(front)
    assert [r.arch for r in view2.front()[0]][:2] == ["arch0", "arch1"]


def test_a_resumed_search_shows_every_session_s_trials(tmp_path: Path) -> None:
    run_optuna(cheap_settings(tmp_path, budget="2trials"))
    settings = cheap_settings(tmp_path, budget="3trials", resume=True)
    out = io.StringIO()
    view = SearchProgress("s", settings.parsed_objectives, Console(file=out, width=300))
    with view:
        run_optuna(settings, view)
    table = trials_frame(open_study(settings, create=False)[0], ["macs", "params"])
    complete, session = int((table["state"] == "COMPLETE").sum()), len(table) - 2
    assert f"{complete} trials done, 0 failed ({session} of them in this session)" in out.getvalue()
    assert {r.number for r in view.rows} == set(table["number"])


def test_running_trials_are_plain_lines_off_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(progress_module, "PLAIN_SECONDS", 0.2)
    real = TrialRunner.evaluate

    def slow(self, arch, report=None, step=None):  # an evaluator that reports an epoch, then takes a while
        metrics = real(self, arch, report)
        report(1, {})
        time.sleep(0.8)
        return metrics

    monkeypatch.setattr(TrialRunner, "evaluate", slow)
    args = ["search", "--space", "sasa", "--evaluator", "complexity", "--objectives", "macs,params",
            "--budget", "2trials", "--macs-img-size", "32", "--runs-dir", str(tmp_path)]  # fmt: skip
    began = time.monotonic()
    result = CliRunner().invoke(app, args)
    took = time.monotonic() - began
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("running: trial")]
    assert lines, result.output
    # each names its trial, architecture, time so far and the budget; the epoch once reported
    assert all(", for " in line and "| budget 2trials" in line for line in lines), lines
    assert any(line.startswith("running: trial   0 ") and "epoch 1 done" in line for line in lines), lines
    assert len(lines) <= took / 0.2 + 1  # throttled: at most one line per period


def test_quick_trials_print_no_running_lines(tmp_path: Path) -> None:
    args = ["search", "--space", "sasa", "--evaluator", "complexity", "--objectives", "macs,params",
            "--budget", "2trials", "--macs-img-size", "32", "--runs-dir", str(tmp_path)]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0 and "running:" not in result.output, result.output


def test_running_trials_in_the_panel_and_their_lines() -> None:
    view = SearchProgress("s", parse_objectives(["top1:max", "macs:min"]), Console(file=io.StringIO()))
    view.trial_started(4, rung=1)
    view.trial_step(4, arch="conv64|C2x96", epoch=2)
    view.trial_step(99, epoch=1)  # a trial it was not told of: ignored
    text = _text(view)
    assert "running" in text and "conv64|C2x96" in text
    (line,) = view.running_lines()
    assert line.startswith("running: trial   4 conv64|C2x96 rung 1, epoch 2 done, for ")

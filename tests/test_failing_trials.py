"""A search whose trials fail in every way a real one does (a diverged run, out of memory, past its timeout,
an evaluator error) records each as failed with its reason, goes on, and lists them in its report.

The faults are injected by trial, and so is the clock: the search runs with a trial timeout, but a trial's
deadline counts only once the trial that hangs starts it (:class:`HeldClock`), so no other trial can time
out, and none can fail otherwise, however slow or busy the machine is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
import torch

from evaluators.data import DataSplit
from evaluators.hyperparams import MAX_LR
from evaluators.proxy import ProxyEvaluator, TrainConfig
from evaluators.registry import EVALUATORS
from nas import api as api_module
from nas.api import run_search
from nas.core.arch import Arch
from nas.study.constraints import FAILED_IN_A_ROW, Limits, RejectionStreak, SameFailure
from nas.study.settings import SearchSettings
from nas.system import failures
from search_spaces.base import ProxyProfile

pytestmark = pytest.mark.integration

TIMEOUT = 5.0  # under test, for the trial that hangs; the others run without a clock
REAL_TIMER = failures.start_timer


class _Held:
    """A deadline's timer that counts nothing until it is armed; then a real one."""

    def __init__(self, seconds: float, expire: Callable[[], None]) -> None:
        self.seconds, self.expire, self.real = seconds, expire, None

    def cancel(self) -> None:
        if self.real is not None:
            self.real.cancel()


class HeldClock:
    """``failures.start_timer`` for this test: every trial's deadline timer is held, unless the trial arms it
    (the one that hangs): then its real timer runs, and so do the deadline's real retries while an import
    ends."""

    def __init__(self) -> None:
        self.held: _Held | None = None

    def __call__(self, seconds: float, expire: Callable[[], None]) -> Any:
        if self.held is not None and self.held.real is not None and expire == self.held.expire:
            return REAL_TIMER(seconds, expire)  # the armed deadline waits for an import to end
        self.held = _Held(seconds, expire)
        return self.held

    def arm(self) -> None:
        """Start the running trial's deadline now."""
        assert self.held is not None, "the search runs no trial timeout"
        self.held.real = REAL_TIMER(self.held.seconds, self.held.expire)


clock = HeldClock()


class FaultSchedule:
    """Real proxy training of each architecture, but the n-th call fails as ``faults[n]`` says."""

    faults: ClassVar[dict[int, str]] = {1: "diverge", 2: "oom", 3: "hang", 4: "error"}

    def __init__(self, profile: ProxyProfile, data: DataSplit) -> None:
        profile = replace(profile, epochs=1, train_samples=256, val_samples=256, batch_size=64)
        self.calls = 0
        self.normal = ProxyEvaluator(profile, data, seed=0)
        # a learning rate that makes the loss NaN within a few steps: a real divergence, caught by the trainer
        self.diverging = ProxyEvaluator(
            profile, data, seed=0, config=TrainConfig(opt="sgd", lr=MAX_LR, warmup_epochs=0)
        )
        self.endless = ProxyEvaluator(replace(profile, epochs=10_000), data, seed=0)

    def evaluate(self, arch: Arch, report: Any = None) -> dict[str, Any]:
        fault = self.faults.get(self.calls)
        self.calls += 1
        if fault == "diverge":
            return self.diverging.evaluate(arch)
        if fault == "oom":  # what a too-large network raises on a GPU; this machine has none
            raise torch.OutOfMemoryError(
                "CUDA out of memory. Tried to allocate 20.00 GiB (simulated on the CPU)"
            )
        if fault == "hang":
            clock.arm()
            return self.endless.evaluate(arch)  # real training that would run for hours: the timeout stops it
        if fault == "error":
            raise ValueError("the evaluator failed on this architecture (simulated)")
        return self.normal.evaluate(arch)


schedules: list[FaultSchedule] = []


def build_faults(config: Any, *, profile: ProxyProfile, data: Any, **_: Any) -> FaultSchedule:
    schedules.append(FaultSchedule(profile, data()))
    return schedules[-1]


def test_each_kind_of_failure_is_recorded_and_the_search_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the proxy evaluator's registry entry, built as the fault schedule: what the search calls is unchanged
    schedules.clear()
    monkeypatch.setitem(EVALUATORS, "proxy", replace(EVALUATORS["proxy"], builder=f"{__name__}:build_faults"))
    monkeypatch.setattr(failures, "start_timer", clock)
    settings = SearchSettings(
        space="sasa",
        evaluator="proxy",
        budget="8trials",
        baselines=False,
        trial_timeout=TIMEOUT,
        runs_dir=str(tmp_path),
        study="faults",
    )
    outcome = run_search(settings)
    table = outcome.trials.set_index("number")
    assert len(table) == 8 and schedules[0].calls == 8  # every failure was followed by more trials
    reasons = table["fail_reason"]
    assert reasons[1].startswith("diverged: TrainingDiverged: training diverged") and "loss nan" in reasons[1]
    assert reasons[2].startswith("out of memory: OutOfMemoryError: CUDA out of memory")
    assert reasons[3] == f"timeout: TrialTimeout: trial exceeded its {TIMEOUT:g} s timeout"
    assert reasons[4].startswith("error: ValueError: the evaluator failed")
    assert list(table["state"]) == ["COMPLETE"] + ["FAIL"] * 4 + ["COMPLETE"] * 3
    assert outcome.failed is None  # a search some of whose trials fail has done its job
    complete = table[table["state"] == "COMPLETE"]
    assert complete["top1"].between(0, 100).all() and complete["macs"].gt(0).all()
    # stopped at its deadline (it would have trained for hours), and charged
    assert TIMEOUT <= table.loc[3, "cost_seconds"] < TIMEOUT + 60
    saved = pd.read_csv(tmp_path / "faults" / "trials.csv", keep_default_na=False).set_index("number")
    assert list(saved["fail_reason"]) == list(reasons.fillna(""))
    report = outcome.report.read_text()
    for number in range(1, 5):  # the report lists every failed trial with its reason
        assert reasons[number].split(":")[0] in report and f">{number}<" in report


class BrokenEnvironment:
    """Fails every architecture the same way, as a broken install does (a package without its metadata)."""

    calls = 0

    def evaluate(self, arch: Arch, report: Any = None) -> dict[str, Any]:
        BrokenEnvironment.calls += 1
        raise ModuleNotFoundError("No module named 'a_dependency' (simulated)")


def build_broken(config: Any, **_: Any) -> BrokenEnvironment:
    return BrokenEnvironment()


def test_a_search_whose_trials_all_fail_the_same_way_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU machine every trial failed with one PackageNotFoundError, 201 in a 43-second budget: each
    is charged only its fraction of a second, so a GPU-days budget would fill the study with failures."""
    BrokenEnvironment.calls = 0
    monkeypatch.setitem(EVALUATORS, "proxy", replace(EVALUATORS["proxy"], builder=f"{__name__}:build_broken"))
    settings = SearchSettings(
        space="coatnet", evaluator="proxy", budget="2h", baselines=False, runs_dir=str(tmp_path), study="bad"
    )
    outcome = run_search(settings)
    assert BrokenEnvironment.calls == FAILED_IN_A_ROW == len(outcome.trials)
    assert (outcome.trials["state"] == "FAIL").all()
    assert outcome.stopped is not None and outcome.stopped.startswith(
        f"the last {FAILED_IN_A_ROW} trials all failed with the same reason"
    )
    assert "ModuleNotFoundError: No module named 'a_dependency'" in outcome.stopped
    assert outcome.failed == outcome.stopped  # the search did not do its job: `nas search` exits 1
    # the report is where a user reads why: it lists the failures beside an empty plot
    assert outcome.report is not None and outcome.no_front == "no trial has completed yet"
    assert "No module named &#x27;a_dependency&#x27;" in outcome.report.read_text()
    assert (outcome.run_dir / "pareto.png").stat().st_size > 0


def test_nas_search_exits_1_when_no_trial_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A search whose every trial failed exited 0, whether the budget ran out before the failure streak's
    end or the streak stopped it: a script (`nas search ... && nas export ...`) read it as success."""
    from typer.testing import CliRunner

    from nas.cli.commands import app

    monkeypatch.setitem(EVALUATORS, "proxy", replace(EVALUATORS["proxy"], builder=f"{__name__}:build_broken"))
    args = ["search", "--space", "coatnet", "--no-baselines", "--runs-dir", str(tmp_path)]
    runner = CliRunner()
    short = runner.invoke(app, [*args, "--budget", "3trials", "--study", "short"])
    assert short.exit_code == 1, short.output
    assert "no trial of the study has completed, 3 failed" in short.output
    assert (tmp_path / "short" / "report.html").exists()  # written all the same: it lists why
    streak = runner.invoke(app, [*args, "--budget", "2h", "--study", "streak"])
    assert streak.exit_code == 1, streak.output
    assert f"the last {FAILED_IN_A_ROW} trials all failed with the same reason" in streak.output
    # once a trial completes the study has results: a failure later in a search is no failed search
    frame = pd.DataFrame({"state": ["FAIL", "COMPLETE", "FAIL"]})
    assert api_module._all_failed(frame, None) is None
    assert api_module._all_failed(frame.iloc[[0, 2]], None) == "no trial of the study has completed, 2 failed"
    assert api_module._all_failed(pd.DataFrame({"state": ["INFEASIBLE"]}), None) is None


def test_the_failure_streak_counts_one_reason_in_a_row() -> None:
    streak = RejectionStreak(Limits(), most_failed=3)
    for reason in ("error: A", "error: A", "error: B", "error: B", None, "error: B", "error: B"):
        streak.add(False, {}, failure=reason)  # a new reason, or a trial that completed, starts again
    with pytest.raises(SameFailure, match=r"the last 3 trials all failed with the same reason.*error: B"):
        streak.add(False, {}, failure="error: B")


def test_a_ray_search_whose_trials_all_fail_the_same_way_stops(tmp_path: Path) -> None:
    """The same stop on Ray: the searcher counts the reasons its workers report. A deadline no trial can
    meet fails every one the same way in the Ray workers' own processes (no patch reaches them)."""
    import ray

    settings = SearchSettings(
        space="coatnet",
        evaluator="proxy",
        backend="ray",
        budget="2h",
        baselines=False,
        trial_timeout=0.01,
        runs_dir=str(tmp_path),
        study="bad-ray",
    )
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        outcome = run_search(settings)
    finally:
        ray.shutdown()
    assert len(outcome.trials) == FAILED_IN_A_ROW and (outcome.trials["state"] == "FAIL").all()
    assert outcome.stopped is not None and outcome.stopped.startswith(
        f"the last {FAILED_IN_A_ROW} trials all failed with the same reason"
    )
    assert "timeout:" in outcome.stopped
    assert outcome.failed == outcome.stopped  # the searcher's stop reaches the driver as the kind it is

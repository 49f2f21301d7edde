"""Search budgets: parsing (valid and invalid forms, the canonical round trip) and the accounting, driven by
simulated searches, sequential and parallel, whose trial costs are noisy or drift: every one stops within
one trial's cost of its limit."""

from __future__ import annotations

import heapq
import json
import math
import random
import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nas.study.budget import Budget, BudgetTracker, TrialCost

DAY, HOUR, MIN = 86400.0, 3600.0, 60.0

# -- parsing -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8gpu-days", Budget("device-seconds", 8 * DAY, "gpu")),
        ("12gpu-hours", Budget("device-seconds", 12 * HOUR, "gpu")),
        ("6cpu-hours", Budget("device-seconds", 6 * HOUR, "cpu")),
        ("45min", Budget("device-seconds", 45 * MIN)),
        ("2h", Budget("device-seconds", 2 * HOUR)),
        ("200trials", Budget("trials", 200)),
        ("1trial", Budget("trials", 1)),
        ("90s", Budget("device-seconds", 90.0)),
        ("1.5h", Budget("device-seconds", 1.5 * HOUR)),
        (".5 days", Budget("device-seconds", 0.5 * DAY)),
        ("3 d", Budget("device-seconds", 3 * DAY)),
        ("10 secs", Budget("device-seconds", 10.0)),
        ("2 hrs", Budget("device-seconds", 2 * HOUR)),
        ("5m", Budget("device-seconds", 5 * MIN)),
        ("1 minute", Budget("device-seconds", 60.0)),
        ("2wall-hours", Budget("wall-seconds", 2 * HOUR)),
        ("30 wall min", Budget("wall-seconds", 30 * MIN)),
        ("1e3s", Budget("device-seconds", 1000.0)),
        ("200.0 trials", Budget("trials", 200)),
    ],
)
def test_parse_valid(text: str, expected: Budget) -> None:
    assert Budget.parse(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "8gpu-days",
        "8 gpu-days",
        "8 GPU days",
        "8GPU-DAYS",
        "8gpu_days",
        "8gpudays",
        "  8 gpu - days ",
        "8 Gpu Day",
    ],
)
def test_parse_case_and_spacing(text: str) -> None:
    assert Budget.parse(text) == Budget("device-seconds", 8 * DAY, "gpu")


@pytest.mark.parametrize("text", ["200trials", "200 trials", "200 Trials", "200TRIALS", "200trial"])
def test_parse_trials_spellings(text: str) -> None:
    assert Budget.parse(text) == Budget("trials", 200)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("0h", "positive"),
        ("0trials", "positive"),
        ("0.0gpu-days", "positive"),
        ("-5h", "positive"),
        ("-3trials", "positive"),
        ("nan", "not a number"),
        ("nan h", "not a number"),
        ("inf hours", "not a number"),
        ("1e400h", "too large"),
        ("5 weeks", "'weeks' is not a unit"),
        ("5ms", "'ms' is not a unit"),
        ("3600", "no unit"),
        ("8gpu", "needs a time unit"),
        ("200 gpu-trials", "no 'gpu' prefix"),
        ("200wall-trials", "no 'wall' prefix"),
        ("2.5trials", "whole number"),
        ("hours", "not a number"),
        ("lots", "not a number"),
        ("1h30m", "'h30m' is not a unit"),
        ("8-gpu-days", "'-gpu-days' is not a unit"),
        ("8 tpu-days", "'tpu-days' is not a unit"),
    ],
)
def test_parse_invalid(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as info:
        Budget.parse(text)
    message = str(info.value)
    assert repr(text) in message and reason in message
    assert "8gpu-days" in message and "45min" in message and "200trials" in message  # the valid forms
    assert ". " not in message and "\n" not in message  # one sentence


def test_parse_rejects_non_text() -> None:
    with pytest.raises(TypeError, match="as text"):
        Budget.parse(3600)  # type: ignore[arg-type]
    budget = Budget.parse("2h")
    assert Budget.parse(budget) is budget


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("8 GPU days", "8gpu-days"),
        ("12gpu-hours", "12gpu-hours"),
        ("6 cpu hours", "6cpu-hours"),
        ("45 minutes", "45min"),
        ("2 hours", "2h"),
        ("1.5h", "90min"),
        ("36h", "36h"),
        ("1 day", "1day"),
        ("48h", "2days"),
        ("90 s", "90s"),
        ("1.5 s", "1.5s"),
        ("1 gpu-day", "1gpu-day"),
        ("0.5gpu-days", "12gpu-hours"),
        ("2 gpu min", "2gpu-minutes"),
        ("2 wall hours", "2wall-hours"),
        ("200 Trials", "200trials"),
        ("1 trial", "1trial"),
    ],
)
def test_canonical_form(text: str, canonical: str) -> None:
    budget = Budget.parse(text)
    assert str(budget) == canonical
    assert Budget.parse(str(budget)) == budget


@given(
    amount=st.floats(min_value=1e-6, max_value=1e12, allow_nan=False, allow_infinity=False),
    kind=st.sampled_from(["gpu", "cpu", None, "wall"]),
)
def test_round_trip_any_time_amount(amount: float, kind: str | None) -> None:
    budget = Budget("wall-seconds", amount) if kind == "wall" else Budget("device-seconds", amount, kind)
    assert Budget.parse(str(budget)) == budget


@given(st.integers(min_value=1, max_value=10**9))
def test_round_trip_any_trial_count(n: int) -> None:
    budget = Budget("trials", n)
    assert Budget.parse(str(budget)) == budget


def test_budget_validates_fields() -> None:
    with pytest.raises(ValueError, match="kind"):
        Budget("gpu-seconds", 10.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        Budget("trials", 10, "gpu")
    with pytest.raises(ValueError, match="device"):
        Budget("device-seconds", 10.0, "tpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        Budget("device-seconds", 0.0)
    with pytest.raises(ValueError, match="positive"):
        Budget("device-seconds", float("nan"))
    with pytest.raises(ValueError, match="whole number"):
        Budget("trials", 2.5)
    assert Budget("trials", 3.0).amount == 3 and isinstance(Budget("trials", 3.0).amount, int)
    assert Budget("device-seconds", 3).amount == 3.0 and isinstance(Budget("device-seconds", 3).amount, float)


# -- costs ---------------------------------------------------------------------------------------------------


def test_trial_cost_charges_seconds_times_devices() -> None:
    assert TrialCost(10.0, 4, "gpu").charge == 40.0
    assert TrialCost(10.0).charge == 10.0
    assert TrialCost.of(10.0, gpus=2) == TrialCost(10.0, 2, "gpu")
    assert TrialCost.of(10.0) == TrialCost(10.0, 1, "cpu")
    cost = TrialCost.of(7.5, gpus=8, label="supernet training", overhead=True)
    assert TrialCost.from_dict(json.loads(json.dumps(cost.to_dict()))) == cost


def test_a_data_parallel_set_up_is_charged_per_worker() -> None:
    """--supernet-workers: workers x wall seconds x the devices each holds, on GPUs and on CPUs (overhead
    only: a CPU trial still holds 1 device)."""
    on_gpus = TrialCost.of(10.0, gpus=1, overhead=True, workers=8)
    assert on_gpus == TrialCost(10.0, 8, "gpu", overhead=True) and on_gpus.charge == 80.0
    on_cpus = TrialCost.of(10.0, overhead=True, workers=2)
    assert on_cpus == TrialCost(10.0, 2, "cpu", overhead=True) and on_cpus.charge == 20.0
    assert TrialCost.from_dict(json.loads(json.dumps(on_cpus.to_dict()))) == on_cpus
    with pytest.raises(ValueError, match="CPU trial holds 1 device"):
        TrialCost.of(10.0, workers=2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"seconds": -1.0}, "not negative"),
        ({"seconds": float("inf")}, "finite"),
        ({"seconds": 1.0, "devices": 0, "device": "gpu"}, "at least 1"),
        ({"seconds": 1.0, "devices": 2, "device": "cpu"}, "CPU trial holds 1 device"),
        ({"seconds": 1.0, "device": "tpu"}, "'gpu' or 'cpu'"),
    ],
)
def test_trial_cost_validates(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        TrialCost(**kwargs)


# -- simulated searches --------------------------------------------------------------------------------------


def noisy(
    rng: random.Random, mean: float = 10.0, spread: float = 0.2, gpus: int = 0
) -> Callable[[], TrialCost]:
    """Trials of ``mean`` wall seconds, uniformly within +-``spread`` of it."""
    return lambda: TrialCost.of(mean * rng.uniform(1 - spread, 1 + spread), gpus=gpus)


def run_search(tracker: BudgetTracker, draw: Callable[[], TrialCost], workers: int = 1, clock=None) -> int:
    """Simulate a driver with ``workers`` slots: it asks ``can_start(pending=running)`` whenever a slot is
    free, and charges each trial when it ends. Returns the number of trials started."""
    running: list[tuple[float, int, TrialCost]] = []
    now, started = 0.0, 0
    while True:
        while len(running) < workers and tracker.can_start(pending=len(running)):
            cost = draw()
            heapq.heappush(running, (now + cost.seconds, started, cost))
            started += 1
            assert started < 100_000, "the search did not stop"
        if not running:
            return started
        now, _, cost = heapq.heappop(running)
        if clock is not None:
            clock[0] = now
        tracker.charge(cost)


def assert_within_one_trial(tracker: BudgetTracker) -> None:
    biggest = max(c.charge for c in tracker.charges if not c.overhead)
    amount = tracker.budget.amount
    assert tracker.device_seconds <= amount + biggest, "overran by more than one trial"
    assert amount - tracker.device_seconds < biggest, "stopped more than one trial short"
    assert not tracker.can_start()


@pytest.mark.parametrize("seed", range(20))
def test_sequential_search_stops_within_one_trial(seed: int) -> None:
    tracker = BudgetTracker("1000s")
    run_search(tracker, noisy(random.Random(seed)))
    assert_within_one_trial(tracker)
    # one at a time, the overrun is only the last trial's excess over the estimate
    assert tracker.overrun < tracker.charges[-1].charge
    assert tracker.left < tracker.estimate_next()
    assert 80 <= tracker.trials <= 125


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("workers", [2, 4])
def test_parallel_search_stops_within_one_trial(seed: int, workers: int) -> None:
    tracker = BudgetTracker("1000gpu-s" if seed % 2 else "1000s")
    gpus = 1 if seed % 2 else 0
    run_search(tracker, noisy(random.Random(seed), gpus=gpus), workers=workers)
    assert_within_one_trial(tracker)
    assert tracker.left < tracker.estimate_next()


@pytest.mark.parametrize("seed", range(10))
def test_search_with_drifting_costs_stops_within_one_trial(seed: int) -> None:
    """Costs grow from 5 to about 25 s as the sampler moves to bigger networks; the recent-window estimate
    follows them."""
    rng = random.Random(seed)
    step = [0]

    def draw() -> TrialCost:
        step[0] += 1
        return TrialCost.of((5.0 + 0.1 * step[0]) * rng.uniform(0.9, 1.1))

    tracker = BudgetTracker("3000s")
    run_search(tracker, draw, workers=1 + seed % 4)
    assert_within_one_trial(tracker)


def test_multi_gpu_trials_charge_every_gpu() -> None:
    tracker = BudgetTracker("1gpu-hours")
    run_search(tracker, lambda: TrialCost.of(60.0, gpus=4))
    assert tracker.trials == 15 and tracker.device_seconds == 3600.0 and tracker.exhausted


def test_trials_budget_runs_exactly_n_trials() -> None:
    for workers in (1, 3, 8):
        tracker = BudgetTracker("10trials")
        assert run_search(tracker, noisy(random.Random(workers)), workers=workers) == 10
        assert tracker.trials == 10 and tracker.exhausted and tracker.spent == 10
    tracker = BudgetTracker("10trials")
    assert tracker.can_start(pending=9) and not tracker.can_start(pending=10)


def test_wall_budget_uses_the_clock() -> None:
    clock = [0.0]
    tracker = BudgetTracker("1000wall-s", clock=lambda: clock[0])
    run_search(tracker, noisy(random.Random(0)), workers=4, clock=clock)
    # four trials at a time of about 10 s each: about 400 trials in 1000 s of wall time
    assert 1000 - 12 < tracker.elapsed <= 1000 + 12
    assert 300 < tracker.trials < 450
    assert not tracker.can_start()


def test_no_estimate_before_the_first_trial_ends() -> None:
    tracker = BudgetTracker("1h")
    assert tracker.estimate_next() is None and tracker.projected_trials() is None
    assert tracker.can_start() and not tracker.can_start(pending=1)  # the first trial runs alone
    tracker.charge(TrialCost.of(600.0))
    assert tracker.estimate_next() == 600.0
    assert tracker.can_start(pending=4) and not tracker.can_start(pending=5)
    with pytest.raises(ValueError, match="pending"):
        tracker.can_start(pending=-1)


def test_estimate_is_the_mean_of_the_last_window_trials() -> None:
    tracker = BudgetTracker("1day", window=3)
    for seconds in (100.0, 1.0, 2.0, 3.0):
        tracker.charge(TrialCost.of(seconds))
    assert tracker.estimate_next() == 2.0
    tracker.charge(TrialCost.of(50.0, gpus=2))
    assert tracker.estimate_next() == (2.0 + 3.0 + 100.0) / 3
    with pytest.raises(ValueError, match="window"):
        BudgetTracker("1h", window=0)


def test_projected_trials() -> None:
    tracker = BudgetTracker("100s")
    tracker.charge(TrialCost.of(10.0))
    tracker.charge(TrialCost.of(14.0))
    assert tracker.projected_trials() == 2 + 76 // 12
    assert BudgetTracker("7trials").projected_trials() == 7
    clock = [0.0]
    wall = BudgetTracker("100wall-s", clock=lambda: clock[0])
    for _ in range(4):
        wall.charge(TrialCost.of(5.0))
    clock[0] = 10.0
    assert wall.projected_trials() == 40  # 4 trials in 10 s
    assert BudgetTracker("1h").summary().startswith("budget 1h: 0 s of 1 h of device time spent on 0 trials")


def test_supernet_training_is_charged_but_is_no_trial() -> None:
    tracker = BudgetTracker("1gpu-hours")
    tracker.charge(TrialCost.of(1200.0, gpus=1, label="supernet training", overhead=True))
    assert tracker.trials == 0 and tracker.spent == 1200.0 and tracker.overhead_seconds == 1200.0
    assert tracker.estimate_next() is None
    tracker.charge(TrialCost.of(60.0, gpus=1))
    assert tracker.estimate_next() == 60.0
    assert tracker.projected_trials() == 1 + (3600 - 1260) // 60
    run_search(tracker, lambda: TrialCost.of(60.0, gpus=1))
    assert tracker.trials == 40 and tracker.device_seconds == 3600.0
    assert "overhead (20 min)" in tracker.summary()
    # a trials budget records overhead but does not spend trials on it
    trials = BudgetTracker("5trials")
    trials.charge(TrialCost.of(1200.0, label="supernet training", overhead=True))
    assert trials.spent == 0 and trials.can_start(pending=4)


def test_summary_reports_the_projection() -> None:
    tracker = BudgetTracker("8gpu-days")
    for _ in range(3):
        tracker.charge(TrialCost.of(1800.0, gpus=8))
    line = tracker.summary()
    assert line.startswith("budget 8gpu-days: 12 h of 8 days of GPU time spent on 3 trials")
    assert "a trial takes about 4 h of GPU time" in line and "about 48 trials in all" in line
    assert "10 trials ended" in _charged("10trials", 10).summary()


def _charged(budget: str, n: int) -> BudgetTracker:
    tracker = BudgetTracker(budget)
    for _ in range(n):
        tracker.charge(TrialCost.of(1.0))
    return tracker


# -- devices -------------------------------------------------------------------------------------------------


def test_gpu_budget_on_a_cpu_only_machine_fails_at_once() -> None:
    tracker = BudgetTracker("8gpu-days")
    with pytest.raises(ValueError) as info:
        tracker.check_device("cpu")
    assert str(info.value) == (
        "budget 8gpu-days counts GPU time but no GPU is available; give a cpu-hours or plain time budget "
        "such as 6cpu-hours or 45min"
    )
    tracker.check_device("gpu")
    with pytest.raises(ValueError, match=r"counts GPU time but trial 3 ran on CPU"):
        tracker.charge(TrialCost.of(10.0, label="trial 3"))
    assert tracker.charges == ()


def test_cpu_budget_refuses_gpu_trials_and_plain_budgets_take_any() -> None:
    with pytest.raises(ValueError, match="counts CPU time but the trials would run on a GPU"):
        BudgetTracker("6cpu-hours").check_device("gpu")
    with pytest.raises(ValueError, match="'gpu' or 'cpu'"):
        BudgetTracker("6cpu-hours").check_device("tpu")
    for budget in ("45min", "2wall-hours", "200trials"):
        tracker = BudgetTracker(budget)
        tracker.check_device("gpu")
        tracker.check_device("cpu")
        tracker.charge(TrialCost.of(10.0, gpus=2))
        tracker.charge(TrialCost.of(10.0))
        assert tracker.device_seconds == 30.0


# -- resuming ------------------------------------------------------------------------------------------------


def test_resume_continues_with_what_was_spent() -> None:
    rng = random.Random(0)
    tracker = BudgetTracker("1000s")
    tracker.charge(TrialCost.of(100.0, label="supernet training", overhead=True))
    for _ in range(30):
        tracker.charge(noisy(rng)())
    state = json.loads(json.dumps(tracker.to_dict()))
    assert state["budget"] == "1000s" and len(state["charges"]) == 31
    resumed = BudgetTracker.from_dict(state)
    assert resumed.charges == tracker.charges
    assert resumed.spent == tracker.spent and resumed.trials == 30
    assert resumed.estimate_next() == tracker.estimate_next()
    run_search(resumed, noisy(rng))
    assert_within_one_trial(resumed)
    assert 30 + 50 < resumed.trials < 30 + 100  # about 900 s of 10 s trials were left, not 1000 s

    bigger = BudgetTracker.from_dict(state, budget="2000s")
    assert bigger.budget == Budget.parse("2000s") and bigger.spent == tracker.spent
    with pytest.raises(ValueError, match="counts GPU time"):
        BudgetTracker.from_dict(state, budget="1gpu-days")


def test_resume_keeps_the_wall_time_elapsed() -> None:
    clock = [100.0]
    tracker = BudgetTracker("1wall-hours", clock=lambda: clock[0])
    clock[0] = 1300.0
    state = tracker.to_dict()
    assert state["elapsed"] == 1200.0
    clock2 = [5.0]
    resumed = BudgetTracker.from_dict(state, clock=lambda: clock2[0])
    assert resumed.elapsed == 1200.0
    clock2[0] = 605.0
    assert resumed.spent == 1800.0 and resumed.left == 1800.0 and not resumed.exhausted


# -- import cost ---------------------------------------------------------------------------------------------


def test_importing_the_budget_imports_nothing_heavy() -> None:
    code = (
        "import sys, nas.search, nas.study.budget; "
        "heavy = sorted(m for m in ('torch', 'optuna', 'ray', 'numpy') if m in sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_ladder_projects_its_promotions_into_the_trials_left() -> None:
    """Six cheap rung-0 trials (1 s each) on an eta=3, 3-rung ladder: the plain mean would buy one trial per
    second left, but a third of the architectures go on to rung 1 (2 s more: 2 rung-0 units of images) and
    a ninth to rung 2 (6 s more): 2.33 s and 1.44 trials per architecture."""
    tracker = BudgetTracker("10min", ladder=(3, 3))
    plain = BudgetTracker("10min")
    for n in range(6):
        for t in (tracker, plain):
            t.charge(TrialCost(1.0, label=f"trial {n}", rung=0))
    per_architecture_cost, per_architecture_trials = 1 + 2 / 3 + 6 / 9, 1 + 1 / 3 + 1 / 9
    expected = 6 + math.floor(594 / (per_architecture_cost / per_architecture_trials))
    assert plain.projected_trials() == 600
    assert tracker.projected_trials() == expected
    # once rung 1 has trials of its own, their measured cost replaces the images-based guess
    tracker.charge(TrialCost(5.0, label="trial 6", rung=1))
    mean_trial = (1 + 5 / 3 + 6 / 9) / per_architecture_trials  # rung 2 still rung 0's mean times 6
    assert tracker.projected_trials() == 7 + math.floor(589 / mean_trial)
    assert TrialCost.from_dict(TrialCost(1.0, rung=2).to_dict()).rung == 2

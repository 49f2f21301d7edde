"""The pieces behind failing trials: the per-trial deadline (in any thread), the recorded reason of each kind
of failure, and which RUNNING trials are lost."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from types import SimpleNamespace

import optuna
import pytest
import torch
from optuna.trial import TrialState

from evaluators.proxy import TrainingDiverged
from nas.search import liveness
from nas.search.liveness import fail_lost_trials, lost_reason
from nas.study.budget import BudgetTracker, TrialCost
from nas.system import failures
from nas.system.failures import TrialTimeout, deadline, failure_reason
from nas.system.processes import process_alive, this_process


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(1000))


def _spin_until_stopped() -> None:
    """Python work only a deadline ends (pytest's own timeout, if none does): no test here depends on how
    much work fits in some seconds."""
    while True:
        sum(range(1000))


class _HandTimer:
    def __init__(self, seconds: float, expire: Callable[[], None]) -> None:
        self.seconds, self.expire = seconds, expire

    def cancel(self) -> None:
        pass  # a late call of ``expire`` is what the deadline must ignore: the tests make one


class HandClock:
    """``failures.start_timer`` driven by the test: a deadline's time is up when :meth:`fire` says, as a real
    timer does it (``expire`` called from another thread), whatever the machine's speed."""

    def __init__(self) -> None:
        self.timers: list[_HandTimer] = []

    def __call__(self, seconds: float, expire: Callable[[], None]) -> _HandTimer:
        self.timers.append(_HandTimer(seconds, expire))
        return self.timers[-1]

    def fire(self) -> None:
        """The latest timer's time is up."""
        thread = threading.Thread(target=self.timers[-1].expire)
        thread.start()
        thread.join()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> HandClock:
    hand = HandClock()
    monkeypatch.setattr(failures, "start_timer", hand)
    return hand


def test_deadline_interrupts_python_work_in_the_main_thread() -> None:
    start = time.perf_counter()
    with pytest.raises(TrialTimeout, match=r"exceeded its 0.2 s timeout"), deadline(0.2):
        _spin_until_stopped()
    assert time.perf_counter() - start >= 0.2  # not before its time


def test_deadline_interrupts_a_worker_thread_as_ray_runs_trials() -> None:
    caught: list[BaseException] = []

    def trial() -> None:
        try:
            with deadline(0.2):
                _spin_until_stopped()
        except TrialTimeout as err:
            caught.append(err)

    worker = threading.Thread(target=trial, daemon=True)
    worker.start()
    worker.join(120)  # a margin for a busy machine: the deadline ends it after 0.2 s
    assert len(caught) == 1 and not worker.is_alive()


def test_deadline_leaves_a_fast_block_alone_and_does_not_fire_later(clock: HandClock) -> None:
    with deadline(0.3):
        _spin(0.01)
    clock.fire()  # the timer's time comes after the block (a cancel that lost the race): nothing happens
    _spin(0.1)  # where a stale exception would land
    with deadline(None):
        _spin(0.01)
    assert len(clock.timers) == 1  # no limit, no timer


def test_a_timeout_that_escapes_exit_is_closed_and_worded_as_every_other(
    clock: HandClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python checks for a pending exception at the first bytecode of ``__exit__``, before its code can take
    the deadline's back: where the block ends as the deadline fires, the TrialTimeout leaves the ``with``
    bare and the deadline open. The trial body closes it and words it as every other timeout, so that a run
    of timeouts is one same failure (seen once on Ray as "trial exceeded its time limit")."""
    from nas.search import trial
    from nas.system import unraisable

    guard = deadline(0.3)
    guard.__enter__()
    with pytest.raises(TrialTimeout) as bare:
        clock.fire()
        _spin_until_stopped()  # the exception leaves here, as it would at __exit__'s first bytecode
    assert str(bare.value) == ""
    escaped = guard.escaped()
    assert failure_reason(escaped) == "timeout: TrialTimeout: trial exceeded its 0.3 s timeout"
    assert not guard._active and (threading.get_ident(), TrialTimeout) not in unraisable._open
    clock.fire()  # the timer's time again (a cancel that lost the race): nothing lands
    _spin(0.05)

    class Escaping(deadline):  # __exit__ as it runs when the exception lands on its first bytecode
        def __exit__(self, *exc: object) -> None:
            if exc[0] is TrialTimeout:
                raise TrialTimeout

    monkeypatch.setattr(trial, "deadline", Escaping)
    runner = SimpleNamespace(settings=SimpleNamespace(trial_timeout=0.3, measures_latency=True), limits=None)
    runner.measure = lambda arch: (clock.fire(), _spin_until_stopped())
    with pytest.raises(TrialTimeout, match=r"^trial exceeded its 0\.3 s timeout$"):
        trial._evaluate(runner, None, None, None)
    assert (threading.get_ident(), TrialTimeout) not in unraisable._open  # closed by the trial body


def test_a_block_that_swallows_the_timeout_still_fails(clock: HandClock) -> None:
    # the inner suppress is a library catching everything
    with pytest.raises(TrialTimeout), deadline(0.1), contextlib.suppress(TrialTimeout):
        clock.fire()
        _spin_until_stopped()


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (TrialTimeout("trial exceeded its 3 s timeout"), "timeout: "),
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), "out of memory: "),
        (
            RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"),
            "out of ",
        ),
        (MemoryError(), "out of memory: MemoryError"),
        (TrainingDiverged(1, 3, float("nan"), "a"), "diverged: TrainingDiverged: training diverged for a"),
        (ValueError("bad\nsecond line"), "error: ValueError: bad"),
        (KeyboardInterrupt(), "interrupted: "),
    ],
)
def test_failure_reason_names_the_kind_in_one_line(error: BaseException, kind: str) -> None:
    reason = failure_reason(error)
    assert reason.startswith(kind) and "\n" not in reason and len(reason) <= 500


def _running_trial(study: optuna.Study, here: bool = False, **attrs: object) -> optuna.trial.FrozenTrial:
    """A RUNNING trial with these records; ``here``: as if this process were running it now."""
    trial = study.ask()
    trial.suggest_int("x", 0, 9)
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    trial.set_user_attr("arch_json", "{}")
    if here:
        liveness._RUNNING_HERE.add(trial._trial_id)
    return study._storage.get_trial(trial._trial_id)


def test_lost_trials_are_told_apart_from_live_ones() -> None:
    study = optuna.create_study()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    me = this_process()
    gone = {**me, "pid": dead.pid, "started": "1"}
    reused = {**me, "started": "1"}  # our pid, but another process's start time
    elsewhere = {**me, "machine": "other-host/boot/pid:[1]", "host": "other-host"}
    now = datetime.now().timestamp()
    assert lost_reason(_running_trial(study, here=True, worker=me)) is None
    # this process, but not running it now: left by an earlier search in the same Python session
    assert "earlier search in this process" in lost_reason(_running_trial(study, worker=me))
    assert process_alive(me) is True and process_alive(gone) is False and process_alive(elsewhere) is None
    assert "stopped mid-trial" in lost_reason(_running_trial(study, worker=gone))
    assert "stopped mid-trial" in lost_reason(_running_trial(study, worker=reused))
    fresh = _running_trial(study, worker=elsewhere, heartbeat=now - 10)
    stale = _running_trial(study, worker=elsewhere, heartbeat=now - 600)
    assert lost_reason(fresh, now) is None
    assert "no heartbeat from its worker on other-host for 600 s" in lost_reason(stale, now)
    # no worker record: killed between taking the trial and recording itself, known after a short grace
    unclaimed = _running_trial(study)
    assert lost_reason(unclaimed, now + 5) is None
    assert liveness.UNCLAIMED_AFTER_SECONDS < liveness.LOST_AFTER_SECONDS
    assert "never recorded itself on it" in lost_reason(unclaimed, now + liveness.UNCLAIMED_AFTER_SECONDS + 5)


def test_a_worker_in_another_time_zone_is_judged_by_unix_times() -> None:
    """A ``datetime_start`` written as the asking machine's naive local time (before Optuna 5, and in the
    studies written then) makes a worker 5 hours west of the reader look 5 hours late. Before its first
    heartbeat a trial is judged by its worker's ``since``, a Unix time."""
    study = optuna.create_study()
    now = time.time()
    elsewhere = {**this_process(), "machine": "other-host/boot/pid:[1]", "host": "other-host"}
    west = _running_trial(study, worker={**elsewhere, "since": now - 10})
    west.datetime_start = west.datetime_start - timedelta(hours=5)  # its naive local time, read here
    assert lost_reason(west, now) is None
    silent = _running_trial(study, worker={**elsewhere, "since": now - 600})
    assert "no heartbeat from its worker on other-host for 600 s" in lost_reason(silent, now)


def test_fail_lost_trials_fails_each_once_and_enqueues_the_rerun() -> None:
    study = optuna.create_study()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lost = _running_trial(study, worker={**this_process(), "pid": dead.pid}, baseline="ResNet-26")
    live = _running_trial(study, here=True, worker=this_process())
    assert fail_lost_trials(study) == [lost.number]
    assert fail_lost_trials(study) == []  # already failed: nothing to do twice
    states = {t.number: t for t in study.get_trials(deepcopy=False)}
    assert states[lost.number].state == TrialState.FAIL
    assert states[lost.number].user_attrs["fail_reason"].startswith("lost: ")
    assert states[lost.number].user_attrs["cost"]["overhead"] is True  # not one of a trials budget's
    assert states[live.number].state == TrialState.RUNNING
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    assert len(waiting) == 1 and waiting[0].user_attrs == {"rerun_of": lost.number, "baseline": "ResNet-26"}
    rerun = study.ask()
    assert rerun.suggest_int("x", 0, 9) == lost.params["x"]  # the same architecture again


def test_a_lost_trial_is_charged_on_the_gpus_its_worker_held() -> None:
    """A lost trial used to be charged as CPU time whatever ran it: in a study with a GPU budget
    (``8gpu-days``) every worker's budget then refused the charge ("counts GPU time but lost trial N ran on
    CPU") at its next look at the study, and the study could not go on."""
    study = optuna.create_study()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    trial = study.ask()
    with liveness.Heartbeat(trial, gpus=2):  # what a worker records as it takes a trial
        recorded = study._storage.get_trial(trial._trial_id).user_attrs["worker"]
    study.tell(trial, state=TrialState.FAIL)
    assert recorded["gpus"] == 2
    lost = _running_trial(study, worker={**recorded, "pid": dead.pid}, heartbeat=recorded["since"] + 3)
    assert fail_lost_trials(study) == [lost.number]
    cost = TrialCost.from_dict(study._storage.get_trial(lost._trial_id).user_attrs["cost"])
    assert (cost.device, cost.devices, cost.overhead) == ("gpu", 2, True)
    assert cost.seconds == pytest.approx(3.0)
    BudgetTracker("8gpu-days").charge(cost)  # refused before, as CPU time


def test_the_deadline_waits_for_an_import_in_progress(
    tmp_path, monkeypatch: pytest.MonkeyPatch, clock: HandClock
) -> None:
    """A timeout inside an import would leave a half-built module that breaks every later trial."""
    (tmp_path / "slow_module_for_deadline.py").write_text(
        "from deadline_test_clock import fire\n"
        "fire()  # the trial's time is up in the middle of this import\n"
        "DONE = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(sys.modules, "deadline_test_clock", SimpleNamespace(fire=clock.fire))
    monkeypatch.delitem(sys.modules, "slow_module_for_deadline", raising=False)
    with pytest.raises(TrialTimeout), deadline(0.05):
        import slow_module_for_deadline  # noqa: F401

        assert len(clock.timers) == 2  # the deadline waits (a retry timer) instead of raising in the import
        clock.fire()  # the retry, after the import
        _spin_until_stopped()
    assert sys.modules["slow_module_for_deadline"].DONE


def test_a_timeout_delivered_as_a_deadline_closes_keeps_its_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trial timeout can arrive at any bytecode of the deadline's own exit (the block ended as the timer
    fired, or a redelivery sent a second): it escaped bare, and its reason read "trial exceeded its time
    limit" beside the others' "trial exceeded its 0.01 s timeout", which broke a Ray search's failure
    streak (13 trials where 10 stop it). The exit closes again and raises the timeout with its message."""
    hook = sys.unraisablehook
    closes = []
    real_close = deadline._close

    def close(self: deadline) -> bool:
        closes.append(1)
        fired = real_close(self)
        if len(closes) == 1:
            raise TrialTimeout  # as PyThreadState_SetAsyncExc delivers it: the class, bare
        return fired

    monkeypatch.setattr(deadline, "_close", close)
    refused = pytest.raises(TrialTimeout, match=r"^trial exceeded its 0\.05 s timeout$")
    with refused, deadline(0.05):
        time.sleep(0.3)  # the timeout lands here: it fired
    assert len(closes) == 2 and sys.unraisablehook is hook

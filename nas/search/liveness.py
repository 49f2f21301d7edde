"""Which running trials of a shared Optuna study are still alive, and what to do with those that are not.

A worker killed mid-trial (SIGKILL, out-of-memory killer, a lost machine) leaves its trial RUNNING in the
storage for ever. Every trial therefore records, as user attributes, the ``worker`` that runs it (host, a
machine id, pid, the process's start time and ``since``, the Unix time it took the trial) and a
``heartbeat`` (Unix time) refreshed every :data:`HEARTBEAT_SECONDS` while it runs. Times are Unix times:
before Optuna 5 a trial's ``datetime_start`` was the asking machine's naive local time, and in a study
written then it still is, hours off for a machine in another time zone. A RUNNING trial is *lost* when

- its worker ran on this machine and that process is gone (or the pid now belongs to a younger process):
  known at once, so a search resumed after a kill recovers immediately; or
- its last heartbeat (its ``since``, before the first one) is older than :data:`LOST_AFTER_SECONDS`: a
  worker on another machine that stopped without a word. Heartbeats are the writer's clock, so machines
  sharing a study should keep their clocks within a minute (NTP); or
- it has no worker record and started more than :data:`UNCLAIMED_AFTER_SECONDS` ago (by ``datetime_start``,
  the only time it has): its worker was killed between taking the trial (Optuna's ``ask``, one transaction)
  and recording itself on it (the next write, milliseconds later), so no process can be running it.

:func:`fail_lost_trials` marks each lost trial FAIL with a ``fail_reason`` starting ``lost:`` and enqueues
its architecture again (``rerun_of`` names the lost trial), so the search re-runs it under a new number. Two
workers finding the same lost trial race on the state change; only the winner enqueues the re-run. A lost
trial is charged as overhead (the time up to its last heartbeat): it spends a time budget, but does not count
as one of a ``trials`` budget's trials.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from nas.study.budget import TrialCost
from nas.study.optuna_private import storage_of
from nas.study.optuna_private import trial_id as trial_key
from nas.system.processes import process_alive, this_process

__all__ = [
    "HEARTBEAT_SECONDS",
    "LOST_AFTER_SECONDS",
    "UNCLAIMED_AFTER_SECONDS",
    "Heartbeat",
    "enqueue_arch",
    "enqueue_rerun",
    "fail_lost_trials",
    "lost_reason",
]

HEARTBEAT_SECONDS = 30.0
LOST_AFTER_SECONDS = 120.0
UNCLAIMED_AFTER_SECONDS = HEARTBEAT_SECONDS  # ask to worker record takes milliseconds; clocks may differ


_RUNNING_HERE: set[int] = set()  # storage ids of the trials this process is running now


def _taken(trial: FrozenTrial, now: float) -> float:
    """When ``trial``'s worker took it, as a Unix time: its worker record's ``since``; without one (a record
    written before ``since``, or none yet), Optuna's ``datetime_start``; ``now`` if it has neither."""
    since = (trial.user_attrs.get("worker") or {}).get("since")
    if since is not None:
        return float(since)
    return trial.datetime_start.timestamp() if trial.datetime_start else now


def lost_reason(
    trial: FrozenTrial, now: float | None = None, after: float = LOST_AFTER_SECONDS
) -> str | None:
    """Why the RUNNING ``trial`` is lost, or None while it may still be running."""
    now = time.time() if now is None else now
    worker = trial.user_attrs.get("worker") or {}
    host = worker.get("host", "an unknown host")
    if worker:
        alive = process_alive(worker)
        if alive and worker.get("pid") == os.getpid() and trial_key(trial) not in _RUNNING_HERE:
            # this very process, which runs no such trial now: an earlier search in it (the Python API)
            # ended without telling this trial's outcome
            return "lost: an earlier search in this process ended without finishing it"
        if alive is False:
            pid = worker.get("pid")
            return f"lost: its worker (pid {pid} on {host}) stopped mid-trial (killed or crashed)"
        if alive:
            return None
    taken = _taken(trial, now)
    if not worker:
        if now - taken > min(after, UNCLAIMED_AFTER_SECONDS):
            return (
                f"lost: its worker took it {now - taken:.0f} s ago but never recorded itself on it "
                "(killed right after taking it)"
            )
        return None
    last = float(trial.user_attrs.get("heartbeat", taken))
    if now - last > after:
        return (
            f"lost: no heartbeat from its worker on {host} for {now - last:.0f} s "
            "(killed, crashed or its machine stopped)"
        )
    return None


def enqueue_rerun(study: optuna.Study, trial: FrozenTrial) -> None:
    """Enqueue ``trial``'s architecture again (``rerun_of`` names it; a ladder's promotion keeps its rung and
    lineage). Nothing is enqueued for a trial stopped before its architecture was sampled: nothing of it was
    evaluated, and the sampler will propose anew."""
    if not trial.user_attrs.get("arch_json") and not trial.system_attrs.get("fixed_params"):
        return
    attrs: dict[str, Any] = {"rerun_of": trial.number}
    if trial.user_attrs.get("rung"):  # a promotion continues its lineage; a rung-0 re-run starts its own
        attrs["rung"], attrs["lineage"] = trial.user_attrs["rung"], trial.user_attrs["lineage"]
    enqueue_arch(study, trial, attrs)


def enqueue_arch(study: optuna.Study, trial: FrozenTrial, attrs: dict[str, Any]) -> None:
    """Queue ``trial``'s architecture as a new trial with user attributes ``attrs``: its suggested
    parameters over those it was enqueued with; a baseline (or an enqueued network) keeps its name."""
    if trial.user_attrs.get("baseline"):
        attrs = {**attrs, "baseline": trial.user_attrs["baseline"]}
    fixed = dict(trial.system_attrs.get("fixed_params") or {})
    study.enqueue_trial({**fixed, **trial.params}, user_attrs=attrs)


def fail_lost_trials(
    study: optuna.Study, trials: Sequence[FrozenTrial] | None = None, after: float = LOST_AFTER_SECONDS
) -> list[int]:
    """Mark the study's lost RUNNING trials FAIL (reason recorded) and enqueue their re-runs; returns the
    numbers of the trials this call failed. ``trials``: the study's trials as just read, if at hand."""
    failed = []
    now = time.time()
    if trials is None:
        trials = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    for trial in trials:
        if trial.state != TrialState.RUNNING:
            continue
        reason = lost_reason(trial, now, after)
        if reason is None:
            continue
        storage, trial_id = storage_of(study), trial_key(trial)
        try:
            start = _taken(trial, now)
            seconds = max(0.0, float(trial.user_attrs.get("heartbeat", start)) - start)
            gpus = int((trial.user_attrs.get("worker") or {}).get("gpus", 0))  # as its worker held them
            cost = TrialCost.of(seconds, gpus=gpus, label=f"lost trial {trial.number}", overhead=True)
            storage.set_trial_user_attr(trial_id, "cost", cost.to_dict())
            storage.set_trial_user_attr(trial_id, "fail_reason", reason)
            if not storage.set_trial_state_values(trial_id, TrialState.FAIL):
                continue
        except UpdateFinishedTrialError:
            continue  # it finished meanwhile, or another worker failed it first
        failed.append(trial.number)
        enqueue_rerun(study, trial)
    return failed


class Heartbeat:
    """Records this worker (and the ``gpus`` the trial holds, which a lost trial is charged on) on ``trial``
    and refreshes its ``heartbeat`` every ``interval`` seconds from a daemon thread until the block ends (a
    context manager around one trial's evaluation)."""

    def __init__(self, trial: optuna.Trial, gpus: int = 0, interval: float = HEARTBEAT_SECONDS) -> None:
        self.trial, self.gpus, self.interval = trial, gpus, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="nas-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        _RUNNING_HERE.add(trial_key(self.trial))
        # its first heartbeat is the trial's start, ``since``
        self.trial.set_user_attr("worker", {**this_process(), "since": time.time(), "gpus": self.gpus})
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.trial.set_user_attr("heartbeat", time.time())
            except UpdateFinishedTrialError:
                return
            except Exception:  # a storage hiccup: the next beat tries again
                continue

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        _RUNNING_HERE.discard(trial_key(self.trial))

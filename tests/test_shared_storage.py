"""Several worker processes on one study: three against a real PostgreSQL server, two sharing a journal
file. No trial is duplicated or lost, and the study's total is the sum of what the workers say they ran."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
from postgres_server import PostgresServer

from nas.study.settings import SearchSettings
from nas.study.storage import open_storage

pytestmark = pytest.mark.integration
BUDGET = 150


def _worker(runs: Path, storage: str, resume: bool) -> subprocess.Popen:
    # coatnet's MACs counted at 224 px on the meta device: a trial takes about 0.1 s, so the first worker's
    # 150 trials outlast the others' start-up (seconds: imports), and those started once the baselines exist
    # still find trials to run
    command = [
        sys.executable, "-m", "nas", "search", "--space", "coatnet", "--evaluator", "complexity",
        "--objectives", "macs,params", "--budget", f"{BUDGET}trials", "--macs-img-size", "224",
        "--runs-dir", str(runs), "--study", "shared", "--storage", storage, *(["--resume"] if resume else []),
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _run_workers(runs: Path, storage: str, count: int) -> list[int]:
    """Start one worker, the others with --resume once the study and its baselines exist (as a user adds
    workers); returns the number of trials each worker says it ran."""
    settings = SearchSettings(
        space="coatnet",
        evaluator="complexity",
        objectives=("macs", "params"),
        storage=storage,
        study="shared",
    )
    first = _worker(runs, storage, resume=False)
    deadline = time.time() + 600  # a stalled worker, not a slow machine
    opened = open_storage(settings)[0]  # one connection pool for the polling, not one per look
    while True:
        try:
            study = optuna.load_study(study_name="shared", storage=opened)
            if len(study.get_trials(deepcopy=False)) >= 9:
                break
        except KeyError:  # not created yet
            pass
        assert first.poll() is None and time.time() < deadline, first.communicate()[0][-3000:]
        time.sleep(0.2)
    workers = [first] + [_worker(runs, storage, resume=True) for _ in range(count - 1)]
    ran = []
    for proc in workers:
        output, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, output[-3000:]
        ran.append(int(re.search(r"this worker ran (\d+) trials?", output).group(1)))
    return ran


def _check_study(storage: str, ran: list[int]) -> None:
    settings = SearchSettings(
        space="coatnet",
        evaluator="complexity",
        objectives=("macs", "params"),
        storage=storage,
        study="shared",
    )
    study = optuna.load_study(study_name="shared", storage=open_storage(settings)[0])
    trials = [t for t in study.get_trials(deepcopy=False) if t.state.name != "WAITING"]
    numbers = [t.number for t in trials]
    assert sorted(numbers) == list(range(len(trials)))  # every number once
    assert all(t.state.name == "COMPLETE" for t in trials)
    assert len(trials) == sum(ran)  # the study holds exactly what the workers ran
    assert all(n >= 1 for n in ran), ran  # each worker took part
    # a sample that repeats an architecture the study evaluated is answered from it and not charged; of the
    # charged trials, the budget's last may start on two workers at once: at most one more per extra worker
    charged = [t for t in trials if t.user_attrs.get("repeat_of") is None]
    assert BUDGET <= len(charged) <= BUDGET + len(ran) - 1
    pids = Counter(t.user_attrs["worker"]["pid"] for t in trials)
    assert sorted(pids.values()) == sorted(ran)  # each trial recorded by the one worker that ran it
    baselines = Counter(t.user_attrs.get("baseline") for t in trials if t.user_attrs.get("baseline"))
    assert len(baselines) == 9 and set(baselines.values()) == {1}  # each baseline once


def test_three_workers_share_a_postgresql_study(postgres: PostgresServer, tmp_path: Path) -> None:
    ran = _run_workers(tmp_path, postgres.url, 3)
    _check_study(postgres.url, ran)


def test_two_processes_share_a_journal_file(tmp_path: Path) -> None:
    storage = f"journal:{tmp_path / 'shared.log'}"
    ran = _run_workers(tmp_path, storage, 2)
    _check_study(storage, ran)

"""A Ray search that starts its own local Ray shuts it down on its way out, whichever way that is: no Ray
process of it outlives the search in a long-lived Python process (a notebook, a service)."""

from __future__ import annotations

import itertools
import signal
from pathlib import Path

import pytest
from cheap_search import cheap_settings
from processes import descendants

from nas.api import run_search

pytestmark = pytest.mark.integration


def _ray_children() -> list[str]:
    """This process's children that belong to a Ray node (GCS, raylet, dashboard, workers)."""
    import os

    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        argv = command.split()
        cli_start = any(
            a.endswith("ray") and b == "start" for a, b in itertools.pairwise(argv)
        )  # a fixture's cluster
        started_by_init = "ray" in command and not cli_start
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and started_by_init:
            out.append(command[:80])
    return out


@pytest.mark.parametrize("ending", ["budget", "interrupted", "ctrl-c"])
def test_a_local_ray_is_shut_down_when_the_search_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    """Also, a Ctrl-C is an interruption: Tune takes SIGINT itself, saves the experiment and returns from
    fit(), which the search took for its end (exit 0, "ran no trial"), charging nothing for the trials
    that were running."""
    import ray

    from nas.search import ray_driver

    if ray.is_initialized():  # another test's
        ray.shutdown()
    if ending == "interrupted":  # SIGTERM while the driver waits on its trials

        def fit(self):
            assert _ray_children(), "no local Ray was started"
            raise KeyboardInterrupt

        monkeypatch.setattr("ray.tune.Tuner.fit", fit)
    if ending == "ctrl-c":  # as the second trial starts, the first one ended
        real = ray_driver.BudgetedSearcher.suggest

        def suggest(self, trial_id: str) -> object:
            config = real(self, trial_id)
            if isinstance(config, dict) and config["__number"] == 1:
                signal.raise_signal(signal.SIGINT)  # to Tune's handler, in this (the main) thread
            return config

        monkeypatch.setattr(ray_driver.BudgetedSearcher, "suggest", suggest)
    settings = cheap_settings(tmp_path, backend="ray", budget="2trials", baselines=False)
    outcome = run_search(settings)
    assert outcome.interrupted == (ending != "budget")
    assert not ray.is_initialized()
    assert _ray_children() == []
    if ending == "budget":
        assert len(outcome.trials) == 2
    if ending == "ctrl-c":
        ledger = ray_driver.read_ledger(ray_driver.ledger_path(settings))
        recorded = {entry["number"] for entry in ledger.trials.values()}
        charged = {
            int(o["label"].split()[-1]) for o in ledger.overhead if o["label"].startswith("interrupted")
        }
        assert recorded == {0} and charged == {1}  # the trial running at the Ctrl-C, charged
        assert len(outcome.trials) == len(recorded) and outcome.signum is None


def _alive(processes: dict[int, bytes]) -> list[str]:
    """Those of ``processes`` (pid -> start time) still running, by command line."""
    out = []
    for pid, start in processes.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fields[19] == start and fields[0] != b"Z":
            out.append(f"{pid} {command[:60]}")
    return out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_sigkilled_search_leaves_no_ray_process(tmp_path: Path) -> None:
    """The driver of a Ray search that started its own Ray is SIGKILLed mid-search: its workers and agents,
    which Ray's fate-sharing leaves running for about a minute, end within seconds (its watchdog)."""
    import signal
    import subprocess
    import sys
    import time

    command = [
        sys.executable, "-m", "nas", "search", "--space", "sasa", "--evaluator", "complexity",
        "--objectives", "macs,params", "--backend", "ray", "--budget", "10000trials", "--macs-img-size",
        "32", "--runs-dir", str(tmp_path), "--study", "killed",
    ]  # fmt: skip
    search = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ledger = tmp_path / "killed" / "ray_ledger.jsonl"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and search.poll() is None:
            tree = descendants(search.pid)
            workers = [line for line in _alive(tree) if " ray::" in f" {line.split(' ', 1)[1]}"]
            done = ledger.read_text().count('"number"') if ledger.exists() else 0
            if workers and done >= 2:  # trials have run in a Ray worker
                break
            time.sleep(0.5)
        assert search.poll() is None, "the search ended before it could be killed"
        assert workers, "no Ray worker was seen"
        tree = descendants(search.pid)  # the whole Ray of this search: GCS, raylet, agents, workers
        search.send_signal(signal.SIGKILL)
        search.wait()
        deadline = time.monotonic() + 20  # Ray alone leaves workers and agents for about 60 s
        while _alive(tree) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _alive(tree) == [], "Ray processes outlived the SIGKILLed search"
    finally:
        if search.poll() is None:
            search.kill()
            search.wait()

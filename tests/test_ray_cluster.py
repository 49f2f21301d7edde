"""A real two-node Ray cluster: a search submitted with `ray job submit` spreads its trials over both nodes,
the worker node is killed mid-search (every process at once, as if its machine were lost: no draining), and
the search ends on the head with no finished trial lost."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from ray_nodes import RAY, RayNode, wait_for_nodes

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
BUDGET = 32


def _ended_trials(temp_dir: Path) -> int:
    logs = temp_dir.glob("session_latest/logs/job-driver-*.log")
    text = "".join(p.read_text(errors="replace") for p in logs)
    return len(re.findall(r"^\s*trial\s+\d+ (?:ok|FAIL)", text, flags=re.MULTILINE))


def test_search_job_survives_losing_a_worker_node(ray_head: RayNode, tmp_path: Path) -> None:
    worker = RayNode(tmp_path, "worker", ray_head.address, num_cpus=1, env=ray_head.env).start()
    try:
        wait_for_nodes(ray_head, 2)
        runs = tmp_path / "runs"
        # coatnet at 224 px: nearly every trial counts blocks no earlier trial had (count memoizes them), so a
        # trial takes a good fraction of a second and the kill lands in one
        entry = [
            sys.executable, "-m", "nas", "search", "--space", "coatnet", "--evaluator", "complexity",
            "--objectives", "macs,params", "--budget", f"{BUDGET}trials", "--macs-img-size", "224",
            "--runs-dir", str(runs), "--study", "job", "--backend", "ray", "--address", "auto",
            "--concurrency", "2",
        ]  # fmt: skip
        job_log = tmp_path / "job.log"  # a file, not a pipe: a full pipe nobody reads would stall the job
        job = subprocess.Popen(
            [RAY, "job", "submit", "--address", ray_head.dashboard, "--working-dir", str(ROOT), "--", *entry],
            env=ray_head.env, stdout=job_log.open("w"), stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        stopped_after = None
        deadline = time.time() + 600
        while job.poll() is None:
            if time.time() > deadline:
                job.kill()
                pytest.fail(
                    "the search job did not end within 600 s:\n" + ray_head.log()
                )  # the job's driver log, as it is written: one line per ended trial
            if stopped_after is None:
                ended = _ended_trials(ray_head.temp_dir)
                if ended >= 10:
                    worker.kill()  # mid-search, as if its machine were lost: its trial dies with it
                    stopped_after = ended
            time.sleep(0.1)
        text = job_log.read_text(errors="replace")[-4000:]
        assert job.returncode == 0, text + ray_head.log()
        assert stopped_after is not None and stopped_after < BUDGET - 10, text
    finally:
        worker.stop()
    table = pd.read_csv(runs / "job" / "trials.csv", keep_default_na=False)
    assert sorted(table["number"]) == list(range(BUDGET))  # every number once: none lost, none doubled
    assert (table["state"] == "COMPLETE").all(), table[["number", "state", "fail_reason"]]
    nodes = table["node"].value_counts()
    assert len(nodes) == 2, nodes  # trials ran on both nodes ...
    finished_on_worker = nodes.min()
    assert finished_on_worker >= 1  # ... and those the stopped node finished are kept
    last = table.sort_values("number")["node"].iloc[-8:]
    assert last.nunique() == 1  # after the kill, the head alone ran the rest
    from ray.tune import ExperimentAnalysis

    retried = [t for t in ExperimentAnalysis(str(runs / "job" / "ray")).trials if t.num_failures]
    assert retried and all(t.status == "TERMINATED" for t in retried)  # the trial killed with the node


def test_a_killed_worker_process_is_retried(ray_head: RayNode, tmp_path: Path) -> None:
    """FailureConfig: a trial whose Ray worker process dies mid-trial is run again, and the search ends
    with every trial complete."""
    runs = tmp_path / "runs"
    log = tmp_path / "search.log"  # a file: a full pipe nobody reads would stall the search
    search = subprocess.Popen(
        [sys.executable, "-m", "nas", "search", "--space", "sasa", "--evaluator", "complexity",
         "--objectives", "macs,params", "--budget", "4trials", "--macs-img-size", "224",
         "--runs-dir", str(runs), "--study", "retry", "--backend", "ray", "--address", ray_head.address],
        env=ray_head.env, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    killed = None
    deadline = time.time() + 300
    while killed is None and time.time() < deadline and search.poll() is None:
        busy = subprocess.run(["pgrep", "-f", "^ray::ImplicitFunc.train"], capture_output=True, text=True)
        pids = [int(p) for p in busy.stdout.split()]
        if pids:
            time.sleep(0.2)
            subprocess.run(["kill", "-9", str(pids[0])], check=False)
            killed = pids[0]
        time.sleep(0.05)
    search.wait(timeout=600)
    output = log.read_text(errors="replace")
    assert search.returncode == 0, output[-4000:]
    assert killed is not None, "no trial was seen running"
    table = pd.read_csv(runs / "retry" / "trials.csv", keep_default_na=False)
    assert sorted(table["number"]) == list(range(4)) and (table["state"] == "COMPLETE").all()
    from ray.tune import ExperimentAnalysis

    retried = [t for t in ExperimentAnalysis(str(runs / "retry" / "ray")).trials if t.num_failures]
    assert len(retried) == 1 and retried[0].status == "TERMINATED"

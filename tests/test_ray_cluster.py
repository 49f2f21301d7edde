"""A real Ray cluster of a head and two worker nodes: a search submitted with `ray job submit` spreads its
trials over the workers, one worker is killed mid-search (every process at once, as if its machine were
lost: no draining), and the search ends on the other with no finished trial lost."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from processes import descendants
from ray_nodes import RAY, RayNode, wait_for_nodes

from nas.search.ray_driver import read_ledger

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
BUDGET = 32


def _command(pid: int) -> str:
    """``pid``'s command line ('' once it is gone); a Ray worker's is its title (ray::ImplicitFunc.train)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _nodes_of_ended_trials(ledger: Path) -> Counter[str]:
    """How many trials have ended on each node (by Ray node id), from the search's ledger as the job writes
    it (``read_ledger`` skips a last line still being written)."""
    return Counter(t["attrs"]["metrics"].get("node", "") for t in read_ledger(ledger).trials.values())


def test_search_job_survives_losing_a_worker_node(ray_head: RayNode, tmp_path: Path) -> None:
    # trials hold 2 CPUs, so they run on the two 2-CPU workers and never on the 1-CPU head, the driver's node
    # (as Ray advises for a cluster). One worker's first trial process can take seconds longer to import
    # torch than the other's, long enough for the other to run the whole search of these fast trials (seen
    # on a busy CI machine), so the node killed is the one that has finished the most trials so far
    workers = [RayNode(tmp_path, name, ray_head.address, num_cpus=2, env=ray_head.env) for name in "ab"]
    for worker in workers:
        worker.start()
    try:
        wait_for_nodes(ray_head, 3)
        node_ids = [worker.node_id for worker in workers]
        assert all(node_ids) and len(set(node_ids)) == 2, node_ids
        runs = tmp_path / "runs"
        entry = [
            sys.executable, "-m", "nas", "search", "--space", "coatnet", "--evaluator", "complexity",
            "--objectives", "macs,params", "--budget", f"{BUDGET}trials", "--macs-img-size", "224",
            "--runs-dir", str(runs), "--study", "job", "--backend", "ray", "--address", "auto",
            "--concurrency", "2", "--cpus-per-trial", "2",
        ]  # fmt: skip
        job_log = tmp_path / "job.log"  # a file, not a pipe: a full pipe nobody reads would stall the job
        job = subprocess.Popen(
            [RAY, "job", "submit", "--address", ray_head.dashboard, "--working-dir", str(ROOT), "--", *entry],
            env=ray_head.env, stdout=job_log.open("w"), stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        lost = stopped_after = None
        deadline = time.time() + 600
        while job.poll() is None:
            if time.time() > deadline:
                job.kill()
                pytest.fail("the search job did not end within 600 s:\n" + ray_head.log())
            if stopped_after is None:
                # a node whose start failed after it joined (its runtime-env agent lost a port to another
                # process) leaves one worker: killing that one would leave none, and the job would wait
                gone = [w for w in workers if w.proc is not None and w.proc.poll() is not None]
                if gone:
                    job.kill()
                    node = gone[0]
                    pytest.fail(f"worker node {node.name} exited by itself, before the kill:\n{node.log()}")
                ended = _nodes_of_ended_trials(runs / "job" / "ray_ledger.jsonl")
                if ended.total() >= 6:  # mid-search
                    lost = max(range(2), key=lambda i: ended[node_ids[i]])
                    workers[lost].kill()  # as if its machine were lost: its running trial dies with it
                    stopped_after = ended.total()
            time.sleep(0.05)
        text = job_log.read_text(errors="replace")[-4000:]
        assert job.returncode == 0, text + ray_head.log()
        assert lost is not None and stopped_after < BUDGET - 10, text
    finally:
        for worker in workers:
            worker.stop()
    table = pd.read_csv(runs / "job" / "trials.csv", keep_default_na=False)
    assert sorted(table["number"]) == list(range(len(table)))  # every number once: none lost, none doubled
    # an architecture sampled again is answered from the study (REPEAT), no trial of the budget (seen once)
    assert table["state"].isin(["COMPLETE", "REPEAT"]).all(), table[["number", "state", "fail_reason"]]
    assert (table["state"] == "COMPLETE").sum() == BUDGET
    nodes = table["node"].value_counts()
    assert set(nodes.index) == set(node_ids), nodes  # trials ran on both workers, none on the head ...
    assert nodes[node_ids[lost]] >= 1  # ... and those the lost node finished are kept
    last = table.sort_values("number")["node"].iloc[-8:]
    assert (last == node_ids[1 - lost]).all()  # after the kill, the other worker alone ran the rest
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
        # this head's workers only: another cluster's on the machine (a parallel test's) is not ours to kill
        tree = descendants(ray_head.proc.pid)
        pids = [pid for pid in tree if _command(pid).startswith("ray::ImplicitFunc.train")]
        # killed inside a trial: a worker that dies between two trials (while Tune resets the reused actor
        # for the next) fails that trial with no retry, Tune's rule for a trial not yet running (Ray 2.60)
        if pids:
            subprocess.run(["kill", "-9", str(pids[0])], check=False)
            killed = pids[0]
        time.sleep(0.01)
    search.wait(timeout=600)
    output = log.read_text(errors="replace")
    assert search.returncode == 0, output[-4000:]
    assert killed is not None, "no trial was seen running"
    table = pd.read_csv(runs / "retry" / "trials.csv", keep_default_na=False)
    assert sorted(table["number"]) == list(range(4)) and (table["state"] == "COMPLETE").all()
    from ray.tune import ExperimentAnalysis

    retried = [t for t in ExperimentAnalysis(str(runs / "retry" / "ray")).trials if t.num_failures]
    assert len(retried) == 1 and retried[0].status == "TERMINATED"

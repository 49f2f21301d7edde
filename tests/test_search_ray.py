"""The Ray Tune driver: the Optuna driver's table, resume with Tuner.restore, and a real `ray job submit`."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from nas.search.run import run_search
from nas.search.settings import SearchSettings

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]


def _settings(tmp_path: Path, **changes: object) -> SearchSettings:
    values: dict[str, object] = {
        "space": "sasa",
        "evaluator": "complexity",
        "objectives": ("macs", "params"),
        "budget": "30trials",
        "macs_img_size": 32,
        "runs_dir": str(tmp_path),
        "study": "t",
    }
    values.update(changes)
    return SearchSettings(**values)


@pytest.fixture
def local_ray():
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_thirty_trials_give_the_optuna_table_on_ray_and_resume_continues(local_ray, tmp_path: Path) -> None:
    optuna_table = run_search(_settings(tmp_path, study="o")).trials
    ray_table = run_search(_settings(tmp_path, study="r", backend="ray")).trials
    assert list(ray_table.columns) == list(optuna_table.columns)
    assert len(ray_table) == len(optuna_table) == 30
    assert sorted(ray_table["number"]) == list(range(30))
    assert (ray_table["state"] == "COMPLETE").all()
    baselines = ray_table.sort_values("number")["baseline"]
    assert list(baselines[:9]) == list(optuna_table["baseline"][:9])  # the same baselines, first

    more = run_search(_settings(tmp_path, study="r", backend="ray", budget="33trials", resume=True)).trials
    assert sorted(more["number"]) == list(range(33))  # the 30 kept, numbering continued
    kept = more.set_index("number").loc[list(range(30)), "arch"]
    assert list(kept) == list(ray_table.set_index("number").sort_index()["arch"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_ray_job_submit_to_a_local_cluster(tmp_path: Path) -> None:
    """A head node of our own (token authentication, free ports, stopped by its own SIGTERM, so a cluster the
    user runs is left alone), a search submitted to it with `ray job submit`, run with `--address auto`."""
    token = tmp_path / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {
        **os.environ,
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    env.pop("RAY_ADDRESS", None)
    ray = str(Path(sys.executable).with_name("ray"))
    dashboard = _free_port()
    log = (tmp_path / "head.log").open("w")
    head = subprocess.Popen(
        [ray, "start", "--head", "--block", f"--port={_free_port()}", "--num-cpus=2",
         "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        runs = tmp_path / "runs"
        entry = (
            f"{sys.executable} -m nas search --space sasa --evaluator complexity "
            f"--objectives macs,params --budget 4trials --macs-img-size 32 --runs-dir {runs} --study job "
            "--backend ray --address auto"
        )
        deadline = time.time() + 120
        while True:  # the dashboard's job server comes up a while after the head starts
            job = subprocess.run(
                [ray, "job", "submit", "--address", f"http://127.0.0.1:{dashboard}",
                 "--working-dir", str(ROOT), "--", *entry.split()],
                env=env, capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            if job.returncode == 0 or time.time() > deadline or head.poll() is not None:
                break
            time.sleep(3)
        head_log = (tmp_path / "head.log").read_text()
        assert job.returncode == 0, job.stdout[-3000:] + job.stderr[-3000:] + head_log[-3000:]
        table = pd.read_csv(runs / "job" / "trials.csv")
        assert len(table) == 4 and (table["state"] == "COMPLETE").all()
        assert (runs / "job" / "manifest.json").exists() and (runs / "job" / "ray").is_dir()
    finally:
        head.terminate()  # `ray start --block` stops the processes it started on SIGTERM
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
        log.close()

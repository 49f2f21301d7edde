"""Ctrl-C and SIGTERM with --workers 2: the signal reaches every worker, each records its trial cleanly
(interrupted, queued again), the table, manifest and report are written, and the exit code says which
signal (130 for SIGINT, 143 for SIGTERM). A real search in its own process group, signalled mid-run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.integration

BUDGET = 400  # far more than runs before the signal: a worker that did not stop would run for minutes


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc: Linux)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _running_and_done(db: Path) -> tuple[int, int]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as con:
            rows = dict(con.execute("SELECT state, count(*) FROM trials GROUP BY state").fetchall())
    except sqlite3.OperationalError:
        return 0, 0
    return rows.get("RUNNING", 0), rows.get("COMPLETE", 0)


@pytest.mark.parametrize(("sig", "code", "group"), [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)])
def test_a_signal_stops_every_worker_and_the_outputs_are_written(
    tmp_path: Path, sig: int, code: int, group: bool
) -> None:
    db = tmp_path / "t" / "study.db"
    errors = tmp_path / "stderr.txt"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nas", "search", "--space", "coatnet", "--evaluator", "complexity",
         "--budget", f"{BUDGET}trials", "--workers", "2", "--runs-dir", str(tmp_path), "--study", "t"],
        stdout=subprocess.DEVNULL, stderr=errors.open("w"), start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.time() + 300
        while _running_and_done(db)[0] < 2:  # both workers are at work (the helper starts later)
            assert proc.poll() is None, errors.read_text()[-3000:]
            assert time.time() < deadline, "the search made no progress"
            time.sleep(0.1)
        helpers = [c for c in _children(proc.pid) if "spawn" in Path(f"/proc/{c}/cmdline").read_text()]
        assert helpers, "the second worker is not running"
        if group:  # Ctrl-C in a terminal: the whole foreground process group
            os.killpg(proc.pid, sig)
        else:  # SIGTERM from a job scheduler: the first worker only
            proc.send_signal(sig)
        assert proc.wait(timeout=120) == code, errors.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    end = time.time() + 30
    while any(_alive(h) for h in helpers) and time.time() < end:
        time.sleep(0.1)
    assert not any(_alive(h) for h in helpers), "the second worker outlived the search"
    assert "Traceback" not in errors.read_text(), errors.read_text()[-3000:]
    table = pd.read_csv(tmp_path / "t" / "trials.csv", keep_default_na=False)
    # nothing left RUNNING (a REPEAT is a sample of an architecture already done, answered from the study:
    # with MAC counts taken in a tenth of a second, a search reaches its first repeats before the signal)
    assert set(table["state"]) <= {"COMPLETE", "FAIL", "REPEAT"} and len(table) < BUDGET
    failed = table[table["state"] == "FAIL"]
    assert failed["fail_reason"].str.startswith("interrupted:").all() and len(failed) <= 2  # one per worker
    assert (tmp_path / "t" / "manifest.json").exists() and (tmp_path / "t" / "report.html").exists()
    assert _running_and_done(db)[0] == 0

"""A full disk or a read-only run folder, for real (a small tmpfs mounted for the test, which needs root and
mount permission: skipped otherwise): one sentence naming the path and the cause, exit 1, no traceback, and
the trials the study had committed kept."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cheap_search import evaluated_trials


def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=16m", "tmpfs", str(where)):
        pytest.skip("cannot mount a tmpfs here (needs root and mount permission)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _search(runs: Path, *extra: str) -> tuple[int, str, str]:
    """``nas search`` in a process of its own: none of its files stays open in the test's (a remount read-only
    would find the file system busy)."""
    done = subprocess.run(
        [sys.executable, "-m", "nas", "search", "--space", "sasa", "--evaluator", "complexity",
         "--macs-img-size", "32", "--no-baselines", "--runs-dir", str(runs), "--study", "t", *extra],
        capture_output=True, text=True, timeout=600, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    return done.returncode, " ".join(done.stdout.split()), " ".join(done.stderr.split())


def _fill(disk: Path) -> None:
    """Write until the file system is full."""
    with open(disk / "filler", "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()


def test_a_full_disk_stops_the_search_in_one_sentence_and_keeps_the_study(small_disk: Path) -> None:
    code, out, err = _search(small_disk, "--budget", "3trials")
    assert code == 0, out + err
    _fill(small_disk)
    code, out, err = _search(small_disk, "--budget", "30trials", "--resume")
    assert code == 1, out + err
    assert "Traceback" not in out + err and err.count("error:") == 1
    assert "cannot write" in err and f"the file system holding {small_disk}" in err and "is full" in err
    assert "continue with --resume" in err
    (small_disk / "filler").unlink()  # (SQLite rolls back the cut write on next open: it needs space)
    assert evaluated_trials(small_disk / "t" / "study.db") >= 3  # committed trials kept
    code, out, err = _search(small_disk, "--budget", "6trials", "--resume")
    assert code == 0, out + err
    assert evaluated_trials(small_disk / "t" / "study.db") == 6


def test_a_read_only_run_folder_stops_the_search_in_one_sentence_and_keeps_the_study(
    small_disk: Path,
) -> None:
    code, out, err = _search(small_disk, "--budget", "3trials")
    assert code == 0, out + err
    assert _mount("-o", "remount,ro", str(small_disk))
    code, out, err = _search(small_disk, "--budget", "6trials", "--resume")
    assert code == 1, out + err
    assert "Traceback" not in out + err and err.count("error:") == 1
    assert "cannot write" in err and f"{small_disk / 't'} is on a read-only file system" in err
    assert evaluated_trials(small_disk / "t" / "study.db", "ro&immutable=1") == 3  # read-only file: no locks

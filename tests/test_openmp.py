"""The command line's OpenMP threads spin briefly at a join, then sleep (nas.system.openmp): set before torch
loads,
so that libgomp itself reads it, and never over the user's own choice."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nas.system.openmp import SPIN_COUNT, wait_briefly


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, SPIN_COUNT),
        ({"GOMP_SPINCOUNT": "5"}, "5"),  # the user's count
        ({"OMP_WAIT_POLICY": "ACTIVE"}, None),  # the user's policy decides libgomp's count
    ],
)
def test_the_spin_count_is_set_unless_the_user_chose(
    given: dict[str, str], expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    wait_briefly()
    assert os.environ.get("GOMP_SPINCOUNT") == expected


def _libgomp_spin_count() -> str:
    """The spin count libgomp read in a ``nas`` process that loads torch, started without the caller's
    OpenMP settings (``OMP_DISPLAY_ENV=VERBOSE`` has libgomp print its settings when it loads)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    command = [sys.executable, "-m", "nas", "ops", "--width", "8", "--size", "2"]
    done = subprocess.run(command, env=env | {"OMP_DISPLAY_ENV": "VERBOSE"}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip().startswith("GOMP_SPINCOUNT")]
    assert len(lines) == 1, done.stderr
    return lines[0].split("=")[1].strip().strip("'")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="torch's Linux wheels load GNU libgomp")
def test_libgomp_in_a_nas_process_reads_the_count() -> None:
    probe = [sys.executable, "-c", "import sys, nas.cli.commands; print(*sys.modules)"]
    loaded = subprocess.run(probe, capture_output=True, text=True, check=True).stdout.split()
    assert "torch" not in loaded  # nothing the command line imports before main() loads torch
    assert _libgomp_spin_count() == SPIN_COUNT  # the user's own count wins: the test above

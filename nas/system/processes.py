"""Which process this is, and whether the one a record names still runs: the identity a search's worker
records on its trial (:mod:`nas.search.liveness`) and a study's shard on its claim (benchmarks'
``evaluator_quality.py``). Standard library only (Linux ``/proc``; elsewhere nothing can be told)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

__all__ = ["process_alive", "this_process"]


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _machine() -> str:
    """This machine's identity for pid checks: host name, boot id and pid namespace (Linux; else '', which
    is not trusted for pid checks). Containers on one host share the boot id but not the pid namespace; two
    boots of one machine differ in boot id."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    if not boot or not namespace:
        return ""
    return f"{socket.gethostname()}/{boot}/{namespace}"


def _process_start(pid: int) -> str:
    """The start time of ``pid`` in clock ticks since boot (Linux ``/proc``), '' if unknown or gone."""
    stat = _read(f"/proc/{pid}/stat")
    if not stat:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22; the command name may hold spaces and ')'


def this_process() -> dict[str, Any]:
    """This process as plain JSON: host, machine (see :func:`process_alive`), pid and start time."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "machine": _machine(), "pid": pid, "started": _process_start(pid)}


def process_alive(record: dict[str, Any]) -> bool | None:
    """Whether the process ``record`` (:func:`this_process`'s) names still runs: True / False on this
    machine, None elsewhere (or where it cannot be told). A pid reused by a younger process is not it."""
    machine = record.get("machine")
    if not machine or machine != _machine():
        return None
    started = _process_start(int(record.get("pid", -1)))
    if not started:
        return False  # no such process
    return started == record.get("started")

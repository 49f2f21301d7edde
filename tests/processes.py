"""What the service helpers (real PostgreSQL, real Ray nodes) share: a free localhost port, stopping a
server by the signal it shuts down cleanly on, and the processes a server started (its descendants)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop(proc: subprocess.Popen | None, sig: int, timeout: float = 60) -> None:
    """Send ``sig`` to a running ``proc`` and wait for it; SIGKILL if it outlives ``timeout`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def descendants(root: int) -> dict[int, bytes]:
    """pid -> start time (field 22 of /proc/<pid>/stat) of every live descendant of ``root``."""
    parents, starts = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            parents[int(stat.parent.name)], starts[int(stat.parent.name)] = int(fields[1]), fields[19]
    found, frontier = {}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = starts[pid]
                frontier.append(pid)
    return found

"""What the service helpers (real PostgreSQL, real Ray nodes) share: a free localhost port, stopping a
server by the signal it shuts down cleanly on, and the processes a server started (its descendants)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

# Ports are handed out from a block of this process's own, below the kernel's ephemeral range (where every
# port 0 bind lands, a local Ray's components' included) and above Ray's default worker ports (10002-19999):
# a port the kernel picked as free could be taken by another xdist process's Ray before this test's server
# bound it (seen: a test node's runtime-env agent failed to start on a port conflict).
_BLOCK = 1000
_FIRST = 20000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _block() -> range:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    low = _FIRST + _BLOCK * (int(worker) if worker.isdigit() else 0)
    return range(low, min(low + _BLOCK, _ephemeral_low()))


_next = [0]


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("", port))  # every interface: a server on 127.0.0.1 only would fail it too
        except OSError:
            return False
    return True


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports, each free now, from this process's block (wrapping round:
    the servers of earlier tests have stopped by then); from the kernel where the block is too small."""
    block = _block()
    for _ in range(len(block)):
        first = block.start + _next[0] % len(block)
        _next[0] = (_next[0] + 1) % len(block)
        if first + count > block.stop:
            continue
        if all(_bindable(port) for port in range(first, first + count)):
            _next[0] = (first + count - block.start) % len(block)
            return first
    for _ in range(100):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            first = sock.getsockname()[1]
        if all(_bindable(port) for port in range(first, first + count)):
            return first
    raise RuntimeError(f"no {count} consecutive free ports found")


def free_port() -> int:
    """A localhost port free now, that no other test process hands out."""
    return free_ports(1)


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

"""What the service helpers (real PostgreSQL, real Ray nodes) share: a free localhost port, and stopping a
server by the signal it shuts down cleanly on."""

from __future__ import annotations

import socket
import subprocess


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

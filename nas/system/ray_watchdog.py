"""The watchdog of the local Ray a search starts: when the search's process dies in a way it cannot clean
up after (SIGKILL, the OOM killer), the watchdog ends that Ray's processes at once.

Ray's own fate-sharing ends the GCS and the raylet with the process that started them, but the workers and
agents the raylet started outlive a SIGKILLed driver by about a minute, until their reports to the dead GCS
time out, and a trial's worker goes on training all that time. The watchdog is a small process in a session
of its own (so a signal to the search's process group does not reach it), whose stdin is a pipe from the
search: the pipe reaches end-of-file when the search closes it or dies, however it dies. The watchdog then
sends SIGTERM, and after a grace period SIGKILL, to every process of that Ray: those whose command line names
the Ray session's folder (GCS, raylet, monitors), and the workers and agents, which rename themselves
``ray::...`` (the new title can overwrite their environment too), that hold a file of that folder open (their
logs). On a clean exit the search shuts Ray down first, so the watchdog finds nothing left and exits.

This file is run by path, not imported as part of ``nas``: the standard library only, so it starts in
milliseconds and holds neither Ray nor torch. Linux only (it reads ``/proc``); elsewhere none is started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

GRACE_SECONDS = 3.0  # between SIGTERM and SIGKILL


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # gone, or not ours to read
        return b""


def _opens_a_file_in(proc: Path, folder: str) -> bool:
    try:
        fds = list((proc / "fd").iterdir())
    except OSError:
        return False
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(fd).startswith(folder):
                return True
    return False


def ray_processes(session_dir: str) -> list[int]:
    """The live processes of the Ray session at ``session_dir``."""
    own = {os.getpid(), os.getppid()}
    folder = session_dir.rstrip("/") + "/"
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        pid = int(proc.name)
        stat = _read(proc / "stat")
        if pid in own or not stat or stat.rsplit(b")", 1)[-1].split()[0] == b"Z":  # a zombie: reaped
            continue
        command = _read(proc / "cmdline")
        if folder.encode() in command or (command.startswith(b"ray::") and _opens_a_file_in(proc, folder)):
            found.append(pid)
    return found


def end_session(session_dir: str) -> list[int]:
    """SIGTERM the session's processes, then SIGKILL those left after :data:`GRACE_SECONDS`; the pids
    signalled."""
    targets = ray_processes(session_dir)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + GRACE_SECONDS
        while sig == signal.SIGTERM and time.monotonic() < deadline:
            if not set(targets) & set(ray_processes(session_dir)):
                return targets
            time.sleep(0.1)
    return targets


def start(session_dir: str) -> subprocess.Popen | None:
    """Start the watchdog of the local Ray at ``session_dir`` (None where ``/proc`` is missing); keep the
    returned process, and :func:`stop` it after ``ray.shutdown()``."""
    if not Path("/proc/self/environ").exists():
        return None
    return subprocess.Popen(
        [sys.executable, "-I", str(Path(__file__).resolve()), session_dir],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def stop(watchdog: subprocess.Popen | None) -> None:
    """Close the watchdog's pipe (it ends what is left of the session) and wait for it to exit."""
    if watchdog is None:
        return
    if watchdog.stdin is not None:
        watchdog.stdin.close()
    try:
        watchdog.wait(timeout=GRACE_SECONDS + 10)
    except subprocess.TimeoutExpired:
        watchdog.kill()


def main(argv: list[str]) -> None:
    (session_dir,) = argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the search's Ctrl-C is the search's to handle
    while sys.stdin.buffer.read(4096):  # the search never writes: this returns at end-of-file
        pass
    end_session(session_dir)


if __name__ == "__main__":
    main(sys.argv[1:])

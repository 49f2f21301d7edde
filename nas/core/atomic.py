"""Files replaced atomically, safe with several writers: every file a run writes (trials table, report,
manifest, checkpoints) is written beside its target under a name of this process's own and renamed over it,
so a kill never leaves half a file and workers sharing a run directory never rename each other's. A folder
is made the same way, complete in a :func:`scratch_folder` on its file system, then renamed into place. A file
that several writers merge into (a latency table, the part-cost store) is read, merged and replaced while
holding :func:`locked`. A process that must be the only one at work on something holds :func:`sole`."""

from __future__ import annotations

import fcntl
import json
import os
import socket
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["Held", "locked", "merge_json", "nearest_existing", "replaced", "scratch_folder", "sole"]


@contextmanager
def replaced(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path (same folder and suffix) to write; on success it replaces ``path``."""
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp{path.suffix}")
    try:
        yield tmp
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``<path>.lock``, held inside (released by the OS if the process dies)."""
    path = Path(path)
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class Held(Exception):
    """Another process holds the :func:`sole` lock; ``holder`` is what it wrote there (its pid and host)."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


@contextmanager
def sole(path: str | Path) -> Iterator[None]:
    """An exclusive ``flock`` on the file ``path`` (made if missing), held inside, or :class:`Held` at once
    if another process holds it. The holder writes its pid and host there, for the refusal to name; the OS
    releases the lock when the holder dies, however it dies."""
    with open(path, "a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            raise Held(lock.read(200).strip() or "a process that has not said which") from None
        try:
            lock.seek(0)
            lock.truncate()
            lock.write(f"pid {os.getpid()} on {socket.gethostname()}")
            lock.flush()
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def merge_json(path: str | Path, document: Callable[[], Any]) -> None:
    """Replace the JSON file ``path`` with ``document()``, which runs while this process holds ``path``'s
    :func:`locked`, so that it can first merge in what other writers put in the file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path):
        text = json.dumps(document(), indent=1, sort_keys=True) + "\n"
        with replaced(path) as tmp:
            tmp.write_text(text)


def nearest_existing(path: str | Path) -> Path:
    """``path`` made absolute, or its nearest ancestor that exists (where ``path`` would be made)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def scratch_folder(path: str | Path, setting: str) -> Path:
    """A new hidden folder in the nearest existing folder of ``path`` (so on the file system ``path`` will be
    on: what is made there can be renamed to ``path``); ValueError in one sentence naming ``setting`` if no
    folder can be made there. The caller removes it."""
    path = Path(path)
    parent = nearest_existing(path)
    if not parent.is_dir():
        raise ValueError(f"{setting}: cannot create the folder {path}: {parent} is a file")
    try:
        return Path(tempfile.mkdtemp(prefix=".nas-", dir=parent))
    except OSError as err:  # permission bits say nothing to root, nor about a read-only or pseudo file system
        raise ValueError(f"{setting}: cannot create the folder {path} ({err.strerror})") from None

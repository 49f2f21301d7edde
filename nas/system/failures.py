"""How a trial fails, whichever driver runs it: a per-trial deadline, the reason kept in the trials table,
and the memory a failed trial leaves behind.

Every ``fail_reason`` starts with its kind, so the table and the report can be filtered on it:

``timeout:``        the trial ran past ``--trial-timeout``
``out of memory:``  a CUDA or CPU allocation failed (``torch.OutOfMemoryError``, ``MemoryError``, ...)
``diverged:``       the training loss became NaN or infinite
``error:``          any other exception the evaluator raised
``interrupted:``    Ctrl-C or SIGTERM stopped the search during the trial (it is re-run on ``--resume``)
``lost:``           its worker died without a word (:mod:`nas.search.liveness`; it is re-run)
``cannot write:``   the disk is full or the folder read-only (:func:`write_failure`): the search stops

A full disk or a read-only folder is no trial's fault and would fail every later one: the drivers stop the
search on it (:class:`WriteFailed`), and the CLI says in one sentence which path and why, with exit code 1.
What the study had committed stays in it.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from nas.core.atomic import nearest_existing
from nas.system.unraisable import Redelivery

__all__ = [
    "TrialTimeout",
    "WriteFailed",
    "deadline",
    "disk_state",
    "failure_reason",
    "release_memory",
    "start_timer",
    "write_failure",
]

_MAX_REASON = 500
_IMPORT_RETRY_SECONDS = 0.05


class TrialTimeout(Exception):
    """The trial ran past its time limit."""


class WriteFailed(Exception):
    """The search cannot write (a full disk, a read-only folder); the message is one sentence."""


_FULL_BYTES = 1 << 20  # a file system with less free than this is full for a search (one trial's records)
_CANNOT_WRITE = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}
_SQLITE_CANNOT_WRITE = {  # sqlite3's messages for the same causes, as SQLAlchemy and Optuna pass them on
    "database or disk is full": "the disk is full",
    "attempt to write a readonly database": "it is read-only",
    "unable to open database file": "it cannot be opened (a read-only or missing folder)",
    "disk i/o error": "a disk I/O error",
}


def disk_state(path: str | Path) -> str | None:
    """Why nothing can be written under ``path``, if its file system says so: read-only, or (almost) full."""
    path = nearest_existing(path)
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    if stat.f_flag & os.ST_RDONLY:
        return f"{path} is on a read-only file system"
    free = stat.f_bavail * stat.f_frsize
    if free < _FULL_BYTES:
        return f"the file system holding {path} is full ({free // 1024} KiB free)"
    return None


def write_failure(err: BaseException, where: str | Path | None = None) -> str | None:
    """``cannot write <path>: <cause>`` if ``err`` (or an exception it was raised from) is a write refused by
    the disk or the file system, else None; ``where``'s :func:`disk_state` is added when it tells more."""
    cannot = _write_failure(err)
    state = disk_state(where) if cannot is not None and where is not None else None
    return f"{cannot}: {state}" if state else cannot


def _write_failure(err: BaseException) -> str | None:
    seen: set[int] = set()
    node: BaseException | None = err
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if isinstance(node, OSError) and node.errno in _CANNOT_WRITE:
            where = node.filename if node.filename is not None else "a file"
            return f"cannot write {where}: {node.strerror or errno.errorcode.get(node.errno or 0, 'error')}"
        text = str(node).lower()
        for message, cause in _SQLITE_CANNOT_WRITE.items():
            if message in text:
                return f"cannot write the study database: {cause} ({message})"
        node = node.__cause__ or node.__context__
    return None


def start_timer(seconds: float, expire: Callable[[], None]) -> Any:
    """A started daemon timer that calls ``expire`` after ``seconds`` and stops on ``cancel()``: the clock of
    every :class:`deadline` (a test puts one it drives here, so no outcome depends on the machine's speed)."""
    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


class deadline:  # lower-case: a context manager, like contextlib's
    """Raise :class:`TrialTimeout` in the calling thread once ``seconds`` have passed (no limit for None).

    The exception is delivered asynchronously into the thread that entered the block (``main`` or not: a
    Ray function trainable runs in a thread of its worker), at its next Python bytecode, so a single long
    C++ kernel finishes first, as it would under SIGALRM, and an import in progress is let finish (an
    exception inside one would leave a half-built module behind). A block that returns after its deadline (it
    swallowed the exception, or ended between the timer and delivery) raises :class:`TrialTimeout` too, as
    does one that fails with another exception after its deadline.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._active = False
        self._fired = False
        self._timer: Any = None

    @property
    def message(self) -> str:
        return f"trial exceeded its {self.seconds:g} s timeout"

    def __enter__(self) -> deadline:
        if self.seconds:
            self._thread = threading.get_ident()
            self._active = True
            # a TrialTimeout that lands in a finalizer is dropped by Python: this sends it again
            self._redelivery = Redelivery(TrialTimeout, self._expire).__enter__()
            self._timer = start_timer(self.seconds, self._expire)
        return self

    def _expire(self) -> None:
        with self._lock:
            if not self._active:
                return
            if _importing(self._thread):  # an exception inside an import leaves a half-built module that
                # breaks every later trial of this process: wait for the import to end
                self._timer = start_timer(_IMPORT_RETRY_SECONDS, self._expire)
                return
            self._fired = True
            exc = ctypes.py_object(TrialTimeout)
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread), exc)

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._timer is None:
            return
        if self._close_surely() and (kind is None or not issubclass(kind, KeyboardInterrupt)):
            raise TrialTimeout(self.message) from None  # whatever the late exception became on its way up

    def escaped(self) -> TrialTimeout:
        """The TrialTimeout to raise for a bare one that left the block past ``__exit__``: delivered at
        ``__exit__``'s very first bytecode (the block ended as the deadline fired), where Python checks for
        pending exceptions before any of its code runs, so the deadline is still open. This closes it."""
        if self._timer is not None:
            self._close_surely()
        return TrialTimeout(self.message)

    def _close_surely(self) -> bool:
        """:meth:`_close`, again if a TrialTimeout lands in it; whether the deadline fired."""
        while True:
            try:
                return self._close()
            except TrialTimeout:  # delivered here, before closing took it back: bare, without the message
                continue  # closing again is harmless, and after it none can come

    def _close(self) -> bool:
        """Stop the timer and the redelivery, take back a TrialTimeout not delivered yet (the block ended
        between the timer and delivery, or a redelivery sent a second); whether the deadline fired."""
        with self._lock:
            self._active = False  # from here no TrialTimeout is sent (``_expire`` checks it)
            self._timer.cancel()
            if self._fired:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread), None)
        self._redelivery.__exit__(None, None, None)
        return self._fired


def _importing(thread: int) -> bool:
    """Whether ``thread`` is inside the import machinery now."""
    frame = sys._current_frames().get(thread)
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _is_out_of_memory(err: BaseException) -> bool:
    if isinstance(err, MemoryError):
        return True
    try:
        import torch

        if isinstance(err, torch.OutOfMemoryError):
            return True
    except (ImportError, AttributeError):
        pass
    text = str(err).lower()
    return "out of memory" in text or "can't allocate memory" in text or "cannot allocate memory" in text


def failure_reason(err: BaseException) -> str:
    """One line for the trials table: ``<kind>: <exception type>: <first line of its message>``."""
    first = str(err).strip().splitlines()[0] if str(err).strip() else ""
    if isinstance(err, TrialTimeout):
        kind = "timeout"
        first = first or "trial exceeded its time limit"
    elif isinstance(err, KeyboardInterrupt):
        kind = "interrupted"
        first = first or "the search was stopped (Ctrl-C or SIGTERM) during the trial"
    elif _is_out_of_memory(err):
        kind = "out of memory"
    elif type(err).__name__ == "TrainingDiverged":
        kind = "diverged"
    elif (cannot := write_failure(err)) is not None:
        return f"cannot write: {cannot.removeprefix('cannot write ')}"[:_MAX_REASON]
    else:
        kind = "error"
    return f"{kind}: {type(err).__name__}: {first}"[:_MAX_REASON]


def release_memory() -> None:
    """Free what a failed trial left: its frames' tensors (garbage) and CUDA's cached blocks, so that one
    out-of-memory trial does not make the next ones fail too. Call it after the exception is dropped."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass

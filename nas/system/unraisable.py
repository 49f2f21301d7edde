"""Exceptions that a search raises into a running thread from outside it (a signal handler's
KeyboardInterrupt, a trial deadline's TrialTimeout) are delivered at the thread's next Python bytecode. That
bytecode may be inside a finalizer: a ``__del__`` or a weakref callback, which the garbage collector runs in
the middle of any code (SQLAlchemy's class registry has such callbacks). Python prints an exception raised
there as "Exception ignored in ..." with its traceback, through ``sys.unraisablehook``, and drops it: the
trial runs on, past its Ctrl-C or its deadline.

While a :class:`Redelivery` is open, such an exception of its kind, dropped in the thread that opened it, is
taken off the hook (nothing printed) and its ``deliver`` is called from a timer thread a moment later, to
raise it again. Not from the hook itself: an exception raised there would be raised before the hook returns,
and be dropped in turn. By then the thread has left the finalizer, or it is in another one and this repeats.
Other unraisable exceptions go to the hook that was there before.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

__all__ = ["Redelivery"]

_AGAIN_AFTER = 0.01  # seconds from a dropped exception to its delivery again

_lock = threading.RLock()  # re-entrant: the hook may run in a thread that holds it (a finalizer in between)
_open: dict[tuple[int, type[BaseException]], Callable[[], None]] = {}  # (thread, kind) -> deliver
_previous: Any = None  # the hook in place before the first Redelivery opened


class Redelivery:
    """While open (``with``), a ``kind`` exception dropped in a finalizer of the thread that opened it calls
    ``deliver`` from a timer thread instead of being printed."""

    def __init__(self, kind: type[BaseException], deliver: Callable[[], None]) -> None:
        self.kind, self.deliver = kind, deliver
        self._key: tuple[int, type[BaseException]] | None = None

    def __enter__(self) -> Redelivery:
        global _previous
        self._key = (threading.get_ident(), self.kind)
        with _lock:
            if not _open:
                _previous, sys.unraisablehook = sys.unraisablehook, _hook
            _open[self._key] = self.deliver
        return self

    def __exit__(
        self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None
    ) -> None:
        with _lock:
            _open.pop(self._key, None)
            if not _open and sys.unraisablehook is _hook:
                sys.unraisablehook = _previous


def _hook(info: Any) -> None:
    thread = threading.get_ident()
    with _lock:
        kind = next(
            (
                kind
                for opened_by, kind in _open
                if opened_by == thread and info.exc_type is not None and issubclass(info.exc_type, kind)
            ),
            None,
        )
        previous = _previous
    if kind is None:
        previous(info)
        return
    timer = threading.Timer(_AGAIN_AFTER, _deliver, (thread, kind))
    timer.daemon = True
    timer.start()


def _deliver(thread: int, kind: type[BaseException]) -> None:
    """``deliver`` of the Redelivery that ``thread`` opened for ``kind``, if it is still open."""
    with _lock:
        deliver = _open.get((thread, kind))
    if deliver is not None:
        deliver()

"""Ctrl-C and SIGTERM stop a search cleanly, in every worker process, and the exit code says which.

Python raises KeyboardInterrupt wherever the main thread is when SIGINT arrives: in a trial's training (what
the user wants stopped), but also inside ``study.tell`` or a storage transaction, where it leaves a trial
half told (Optuna's ``UpdateFinishedTrialError`` on the next write) and the search crashes before its table
is written. Under :func:`signals` with ``defer`` (the Optuna backend) a signal is only *recorded*, except
while the trial's evaluation runs (:func:`stoppable`), where stopping at once is safe: the trial body records
it as interrupted. A worker looks (:func:`check`) before each trial, so a signal received between trials stops
it there. A third signal stops at once, whatever the process is doing (the user insists).

Without ``defer`` (the Ray backend, whose Tune loop handles SIGINT itself) SIGTERM raises KeyboardInterrupt
at once, as Ctrl-C does. Either way :func:`received` names the first signal, so the CLI exits with
``128 + signal`` (130 for SIGINT, 143 for SIGTERM).

The handler may run while the main thread is inside a finalizer, where Python prints its KeyboardInterrupt
and drops it (:mod:`nas.system.unraisable`): the trial, or under Ray the whole search, would run on. Inside
:func:`signals` such an interrupt is delivered again, as the same signal, once the finalizer has returned.
"""

from __future__ import annotations

import _thread
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nas.system.unraisable import Redelivery

__all__ = ["check", "received", "signals", "stoppable"]

_INSIST = 3  # this many signals stop at once, in whatever the process is doing


class _State:
    signum: int | None = None
    count = 0
    defer = False
    in_trial = 0
    again = False  # the next call of the handler delivers a dropped interrupt again: not a new signal


_state = _State()


def _handle(signum: int, frame: Any) -> None:
    if _state.again:
        _state.again = False
    else:
        _state.signum = _state.signum or signum
        _state.count += 1
    if not _state.defer or _state.in_trial or _state.count >= _INSIST:
        raise KeyboardInterrupt


def _deliver_again() -> None:
    """The interrupt a finalizer dropped, raised again: by the same signal, not counted as a new one; by
    SIGINT where none reached this handler (Ctrl-C under Ray, whose SIGINT handler is not this module's)."""
    if _state.signum is None:
        _thread.interrupt_main(signal.SIGINT)
        return
    _state.again = True
    _thread.interrupt_main(_state.signum)


@contextmanager
def signals(defer: bool) -> Iterator[None]:
    """Handle SIGTERM (and, with ``defer``, SIGINT) as the module says, inside this block; the previous
    handlers come back after it. Outside the main thread (where no handler can be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    names = (signal.SIGTERM, signal.SIGINT) if defer else (signal.SIGTERM,)
    previous = {sig: signal.signal(sig, _handle) for sig in names}
    _state.signum, _state.count, _state.defer, _state.again = None, 0, defer, False
    try:
        with Redelivery(KeyboardInterrupt, _deliver_again):
            yield
    finally:
        _state.defer = False
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def stoppable() -> Iterator[None]:
    """Where a recorded signal stops the process at once (a trial's evaluation)."""
    check()
    _state.in_trial += 1
    try:
        yield
    finally:
        _state.in_trial -= 1


def check() -> None:
    """KeyboardInterrupt if a signal was received (and deferred) since :func:`signals` began."""
    if _state.defer and _state.signum is not None:
        raise KeyboardInterrupt


def received() -> int | None:
    """The first signal received under :func:`signals` (None: none)."""
    return _state.signum

"""nas.system.unraisable in one process: an exception raised into a running thread from outside it (a
signal handler's KeyboardInterrupt, a trial deadline's TrialTimeout) that lands while the thread runs a
finalizer (a ``__del__`` or a weakref callback, which the garbage collector may run in the middle of any code)
still stops the trial, and prints no traceback. Python reports an exception raised in a finalizer as
"Exception ignored in ..." on stderr and drops it."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from nas.system import stopping
from nas.system.failures import TrialTimeout, deadline


def _spin(seconds: float) -> None:
    """Run Python bytecode for ``seconds``: a pending signal's handler runs at one of them."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


class _SlowFinalizer:
    """Sends ``sig`` to this process from its finalizer (none: sends nothing) and keeps running Python there
    for ``seconds``, so what is delivered meanwhile is delivered inside the finalizer."""

    def __init__(self, sig: int | None, seconds: float = 0.5) -> None:
        self.sig, self.seconds = sig, seconds

    def __del__(self) -> None:
        if self.sig is not None:
            os.kill(os.getpid(), self.sig)
        _spin(self.seconds)


@pytest.mark.parametrize(
    ("defer", "sig"), [(True, signal.SIGTERM), (True, signal.SIGINT), (False, signal.SIGTERM)]
)
def test_a_signal_handled_inside_a_finalizer_still_stops_the_trial(
    defer: bool, sig: int, capfd: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    with stopping.signals(defer), pytest.raises(KeyboardInterrupt), stopping.stoppable():
        _SlowFinalizer(sig)  # dropped at once: its __del__ runs here
        _spin(10)  # the trial goes on: the interrupt must reach it
    assert time.monotonic() - began < 5, "the interrupt was lost: the trial ran on to its end"
    assert stopping.received() == sig
    assert "Traceback" not in capfd.readouterr().err


def test_a_deadline_that_passes_inside_a_finalizer_still_stops_the_trial(
    capfd: pytest.CaptureFixture[str],
) -> None:
    began = time.monotonic()
    with pytest.raises(TrialTimeout), deadline(0.2):
        _SlowFinalizer(None, seconds=1.0)  # the deadline passes while its __del__ runs
        _spin(10)
    assert time.monotonic() - began < 5, "the timeout was lost: the trial ran on to its end"
    assert "Traceback" not in capfd.readouterr().err


def test_another_exception_in_a_finalizer_is_reported_as_before() -> None:
    seen = []

    class Failing:
        def __del__(self) -> None:
            raise ValueError("a finalizer's own error")

    previous = sys.unraisablehook
    try:
        sys.unraisablehook = seen.append
        with stopping.signals(True):
            Failing()
        assert sys.unraisablehook == seen.append  # put back once no redelivery is open
    finally:
        sys.unraisablehook = previous
    assert [type(u.exc_value) for u in seen] == [ValueError]

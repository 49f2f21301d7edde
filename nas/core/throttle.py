"""At most one event per period: how the plain-text progress lines (of a search, of ``nas train``) stay few
when nothing draws on a terminal (CI logs, ``ray job`` output, a file), so that writing them never slows the
work they report on."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Throttle"]


class Throttle:
    """:meth:`ready` is True at most once per ``seconds`` (the first call after ``seconds`` have passed since
    the throttle was made or last ready). ``clock`` returns seconds and is replaceable for tests."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not seconds > 0:
            raise ValueError(f"a throttle's period must be a positive number of seconds, not {seconds!r}")
        self.seconds, self._clock = float(seconds), clock
        self._last = clock()

    def ready(self) -> bool:
        now = self._clock()
        if now - self._last < self.seconds:
            return False
        self._last = now
        return True

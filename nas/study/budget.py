"""Search budgets: parse them, charge what a search spends against them, stop it before it overruns.

Forms
-----
A budget is a positive number and a unit, case-insensitive; a space, ``-`` or ``_`` may sit between the
number, the optional ``gpu`` / ``cpu`` / ``wall`` prefix and the unit (``8gpu-days``, ``8 GPU days``,
``8gpu_days`` and ``8 gpudays`` are one budget). Time units are ``s`` / ``sec`` / ``second(s)``,
``m`` / ``min`` / ``minute(s)``, ``h`` / ``hr`` / ``hour(s)`` and ``d`` / ``day(s)``; decimals are allowed
(``1.5h``). Three kinds:

==================================  ================  ===================================================
text                                kind              what is spent
==================================  ================  ===================================================
``8gpu-days``, ``12gpu-hours``      device-seconds    GPU-seconds; only GPU trials may be charged
``6cpu-hours``                      device-seconds    CPU-seconds; only CPU trials may be charged
``45min``, ``2h``, ``90s``          device-seconds    device-seconds of whatever device runs the trials
``2wall-hours``                     wall-seconds      the wall clock since the tracker was created
``200trials``                       trials            finished trials (a whole number)
==================================  ================  ===================================================

``str(budget)`` is the canonical form, which parses back to an equal :class:`Budget`: ``8gpu-days``,
``12gpu-hours``, ``6cpu-hours``, ``2gpu-minutes``, ``45min``, ``2h``, ``36h``, ``90s``, ``2wall-hours``,
``200trials``, ``1trial``: the largest unit (days, h / hours, min / minutes, s / seconds) in which the amount
is a whole number (``1.5h`` is written ``90min``), else seconds with at most 3 decimals (``1.5s``), else
seconds as Python writes the float.

Accounting
----------
A trial is charged when it ends, whether it finished, was pruned or failed: it held its devices all the
same. Its :class:`TrialCost` is its wall seconds times the devices it held, the GPUs it was given on a GPU
and 1 on a CPU. Work that is no trial but serves the search, such as the training of a one-shot supernet, is
charged as *overhead* (``TrialCost(..., overhead=True)``): it spends device-seconds like a trial, but it is no
trial (it neither counts toward a ``trials`` budget nor enters the estimate of a trial's cost).

The driver asks :meth:`BudgetTracker.can_start` before it starts each trial, passing ``pending``, the number
of trials it has started that have not been charged yet. With ``e`` the estimated cost of a trial (below):

- device-seconds: start while ``spent + (pending + 1) * e <= amount``;
- wall-seconds: start while ``elapsed + e <= amount`` (running trials run alongside the new one, so they
  do not add; ``e`` is here a trial's wall seconds);
- trials: start while ``finished + pending < N`` (no estimate needed).

The estimate ``e`` is the mean cost of the last ``window`` (default 10) trials charged. A trial's cost drifts
during a search (a sampler moves toward larger or smaller networks), and a mean of the recent trials follows
it while still averaging out the noise of single trials; a high quantile would overrun less often, but would
leave most of a trial's worth of budget unspent in every search. Before any trial has ended there is no
estimate, and a time budget lets only one trial run (``pending == 0``): a parallel search runs its first trial
alone to learn what a trial costs, then fills its workers.

What this guarantees: a search stops with less than one estimated trial's cost left, and it overruns only by
as much as the trials running at the stop cost more than estimated, which for a driver that runs one trial
at a time is less than one trial's cost. :meth:`BudgetTracker.projected_trials` turns the estimate into the
number of trials the whole budget should buy, which the driver prints once the first trials have ended.

Resuming
--------
:meth:`BudgetTracker.to_dict` is plain JSON (the budget's canonical text, every charge, the wall seconds
elapsed); the driver stores it with the study, and :meth:`BudgetTracker.from_dict` rebuilds a tracker that
continues with what was already spent (optionally under a new budget, for a search given more time). A
study's wall time is the union of its sessions' spans (:func:`wall_seconds`): each session records when it
started and when it last finished a trial, so a ``wall`` budget keeps spending, and stops, across resumes.

This module is pure Python (no torch): it is safe to import anywhere.
"""

from __future__ import annotations

import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from nas.core.bounds import shown

__all__ = ["Budget", "BudgetTracker", "Session", "TrialCost", "human_seconds", "wall_seconds"]

BudgetKind = Literal["device-seconds", "wall-seconds", "trials"]
DeviceKind = Literal["gpu", "cpu"]

KINDS = ("device-seconds", "wall-seconds", "trials")
DEVICES = ("gpu", "cpu")

EXAMPLES = (
    "8gpu-days, 12gpu-hours, 6cpu-hours, 45min, 2h, 2wall-hours or 200trials "
    "(time units s, min, h or days, optionally after gpu-, cpu- or wall-)"
)

_SECONDS_PER_UNIT = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1.0),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60.0),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600.0),
    **dict.fromkeys(("d", "day", "days"), 86400.0),
}
_TRIAL_UNITS = ("trial", "trials")

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?"
_NUMBER_RE = re.compile(_NUMBER)
_BUDGET_RE = re.compile(rf"(?P<num>{_NUMBER})\s*(?:(?P<prefix>gpu|cpu|wall)[\s_-]*)?(?P<unit>[a-z]+)")

# Canonical units, largest first: (plural, singular, seconds), without and with a prefix.
_PLAIN_UNITS = (("days", "day", 86400.0), ("h", "h", 3600.0), ("min", "min", 60.0), ("s", "s", 1.0))
_PREFIXED_UNITS = (
    ("days", "day", 86400.0),
    ("hours", "hour", 3600.0),
    ("minutes", "minute", 60.0),
    ("seconds", "second", 1.0),
)


def _invalid(text: str, reason: str) -> ValueError:
    return ValueError(
        f"invalid budget {shown(text)}: {reason}; give a positive number and a unit, such as {EXAMPLES}"
    )


@dataclass(frozen=True)
class Budget:
    """A search budget: ``amount`` of ``kind``, in seconds (time kinds) or trials.

    ``device`` is set only for device-seconds: ``"gpu"`` or ``"cpu"`` when the budget counts one kind of
    device's time (``8gpu-days``), ``None`` when it counts whatever device runs the trials (``45min``).
    """

    kind: BudgetKind
    amount: float | int
    device: DeviceKind | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"budget kind must be one of {', '.join(KINDS)}, not {self.kind!r}")
        if self.device is not None and (self.kind != "device-seconds" or self.device not in DEVICES):
            raise ValueError(
                f"budget device must be 'gpu', 'cpu' or None, and set only for device-seconds, "
                f"not {self.device!r} for {self.kind}"
            )
        amount = self.amount
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            raise ValueError(f"budget amount must be a number, not {amount!r}")
        if not (math.isfinite(amount) and amount > 0):
            raise ValueError(f"budget amount must be positive and finite, not {amount!r}")
        if self.kind == "trials":
            if amount != int(amount):
                raise ValueError(f"a trials budget must be a whole number of trials, not {amount!r}")
            object.__setattr__(self, "amount", int(amount))
        else:
            object.__setattr__(self, "amount", float(amount))

    @classmethod
    def parse(cls, text: str | Budget) -> Budget:
        """Parse a budget such as ``8gpu-days``, ``45min`` or ``200trials`` (see the module docstring).

        Raises :class:`ValueError`, one sentence naming the text and the valid forms, on anything else.
        """
        if isinstance(text, Budget):
            return text
        if not isinstance(text, str):
            raise TypeError(f"a budget is given as text such as '8gpu-days', not {type(text).__name__}")
        s = text.strip().lower()
        if not s:
            raise _invalid(text, "it is empty")
        if s.startswith("-"):
            raise _invalid(text, "a budget must be positive")
        m = _BUDGET_RE.fullmatch(s)
        if m is None and _NUMBER_RE.fullmatch(s):
            raise _invalid(text, "it has no unit")
        if m is None:
            loose = re.fullmatch(rf"{_NUMBER}\s*(.+)", s)
            if loose is None:
                raise _invalid(text, "it is not a number followed by a unit")
            raise _invalid(text, f"{shown(loose[1])} is not a unit")
        value = float(m["num"])
        prefix, unit = m["prefix"], m["unit"]
        if unit in ("gpu", "cpu", "wall"):
            raise _invalid(text, f"{unit!r} needs a time unit after it")
        if unit in _TRIAL_UNITS:
            if prefix is not None:
                raise _invalid(text, f"a trial count takes no {prefix!r} prefix")
            if not math.isfinite(value) or value != int(value):
                raise _invalid(text, "a trial count must be a whole number")
            if value <= 0:
                raise _invalid(text, "a budget must be positive")
            return cls("trials", int(value))
        if unit not in _SECONDS_PER_UNIT:
            raise _invalid(text, f"{unit!r} is not a unit")
        seconds = value * _SECONDS_PER_UNIT[unit]
        if not math.isfinite(seconds):
            raise _invalid(text, "the amount is too large")
        if seconds <= 0:
            raise _invalid(text, "a budget must be positive")
        if prefix == "wall":
            return cls("wall-seconds", seconds)
        return cls("device-seconds", seconds, prefix)

    def __str__(self) -> str:
        if self.kind == "trials":
            return f"{self.amount}trial" if self.amount == 1 else f"{self.amount}trials"
        prefix = "wall" if self.kind == "wall-seconds" else self.device
        units = _PREFIXED_UNITS if prefix else _PLAIN_UNITS
        for whole in (True, False):  # the largest unit that gives a whole number, else a short decimal >= 1
            for plural, singular, factor in units:
                value = self.amount / factor
                if value < 1 or (whole and value != int(value)):
                    continue
                num = _short_number(value)
                if num is None or float(num) * factor != self.amount:
                    continue
                return _join(num, prefix, singular if num == "1" else plural)
        return _join(repr(self.amount), prefix, units[-1][0])  # repr round-trips a float exactly

    @property
    def time_label(self) -> str:
        """What it counts in messages: ``GPU time``, ``CPU time``, ``device time`` or ``wall time``."""
        if self.kind == "wall-seconds":
            return "wall time"
        if self.kind == "device-seconds" and self.device:
            return f"{self.device.upper()} time"
        return "device time"


def _short_number(value: float) -> str | None:
    """``value`` written with at most 3 decimals, or None where that would change it."""
    if value == int(value) and value < 1e15:
        return str(int(value))
    for decimals in (1, 2, 3):
        s = f"{value:.{decimals}f}"
        if float(s) == value:
            return s
    return None


def _join(num: str, prefix: str | None, unit: str) -> str:
    return f"{num}{prefix}-{unit}" if prefix else f"{num}{unit}"


def human_seconds(seconds: float) -> str:
    """A duration for people: ``42 s``, ``12.5 min``, ``3.2 h``, ``8 days``."""
    for unit, factor, below in (("s", 1.0, 60.0), ("min", 60.0, 3600.0), ("h", 3600.0, 172800.0)):
        if seconds < below:
            return f"{_one_decimal(seconds / factor)} {unit}"
    return f"{_one_decimal(seconds / 86400.0)} days"


def _one_decimal(value: float) -> str:
    s = f"{value:,.1f}"
    return s[:-2] if s.endswith(".0") else s


@dataclass(frozen=True)
class TrialCost:
    """What one trial (or one piece of overhead, such as supernet training) cost.

    ``seconds`` is its wall time, ``devices`` the devices it held (its GPUs on a GPU, 1 on a CPU, or on a CPU
    the worker processes of overhead trained data-parallel, such as a supernet on ``--supernet-workers``),
    ``device`` their kind. ``overhead`` marks work that is no trial: it spends device-seconds, but does not
    count as a trial nor enter the estimate of the next trial's cost.
    """

    seconds: float
    devices: int = 1
    device: DeviceKind = "cpu"
    label: str = "trial"
    overhead: bool = False
    rung: int | None = None  # on a fidelity ladder, the rung the trial trained to

    def __post_init__(self) -> None:
        if isinstance(self.seconds, bool) or not isinstance(self.seconds, (int, float)):
            raise ValueError(f"{self.label}: seconds must be a number, not {self.seconds!r}")
        if not (math.isfinite(self.seconds) and self.seconds >= 0):
            raise ValueError(f"{self.label}: seconds must be finite and not negative, not {self.seconds!r}")
        object.__setattr__(self, "seconds", float(self.seconds))
        if self.device not in DEVICES:
            raise ValueError(f"{self.label}: device must be 'gpu' or 'cpu', not {self.device!r}")
        if isinstance(self.devices, bool) or not isinstance(self.devices, int) or self.devices < 1:
            raise ValueError(
                f"{self.label}: devices must be a whole number of at least 1, not {self.devices!r}"
            )
        if self.device == "cpu" and self.devices != 1 and not self.overhead:
            raise ValueError(f"{self.label}: a CPU trial holds 1 device, not {self.devices}")

    @classmethod
    def of(
        cls,
        seconds: float,
        gpus: int = 0,
        label: str = "trial",
        overhead: bool = False,
        rung: int | None = None,
        workers: int = 1,
    ) -> TrialCost:
        """The cost of ``seconds`` on ``gpus`` GPUs, or on the CPU (1 device) when ``gpus`` is 0, in each of
        ``workers`` data-parallel processes."""
        if gpus:
            return cls(seconds, gpus * workers, "gpu", label, overhead, rung)
        return cls(seconds, workers, "cpu", label, overhead, rung)

    @property
    def charge(self) -> float:
        """Device-seconds: wall seconds x devices held."""
        return self.seconds * self.devices

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "devices": self.devices,
            "device": self.device,
            "label": self.label,
            "overhead": self.overhead,
            **({"rung": self.rung} if self.rung is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrialCost:
        return cls(
            data["seconds"],
            data.get("devices", 1),
            data.get("device", "cpu"),
            data.get("label", "trial"),
            data.get("overhead", False),
            data.get("rung"),
        )


def session_clock() -> float:
    """Now, in Unix seconds, as sessions read it (a test replaces it with a clock it moves itself)."""
    return time.time()


@dataclass(frozen=True)
class Session:
    """One ``nas search`` call on a study: an id and when it started (Unix seconds). Its span runs from its
    start to its last finished trial; a study's wall time is the union of its sessions' spans."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    start: float = field(default_factory=lambda: session_clock())

    def span(self) -> tuple[float, float]:
        """From its start to now."""
        return (self.start, session_clock())


def wall_seconds(spans: Iterable[Sequence[float]]) -> float:
    """The wall seconds that ``spans`` cover, each ``(start, end)`` in Unix seconds, overlaps counted once:
    a study's wall time across its sessions, some of which (workers on other machines) ran at once."""
    total, reach = 0.0, -math.inf
    for start, end in sorted((float(a), float(b)) for a, b in spans if b > a):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


class BudgetTracker:
    """Charges a search's trials and overhead against a :class:`Budget` and says when to stop starting trials.

    The wall clock (for ``wall`` budgets, and :attr:`elapsed`) runs from the tracker's creation; ``clock``
    returns seconds and is replaceable for tests. ``wall``, where given, replaces it: a function returning
    the wall seconds elapsed (a study's, over the spans of its sessions). Safe to call from several threads.
    """

    def __init__(
        self,
        budget: Budget | str,
        *,
        window: int = 10,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] | None = None,
        ladder: tuple[int, int] | None = None,
    ) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a whole number of at least 1, not {window!r}")
        self.budget = Budget.parse(budget)
        self.ladder = ladder  # (eta, rungs) of a fidelity ladder: the projection counts its promotions
        self.window = window
        self._clock = clock
        self._wall = wall
        self._started_at = clock()
        self._elapsed_before = 0.0  # wall seconds spent before a resume
        self._charges: list[TrialCost] = []
        self._lock = threading.RLock()

    # -- what was spent ------------------------------------------------------------------------------------

    @property
    def charges(self) -> tuple[TrialCost, ...]:
        """Every charge so far, trials and overhead, in order."""
        with self._lock:
            return tuple(self._charges)

    @property
    def trials(self) -> int:
        """Trials charged so far (overhead excluded)."""
        with self._lock:
            return sum(1 for c in self._charges if not c.overhead)

    @property
    def device_seconds(self) -> float:
        """Device-seconds charged so far, trials and overhead."""
        with self._lock:
            return math.fsum(c.charge for c in self._charges)

    @property
    def overhead_seconds(self) -> float:
        """Device-seconds charged as overhead (such as supernet training)."""
        with self._lock:
            return math.fsum(c.charge for c in self._charges if c.overhead)

    @property
    def elapsed(self) -> float:
        """Wall seconds since the tracker was created, plus those elapsed before a resume (or ``wall()``)."""
        if self._wall is not None:
            return self._wall()
        return self._elapsed_before + max(0.0, self._clock() - self._started_at)

    @property
    def spent(self) -> float | int:
        """What was spent, in the budget's unit: device-seconds, wall seconds or trials."""
        kind = self.budget.kind
        if kind == "trials":
            return self.trials
        if kind == "wall-seconds":
            return self.elapsed
        return self.device_seconds

    @property
    def left(self) -> float | int:
        """What is left of the budget, in its unit; 0 once it is spent."""
        return max(self.budget.amount - self.spent, 0)

    @property
    def overrun(self) -> float | int:
        """How far past the budget the search went, in its unit; 0 while within it."""
        return max(self.spent - self.budget.amount, 0)

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.budget.amount

    # -- charging ------------------------------------------------------------------------------------------

    def check_device(self, device: str) -> None:
        """Raise :class:`ValueError` (one sentence) when trials on ``device`` (``gpu`` or ``cpu``) cannot
        spend this budget, so that a search fails before it starts rather than at its first charge."""
        if device not in DEVICES:
            raise ValueError(f"device must be 'gpu' or 'cpu', not {device!r}")
        want = self.budget.device
        if want is None or want == device:
            return
        if want == "gpu":
            raise ValueError(
                f"budget {self.budget} counts GPU time but no GPU is available; give a cpu-hours or plain "
                f"time budget such as 6cpu-hours or 45min"
            )
        raise ValueError(
            f"budget {self.budget} counts CPU time but the trials would run on a GPU; give a gpu-hours or "
            f"plain time budget such as 12gpu-hours or 45min"
        )

    def charge(self, cost: TrialCost) -> None:
        """Record what a trial that ended (or a piece of overhead) cost."""
        if not isinstance(cost, TrialCost):
            raise TypeError(f"charge takes a TrialCost, not {type(cost).__name__}")
        want = self.budget.device
        if want is not None and cost.device != want:
            raise ValueError(
                f"budget {self.budget} counts {want.upper()} time but {cost.label} ran on "
                f"{cost.device.upper()}; charge it to a {cost.device}-hours or plain time budget instead"
            )
        with self._lock:
            self._charges.append(cost)

    # -- deciding ------------------------------------------------------------------------------------------

    def _recent(self) -> list[TrialCost]:
        """The last ``window`` trials' charges (overhead excluded)."""
        with self._lock:
            return [c for c in self._charges if not c.overhead][-self.window :]

    def typical_seconds(self) -> float | None:
        """The wall seconds a trial takes: the mean over the last ``window`` trials; None before any ended."""
        recent = self._recent()
        return math.fsum(c.seconds for c in recent) / len(recent) if recent else None

    def estimate_next(self) -> float | None:
        """The expected cost of the next trial: the mean over the last ``window`` trials (overhead excluded)
        of their device-seconds, or of their wall seconds for a wall budget; None before any trial ended."""
        if self.budget.kind == "wall-seconds":
            return self.typical_seconds()
        recent = self._recent()
        return math.fsum(c.charge for c in recent) / len(recent) if recent else None

    def can_start(self, pending: int = 0) -> bool:
        """Whether one more trial fits, with ``pending`` trials already started and not yet charged (each
        assumed to cost the estimate). See the module docstring for the rule of each kind."""
        if isinstance(pending, bool) or not isinstance(pending, int) or pending < 0:
            raise ValueError(f"pending must be a whole number of at least 0, not {pending!r}")
        budget = self.budget
        with self._lock:
            if budget.kind == "trials":
                return self.trials + pending < budget.amount
            spent = self.spent
            if spent >= budget.amount:
                return False
            estimate = self.estimate_next()
            if estimate is None:
                return pending == 0
            if budget.kind == "wall-seconds":
                return spent + estimate <= budget.amount
            return spent + (pending + 1) * estimate <= budget.amount

    def projected_trials(self) -> int | None:
        """How many trials the whole budget should buy, ended ones included: the count of a trials budget; for
        a time budget, from the estimate (None before any trial ended, or when trials cost nothing).

        A wall budget projects from the rate trials have ended at so far, so a parallel search's projection
        rises after its first trial (which runs alone).
        """
        budget = self.budget
        if budget.kind == "trials":
            return int(budget.amount)
        with self._lock:
            trials = self.trials
            estimate = self.estimate_next()
            if estimate is None or estimate <= 0:
                return None
            if budget.kind == "wall-seconds":
                elapsed = self.elapsed
                if elapsed <= 0:
                    return None
                return max(trials, math.floor(trials * budget.amount / elapsed))
            left = max(budget.amount - self.device_seconds, 0.0)
            return trials + math.floor(left / (self._ladder_trial_cost() or estimate))

    def _ladder_trial_cost(self) -> float | None:
        """On a fidelity ladder, a trial's expected cost once rungs are in their steady mix: rung ``r`` is
        ``eta**-r`` of the trials (normalized), and costs the mean of its recent trials, or, before any
        reached it, rung 0's mean times the images it adds (``eta**r - eta**(r-1)`` rung-0 units). Early in a
        search nearly every trial is a cheap rung-0 one: the plain mean would project too many. None without
        a ladder or a rung-0 trial."""
        if self.ladder is None:
            return None
        eta, rungs = self.ladder
        recent: dict[int, list[float]] = {}
        for cost in self._charges:
            if not cost.overhead and cost.rung is not None:
                recent.setdefault(cost.rung, []).append(cost.charge)
        if not recent.get(0):
            return None
        means = {r: math.fsum(c[-self.window :]) / len(c[-self.window :]) for r, c in recent.items()}
        shares = [eta**-r for r in range(rungs)]
        costs = [means.get(r, means[0] * (eta**r - eta ** (r - 1) if r else 1)) for r in range(rungs)]
        return math.fsum(p * c for p, c in zip(shares, costs, strict=True)) / math.fsum(shares)

    def summary(self) -> str:
        """One line for the log: what was spent, what a trial costs, how many trials the budget buys."""
        budget = self.budget
        with self._lock:
            trials = self.trials
            estimate = self.estimate_next()
            projected = self.projected_trials()
            overhead = self.overhead_seconds
        noun = "trial" if trials == 1 else "trials"
        if budget.kind == "trials":
            line = f"budget {budget}: {trials} of {budget.amount} trials ended"
            line += f", {human_seconds(self.device_seconds)} of device time spent"
        elif budget.kind == "wall-seconds":
            passed = f"{human_seconds(self.elapsed)} of {human_seconds(budget.amount)}"
            line = f"budget {budget}: {passed} of wall time passed"
            line += f", {trials} {noun} ended"
        else:
            line = (
                f"budget {budget}: {human_seconds(self.device_seconds)} of {human_seconds(budget.amount)} of "
            )
            line += f"{budget.time_label} spent on {trials} {noun}"
            if overhead:
                line += f" and overhead ({human_seconds(overhead)})"
        if estimate is not None:
            what = "wall time" if budget.kind == "wall-seconds" else budget.time_label
            line += f"; a trial takes about {human_seconds(estimate)} of {what}"
        if projected is not None and budget.kind != "trials":
            line += f"; about {projected} trials in all"
        return line

    # -- resuming ------------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The tracker's state as plain JSON: the budget's canonical text, the charges, the wall seconds."""
        with self._lock:
            return {
                "budget": str(self.budget),
                "charges": [c.to_dict() for c in self._charges],
                "elapsed": self.elapsed,
            }

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        budget: Budget | str | None = None,
        window: int = 10,
        clock: Callable[[], float] = time.monotonic,
    ) -> BudgetTracker:
        """Rebuild a tracker from :meth:`to_dict`; it continues with what was spent. ``budget`` replaces the
        stored one (a resumed search given a new budget); the charges must suit it."""
        tracker = cls(data["budget"] if budget is None else budget, window=window, clock=clock)
        elapsed = float(data.get("elapsed", 0.0))
        if not (math.isfinite(elapsed) and elapsed >= 0):
            raise ValueError(f"stored elapsed wall seconds must be finite and not negative, not {elapsed!r}")
        tracker._elapsed_before = elapsed
        for item in data.get("charges", ()):
            tracker.charge(TrialCost.from_dict(item))
        return tracker

    def __repr__(self) -> str:
        return f"BudgetTracker({str(self.budget)!r}, spent={self.spent!r}, trials={self.trials})"

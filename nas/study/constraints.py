"""Hard limits on what a found network may cost: ``--max-macs``, ``--max-params``, ``--max-latency`` and
``--at-cost-of <baseline>``.

A limit is checked on the sampled architecture before anything is built or trained: MACs and params from
the memoized part counts (:func:`evaluators.complexity.count`, at the search's ``--macs-img-size``), latency
from the device's latency table (:mod:`evaluators.latency`). A sample over a limit is *rejected*: it is never
evaluated, it is charged only the seconds of its check (as overhead: it is no trial of a ``trials`` budget),
and the sampler is told how far over it was. Each limit's constraint value is the relative excess
``value / limit - 1`` (at most 0 when met), so that limits of different units add up sensibly in the
samplers' infeasibility scores (TPE and NSGA-II sum the positive values). The space's baselines are the
study's references: they are evaluated whatever their cost, and marked when over a limit.

``--at-cost-of CoAtNet-0`` sets ``macs`` and ``params`` limits to that baseline's own (at the same
``--macs-img-size``), combined with any explicit limit by the smaller of the two.

A space where almost nothing is feasible must not spin: :class:`RejectionStreak` stops a worker after
:data:`REJECTED_IN_A_ROW` rejected samples in a row, with a sentence naming the limits and the cheapest
sample seen. It also stops a worker whose last :data:`REJECTED_IN_A_ROW` samples were all repeats
(architectures the study had evaluated, answered from the study at no cost: the sampler has converged, or the
space is exhausted), which would otherwise spin through a time budget they never spend; and one whose last
:data:`FAILED_IN_A_ROW` trials all failed with the same reason (a package the trials import is broken, a
setting no network can train under): each such trial is charged only its seconds before the failure, so a
time budget would otherwise fill the study with failures for as long as it lasts.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from search_spaces import get_space

__all__ = [
    "FAILED_IN_A_ROW",
    "REJECTED_IN_A_ROW",
    "Limits",
    "NothingFeasible",
    "NothingNew",
    "RejectionStreak",
    "SameFailure",
    "format_count",
    "parse_count",
    "parse_ms",
]

REJECTED_IN_A_ROW = 50  # a worker that drew this many rejected samples in a row stops, saying why
FAILED_IN_A_ROW = 10  # ... and one whose trials failed this many times in a row with the same reason
LIMITED = ("macs", "params", "latency_ms")  # the metrics a limit can be set on, as the trials record them
_PREFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_COUNT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmgt]?)\s*", re.IGNORECASE)
_TIME = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(ms|s|us|µs)?\s*", re.IGNORECASE)
_TIME_UNIT = {"ms": 1.0, "s": 1e3, "us": 1e-3, "µs": 1e-3}


def parse_count(value: str | float | int, what: str) -> float:
    """A MAC or parameter count: ``4.2G``, ``25M``, ``800k``, ``4.2e9`` or a plain number; ValueError in one
    sentence (``what`` names the option) for anything else or a count that is not positive."""
    return _parse(value, what, _COUNT, _PREFIX, "a count such as 4.2G, 25M or 800K", "count")


def parse_ms(value: str | float | int, what: str = "max-latency") -> float:
    """A latency in milliseconds: ``12ms``, ``0.5s``, ``800us`` or a plain number (ms)."""
    return _parse(value, what, _TIME, _TIME_UNIT, "a time such as 12ms or 0.5s", "time")


def _parse(
    value: str | float | int,
    what: str,
    form: re.Pattern[str],
    units: dict[str, float],
    example: str,
    noun: str,
) -> float:
    """A positive number, or a number and a unit of ``units`` (``form`` matches both; no unit is the unit
    ``""``, or ``ms`` for a time)."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected {example}, got {value!r}")
    if isinstance(value, (int, float)):
        number = float(value)
    else:
        match = form.fullmatch(str(value))
        if match is None:
            raise ValueError(f"{what}: expected {example}, got {value!r}")
        number = float(match.group(1)) * units[(match.group(2) or next(iter(units))).lower()]
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"{what}: must be a positive {noun}, got {value!r}")
    return number


def format_count(value: float) -> str:
    """4.2e9 -> '4.2G' (three significant digits)."""
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{prefix}"
    return f"{value:.3g}"


def _format(name: str, value: float) -> str:
    return f"{value:.3g} ms" if name == "latency_ms" else format_count(value)


@dataclass(frozen=True)
class Limits:
    """The resolved limits of a search (None: no limit on that metric) and the baseline they came from."""

    macs: float | None = None
    params: float | None = None
    latency_ms: float | None = None
    at_cost_of: str | None = None

    def items(self) -> list[tuple[str, float]]:
        return [(name, getattr(self, name)) for name in LIMITED if getattr(self, name) is not None]

    def __bool__(self) -> bool:
        return bool(self.items())

    def violations(self, metrics: Mapping[str, Any]) -> dict[str, float]:
        """Each limit's constraint value for ``metrics``: ``value / limit - 1`` (<= 0 when met)."""
        return {name: float(metrics[name]) / limit - 1.0 for name, limit in self.items()}

    def describe(self) -> str:
        """'macs <= 4.2G, params <= 27.4M (at the cost of CoAtNet-0)', or '' without limits."""
        text = ", ".join(f"{name} <= {_format(name, limit)}" for name, limit in self.items())
        return f"{text} (at the cost of {self.at_cost_of})" if text and self.at_cost_of else text

    def to_dict(self) -> dict[str, Any]:
        return {**dict(self.items()), **({"at_cost_of": self.at_cost_of} if self.at_cost_of else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Limits:
        data = data or {}
        return cls(*(data.get(name) for name in LIMITED), data.get("at_cost_of"))


def resolve_limits(
    space: str,
    *,
    max_macs: float | None,
    max_params: float | None,
    max_latency: float | None,
    at_cost_of: str | None,
    img_size: int,
) -> Limits:
    """The limits a search runs under: explicit ones, and a baseline's MACs and params (the smaller wins)."""
    macs, params = max_macs, max_params
    if at_cost_of is not None:
        own_macs, own_params = baseline_cost(space, at_cost_of, img_size)
        macs = own_macs if macs is None else min(macs, own_macs)
        params = own_params if params is None else min(params, own_params)
    return Limits(macs, params, max_latency, at_cost_of)


@functools.cache
def baseline_cost(space: str, name: str, img_size: int) -> tuple[float, float]:
    """(MACs, params) of the space's baseline ``name`` at ``img_size``, counted as every trial is."""
    from evaluators.complexity import count  # heavy: torch

    cost = count(get_space(space).baselines()[name].arch, img_size=img_size, in_chans=3, num_classes=1000)
    return float(cost.macs), float(cost.params)


class NothingFeasible(Exception):
    """A worker stopped: its last :data:`REJECTED_IN_A_ROW` samples were all over the limits."""


class NothingNew(NothingFeasible):
    """A worker stopped: its last :data:`REJECTED_IN_A_ROW` samples were all architectures the study had."""


class SameFailure(NothingFeasible):
    """A worker stopped: its last :data:`FAILED_IN_A_ROW` trials all failed with the same reason."""


class RejectionStreak:
    """Counts a worker's rejected samples in a row, and the cheapest of them per limited metric; its
    repeated samples in a row; and its trials in a row that failed with one same reason."""

    # class defaults: a streak pickled (with a Ray searcher) before failures were counted resumes with these
    most_failed, failed, failure = FAILED_IN_A_ROW, 0, ""

    def __init__(self, limits: Limits, most: int | None = None, most_failed: int | None = None) -> None:
        self.limits, self.most = limits, most or REJECTED_IN_A_ROW
        self.most_failed = most_failed or FAILED_IN_A_ROW
        self.count = 0
        self.repeats = 0
        self.failed, self.failure = 0, ""
        self.cheapest: dict[str, float] = {}

    def add(
        self, rejected: bool, metrics: Mapping[str, Any], repeated: bool = False, failure: str | None = None
    ) -> None:
        """Record one finished sample (``failure``: the reason its trial failed, None if it did not); raise
        :class:`NothingFeasible` when the rejections in a row reach their end, :class:`NothingNew` when the
        repeats in a row do, :class:`SameFailure` when the failures in a row with one reason do."""
        if failure is None:
            self.failed = 0
        else:
            self.failed = self.failed + 1 if failure == self.failure else 1
            self.failure = failure
            if self.failed >= self.most_failed:
                raise SameFailure(
                    f"the last {self.failed} trials all failed with the same reason, as every later one "
                    f"would: {failure}; fix its cause, then resume the study"
                )
        if repeated:
            self.repeats += 1
            if self.repeats >= self.most:
                raise NothingNew(
                    f"the last {self.repeats} samples were all architectures the study had evaluated: the "
                    "sampler has converged or the space is exhausted; the search ends here"
                )
            return
        self.repeats = 0
        if not rejected:
            self.count, self.cheapest = 0, {}
            return
        self.count += 1
        for name, _ in self.limits.items():
            value = float(metrics[name])
            self.cheapest[name] = min(value, self.cheapest.get(name, math.inf))
        if self.count >= self.most:
            seen = ", ".join(f"{name} {_format(name, v)}" for name, v in self.cheapest.items())
            raise NothingFeasible(
                f"the last {self.count} samples were all over the limits ({self.limits.describe()}); the "
                f"lowest they reached: {seen}; loosen the limits, or search a space of smaller networks"
            )

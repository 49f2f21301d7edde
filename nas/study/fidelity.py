"""The fidelity ladder and its promotion rule: asynchronous successive halving over several objectives.

ASHA (Li et al. 2020) trains many configurations briefly and promotes the promising ones to longer training,
without waiting for a rung to fill: whenever a worker is free, it promotes a trial if one qualifies, else it
starts a new one at the bottom. The rule here is ASHA's, with "promising" defined for a Pareto search:

- **Rungs.** Rung ``r`` (0-based) trains a network on ``min_images * eta**r`` images in all (the images of
  every rung below included: a promoted trial continues from its own checkpoint). The top rung is
  ``rungs - 1``. The learning-rate schedule (``schedule``) either spans the top rung (``"top"``: a lower
  rung is measured mid-schedule, at a high rate) or restarts at every rung (``"rung"``: warm restarts,
  each rung's images get the whole schedule, warmup in rung 0 only, so every rung is measured annealed).
  Either way the schedule is fixed before training starts, so continuing a trial is the same training as
  running it to the top in one go.
- **Validation.** Every rung is measured on the profile's held-out validation images, or (``val_images``)
  the rungs below the top on the first ``val_images`` of them only: a short rung's validation costs as much
  as a long one's, so on a small proxy it is a large part of the rung, and the rung only has to rank (the
  top rung, whose top-1 the front is drawn from, always validates on all of them). Validation comes after
  the checkpoint is saved, so it never changes the training a promotion continues.
- **Order at a rung.** The trials that completed rung ``r`` are ordered by non-dominated sorting of their
  objectives at that rung (top-1 reached there, and the costs: MACs, params, latency, which do not change
  with the rung), front by front; within a front by crowding distance, largest first (the extremes of a
  front are infinitely far, so they come first); remaining ties by trial number, oldest first.
- **Promotion.** With ``n`` trials completed at rung ``r``, the first ``n // eta`` of that order qualify for
  rung ``r + 1``. A free worker promotes the best-placed qualified trial that has not been promoted yet,
  looking at the highest rung first (finishing trials is worth more than starting them); if none qualifies
  anywhere, it starts a new trial. A trial that failed at a rung, or was promoted already (its next rung is
  running, done or failed), is never promoted from that rung again.
- **Quota** (``promotion``). Under ``"asha"`` (ASHA's own rule, the default) a trial is promoted whenever it
  is in the first ``n // eta`` now, so a rung promotes every trial that ever was: more than ``1 / eta`` of
  it when the sampler improves, each new architecture placing above most earlier ones (in bench_fidelity's
  seed 7-9 ladders 59-65% of rung 0's results were in its first third at some point, against 38-40% of the
  same results taken in a shuffled order). Under ``"quota"`` a rung promotes at most ``n // eta`` of its
  ``n`` results in all (its promotions running, done or failed count): a promotion that falls due goes to
  the best-placed trial not yet promoted, so the rungs above train ``1 / eta`` of the trials below them as
  successive halving intends, and a late, better trial waits for the next slot instead of adding to the
  promotions.

Everything here is plain data: :func:`next_promotion` gets the rung results the driver read from its
engine's records (Optuna's trials, or the trials Ray Tune reported), so both engines share one rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nas.core.bounds import MAX_ETA, MAX_IMAGES, MAX_RUNGS, shown, whole
from nas.study.pareto import nondominated_sort

__all__ = [
    "DEFAULT_RUNG_VAL_IMAGES",
    "FIDELITIES",
    "PROMOTIONS",
    "RUNG_SCHEDULES",
    "Ladder",
    "Promotion",
    "RungResult",
    "crowding_distances",
    "default_min_images",
    "next_promotion",
    "rung_order",
    "rung_result",
]

FIDELITIES = ("single", "ladder")
PROMOTIONS = ("asha", "quota")  # promote whatever is in a rung's top 1/eta now; at most 1/eta of it in all
RUNG_SCHEDULES = ("top", "rung")  # one schedule spanning the top rung; one restarted at every rung
# The rungs below the top validate on this many images unless told otherwise (``--rung-val-images``): on
# coatnet's cpu profile, 2000 held-out images took 0.61-0.91 s of a 1.4-2.2 s rung-0 trial and 500 took
# 0.16-0.23 s (benchmarks/bench_fidelity.py, notes/lab-notebook.md, "Fidelity ladder").
DEFAULT_RUNG_VAL_IMAGES = 500


def default_min_images(proxy_images: int, eta: int, batch_size: int) -> int:
    """Rung 0's images when ``--min-fidelity`` is not given: ``1 / (2 eta)`` of what the proxy trains on, so
    that rung 1 trains on half the proxy's images and, at eta 3 and 3 rungs, the top rung on 1.5 times them;
    at least one batch. On coatnet's cpu profile (3968 images) this is the ladder bench_fidelity.py measured:
    661, 1983, 5949 images. (Until 2026-11 rung 0 trained on half the proxy: 1984, 5952, 17856 there, a
    ladder no benchmark ran, whose rung-0 trial cost half a proxy trial.)"""
    return max(batch_size, proxy_images // (2 * eta))


@dataclass(frozen=True)
class Ladder:
    """``rungs`` rungs of training, rung ``r`` seeing ``min_images * eta**r`` images in all, on a
    learning-rate ``schedule`` of :data:`RUNG_SCHEDULES`, the rungs below the top validated on ``val_images``
    images (None: as many as the top; the module docstring says why), promoting by a rule of
    :data:`PROMOTIONS`."""

    eta: int = 3
    rungs: int = 3
    min_images: int = 1000
    schedule: str = "top"
    val_images: int | None = None
    promotion: str = "asha"

    def __post_init__(self) -> None:
        whole("eta", self.eta, 2, MAX_ETA)
        whole("rungs", self.rungs, 2, MAX_RUNGS)
        whole("min-fidelity", self.min_images, 1, MAX_IMAGES)
        if self.val_images is not None:
            whole("rung-val-images", self.val_images, 1, MAX_IMAGES)
        for option, value, allowed in (
            ("rung-schedule", self.schedule, RUNG_SCHEDULES),
            ("promotion", self.promotion, PROMOTIONS),
        ):
            if value not in allowed:
                raise ValueError(f"{option}: unknown {shown(value)}; allowed: {', '.join(allowed)}")

    @property
    def top(self) -> int:
        return self.rungs - 1

    def images(self, rung: int) -> int:
        """Images a trial has trained on when it completes ``rung``."""
        if not 0 <= rung < self.rungs:
            raise ValueError(f"rung {rung} is not a rung of a {self.rungs}-rung ladder")
        return self.min_images * self.eta**rung

    def validation(self, rung: int) -> int | None:
        """Validation images of ``rung``: ``val_images`` below the top, None (all of them) at the top."""
        self.images(rung)  # refuses a rung outside the ladder
        return None if rung == self.top else self.val_images

    @property
    def restarts(self) -> tuple[int, ...]:
        """Images at which the learning-rate schedule restarts: every rung's end below the top under the
        ``"rung"`` schedule, none under ``"top"``."""
        return tuple(self.images(r) for r in range(self.top)) if self.schedule == "rung" else ()

    @property
    def trials_to_top(self) -> tuple[int, int]:
        """After how many trials (one worker) the first architecture completes the top rung: (soonest,
        latest). Rung ``r + 1`` promotes the best ``n // eta`` of rung ``r``'s ``n`` results, so it needs
        ``eta`` of them for its first promotion, and then one more per promotion at the soonest (each new
        result the best so far): ``1 + (top - r) * (eta - 1)`` trials at rung ``r``, 5 + 3 + 1 = 9 at eta 3
        and 3 rungs. At the latest (each new result below the earlier ones) it needs ``eta**(top - r)``
        there, 9 + 3 + 1 = 13. Under the ``"quota"`` promotion a rung's ``k``-th promotion waits for its
        ``k * eta``-th result whatever the results, so the soonest is the latest. A trials budget below the
        soonest ends with an empty front."""
        latest = sum(self.eta ** (self.top - r) for r in range(self.rungs))
        if self.promotion == "quota":
            return latest, latest
        return sum(1 + (self.top - r) * (self.eta - 1) for r in range(self.rungs)), latest


@dataclass(frozen=True)
class RungResult:
    """One trial's outcome at one rung: ``lineage`` names the trial across its rungs (on Optuna, the number
    of its rung-0 trial); ``values`` are its objective values there (None: it failed at that rung)."""

    lineage: int
    rung: int
    values: tuple[float, ...] | None


def rung_result(
    lineage: int, rung: int, attrs: Mapping[str, Any], values: Sequence[float] | None
) -> RungResult | None:
    """A recorded trial of ``lineage`` at ``rung`` as the ladder counts it, the one rule of both engines
    (``attrs``: what :meth:`~nas.search.trial.TrialRecord.attrs` holds; ``values``: its objectives if it
    completed, else None): None for a rejected sample or a repeat (neither trained the rung), and a result
    without values unless it completed within the limits."""
    if attrs.get("rejected") or attrs.get("repeat_of") is not None:
        return None
    feasible = attrs.get("feasible", True) is not False
    return RungResult(lineage, rung, tuple(values) if values is not None and feasible else None)


@dataclass(frozen=True)
class Promotion:
    """Continue ``lineage`` from its checkpoint of rung ``rung - 1`` up to ``rung``."""

    lineage: int
    rung: int


def crowding_distances(points: Sequence[Sequence[float]]) -> list[float]:
    """NSGA-II's crowding distance of each point within its front: per objective, the gap between its
    neighbours in that objective over the front's range, summed; the extremes get infinity."""
    n = len(points)
    if n <= 2:
        return [math.inf] * n
    distance = [0.0] * n
    for m in range(len(points[0])):
        order = sorted(range(n), key=lambda i: points[i][m])
        low, high = points[order[0]][m], points[order[-1]][m]
        distance[order[0]] = distance[order[-1]] = math.inf
        if high == low:
            continue
        for k in range(1, n - 1):
            distance[order[k]] += (points[order[k + 1]][m] - points[order[k - 1]][m]) / (high - low)
    return distance


def rung_order(results: Sequence[RungResult], directions: Sequence[str]) -> list[RungResult]:
    """``results`` (completed ones, all at one rung) best first: by front, then crowding distance
    (largest first), then lineage (oldest first)."""
    points = [r.values for r in results]
    if any(p is None for p in points):
        raise ValueError("rung_order orders completed results only")
    ordered: list[RungResult] = []
    for front in nondominated_sort(points, directions):  # type: ignore[arg-type]
        crowding = crowding_distances([points[i] for i in front])  # type: ignore[misc]
        place = sorted(range(len(front)), key=lambda k: (-crowding[k], results[front[k]].lineage))
        ordered.extend(results[front[k]] for k in place)
    return ordered


def next_promotion(
    results: Iterable[RungResult], ladder: Ladder, directions: Sequence[str]
) -> Promotion | None:
    """The promotion a free worker should run now, or None (start a new trial): the module docstring's
    rule. ``results`` holds every rung outcome known, completed or failed, and the promotions under way as
    results with ``values`` None at their rung (so that no other worker promotes them again)."""
    by_rung: dict[int, list[RungResult]] = {}
    taken: set[tuple[int, int]] = set()  # (lineage, rung) already run, running or failed
    for result in results:
        taken.add((result.lineage, result.rung))
        if result.values is not None:
            by_rung.setdefault(result.rung, []).append(result)
    for rung in range(ladder.top - 1, -1, -1):
        done = by_rung.get(rung, [])
        slots = len(done) // ladder.eta
        if ladder.promotion == "quota" and sum(at == rung + 1 for _, at in taken) >= slots:
            continue  # this rung's promotions (running, done or failed) have taken its slots
        qualified = rung_order(done, directions)[:slots]
        for result in qualified:
            if (result.lineage, rung + 1) not in taken:
                return Promotion(result.lineage, rung + 1)
    return None

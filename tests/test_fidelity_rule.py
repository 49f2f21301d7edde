"""The ladder's promotion rule on hand-made fronts: order by front (nas.study.pareto's non-dominated sort,
tested in test_pareto) then crowding distance, the top 1/eta of each rung, highest rung first, and no trial
promoted twice."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable

import pytest

from nas.study.fidelity import (
    Ladder,
    Promotion,
    RungResult,
    crowding_distances,
    next_promotion,
    rung_order,
)
from nas.study.pareto import nondominated_sort

TOP1_MACS = ("maximize", "minimize")
TOP1_MACS_LATENCY = ("maximize", "minimize", "minimize")


def _results(rung: int, points: list[tuple[float, ...]], first: int = 0) -> list[RungResult]:
    return [RungResult(first + i, rung, p) for i, p in enumerate(points)]


# --- sorting --------------------------------------------------------------------------------------


def test_crowding_distance_by_hand() -> None:
    # a front of four points on two objectives, ranges 6 and 3
    points = [(0.0, 3.0), (2.0, 2.0), (3.0, 1.0), (6.0, 0.0)]
    distances = crowding_distances(points)
    assert distances[0] == distances[3] == math.inf
    assert distances[1] == pytest.approx((3 - 0) / 6 + (3 - 1) / 3)
    assert distances[2] == pytest.approx((6 - 2) / 6 + (2 - 0) / 3)
    assert crowding_distances([(1.0, 1.0), (2.0, 0.0)]) == [math.inf, math.inf]


def test_two_objective_order_by_hand() -> None:
    # (top-1, MACs): A, B, D are the front (D in its middle), C is dominated by A and D, E by everything
    a, b, c, d, e = (80, 1.0), (70, 0.5), (60, 2.0), (75, 0.8), (50, 3.0)
    results = _results(0, [a, b, c, d, e])
    order = [r.lineage for r in rung_order(results, TOP1_MACS)]
    assert order == [0, 1, 3, 2, 4]  # extremes A and B (infinitely crowded, oldest first), then D, C, E


def test_three_objective_order_by_hand() -> None:
    # (top-1, MACs, latency): P is best on latency only, which keeps it on the front, though A and D
    # dominate it on the first two objectives; Q is dominated by A on all three
    a, d, p, q = (80, 1.0, 20.0), (75, 0.8, 30.0), (60, 2.0, 5.0), (70, 1.5, 25.0)
    results = _results(0, [a, d, p, q])
    fronts = nondominated_sort([r.values for r in results], TOP1_MACS_LATENCY)
    assert [sorted(f) for f in fronts] == [[0, 1, 2], [3]]
    assert [r.lineage for r in rung_order(results, TOP1_MACS_LATENCY)][-1] == 3


# --- promotion ------------------------------------------------------------------------------------


def test_the_top_third_qualifies_and_each_trial_is_promoted_once() -> None:
    ladder = Ladder(eta=3, rungs=3, min_images=100)
    a, b, c, d, e, f = (80, 1.0), (70, 0.5), (60, 2.0), (75, 0.8), (50, 3.0), (40, 4.0)
    results = _results(0, [a, b, c, d, e])
    assert next_promotion(results[:2], ladder, TOP1_MACS) is None  # 2 // 3 = 0 qualify
    assert next_promotion(results, ladder, TOP1_MACS) == Promotion(0, 1)  # 5 // 3 = 1: A
    running = [*results, RungResult(0, 1, None)]  # A's promotion under way: nobody else qualifies yet
    assert next_promotion(running, ladder, TOP1_MACS) is None
    six = [*running, RungResult(5, 0, f)]  # 6 // 3 = 2 qualify: A (taken) and B
    assert next_promotion(six, ladder, TOP1_MACS) == Promotion(1, 1)


def test_a_quota_promotes_no_more_than_n_over_eta_and_a_late_better_trial_waits() -> None:
    """Results improving one after another (top-1 rising at equal MACs): ASHA promotes each new best as it
    comes; the quota promotes one in three, each slot to the best trial not yet promoted."""
    asha, quota = (
        Ladder(eta=3, rungs=2, min_images=100),
        Ladder(eta=3, rungs=2, min_images=100, promotion="quota"),
    )
    results = _results(0, [(10, 1.0), (20, 1.0), (30, 1.0)])
    for ladder in (asha, quota):
        assert next_promotion(results, ladder, TOP1_MACS) == Promotion(2, 1)  # 3 // 3 = 1: the 30
    results = [*results, RungResult(2, 1, (35, 1.0)), RungResult(3, 0, (40, 1.0))]  # 30 promoted; 40 comes
    assert next_promotion(results, asha, TOP1_MACS) == Promotion(3, 1)  # 40 is the first third now
    assert next_promotion(results, quota, TOP1_MACS) is None  # 4 // 3 = 1 slot, taken by the 30
    results += _results(0, [(5, 1.0), (6, 1.0)], first=4)  # 6 results: a second slot
    assert next_promotion(results, quota, TOP1_MACS) == Promotion(3, 1)
    failed = [*results, RungResult(3, 1, None)]  # a failed promotion keeps its slot
    assert next_promotion(failed, quota, TOP1_MACS) is None
    with pytest.raises(ValueError, match="promotion: unknown 'halving'; allowed: asha, quota"):
        Ladder(promotion="halving")


@pytest.mark.parametrize("eta", [2, 3])
def test_under_an_improving_sampler_asha_over_promotes_and_the_quota_does_not(eta: int) -> None:
    """The module docstring's reason for the quota: when each new architecture tends to place above the
    earlier ones, ASHA promotes far more than 1 / eta of a rung; the quota exactly n // eta of n."""
    shares = {}
    for promotion in ("asha", "quota"):
        ladder = Ladder(eta=eta, rungs=2, min_images=10, promotion=promotion)
        rng = random.Random(eta)
        results: list[RungResult] = []
        for i in range(150):  # top-1 drifting upwards with noise; MACs random
            step = next_promotion(results, ladder, TOP1_MACS)
            lineage, rung = (i, 0) if step is None else (step.lineage, step.rung)
            results.append(RungResult(lineage, rung, (i / 15 + rng.gauss(0, 3), rng.random())))
        done = sum(r.rung == 0 for r in results)
        promoted = sum(r.rung == 1 for r in results)
        assert promoted <= done // eta if promotion == "quota" else promoted > 1.3 * done / eta
        assert promoted >= done // eta - 1  # a quota's slot opened by the last result is still due
        shares[promotion] = promoted / done
    assert shares["asha"] > shares["quota"]


def test_a_failed_promotion_is_not_retried_and_a_failed_trial_never_qualifies() -> None:
    ladder = Ladder(eta=2, rungs=3, min_images=100)
    results = [*_results(0, [(80, 1.0), (70, 2.0)]), RungResult(2, 0, None)]  # trial 2 failed
    assert next_promotion(results, ladder, TOP1_MACS) == Promotion(0, 1)  # 2 completed // 2 = 1
    failed = [*results, RungResult(0, 1, None)]
    assert next_promotion(failed, ladder, TOP1_MACS) is None


def test_the_highest_rung_is_promoted_first() -> None:
    ladder = Ladder(eta=3, rungs=3, min_images=100)
    rung0 = _results(0, [(50 + i, 1.0 + i) for i in range(9)])  # no one dominates: all one front
    rung1 = [RungResult(r.lineage, 1, (60 + r.lineage, 1.0 + r.lineage)) for r in rung0[:3]]
    promotion = next_promotion([*rung0, *rung1], ladder, TOP1_MACS)
    assert promotion is not None and promotion.rung == 2
    # rung 1's front is 3 points: its extremes (lineages 0 and 2) come first, oldest first
    assert promotion.lineage == 0


def test_nothing_is_promoted_past_the_top_rung() -> None:
    ladder = Ladder(eta=2, rungs=2, min_images=100)
    results = [*_results(0, [(80, 1.0), (70, 2.0)]), *_results(1, [(85, 1.0), (75, 2.0)])]
    results.append(RungResult(0, 1, (85, 1.0)))
    assert next_promotion([r for r in results if r.lineage == 0 or r.rung == 0], ladder, TOP1_MACS) is None


def test_ladder_images() -> None:
    ladder = Ladder(eta=3, rungs=4, min_images=100)
    assert [ladder.images(r) for r in range(4)] == [100, 300, 900, 2700]
    with pytest.raises(ValueError, match="eta"):
        Ladder(eta=1)
    with pytest.raises(ValueError, match="rung 4"):
        ladder.images(4)


def test_the_rung_schedule_restarts_at_every_rung_below_the_top() -> None:
    assert Ladder(eta=3, rungs=4, min_images=100).restarts == ()  # "top": one schedule spans the ladder
    assert Ladder(eta=3, rungs=4, min_images=100, schedule="rung").restarts == (100, 300, 900)
    with pytest.raises(ValueError, match="rung-schedule: unknown 'cyclic'; allowed: top, rung"):
        Ladder(schedule="cyclic")


def test_the_rungs_below_the_top_validate_on_val_images() -> None:
    assert [Ladder(eta=3, rungs=3, min_images=100).validation(r) for r in range(3)] == [None] * 3
    ladder = Ladder(eta=3, rungs=3, min_images=100, val_images=500)
    assert [ladder.validation(r) for r in range(3)] == [500, 500, None]  # the top: every image
    with pytest.raises(ValueError, match="rung 3"):
        ladder.validation(3)
    with pytest.raises(ValueError, match="rung-val-images: must be a whole number between 1 and"):
        Ladder(val_images=0)


@pytest.mark.parametrize("eta", [2, 3, 4])
def test_as_results_arrive_each_rungs_top_share_is_promoted(eta: int) -> None:
    """Asynchronously, one result at a time: a worker never waits (it starts a new trial when nothing
    qualifies), and once the due promotions have run, every trial among the top n // eta of the n that
    completed a rung below the top has been promoted."""
    ladder = Ladder(eta=eta, rungs=3, min_images=10)
    rng = random.Random(eta)
    results: list[RungResult] = []
    lineages = itertools.count()

    def run(step: Promotion | None) -> None:
        lineage, rung = (next(lineages), 0) if step is None else (step.lineage, step.rung)
        results.append(RungResult(lineage, rung, (rng.random(), rng.random())))

    for _ in range(200):
        run(next_promotion(results, ladder, TOP1_MACS))
    while (step := next_promotion(results, ladder, TOP1_MACS)) is not None:
        run(step)
    for rung in range(ladder.top):
        done = [r for r in results if r.rung == rung]
        promoted = {r.lineage for r in results if r.rung == rung + 1}
        top = rung_order(done, TOP1_MACS)[: len(done) // eta]
        assert {r.lineage for r in top} <= promoted
        assert len(done) // eta <= len(promoted) < len(done)  # ASHA may promote a few more than n // eta


def _first_top_rung_result(ladder: Ladder, values: Callable[[int], tuple[float, float]]) -> int:
    """One worker climbs ``ladder``, the trial numbered ``i`` scoring ``values(i)``: the trials run until
    the first top-rung result."""
    results: list[RungResult] = []
    lineages = itertools.count()
    while not any(r.rung == ladder.top for r in results):
        step = next_promotion(results, ladder, TOP1_MACS)
        lineage, rung = (next(lineages), 0) if step is None else (step.lineage, step.rung)
        results.append(RungResult(lineage, rung, values(len(results))))
    return len(results)


@pytest.mark.parametrize(
    ("eta", "rungs", "soonest", "latest"),
    [(2, 3, 6, 7), (3, 3, 9, 13), (2, 4, 10, 15), (4, 2, 5, 5), (3, 4, 16, 40)],
)
def test_the_first_top_rung_result_comes_between_the_soonest_and_the_latest(
    eta: int, rungs: int, soonest: int, latest: int
) -> None:
    """Each new result the best so far (top-1 rising at equal MACs): the soonest; each new one the worst:
    the latest; random results: in between (a trials budget below the soonest leaves the front empty)."""
    ladder = Ladder(eta=eta, rungs=rungs, min_images=10)
    assert ladder.trials_to_top == (soonest, latest)
    quota = Ladder(eta=eta, rungs=rungs, min_images=10, promotion="quota")
    assert quota.trials_to_top == (latest, latest)  # each slot waits for eta more results, whatever they are
    assert _first_top_rung_result(quota, lambda i: (i, 1.0)) == latest
    assert _first_top_rung_result(ladder, lambda i: (i, 1.0)) == soonest
    assert _first_top_rung_result(ladder, lambda i: (-i, 1.0)) == latest
    for seed in range(5):
        rng = random.Random(seed)
        assert soonest <= _first_top_rung_result(ladder, lambda i, r=rng: (r.random(), r.random())) <= latest

"""Small-sample statistics for claims over seeds: the paired t-test, a bootstrap interval, Holm's correction.

A claim that one network beats another is made over a few seeds (3 by default): :func:`paired` gives each
side's mean and sample standard deviation over its seeds and the paired difference ``first - second`` over
the seeds both have, with a two-sided t-test (its 95% interval and p-value) and a bootstrap percentile
interval of the mean difference (:func:`bootstrap_interval`: exact over every resample where there are few,
seeded resampling otherwise); :func:`verdict` says it in one sentence. A run that makes several comparisons
corrects their p-values together with :func:`holm` (Holm's step-down, which controls the family-wise error
rate) and judges each by its corrected p-value (:func:`corrected_verdict`). Pure Python (no SciPy): the t
distribution's CDF by Simpson's rule on its density, its quantile by bisection, both exact to far below the
digits reported.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = [
    "ALPHA",
    "LEVEL",
    "bootstrap_interval",
    "corrected_verdict",
    "holm",
    "paired",
    "t_cdf",
    "t_quantile",
    "verdict",
]

LEVEL = 0.95  # of the paired difference's interval
ALPHA = 0.05  # the family-wise error rate Holm's correction holds a run's comparisons to
EXACT_RESAMPLES = 50_000  # up to this many (n ** n), the bootstrap enumerates every resample
RESAMPLES = 20_000  # otherwise it draws this many, seeded


def t_cdf(t: float, df: int) -> float:
    """Student's t distribution's CDF (Simpson's rule on its density; exact to ~1e-10 for what we need)."""
    if t < 0:
        return 1.0 - t_cdf(-t, df)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def pdf(x: float) -> float:
        return math.exp(log_c - (df + 1) / 2 * math.log1p(x * x / df))

    steps = 2000
    h = t / steps
    area = pdf(0.0) + pdf(t) + sum((4 if i % 2 else 2) * pdf(i * h) for i in range(1, steps))
    return 0.5 + area * h / 3


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t with ``df`` degrees of freedom, by bisection."""
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return (lo + hi) / 2


def paired(
    first: dict[int, float], second: dict[int, float], names: tuple[str, str] = ("found", "baseline")
) -> dict[str, Any]:
    """Mean, std and n of each side's values over its seeds (keyed by ``names``), and the paired difference
    first - second over the seeds both have: mean, std, a two-sided t-test's 95% interval and p-value, and
    the :func:`verdict`."""

    def side(values: dict[int, float]) -> dict[str, Any]:
        vals = list(values.values())
        return {
            "n": len(vals),
            "mean": statistics.fmean(vals) if vals else None,
            "std": statistics.stdev(vals) if len(vals) > 1 else None,
        }

    seeds = sorted(set(first) & set(second))
    diffs = [first[s] - second[s] for s in seeds]
    out: dict[str, Any] = {names[0]: side(first), names[1]: side(second), "seeds": seeds, "n": len(diffs)}
    diff: dict[str, Any] = {"mean": statistics.fmean(diffs) if diffs else None, "values": diffs}
    if len(diffs) > 1:
        sd = statistics.stdev(diffs)
        se = sd / math.sqrt(len(diffs))
        half = t_quantile(0.5 + LEVEL / 2, len(diffs) - 1) * se
        diff.update(std=sd, ci=[diff["mean"] - half, diff["mean"] + half], level=LEVEL)
        if se > 0:
            diff["t"] = diff["mean"] / se
            diff["p"] = 2 * (1 - t_cdf(abs(diff["t"]), len(diffs) - 1))
        diff["bootstrap"] = list(bootstrap_interval(diffs))
    out["difference"] = diff
    out["verdict"] = verdict(diff, names)
    return out


def verdict(diff: dict[str, Any], names: tuple[str, str] = ("found", "baseline")) -> str:
    """The plain sentence for a paired difference of ``names[0]`` over ``names[1]``."""
    first, second = names
    if diff["mean"] is None:
        return "no seed with both networks trained yet"
    if "ci" not in diff:
        lead = f"{first} ahead" if diff["mean"] > 0 else f"{first} does not win"
        return f"{lead} on {len(diff['values'])} seed (no test with n < 2)"
    lo, hi = diff["ci"]
    if lo > 0:
        return f"{first} wins (the 95% interval is above 0)"
    if hi < 0:
        return f"{first} does not win: the {second} is better (the 95% interval is below 0)"
    return f"{first} does not win: no significant difference (the 95% interval holds 0)"


def bootstrap_interval(values: Sequence[float], level: float = LEVEL, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values``: the (1 - level) / 2 and (1 + level) / 2
    quantiles (the smallest mean whose share of resamples at or below it reaches each) of the means of
    resamples drawn with replacement. With n values and n ** n <= :data:`EXACT_RESAMPLES` every resample
    is taken once (exact, no randomness: 27 for 3 seeds); above that :data:`RESAMPLES` are drawn with
    ``seed``."""
    n = len(values)
    if n == 0:
        raise ValueError("bootstrap: no values")
    if n**n <= EXACT_RESAMPLES:
        means = sorted(statistics.fmean(pick) for pick in itertools.product(values, repeat=n))
    else:
        rng = random.Random(seed)
        means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(RESAMPLES))

    def quantile(q: float) -> float:
        return means[max(0, math.ceil(q * len(means) - 1e-9) - 1)]

    return quantile((1 - level) / 2), quantile((1 + level) / 2)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values, in the order given (None, a comparison with no test, stays None
    and does not count): sorted ascending, the i-th of m (from 1) becomes max over j <= i of
    min(1, (m - j + 1) p_j). A comparison is significant at family-wise level a where its adjusted p <= a."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if p is not None and not math.isnan(p))
    m = len(tested)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def corrected_verdict(
    diff: dict[str, Any], p_holm: float | None, names: tuple[str, str] = ("found", "reference")
) -> str:
    """The plain sentence for a paired difference judged by its Holm-corrected p-value ``p_holm`` (at
    :data:`ALPHA`), with the direction taken from the mean difference."""
    first, second = names
    if diff.get("mean") is None:
        return "no seed with both networks trained yet"
    if p_holm is None:
        lead = f"{first} ahead" if diff["mean"] > 0 else f"{first} does not win"
        return f"{lead} on {len(diff['values'])} seed(s), untested (no spread to test)"
    if p_holm <= ALPHA:
        if diff["mean"] > 0:
            return f"{first} wins (Holm-corrected p <= {ALPHA:g})"
        return f"{first} does not win: the {second} is better (Holm-corrected p <= {ALPHA:g})"
    return f"{first} does not win: no significant difference after Holm's correction"

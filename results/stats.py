"""Small-sample statistics for claims over seeds: Student's t and the paired t-test.

A claim that one network beats another is made over a few seeds (3 by default): :func:`paired` gives each
side's mean and sample standard deviation over its seeds and the paired difference ``first - second`` over
the seeds both have, with a two-sided t-test (its 95% interval and p-value); :func:`verdict` says it in one
sentence. Pure Python (no SciPy): the t distribution's CDF by Simpson's rule on its density, its quantile by
bisection, both exact to far below the digits reported.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

__all__ = ["LEVEL", "paired", "t_cdf", "t_quantile", "verdict"]

LEVEL = 0.95  # of the paired difference's interval


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

"""results.stats: Student's t against tabled quantiles, and the paired t-test by hand."""

import itertools
import math
import random

import numpy as np
import pytest

from results.stats import bootstrap_interval, corrected_verdict, holm, paired, t_cdf, t_quantile


def test_t_quantile_and_paired_statistics():
    assert t_quantile(0.975, 2) == pytest.approx(4.302653, abs=1e-5)
    assert t_quantile(0.975, 10) == pytest.approx(2.228139, abs=1e-5)
    found, baseline = {0: 90.0, 1: 91.0, 2: 92.0, 3: 70.0}, {0: 89.0, 1: 89.5, 2: 91.0}
    out = paired(found, baseline)
    assert out["n"] == 3 and out["seeds"] == [0, 1, 2]  # seed 3 has no baseline run: not paired
    assert out["found"]["n"] == 4 and out["baseline"]["mean"] == pytest.approx(89.833333)
    diff = out["difference"]
    assert diff["mean"] == pytest.approx(7 / 6)
    half = 4.302653 * (0.5 / math.sqrt(3)) / math.sqrt(3)  # the diffs 1, 1.5, 1 have std 0.5/sqrt(3)
    assert diff["ci"] == pytest.approx([7 / 6 - half, 7 / 6 + half], abs=1e-5)
    assert 0 < diff["p"] < 0.05 and out["verdict"].startswith("found wins")
    worse = paired({0: 1.0, 1: 2.0, 2: 0.0}, {0: 1.0, 1: 1.0, 2: 2.0})
    assert worse["verdict"].startswith("found does not win: no significant")
    assert paired({0: 1.0}, {0: 2.0})["verdict"].startswith("found does not win on 1 seed")
    names = ("a", "b")
    assert paired({0: 3.0, 1: 4.0, 2: 5.0}, {0: 1.0, 1: 2.1, 2: 3.0}, names)["verdict"].startswith("a wins")
    worse = paired({0: 1.0, 1: 1.2, 2: 1.1}, {0: 3.0, 1: 4.0, 2: 3.5}, names)
    assert worse["verdict"].startswith("a does not win: the b is better")


def test_t_cdf_against_tables():
    # one-sided tail areas of Student's t (any statistics table): t 2.015 at 5 df, 1.96 at a huge df
    assert 1 - t_cdf(2.015048, 5) == pytest.approx(0.05, abs=1e-6)
    assert t_cdf(-1.959964, 10**6) == pytest.approx(0.025, abs=1e-5)
    assert t_cdf(0.0, 3) == 0.5


def test_holm_by_hand():
    # sorted: 0.005, 0.01, 0.03, 0.04 of m = 4 -> 4 x 0.005 = 0.02, 3 x 0.01 = 0.03, 2 x 0.03 = 0.06,
    # 1 x 0.04 = 0.04 raised to the running maximum 0.06; a comparison with no test is left out of m
    adjusted = holm([0.01, None, 0.04, 0.03, 0.005])
    assert adjusted[1] is None
    assert [adjusted[i] for i in (0, 2, 3, 4)] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.6, 0.5]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []


def test_the_corrected_verdict_follows_the_corrected_p():
    diff = {"mean": 1.5, "values": [1.0, 2.0, 1.5]}
    assert corrected_verdict(diff, 0.01).startswith("found wins")
    assert corrected_verdict(diff, 0.2).startswith("found does not win: no significant")
    assert "reference is better" in corrected_verdict({**diff, "mean": -1.5}, 0.01)
    assert "untested" in corrected_verdict(diff, None)


@pytest.mark.parametrize(
    "values", [[1.0, 2.0, 6.0], [0.3, -0.2, 0.9, 0.4], [0.5, 0.1, -0.3, 0.8, 0.2, 0.0, 1.1]]
)
def test_the_bootstrap_interval_against_numpy(values):
    n = len(values)
    if n**n <= 50_000:  # every resample, numpy's inverted-CDF percentiles of their means
        means = np.array([np.mean(pick) for pick in itertools.product(values, repeat=n)])
    else:  # the same seeded draws, drawn independently
        rng = random.Random(0)
        means = np.array([np.mean(rng.choices(values, k=n)) for _ in range(20_000)])
    expected = np.percentile(means, [2.5, 97.5], method="inverted_cdf")
    assert bootstrap_interval(values) == pytest.approx(tuple(expected))
    if n == 3:  # with 3 seeds the 95% interval spans the smallest to the largest difference
        assert bootstrap_interval(values) == (min(values), max(values))
    assert paired(dict(enumerate(values)), dict.fromkeys(range(n), 0.0))["difference"]["bootstrap"] == (
        pytest.approx(list(expected))
    )

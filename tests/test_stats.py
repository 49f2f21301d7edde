"""results.stats: Student's t against tabled quantiles, and the paired t-test by hand."""

import math

import pytest

from results.stats import paired, t_cdf, t_quantile


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

"""benchmarks/bench_fidelity.py: the bounds on what tuning the ladder's rungs could buy, on a made-up run."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_fidelity")


def _ladder_run() -> pd.DataFrame:
    """Six trials of a 3-rung ladder: lineage 0 is promoted to the top; lineages 1 and 2 stay at rung 0;
    the last trial (lineage 3) fails at rung 0."""
    rows = [
        # number, lineage, rung, charge, state
        (0, 0, 0, 2.0, "COMPLETE"),
        (1, 1, 0, 3.0, "COMPLETE"),
        (2, 0, 1, 4.0, "COMPLETE"),
        (3, 2, 0, 1.0, "COMPLETE"),
        (4, 0, 2, 10.0, "COMPLETE"),
        (5, 3, 0, 5.0, "FAIL"),
    ]
    table = pd.DataFrame(rows, columns=["number", "lineage", "rung", "charge", "state"])
    return table.sample(frac=1.0, random_state=0)  # row order must not matter: the number orders them


def test_bounds_retime_the_fronts_on_clocks_that_skip_rung_0_or_the_lineages_that_never_reached_the_top(
    bench,
) -> None:
    table = _ladder_run()
    # the run's curve: one point per trial's end, at its cumulative charge 2, 5, 9, 10, 20, 25
    curve = [(2.0, 0.0), (5.0, 0.0), (9.0, 0.0), (10.0, 0.0), (20.0, 0.6), (25.0, 0.6)]
    bounds = bench._ladder_bounds(table, curve, level=0.6, top=2)
    assert bounds["charge_by_rung"] == {0: 11.0, 1: 4.0, 2: 10.0}
    # rung 0 free: only trials 2 (4 s) and 4 (10 s) count, so the level is reached at 14 s, not 20
    assert bounds["seconds_if_rung0_free"] == pytest.approx(14.0)
    # only lineage 0 reached the top: its trials 0, 2 and 4 count, 2 + 4 + 10 = 16 s
    assert bounds["seconds_if_top_lineages_only"] == pytest.approx(16.0)
    never = bench._ladder_bounds(table, curve, level=0.7, top=2)
    assert math.isinf(never["seconds_if_rung0_free"]) and math.isinf(never["seconds_if_top_lineages_only"])


@pytest.fixture(scope="module")
def pooling():
    return load_benchmark("pool_fidelity")


def _result(seeds_ratios_hvs, **settings) -> dict:
    """A bench_fidelity.json document, a pair per (seed, ratio or None for never, ladder HV, single HV)."""
    base = {"budget": "10min", "eta": 3, "rungs": 3, "min_fidelity": 661, "rung_schedule": "top",
            "rung_val_images": 500, "single": "proxy", "threads": 2}  # fmt: skip
    pairs = [
        {"seed": seed, "ratio_to_single_time": ratio, "ladder_final_hv": ladder, "single_final_hv": single}
        for seed, ratio, ladder, single in seeds_ratios_hvs
    ]
    return {"settings": {**base, **settings}, "pairs": pairs}


def test_pooling_counts_a_never_reached_seed_as_slowest_and_each_batch_of_a_seed_apart(pooling) -> None:
    older = _result([(0, 0.25, 0.6, 0.5), (1, None, 0.55, 0.6)])  # written before --promotion existed
    newer = _result([(0, 0.2, 0.7, 0.6), (2, 0.6, 0.65, 0.6)], promotion="asha", threads=1)
    pooled = pooling.pool({"old": older, "new": newer})
    labelled = [(row["label"], row["seed"]) for row in pooled["rows"]]
    assert labelled == [("old", 0), ("old", 1), ("new", 0), ("new", 2)]
    # ratios 0.25, never, 0.2, 0.6: sorted 0.2, 0.25, 0.6, inf, median (0.25 + 0.6) / 2
    assert pooled["ratio_median"] == pytest.approx(0.425)
    assert (pooled["meet_target"], pooled["reached"], pooled["seeds"]) == (2, 3, 4)
    assert pooled["ladder_final_hv_mean"] == pytest.approx(0.625)
    # ladder HVs 0.6, 0.55, 0.7, 0.65 about their mean 0.625, population std as bench_fidelity.py's
    assert pooled["ladder_final_hv_std"] == pytest.approx(math.sqrt(2 * (0.025**2 + 0.075**2) / 4))
    assert pooled["ladder_front_higher"] == 3  # seed 1's ladder front is below single fidelity's


def test_pooling_refuses_two_experiments_and_files_that_are_not_results(pooling, tmp_path, capsys) -> None:
    two = _result([(7, 0.5, 0.7, 0.6)], rungs=2, min_fidelity=1983)
    three = _result([(0, 0.2, 0.7, 0.6)])
    with pytest.raises(ValueError, match=r"rungs 3 against 2, min_fidelity 661 against 1983"):
        pooling.pool({"three": three, "two": two})
    quota = _result([(7, 0.5, 0.7, 0.6)], promotion="quota")
    with pytest.raises(ValueError, match="promotion asha against quota"):
        pooling.pool({"three": three, "quota": quota})
    # proxies validated after recomputing BatchNorm's statistics are another experiment; a result written
    # before --bn-recalibration (or without it) validated on the running averages
    recalibrated = _result([(5, 0.24, 0.63, 0.53)], bn_recalibration=8)
    with pytest.raises(ValueError, match="bn_recalibration 0 against 8"):
        pooling.pool({"three": three, "recalibrated": recalibrated})
    assert pooling.pool({"three": three, "unset": _result([(1, 0.3, 0.7, 0.6)], bn_recalibration=None)})
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "bench_fidelity.json").write_text(json.dumps(three))
    (tmp_path / "b.json").write_text(json.dumps(two))
    (tmp_path / "c.json").write_text('{"settings": {}, "pairs": [{"seed": 0}]}')
    assert pooling.main([str(tmp_path / "a"), str(tmp_path / "b.json")]) == 2
    assert pooling.main([str(tmp_path / "a"), str(tmp_path / "c.json")]) == 2
    assert pooling.main([str(tmp_path / "a"), str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("error: ") for line in err)
    assert pooling.main([str(tmp_path / "a"), "--out", str(tmp_path / "pooled.json")]) == 0
    assert json.loads((tmp_path / "pooled.json").read_text())["ratio_median"] == pytest.approx(0.2)
    never = _result([(1, None, 0.55, 0.6)])
    (tmp_path / "never.json").write_text(json.dumps(never))
    assert pooling.main([str(tmp_path / "never.json"), "--out", str(tmp_path / "never-pooled.json")]) == 0
    written = json.loads((tmp_path / "never-pooled.json").read_text())
    assert written["ratio_median"] is None and written["rows"][0]["ratio"] is None and written["reached"] == 0

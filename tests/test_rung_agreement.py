"""benchmarks/rung_agreement.py: the figures it derives from trained rungs, on made-up rows (no training)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from benchmark_scripts import load_benchmark

from nas.study.fidelity import Ladder

LADDER = Ladder(eta=3, rungs=3, min_images=661, val_images=500)


@pytest.fixture(scope="module")
def ra():
    return load_benchmark("rung_agreement")


def _rows(rung0: list[float], promoted: set[int] = frozenset()) -> list[dict]:
    """Nine architectures of equal MACs, top-1 at rungs 1 and 2 rising with the index, at rung 0 as given."""
    return [
        {
            "arch": f"a{i}",
            "top1": [rung0[i], 60.0 + i, 70.0 + i],
            "macs": 1e9,
            "promoted_in_search": i in promoted,
        }
        for i in range(9)
    ]


def test_a_rung_that_ranks_right_promotes_the_oracles_front_and_random_promotion_rarely_does(ra) -> None:
    summary = ra.summarize(_rows([50.0 + i for i in range(9)]), LADDER, seed=0)
    assert [a["spearman"] for a in summary["agreement"]] == pytest.approx([1.0, 1.0, 1.0])
    p = summary["promotion"]
    # 9 -> 3 -> 1 reach the top; at equal MACs the front is the one best network, which the rule keeps
    assert p["reach_top"] == 1 and p["oracle_front"] == 1
    assert p["rule_keeps_of_oracle_front"] == 1 and p["rule_hv"] == pytest.approx(p["oracle_hv"])
    # one of nine drawn at random is the best one about a ninth of the time
    assert p["random_keeps_of_oracle_front"] == pytest.approx(1 / 9, abs=0.03)
    assert p["random_hv_mean"] < p["rule_hv"]


def test_a_rung_that_ranks_backwards_promotes_none_of_the_front(ra) -> None:
    summary = ra.summarize(_rows([58.0 - i for i in range(9)]), LADDER, seed=0)
    by_pair = {(a["from"], a["to"]): a["spearman"] for a in summary["agreement"]}
    assert by_pair[(0, 2)] == pytest.approx(-1.0) and by_pair[(1, 2)] == pytest.approx(1.0)
    p = summary["promotion"]
    assert p["rule_keeps_of_oracle_front"] == 0 and p["rule_hv"] < p["random_hv_mean"]
    low, high = summary["agreement"][1]["interval90"]
    assert low <= -0.9 and high == pytest.approx(-1.0)


def test_the_search_promoted_sample_is_ranked_apart(ra) -> None:
    # rung 0 agrees with rung 1 on the whole sample, but among the three the search promoted it is reversed
    rung0 = [50.0, 51.0, 52.0, 53.0, 54.0, 55.0, 58.0, 57.0, 56.0]
    summary = ra.summarize(_rows(rung0, promoted={6, 7, 8}), LADDER, seed=0)
    first = summary["agreement"][0]
    assert first["n"] == 9 and first["spearman"] > 0.9
    assert first["n_promoted_in_search"] == 3 and first["spearman_promoted_in_search"] == pytest.approx(-1.0)


def test_architectures_are_drawn_from_rung_0_with_whether_the_search_promoted_them(
    ra, tmp_path, capsys
) -> None:
    table = pd.DataFrame(
        {
            "number": range(5),
            "state": ["COMPLETE", "COMPLETE", "COMPLETE", "FAIL", "COMPLETE"],
            "rung": [0, 0, 1, 0, 0],
            "lineage": [0, 1, 0, 3, 4],
            "arch_json": ['{"a": 0}', '{"a": 1}', '{"a": 0}', '{"a": 3}', '{"a": 4}'],
        }
    )
    table.to_csv(tmp_path / "trials.csv", index=False)
    drawn = ra.sample_architectures(tmp_path / "trials.csv", 10, seed=0)
    assert sorted((d["arch_json"], d["promoted_in_search"]) for d in drawn) == [
        ('{"a": 0}', True),
        ('{"a": 1}', False),
        ('{"a": 4}', False),
    ]
    assert len(ra.sample_architectures(tmp_path / "trials.csv", 2, seed=0)) == 2
    table.drop(columns="rung").to_csv(tmp_path / "single.csv", index=False)
    with pytest.raises(ValueError, match="not the trials table of a fidelity-ladder search"):
        ra.sample_architectures(tmp_path / "single.csv", 10, seed=0)
    assert ra.main(["--trials", str(tmp_path / "single.csv"), "--work", str(tmp_path / "w")]) == 2
    assert (
        ra.main(["--trials", str(tmp_path / "trials.csv"), "--sample", "2", "--work", str(tmp_path / "w")])
        == 2
    )
    assert "a rank needs at least 3" in capsys.readouterr().err
    trials = str(tmp_path / "trials.csv")
    assert ra.main(["--trials", trials, "--bn-recalibration", "-1", "--work", str(tmp_path / "w")]) == 2
    assert "bn_recalibration: must be a whole number between 0 and 10000, got -1" in capsys.readouterr().err


def test_a_spearman_without_enough_points_is_written_as_null(ra) -> None:
    summary = ra.summarize(_rows([50.0 + i for i in range(9)], promoted={0}), LADDER, seed=0)
    assert math.isnan(summary["agreement"][0]["spearman_promoted_in_search"])
    assert ra.json_safe(summary)["agreement"][0]["spearman_promoted_in_search"] is None


def test_a_rung_that_tells_nothing_apart_has_no_interval_rather_than_an_error(ra) -> None:
    rows = _rows([50.0] * 9)
    first = ra.summarize(rows, LADDER, seed=0)["agreement"][0]
    assert math.isnan(first["spearman"]) and all(math.isnan(v) for v in first["interval90"])

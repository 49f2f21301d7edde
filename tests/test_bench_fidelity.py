"""benchmarks/bench_fidelity.py: the bounds on what tuning the ladder's rungs could buy, on a made-up run."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_fidelity", ROOT / "benchmarks/bench_fidelity.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


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

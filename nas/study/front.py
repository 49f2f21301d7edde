"""The front of a study's trials table, and the weights kept for it.

:func:`front_numbers` is the Pareto front of the declared objectives among the feasible trials, as the report
draws it; :func:`prune_weights` deletes the kept weights of completed trials off it: a dominated trial's
network is never exported or retrained, so its file is only disk. The search prunes as a session ends; an
export reads what is left.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from nas.study.objectives import parse_objectives
from nas.study.pareto import pareto_front
from nas.study.trials_table import at_top_rung, feasible_rows

__all__ = ["front_numbers", "prune_weights"]


def _points(frame: pd.DataFrame, names: Sequence[str]) -> dict[int, list[float]]:
    out = {}
    for _, row in frame[frame["state"] == "COMPLETE"].iterrows():
        values = [pd.to_numeric(row.get(n), errors="coerce") for n in names]
        if all(v is not None and math.isfinite(v) for v in values):
            out[int(row["number"])] = [float(v) for v in values]
    return out


def front_numbers(frame: pd.DataFrame, objectives: Sequence[str], top: int | None = None) -> list[int]:
    """Trial numbers on the Pareto front of the declared objectives (``name:direction`` specs) among the
    feasible trials, as the report draws it; on a fidelity ladder (``top``: its top rung) of the top rung's
    results only."""
    parsed = parse_objectives(list(objectives))
    keep = [ok and up for ok, up in zip(feasible_rows(frame), at_top_rung(frame, top), strict=True)]
    points = _points(frame[keep], [o.name for o in parsed])
    numbers = sorted(points)
    front = pareto_front([points[n] for n in numbers], [o.direction for o in parsed])
    return [numbers[i] for i in front]


def prune_weights(
    run_dir: str | Path, frame: pd.DataFrame, objectives: Sequence[str], top: int | None = None
) -> int:
    """Delete kept weights of completed trials off the front; returns how many files went. Files of
    trials not in ``frame`` (another worker's running trial) are left alone. On a ladder a network's file
    holds its highest rung's weights, kept while that rung's trial is on the front."""
    weights = Path(run_dir) / "weights"
    if not weights.is_dir() or "weights" not in frame:
        return 0
    keep = set(front_numbers(frame, objectives, top))
    done = frame[frame["state"] == "COMPLETE"]
    keep_files = {str(w) for n, w in zip(done["number"], done["weights"], strict=True) if int(n) in keep}
    removed = 0
    for number, name in zip(done["number"], done["weights"], strict=True):
        if isinstance(name, str) and name and int(number) not in keep and name not in keep_files:
            path = weights / name
            if path.exists():
                path.unlink()
                removed += 1
    return removed

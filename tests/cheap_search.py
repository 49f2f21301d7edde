"""The cheap search the driver tests run: the `sasa` space under the complexity evaluator (no training),
MACs and params of 32 px images as objectives, so the search logic is under test and not fvcore."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from nas.study.settings import SearchSettings


def cheap_settings(runs_dir: str | Path, **changes: Any) -> SearchSettings:
    values: dict[str, Any] = {
        "space": "sasa",
        "evaluator": "complexity",
        "objectives": ("macs", "params"),
        "budget": "6trials",
        "macs_img_size": 32,
        "runs_dir": str(runs_dir),
        "study": "t",
    }
    values.update(changes)
    return SearchSettings(**values)


def evaluated_trials(db: Path, mode: str = "ro") -> int:
    """The trials of the SQLite study ``db`` (opened with ``mode``) that completed an evaluation. Not the
    repeats: an architecture the study had, sampled again and answered from it, is COMPLETE to Optuna (and
    REPEAT in the trials table); a resumed session, its sampler seeded by its session id, samples one now and
    then, and the budget does not count it."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode={mode}", uri=True)) as con:
        return con.execute(
            "SELECT count(*) FROM trials t WHERE t.state = 'COMPLETE' AND NOT EXISTS (SELECT 1 FROM "
            "trial_user_attributes a WHERE a.trial_id = t.trial_id AND a.key = 'repeat_of')"
        ).fetchone()[0]

"""The trials table: one row per trial of a study, whichever driver ran it, as a pandas DataFrame.

Columns: ``number``, ``state`` (COMPLETE / FAIL / INFEASIBLE / REPEAT / RUNNING / PRUNED / WAITING),
``feasible``, ``arch`` (key), ``arch_json``, ``baseline`` (the hand-designed network's name, or empty), one
column per objective, every other metric the evaluator reported (``params``, ``macs``, ``top1``,
``train_seconds``, ...), ``cost_seconds``, ``devices``, ``device``, ``charge`` (device-seconds), ``start`` /
``end`` (UTC), ``fail_reason``, under limits ``constraint_<metric>`` (``value / limit - 1``: at most 0 when
met), and on a fidelity ladder ``rung`` and ``lineage`` (the number of the architecture's rung-0 trial).
INFEASIBLE is a sample rejected over a limit before it was evaluated: its objectives are what was measured
(its cost; no accuracy). A baseline over a limit is evaluated all the same: COMPLETE, ``feasible`` false.
REPEAT is a sample of an architecture the study had already evaluated, answered from that trial (named in
``repeat_of``) without training: its engine saw it COMPLETE, with the earlier trial's values.

Drivers record each trial's metrics and cost as trial user attributes (``metrics``, ``cost``, ``arch``,
``arch_json``, ``baseline``, ``fail_reason``, ``constraints``, ``feasible``, ``rejected``), so the table is
rebuilt from the study storage alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nas.core.atomic import replaced

__all__ = [
    "COLUMNS",
    "at_top_rung",
    "completed_trial",
    "feasible_rows",
    "frame_from_rows",
    "save_trials",
    "top_rung",
    "trial_row",
    "trials_frame",
    "why_no_front",
]

COLUMNS = [
    "number",
    "state",
    "feasible",
    "arch",
    "baseline",
    "cost_seconds",
    "devices",
    "device",
    "charge",
    "start",
    "end",
    "fail_reason",
    "arch_json",
]


def trial_row(
    number: int,
    state: str,
    attrs: dict[str, Any],
    objective_values: dict[str, float] | None = None,
    start: Any = None,
    end: Any = None,
) -> dict[str, Any]:
    """One row from a trial's recorded attributes (the same for Optuna trials and Ray results)."""
    cost = attrs.get("cost") or {}
    rejected = bool(attrs.get("rejected"))
    repeat = attrs.get("repeat_of") is not None
    if state == "COMPLETE" and (rejected or repeat):
        state = "INFEASIBLE" if rejected else "REPEAT"
    row: dict[str, Any] = {
        "number": number,
        "state": state,
        "feasible": bool(attrs.get("feasible", True)),
        "arch": attrs.get("arch", ""),
        "baseline": attrs.get("baseline", ""),
        "cost_seconds": cost.get("seconds"),
        "devices": cost.get("devices"),
        "device": cost.get("device"),
        "charge": None if not cost else cost["seconds"] * cost.get("devices", 1),
        "start": start,
        "end": end,
        "fail_reason": attrs.get("fail_reason", ""),
        "arch_json": attrs.get("arch_json", ""),
    }
    if repeat:
        row["repeat_of"] = int(attrs["repeat_of"])
    if "rung" in attrs:  # a fidelity ladder's trial: the rung it trained to, and its lineage
        row["rung"], row["lineage"] = int(attrs["rung"]), int(attrs["lineage"])
    for name, value in (attrs.get("constraints") or {}).items():
        row[f"constraint_{name}"] = value
    metrics = attrs.get("metrics") or {}
    for name, value in metrics.items():
        if isinstance(value, (int, float, str, bool)) or value is None:
            row.setdefault(name, value)
    for name, value in (objective_values or {}).items():
        # a rejected sample told its engine the worst value for what it never measured: the table says none
        row[name] = metrics.get(name) if rejected else value
    return row


def top_rung(settings: dict[str, Any]) -> int | None:
    """The top rung of a study searched on a fidelity ladder (``settings`` as the manifest records them);
    None for a single fidelity."""
    return int(settings.get("rungs", 0)) - 1 if settings.get("fidelity") == "ladder" else None


def at_top_rung(frame: pd.DataFrame, top: int | None) -> list[bool]:
    """Whether each row is a result of the top rung (every row, for a single fidelity): on a ladder the
    front is of fully trained results only."""
    if top is None:
        return [True] * len(frame)
    if "rung" not in frame:
        return [False] * len(frame)
    return [bool(pd.notna(rung) and int(rung) == top) for rung in frame["rung"]]


def why_no_front(frame: pd.DataFrame, top: int | None) -> str:
    """Why a study's front is empty, as a sentence's end: no trial has completed, none has reached a
    ladder's top rung (``top``), or none met the search's limits."""
    done = (frame["state"] == "COMPLETE").tolist() if "state" in frame else []
    if not any(done):
        return "no trial has completed yet"
    if not any(ok and up for ok, up in zip(done, at_top_rung(frame, top), strict=True)):
        return (
            f"no trial has reached the ladder's top rung (rung {top}) yet, and the front is of its results "
            "only: resume the study with a larger budget"
        )
    return "no completed trial met the search's limits"


def feasible_rows(frame: pd.DataFrame) -> list[bool]:
    """Whether each row met the search's limits (a table from before limits existed: every row did); the
    front, wherever it is drawn or exported, is of feasible rows only."""
    if "feasible" not in frame:
        return [True] * len(frame)
    return [value is not False and str(value).lower() != "false" for value in frame["feasible"]]


def frame_from_rows(rows: Sequence[dict[str, Any]], objectives: Sequence[str]) -> pd.DataFrame:
    """A table with the fixed columns first, then the objectives, then the other metrics (sorted)."""
    frame = pd.DataFrame(list(rows))
    fixed = [c for c in COLUMNS if c != "arch_json"]
    for column in [*fixed, *objectives, "arch_json"]:
        if column not in frame:
            frame[column] = None
    rest = sorted(c for c in frame.columns if c not in {*COLUMNS, *objectives})
    frame = frame[[*fixed, *objectives, *rest, "arch_json"]]
    return frame.sort_values("number", kind="stable").reset_index(drop=True)


def trials_frame(study: Any, objectives: Sequence[str]) -> pd.DataFrame:
    """The trials table of an Optuna study; ``objectives`` name its values in order."""
    rows = []
    for trial in study.get_trials(deepcopy=False):
        if trial.state.name == "WAITING":  # enqueued (a baseline the budget has not reached yet), never run
            continue
        values = dict(zip(objectives, trial.values, strict=True)) if trial.values is not None else {}
        rows.append(
            trial_row(
                trial.number,
                trial.state.name,
                trial.user_attrs,
                values,
                trial.datetime_start,
                trial.datetime_complete,
            )
        )
    return frame_from_rows(rows, objectives)


def save_trials(frame: pd.DataFrame, run_dir: str | Path) -> list[Path]:
    """Write ``trials.csv`` and ``trials.parquet`` into ``run_dir``, atomically (a kill keeps the old)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, write in (
        ("trials.csv", lambda p: frame.to_csv(p, index=False)),
        ("trials.parquet", lambda p: frame.to_parquet(p, index=False)),
    ):
        target = run_dir / name
        with replaced(target) as tmp:
            write(tmp)
        written.append(target)
    return written


def completed_trial(frame: pd.DataFrame, number: int, study: Any, purpose: str) -> pd.Series:
    """The row of trial ``number`` of ``frame``, which a command (``nas export``, ``nas retrain``) is asked
    for ``purpose``; a ValueError of one sentence when the study has no such trial or it did not complete."""
    rows = frame[frame["number"] == number]
    if rows.empty:
        numbers = frame["number"]
        known = f"its trials are numbered 0 to {int(numbers.max())}" if len(numbers) else "it has no trials"
        raise ValueError(f"trial: study {study!r} has no trial {number} ({known})")
    row = rows.iloc[0]
    if row["state"] != "COMPLETE":
        reason = row.get("fail_reason") or row["state"]
        raise ValueError(f"trial: trial {number} did not complete ({reason}); nothing to {purpose}")
    return row

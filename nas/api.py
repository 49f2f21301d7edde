"""The Python API of a search: what ``nas search`` runs, one floor below the command line.

:func:`run_search` runs a study to its budget's end on the engine (:func:`nas.search.run.run_study`: the
trials, the trials table, the manifest) and then writes its report (:func:`results.report.write_report`:
``report.html``, ``pareto.png``, ``pareto.csv``), so the engine never imports the reports above it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
from rich.console import Console

from nas.search.run import SearchOutcome, run_study
from nas.study.settings import SearchSettings
from nas.study.trials_table import why_no_front
from results.report import write_report

__all__ = ["SearchOutcome", "run_search"]


def run_search(settings: SearchSettings, console: Console | None = None) -> SearchOutcome:
    """Run a search (:func:`~nas.search.run.run_study`) and write its report; the outcome names the report,
    the front's size, why the front is empty, and why the search failed where none of its trials completed.
    """
    outcome = run_study(settings, console)
    frame = outcome.trials
    report, front = None, 0
    if len(frame):  # with no trial completed, the report lists why each failed
        report = write_report(outcome.run_dir)
        front = len(pd.read_csv(outcome.run_dir / "pareto.csv"))
    return dataclasses.replace(
        outcome,
        report=report,
        front=front,
        no_front=None if front else why_no_front(frame, settings.top_rung),
        failed=outcome.failed or _all_failed(frame, report),
    )


def _all_failed(frame: pd.DataFrame, report: Path | None) -> str | None:
    """The sentence for a study none of whose trials completed and some failed (None otherwise): a search
    that produced nothing, which the CLI's exit status says."""
    states = frame["state"].tolist() if len(frame) else []
    if "COMPLETE" in states or "FAIL" not in states:
        return None
    where = f": {report} lists why" if report is not None else ""
    return f"no trial of the study has completed, {states.count('FAIL')} failed{where}"

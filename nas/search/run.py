"""``run_search(settings)``: the one entry point behind ``nas search`` and the Python API.

Runs the chosen backend under a live progress view and, however the search ends (budget spent, Ctrl-C,
SIGTERM, an error), writes ``runs/<study>/manifest.json`` and the trials table (``trials.csv``,
``trials.parquet``) from the study storage, then the report (``report.html``, ``pareto.png``,
``pareto.csv``; :mod:`results.report`).
"""

from __future__ import annotations

import signal
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from nas.search.constraints import NothingFeasible
from nas.search.settings import SearchSettings

__all__ = ["SearchOutcome", "run_search"]


@dataclass
class SearchOutcome:
    run_dir: Path
    trials: pd.DataFrame
    manifest: Path
    interrupted: bool = False
    stopped: str | None = None  # why the search stopped before its budget ran out (nothing feasible)
    report: Path | None = None  # None when the study has no completed trial to plot yet
    ran: int | None = None  # trials this process ran (Optuna; several workers share one study)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run_search(settings: SearchSettings, console: Console | None = None) -> SearchOutcome:
    """Run a search to the end of its budget (or an interruption) and write its manifest and trials table."""
    from nas.search.preflight import preflight
    from nas.search.progress import SearchProgress

    console = console or Console()
    data = preflight(settings)  # a refused search fails here, before anything is written
    objectives = settings.parsed_objectives
    title = f"{settings.study_name} ({settings.space}, {settings.evaluator}, {settings.backend})"
    started = datetime.now(UTC).isoformat(timespec="seconds")
    begin = time.perf_counter()
    interrupted = False
    stopped = None
    ran = None
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # a stopped job saves its table like Ctrl-C
    progress = SearchProgress(title, objectives, console, settings.top_rung)
    try:
        with progress:
            if settings.backend == "optuna":
                from nas.search.optuna_driver import run_optuna

                ran = run_optuna(settings, progress)
            else:
                from nas.search.ray_driver import run_ray

                run_ray(settings, progress)
    except KeyboardInterrupt:
        interrupted = True
        console.print("[yellow]interrupted[/]: the finished trials are kept; continue with --resume")
    except NothingFeasible as stop:
        stopped = str(stop)
        console.print(f"[yellow]stopped[/]: {stopped}", highlight=False)
    finally:
        signal.signal(signal.SIGTERM, previous)
    frame, storage, tracker = _collect(settings)
    from nas.search.manifest import write_manifest
    from results.store import save_trials

    save_trials(frame, settings.run_dir)
    from results.export import prune_weights

    # only the front's networks stay
    prune_weights(settings.run_dir, frame, [str(o) for o in objectives], settings.top_rung)
    counts = {str(k): int(v) for k, v in frame["state"].value_counts().items()} if len(frame) else {}
    manifest = write_manifest(
        settings,
        storage=storage,
        budget={"given": settings.budget, "spent": tracker.to_dict() if tracker else None},
        data=data,
        trials=counts,
        session={
            "id": uuid.uuid4().hex[:8],
            "started": started,
            "seconds": time.perf_counter() - begin,
            "interrupted": interrupted,
            "stopped": stopped,
        },
    )
    report = None
    if len(frame) and (frame["state"] == "COMPLETE").any():
        from results.report import write_report

        report = write_report(settings.run_dir)
    return SearchOutcome(settings.run_dir, frame, manifest, interrupted, stopped, report, ran)


def _collect(settings: SearchSettings) -> tuple[pd.DataFrame, str, Any]:
    objectives = [o.name for o in settings.parsed_objectives]
    if settings.backend == "optuna":
        from nas.search.optuna_driver import StudyBudget, open_study
        from results.store import trials_frame

        study, url, _ = open_study(settings, create=False)
        return trials_frame(study, objectives), url, StudyBudget.of(study, settings)
    from nas.search.ray_driver import collect_ray

    return collect_ray(settings)

"""``run_search(settings)``: the one entry point behind ``nas search`` and the Python API.

Runs the chosen backend under a live progress view and, however the search ends (budget spent, Ctrl-C,
SIGTERM, an error), writes ``runs/<study>/manifest.json`` and the trials table (``trials.csv``,
``trials.parquet``) from the study storage, then the report (``report.html``, ``pareto.png``,
``pareto.csv``; :mod:`results.report`).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from nas.option_names import option
from nas.search import stopping
from nas.search.constraints import NothingFeasible, SameFailure
from nas.search.failures import WriteFailed, write_failure
from nas.search.settings import SearchSettings
from nas.search.study_file import StudyFileLost

__all__ = ["SearchOutcome", "run_search"]


@dataclass
class SearchOutcome:
    run_dir: Path
    trials: pd.DataFrame
    manifest: Path
    interrupted: bool = False
    stopped: str | None = None  # why the search stopped before its budget ran out (nothing feasible)
    failed: str | None = None  # why the search did not do its job: a failure streak, or no trial completed
    lost: str | None = None  # the study's file was removed mid-search (restored, or saved beside it)
    report: Path | None = None  # None when the study has no trial yet
    ran: int | None = None  # trials this process ran (Optuna; several workers share one study)
    signum: int | None = None  # the signal that interrupted it (None: Ctrl-C under Ray, or none)
    front: int = 0  # architectures on the front (pareto.csv)
    no_front: str | None = None  # why the front is empty (results.store.why_no_front), when it is


def run_search(settings: SearchSettings, console: Console | None = None) -> SearchOutcome:
    """Run a search to the end of its budget (or an interruption) and write its manifest and trials table.
    A full disk or a read-only folder stops it with :class:`~nas.search.failures.WriteFailed` (one
    sentence); what the study committed is kept."""
    try:
        with stopping.signals(defer=settings.backend == "optuna"):  # a stopped job saves its table, too
            return _run_search(settings, console)
    except Exception as err:
        cannot = write_failure(err, settings.run_dir)
        if cannot is None or isinstance(err, WriteFailed):
            raise
        raise WriteFailed(
            f"{cannot}; the trials the study committed are kept: free space or make the folder writable, "
            f"then continue with {option('resume')}"
        ) from None


def _run_search(settings: SearchSettings, console: Console | None) -> SearchOutcome:
    from nas.search.manifest import check_manifest
    from nas.search.preflight import preflight
    from nas.search.progress import SearchProgress

    console = console or Console()
    data = preflight(settings)  # a refused search fails here, before anything is written
    if not settings.repair:
        check_manifest(settings.run_dir)  # refused before any trial, not replaced after them
    objectives = settings.parsed_objectives
    title = f"{settings.study_name} ({settings.space}, {settings.evaluator}, {settings.backend})"
    started = datetime.now(UTC).isoformat(timespec="seconds")
    begin = time.perf_counter()
    interrupted = False
    stopped = lost = failed = None
    ran = None
    progress = SearchProgress(title, objectives, console, settings.top_rung)
    try:
        with progress:
            if settings.backend == "optuna":
                from nas.search.optuna_driver import run_optuna

                ran = run_optuna(settings, progress)
            else:
                from nas.search.ray_driver import run_ray

                run_ray(settings, progress)
        # a signal that came while the helpers finished (after this worker's last trial) stopped them
        interrupted = stopping.received() is not None
    except KeyboardInterrupt:
        interrupted = True
        console.print(
            f"[yellow]interrupted[/]: the finished trials are kept; continue with {option('resume')}"
        )
    except NothingFeasible as stop:
        stopped = str(stop)
        failed = stopped if isinstance(stop, SameFailure) else None
        console.print(f"[{'bold red' if failed else 'yellow'}]stopped[/]: {stopped}", highlight=False)
    except StudyFileLost as gone:
        if not gone.restored:
            raise  # saved beside a file that now lies at the path: no study to read the table from
        lost = str(gone)  # the table, manifest and report are written from the restored study
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
            "lost": lost,
        },
    )
    report, front = None, 0
    if len(frame):  # with no trial completed, the report lists why each failed
        from results.report import write_report

        report = write_report(settings.run_dir)
        front = len(pd.read_csv(settings.run_dir / "pareto.csv"))
    from results.store import why_no_front

    no_front = None if front else why_no_front(frame, settings.top_rung)
    failed = failed or _all_failed(frame, report)
    signum = stopping.received() if interrupted else None
    return SearchOutcome(
        settings.run_dir,
        frame,
        manifest,
        interrupted=interrupted,
        stopped=stopped,
        failed=failed,
        lost=lost,
        report=report,
        ran=ran,
        signum=signum,
        front=front,
        no_front=no_front,
    )


def _all_failed(frame: pd.DataFrame, report: Path | None) -> str | None:
    """The sentence for a study none of whose trials completed and some failed (None otherwise): a search
    that produced nothing, which the CLI's exit status says."""
    states = frame["state"].tolist() if len(frame) else []
    if "COMPLETE" in states or "FAIL" not in states:
        return None
    where = f": {report} lists why" if report is not None else ""
    return f"no trial of the study has completed, {states.count('FAIL')} failed{where}"


def _collect(settings: SearchSettings) -> tuple[pd.DataFrame, str, Any]:
    objectives = [o.name for o in settings.parsed_objectives]
    if settings.backend == "optuna":
        from nas.search.optuna_driver import StudyBudget, open_study
        from results.store import trials_frame

        study, url, _ = open_study(settings, create=False)
        return trials_frame(study, objectives), url, StudyBudget.of(study, settings)
    from nas.search.ray_driver import collect_ray

    return collect_ray(settings)

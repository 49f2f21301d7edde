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

from nas.core.atomic import locked
from nas.core.option_names import option
from nas.search.optuna_driver import StudyBudget, open_study, run_optuna
from nas.search.preflight import preflight
from nas.search.progress import SearchProgress
from nas.search.trial import forget_worker_runner
from nas.study.constraints import NothingFeasible, SameFailure
from nas.study.credentials import MASK, split_password
from nas.study.front import prune_weights
from nas.study.manifest import (
    check_manifest,
    manifest_problem,
    read_manifest,
    update_manifest,
    write_manifest,
)
from nas.study.settings import SearchSettings
from nas.study.storage import storage_file, storage_url
from nas.study.study_file import StudyFileLost
from nas.study.trials_table import save_trials, trials_frame
from nas.system import stopping
from nas.system.failures import WriteFailed, write_failure

__all__ = ["SearchOutcome", "refresh_trials", "run_study"]

TABLE_LOCK = ".trials"  # held (as .trials.lock) while the trials table is read from the study and written


@dataclass
class SearchOutcome:
    run_dir: Path
    trials: pd.DataFrame
    manifest: Path
    interrupted: bool = False
    stopped: str | None = None  # why the search stopped before its budget ran out (nothing feasible)
    failed: str | None = None  # why the search did not do its job: a failure streak, or no trial completed
    lost: str | None = None  # the study's file was removed mid-search (restored, or saved beside it)
    report: Path | None = None  # None when the study has no trial yet (set by nas.api.run_search)
    ran: int | None = None  # trials this process ran (Optuna; several workers share one study)
    signum: int | None = None  # the signal that interrupted it (None: Ctrl-C under Ray, or none)
    front: int = 0  # architectures on the front (pareto.csv)
    no_front: str | None = None  # why the front is empty (nas.study.trials_table.why_no_front), when it is
    idle: str | None = None  # why this session ran no trial: the budget left no room for one


def run_study(settings: SearchSettings, console: Console | None = None) -> SearchOutcome:
    """Run a search to the end of its budget (or an interruption) and write its manifest and trials table
    (the report is written above the engine: :func:`nas.api.run_search`).
    A full disk or a read-only folder stops it with :class:`~nas.system.failures.WriteFailed` (one
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
    finally:
        forget_worker_runner()  # this process's runner served this search only


def _run_search(settings: SearchSettings, console: Console | None) -> SearchOutcome:
    console = console or Console()
    data = preflight(settings)  # a refused search fails here, before anything is written
    if not settings.repair:
        check_manifest(settings.run_dir)  # refused before any trial, not replaced after them
    objectives = settings.parsed_objectives
    title = f"{settings.study_name} ({settings.space_words}, {settings.evaluator}, {settings.backend})"
    started = datetime.now(UTC).isoformat(timespec="seconds")
    session_id = uuid.uuid4().hex[:8]
    begin = time.perf_counter()

    def first_manifest(storage: str) -> None:
        """A first session's manifest, written as soon as its study exists: `nas report` reads a running
        study by it, and a session killed outright leaves it. A resumed study keeps its last session's
        until this one ends."""
        if not (settings.run_dir / "manifest.json").exists():
            given = {"given": settings.budget, "spent": None}
            session = {"id": session_id, "started": started}
            write_manifest(settings, storage=storage, budget=given, data=data, trials={}, session=session)

    interrupted = False
    stopped = lost = failed = None
    ran = None
    progress = SearchProgress(title, objectives, console, settings.top_rung)
    try:
        with progress:
            if settings.backend == "optuna":
                ran = run_optuna(settings, progress, first_manifest)
            else:
                from nas.search.ray_driver import run_ray  # heavy: ray

                run_ray(settings, progress, first_manifest)
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

    with locked(settings.run_dir / TABLE_LOCK):  # a `nas report` reading the study meanwhile writes first
        frame, storage, tracker = _collect(settings)
        save_trials(frame, settings.run_dir)
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
                "id": session_id,
                "started": started,
                "seconds": time.perf_counter() - begin,
                "interrupted": interrupted,
                "stopped": stopped,
                "lost": lost,
            },
        )
    idle = None
    # this command's workers' count (Optuna's helpers' included), else the trials the live view was told of
    session_ran = ran if ran is not None else progress.session_trials
    if not (interrupted or stopped or lost) and session_ran == 0 and tracker is not None:
        idle = (
            f"this session ran no trial: the budget leaves no room for one ({tracker.summary()}); continue "
            f"with a larger {option('budget', '2h')}"
        )
    signum = stopping.received() if interrupted else None
    return SearchOutcome(
        settings.run_dir,
        frame,
        manifest,
        interrupted=interrupted,
        stopped=stopped,
        failed=failed,
        lost=lost,
        ran=ran,
        signum=signum,
        idle=idle,
    )


def refresh_trials(run_dir: str | Path) -> None:
    """Rewrite ``run_dir``'s trials table, and its manifest's budget spent, from the study's storage, as
    ``nas report`` and ``nas export`` do before they read them: a search writes its table only as a session
    ends, so a running study's (or one whose session was killed outright) is behind. ValueError in one
    sentence when the study cannot be read there; the table is then left as it is."""
    run_dir = Path(run_dir)
    settings = _settings_of(run_dir)
    with locked(run_dir / TABLE_LOCK):  # the search's own end, meanwhile, writes after this or before it
        frame, _, tracker = _collect(settings)
        save_trials(frame, run_dir)
        if tracker is not None:
            spent = tracker.to_dict()
            update_manifest(run_dir, lambda manifest: manifest.setdefault("budget", {}).update(spent=spent))


def _settings_of(run_dir: Path) -> SearchSettings:
    """The settings a run directory's manifest records, resumed, to open its study read-only (ValueError
    in one sentence where they cannot be used)."""
    manifest = read_manifest(run_dir)
    values = manifest.get("settings")
    if not isinstance(values, dict):
        raise ValueError(f"{run_dir / 'manifest.json'} records no settings")
    problem = manifest_problem(manifest)  # refused before the refresh writes anything, as the report will
    if problem is not None:
        raise ValueError(f"{run_dir / 'manifest.json'} {problem}")
    # what reading the study needs: not the architectures to enqueue (reading evaluates none)
    names = set(SearchSettings.choice_names()) - {"runs_dir", "resume", "repair", "enqueue"}
    values = {name: value for name, value in values.items() if name in names}
    if MASK in str(values.get("storage") or ""):  # the password is not kept: it comes as on a resume
        values["storage"] = split_password(values["storage"])[0]
    try:
        settings = SearchSettings(**values, runs_dir=str(run_dir.parent), resume=True)
    except (TypeError, ValueError) as err:
        raise ValueError(f"its manifest's settings cannot be used ({str(err).splitlines()[0]})") from None
    if settings.run_dir.resolve() != run_dir.resolve():
        raise ValueError(f"the folder was renamed from {settings.study_name!r}")
    if settings.backend == "ray":
        from nas.search.ray_driver import ledger_path  # heavy: ray

        local: Path | None = ledger_path(settings)
    else:
        local = storage_file(storage_url(settings))
    if local is not None and not local.exists():  # opening the storage would make an empty one
        raise ValueError(f"its study is not there ({local} is missing)")
    return settings


def _collect(settings: SearchSettings) -> tuple[pd.DataFrame, str, Any]:
    objectives = [o.name for o in settings.parsed_objectives]
    if settings.backend == "optuna":
        study, url, _ = open_study(settings, create=False)
        return trials_frame(study, objectives), url, StudyBudget.of(study, settings)
    from nas.search.ray_driver import collect_ray  # heavy: ray

    return collect_ray(settings)

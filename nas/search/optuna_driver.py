"""The Optuna driver (the default backend): an ask/tell loop over a named, persistent study.

The study lives in ``runs/<study>/study.db`` (SQLite) unless ``storage`` names another: any SQLAlchemy URL
(``postgresql://``, ``mysql+pymysql://``, ``sqlite:///``) through Optuna's RDB storage, or a journal file
(``journal:PATH`` or a path ending in ``.log``), so that several workers, in one process group or on many
machines, share one study.

Every trial records, as user attributes, its architecture (``arch`` key and ``arch_json``), the evaluator's
``metrics``, its ``cost`` (seconds, devices, device kind) and, if it failed, ``fail_reason``; the budget is
rebuilt from those records, so a resumed search, or several workers, charge one budget. The space's
baselines are enqueued first (once: ``skip_if_exists``). Before each trial the driver asks the budget whether
the next trial, estimated from the finished ones, still fits; it never starts one that would overrun.
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from nas.search.budget import BudgetTracker, TrialCost
from nas.search.failures import deadline, failure_reason, release_memory
from nas.search.liveness import Heartbeat, enqueue_rerun, fail_lost_trials
from nas.search.progress import SearchProgress
from nas.search.settings import SearchSettings
from nas.search.trial import TrialRunner

__all__ = ["open_storage", "run_optuna", "worker_loop"]

optuna.logging.set_verbosity(optuna.logging.WARNING)


def storage_url(settings: SearchSettings) -> str:
    if settings.storage:
        return settings.storage
    return f"sqlite:///{(settings.run_dir / 'study.db').resolve()}"


def open_storage(settings: SearchSettings) -> tuple[Any, str]:
    """The Optuna storage object for ``settings`` and its URL; ValueError (one sentence) if unreachable."""
    url = storage_url(settings)
    try:
        if url.startswith("journal:") or url.endswith(".log"):
            from optuna.storages.journal import JournalFileBackend, JournalStorage

            path = Path(url.removeprefix("journal:")).expanduser()
            path.parent.mkdir(parents=True, exist_ok=True)
            return JournalStorage(JournalFileBackend(str(path))), url
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        engine_url = url
        if url.startswith(("postgresql://", "postgres://")):  # no driver named: psycopg 3, a dependency
            engine_url = "postgresql+psycopg://" + url.split("://", 1)[1]
        storage = optuna.storages.RDBStorage(
            engine_url, engine_kwargs={"connect_args": {"timeout": 60}} if url.startswith("sqlite") else None
        )
        if url.startswith("sqlite"):
            _use_write_ahead_log(storage)
        return storage, url
    except Exception as err:  # SQLAlchemy / driver errors: unreachable host, bad URL, missing driver
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "Failed to import DB access module" in first:
            first = _missing_driver(url)
        raise ValueError(f"storage: cannot open {url}: {first}") from None


def _missing_driver(url: str) -> str:
    scheme = url.split(":", 1)[0]
    if scheme.startswith("postgresql"):
        return "the PostgreSQL driver is not installed (pip install 'psycopg[binary]')"
    if scheme.startswith("mysql"):
        return "the MySQL driver is not installed (pip install pymysql, and use mysql+pymysql://)"
    return f"no database driver is installed for {scheme}://"


def _use_write_ahead_log(storage: optuna.storages.RDBStorage) -> None:
    """SQLite in write-ahead-log mode with ``synchronous=NORMAL``: a commit appends to the log and syncs
    only at checkpoints, so the many small writes of a trial (each suggested parameter is one) cost a
    fraction of a rollback-journal commit, and readers never block the writer. A killed process loses
    nothing it committed; only an operating-system crash or power loss may lose the last commits, and it
    never corrupts the file. WAL needs a local file system (not NFS), as SQLite shared by processes does."""
    from sqlalchemy import event

    def on_connect(connection: Any, _record: Any) -> None:
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    event.listen(storage.engine, "connect", on_connect)
    storage.engine.dispose()  # connections made while Optuna set the schema up reconnect with the pragmas


def _sampler(settings: SearchSettings, worker: int) -> optuna.samplers.BaseSampler:
    seed = settings.seed + worker
    name = settings.sampler_name
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    if name == "tpe":
        with warnings.catch_warnings():  # optuna calls these options experimental: noise for a user
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, constant_liar=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    try:
        import scipy  # noqa: F401 - the GP sampler's optimizer
    except ImportError:
        raise ValueError("sampler: gp needs scipy; pip install scipy, or use nsga2, tpe or random") from None
    return optuna.samplers.GPSampler(seed=seed)


def open_study(settings: SearchSettings, *, worker: int = 0, create: bool = True) -> tuple[optuna.Study, str]:
    """Create the study, or load it: an existing study with trials needs ``resume`` (or a second worker),
    and ``resume`` needs an existing study (a mistyped name must not start a new one)."""
    default_db = settings.run_dir / "study.db"
    if create and settings.resume and not settings.storage and not default_db.exists():
        name, where = settings.study_name, storage_url(settings)
        raise ValueError(f"study {name!r} does not exist in {where}; drop --resume to start it")
    storage, url = open_storage(settings)
    directions = [o.direction for o in settings.parsed_objectives]
    names = optuna.study.get_all_study_names(storage)
    exists = settings.study_name in names
    if exists and create and not settings.resume:
        study = optuna.load_study(study_name=settings.study_name, storage=storage)
        if study.trials:
            raise ValueError(
                f"study {settings.study_name!r} already exists in {url} with {len(study.trials)} trials; "
                "pass --resume to continue it, or choose another --study"
            )
    if not exists and (not create or settings.resume):
        hint = "; drop --resume to start it" if create else ""
        raise ValueError(f"study {settings.study_name!r} does not exist in {url}{hint}")
    study = optuna.create_study(
        study_name=settings.study_name,
        storage=storage,
        directions=directions,
        sampler=_sampler(settings, worker),
        load_if_exists=True,
    )
    stored = study.user_attrs.get("objectives")
    declared = [str(o) for o in settings.parsed_objectives]
    if stored is None:
        study.set_user_attr("objectives", declared)
        study.set_user_attr("space", settings.space)
    elif stored != declared or study.user_attrs.get("space") != settings.space:
        raise ValueError(
            f"study {settings.study_name!r} searches {study.user_attrs.get('space')} for "
            f"{', '.join(stored)}; "
            f"it cannot be resumed for {settings.space} with {', '.join(declared)}"
        )
    return study, url


def tracker_from_study(study: optuna.Study, settings: SearchSettings) -> BudgetTracker:
    """The budget with every finished trial's cost (and recorded overhead) charged."""
    charges = [dict(c, overhead=True) for c in study.user_attrs.get("overhead", [])]
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        cost = trial.user_attrs.get("cost")
        if cost:
            charges.append({**cost, "label": f"trial {trial.number}"})
    return BudgetTracker.from_dict({"budget": settings.budget, "charges": charges, "elapsed": 0.0})


def _enqueue_baselines(study: optuna.Study, settings: SearchSettings) -> int:
    from search_spaces import get_space

    space = get_space(settings.space)
    enqueued = 0
    known = {t.user_attrs.get("baseline") for t in study.get_trials(deepcopy=False)}
    for name, baseline in space.baselines().items():
        if name in known:
            continue
        study.enqueue_trial(space.encode(baseline.arch), user_attrs={"baseline": name}, skip_if_exists=True)
        enqueued += 1
    return enqueued


def _running_elsewhere(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))


WAIT_SECONDS = 2.0  # how often a worker with nothing to start looks at the trials running elsewhere


def run_trial(
    study: optuna.Study, runner: TrialRunner, settings: SearchSettings, tracker: BudgetTracker
) -> dict[str, Any]:
    """Ask one trial, evaluate it, tell its outcome; returns the row the progress view shows.

    While it runs the trial carries this worker's identity and heartbeat (:mod:`nas.search.liveness`), so
    that a kill leaves a trial the next worker recognises as lost. An exception fails the trial with its
    reason (:func:`~nas.search.failures.failure_reason`) and the search goes on; Ctrl-C / SIGTERM fails it
    as interrupted, enqueues its architecture again for ``--resume`` and stops the search.
    """
    objectives = [o.name for o in settings.parsed_objectives]
    trial = study.ask()
    with Heartbeat(trial):  # until its outcome is told
        row, cost = _evaluate(study, trial, runner, settings, objectives)
    tracker.charge(cost)
    row["seconds"] = cost.seconds
    return row


def _evaluate(
    study: optuna.Study,
    trial: optuna.Trial,
    runner: TrialRunner,
    settings: SearchSettings,
    objectives: list[str],
) -> tuple[dict[str, Any], TrialCost]:
    start = time.perf_counter()
    row: dict[str, Any] = {"number": trial.number, "baseline": trial.user_attrs.get("baseline", "")}
    reason = None
    try:
        arch = runner.space.sample(trial)  # the sampler's suggestions run here: part of the trial's cost
        sampling = time.perf_counter() - start
        row["arch"] = arch.key
        trial.set_user_attr("arch", arch.key)
        trial.set_user_attr("arch_json", arch.to_json())
        runner.prepare()
        with deadline(settings.trial_timeout):
            result = runner.run(arch)
        values = result.values(objectives)
        cost = TrialCost.of(
            sampling + result.seconds, gpus=int(result.devices) if result.device_kind == "gpu" else 0
        )
        trial.set_user_attr("metrics", _jsonable(result.metrics))
        trial.set_user_attr("cost", cost.to_dict())
        study.tell(trial, values)
        row.update(state="COMPLETE", values=values)
    except KeyboardInterrupt as err:
        _fail(study, trial, runner, start, failure_reason(err), overhead=True)
        enqueue_rerun(study, study._storage.get_trial(trial._trial_id))  # --resume runs it again
        raise
    except Exception as err:  # the search goes on; the reason is kept in the trials table
        reason = failure_reason(err)
    if reason is not None:
        release_memory()  # after the except block: the exception no longer holds the trial's frames
        cost = _fail(study, trial, runner, start, reason)
        row.update(state="FAIL", values=None, fail_reason=reason)
        row.setdefault("arch", trial.user_attrs.get("arch", "?"))
    return row, cost


def _fail(
    study: optuna.Study,
    trial: optuna.Trial,
    runner: TrialRunner,
    start: float,
    reason: str,
    overhead: bool = False,
) -> TrialCost:
    gpus = int(runner.devices_held()) if runner.device_kind == "gpu" else 0
    label = f"{'interrupted ' if overhead else ''}trial {trial.number}"
    cost = TrialCost.of(time.perf_counter() - start, gpus=gpus, label=label, overhead=overhead)
    trial.set_user_attr("cost", cost.to_dict())
    trial.set_user_attr("fail_reason", reason)
    study.tell(trial, state=TrialState.FAIL)
    return cost


def _jsonable(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float, str, bool)) or v is None}


def worker_loop(
    settings: SearchSettings,
    worker: int = 0,
    progress: SearchProgress | None = None,
    runner: TrialRunner | None = None,
) -> int:
    """Run trials until the shared budget is spent and no trial of the study runs anywhere (a worker whose
    budget is taken by trials running elsewhere waits for them: one may be lost and need a re-run); returns
    the number this worker ran."""
    study, _ = open_study(settings, worker=worker, create=False)
    runner = runner or TrialRunner(settings)
    tracker = tracker_from_study(study, settings)
    tracker.check_device(runner.device_kind)
    if settings.evaluator == "oneshot":
        seconds, devices = runner.setup_cost()
        if seconds:
            gpus = int(devices) if runner.device_kind == "gpu" else 0
            cost = TrialCost.of(seconds, gpus=gpus, label="supernet training", overhead=True)
            study.set_user_attr("overhead", [*study.user_attrs.get("overhead", []), cost.to_dict()])
    ran = 0
    while True:
        fail_lost_trials(study)  # a killed worker's trial is failed and its architecture enqueued again
        tracker = tracker_from_study(study, settings)
        running = _running_elsewhere(study)
        if tracker.can_start(pending=running):
            row = run_trial(study, runner, settings, tracker)
            ran += 1
            if progress is not None:
                progress.trial_done(row, tracker)
        elif running:
            time.sleep(WAIT_SECONDS)  # they may finish, or be found lost and leave work to re-run
        else:
            return ran


def _spawned_worker(settings: SearchSettings, worker: int, ran: Any) -> None:
    ran.value = worker_loop(settings, worker)


def run_optuna(settings: SearchSettings, progress: SearchProgress | None = None) -> int:
    """The whole search: open or resume the study, enqueue baselines, run the workers until the budget is
    spent; returns the number of trials this process's workers ran. Extra workers (``settings.workers`` >
    1) run as processes on this machine against the same storage; workers on other machines join by running
    the same command with ``--resume``."""
    study, _ = open_study(settings, create=True)
    if settings.baselines:
        _enqueue_baselines(study, settings)
    session = uuid.uuid4().hex[:8]
    study.set_user_attr(f"session:{session}", datetime.now(UTC).isoformat(timespec="seconds"))
    context = multiprocessing.get_context("spawn")
    counts = [context.Value("i", 0) for _ in range(1, settings.workers)]
    helpers = [
        context.Process(target=_spawned_worker, args=(settings, w, counts[w - 1]))
        for w in range(1, settings.workers)
    ]
    for p in helpers:
        p.start()
    try:
        ran = worker_loop(settings, 0, progress)
    finally:
        for p in helpers:
            p.join()
    return ran + sum(c.value for c in counts)

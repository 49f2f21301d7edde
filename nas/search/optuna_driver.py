"""The Optuna driver (the default backend): :func:`~nas.search.trial.run_trial` in an ask/tell loop over a
named, persistent study (:mod:`nas.study.storage` says where it lives).

Every trial records, as user attributes, what :meth:`TrialRecord.attrs` holds (``arch`` key and
``arch_json``, ``baseline``, the evaluator's ``metrics``, its ``cost``, ``fail_reason``) plus its ``worker``
and ``heartbeat`` while it runs (:mod:`nas.search.liveness`), and ``top1`` / ``macs`` / ``params`` /
``latency_ms`` as numbers of their own where the evaluator measured them; the study names its values by the
objectives (``metric_names``): ``optuna-dashboard sqlite:///runs/<study>/study.db`` shows trials with the
space's choices as parameters (``stem``, ``s1.op``, ``s1.depth``, ...), these names and attributes.
The study also records the set-up overhead (``overhead``) and, per session, the wall-clock span it ran
(``session:<id>``), so a resumed search, or several workers, charge one budget (:class:`StudyBudget`), wall
budgets included. The space's baselines are enqueued first (once). Before each trial the worker asks the
budget whether the next trial, estimated from the finished ones, still fits; it never starts one that would
overrun.

On a fidelity ladder (``--fidelity ladder``) each rung of an architecture is its own trial with user
attributes ``rung`` and ``lineage`` (the number of its rung-0 trial). Before asking for a trial, a free worker
reads the study's rung results and applies :func:`nas.study.fidelity.next_promotion`; a promotion is
enqueued as a trial with the lineage's parameters, so every engine feature (liveness, re-runs of lost
trials, budgets) treats it as any trial. The sampler models on rung-0 trials only
(:func:`nas.search.samplers.on_rung_zero`), as the Ray driver's inner searcher does. Two workers may decide
the same promotion at once: the later of the two trials is pruned unrun (state PRUNED, reason recorded,
nothing charged).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.core.arch import Arch
from nas.core.option_names import option
from nas.search.liveness import Heartbeat, enqueue_arch, enqueue_rerun, fail_lost_trials
from nas.search.progress import SearchProgress
from nas.search.samplers import make_sampler, on_rung_zero, sampler_seed
from nas.search.trial import TrialRecord, TrialRunner, earlier_results, run_trial, worker_runner
from nas.search.worker_pool import WorkerPool
from nas.study.budget import BudgetTracker, Session, TrialCost, wall_seconds
from nas.study.constraints import RejectionStreak
from nas.study.fidelity import Promotion, RungResult, next_promotion, rung_result
from nas.study.optuna_private import batched_writes
from nas.study.settings import SearchSettings
from nas.study.storage import open_storage, storage_file, storage_url
from nas.study.study_file import StudyFile
from nas.study.terms import check_terms, study_terms
from nas.study.trials_table import trial_row
from nas.system import stopping
from nas.system.failures import WriteFailed, disk_state

__all__ = ["StudyBudget", "open_study", "run_optuna", "worker_loop"]

optuna.logging.set_verbosity(optuna.logging.WARNING)

WAIT_SECONDS = 2.0  # how often a worker with nothing to start looks at the trials running elsewhere
# how often a worker records its session's span and reads the study's (other sessions' spans, overhead): a
# wall budget counts this session's own span live, so the others' need not be fresher
ATTRS_SECONDS = 10.0
_SESSION = "session:"
# the evaluator's metrics that each trial also records as user attributes of their own (beside ``metrics``)
DASHBOARD_METRICS = ("top1", "macs", "params", "latency_ms")


def open_study(
    settings: SearchSettings, *, worker: int = 0, create: bool = True, session: Session | None = None
) -> tuple[optuna.Study, str, Any]:
    """(study, storage URL, storage): create the study or load it. An existing study with trials needs
    ``resume`` (or a second worker), and ``resume`` needs an existing study (a mistyped name must not start
    a new one). The sampler is ``worker``'s in ``session`` (see :func:`~nas.search.samplers.sampler_seed`)."""
    where = storage_url(settings)
    local = storage_file(where)
    if create and settings.resume and local is not None and not local.exists():  # opening would create it
        if settings.storage and not local.parent.is_dir():
            raise ValueError(f"storage: cannot open {where}: there is no folder {local.parent}")
        raise ValueError(
            f"study {settings.study_name!r} does not exist in {where}; drop {option('resume')} to start it"
        )
    storage, url = open_storage(settings)
    names = optuna.study.get_all_study_names(storage)
    exists = settings.study_name in names
    if exists and create and not settings.resume:
        study = optuna.load_study(study_name=settings.study_name, storage=storage)
        if study.trials:
            raise ValueError(
                f"study {settings.study_name!r} already exists in {url} with {len(study.trials)} trials; "
                f"pass {option('resume')} to continue it, or choose another {option('study', 'NAME')}"
            )
    if not exists and (not create or settings.resume):
        hint = f"; drop {option('resume')} to start it" if create else ""
        raise ValueError(f"study {settings.study_name!r} does not exist in {url}{hint}")
    study = optuna.create_study(
        study_name=settings.study_name,
        storage=storage,
        directions=[o.direction for o in settings.parsed_objectives],
        sampler=_sampler(settings, worker, session),
        load_if_exists=True,
    )
    terms = study_terms(settings)
    check_terms(settings.study_name, study.user_attrs, terms)  # a term the study lacks is recorded now
    for name, value in terms.items():
        if name not in study.user_attrs:
            study.set_user_attr(name, value)
    if study.metric_names is None:  # optuna-dashboard and Optuna's plots name the values by these (a study
        with warnings.catch_warnings():  # from before gets them at its resume); experimental since 3.2
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([o.name for o in settings.parsed_objectives])
    return study, url, storage


def _sampler(settings: SearchSettings, worker: int, session: Session | None) -> optuna.samplers.BaseSampler:
    """``worker``'s sampler in ``session``: a resumed study's sessions are seeded apart from its first, so
    they draw other architectures than it did (:func:`~nas.search.samplers.sampler_seed`)."""
    resumed = settings.resume and session is not None
    seed = sampler_seed(settings.seed, worker, session.id if resumed else None)
    sampler = make_sampler(settings.sampler_name, seed)
    return on_rung_zero(sampler) if settings.fidelity == "ladder" else sampler


def rung_results(trials: Sequence[FrozenTrial]) -> list[RungResult]:
    """The ladder's view of the study (:func:`~nas.study.fidelity.rung_result` of every trial that holds a
    rung; unrun duplicates, pruned, left out)."""
    results = []
    for trial in trials:
        attrs = trial.user_attrs
        if "rung" in attrs and trial.state != TrialState.PRUNED:
            values = trial.values if trial.state == TrialState.COMPLETE else None
            results.append(rung_result(int(attrs["lineage"]), int(attrs["rung"]), attrs, values))
    return [r for r in results if r is not None]


def _enqueue_promotion(study: optuna.Study, trials: Sequence[FrozenTrial], promotion: Promotion) -> None:
    """Queue ``promotion`` as a trial with its lineage's parameters."""
    first = next(t for t in trials if t.number == promotion.lineage)
    enqueue_arch(study, first, {"rung": promotion.rung, "lineage": promotion.lineage})


def _duplicate_of(trials: Sequence[FrozenTrial], trial: optuna.Trial) -> int | None:
    """The number of an earlier trial that runs or ran the same rung of the same lineage (not failed)."""
    rung, lineage = trial.user_attrs.get("rung"), trial.user_attrs.get("lineage")
    if not rung:
        return None
    for other in trials:
        attrs = other.user_attrs
        if (
            other.number < trial.number
            and (attrs.get("rung"), attrs.get("lineage")) == (rung, lineage)
            and other.state in (TrialState.RUNNING, TrialState.COMPLETE)
        ):
            return other.number
    return None


def _record_session(study: optuna.Study, session: Session) -> None:
    """Store the session's wall-clock span, from its start to now."""
    start, end = session.span()
    study.set_user_attr(_SESSION + session.id, {"start": start, "end": end})


class StudyBudget:
    """The study's budget as one worker sees it, kept incrementally: each finished trial is charged once
    (this worker's when it ends, others' when this worker next looks), the set-up overhead recorded in the
    study, and the wall time of every session's span (this one running to now)."""

    def __init__(self, settings: SearchSettings, session: Session | None = None) -> None:
        self.session = session
        self._spans: list[tuple[float, float]] = []
        self.tracker = BudgetTracker(settings.parsed_budget, wall=self._wall, ladder=settings.ladder_shape)
        self._charged: set[int] = set()
        self._overheads = 0

    def _wall(self) -> float:
        own = [self.session.span()] if self.session else []
        return wall_seconds([*self._spans, *own])

    def charge(self, number: int, cost: TrialCost) -> None:
        if number not in self._charged:
            self._charged.add(number)
            self.tracker.charge(cost)

    def refresh(self, trials: Sequence[FrozenTrial], attrs: dict[str, Any]) -> int:
        """Charge what ``trials`` and the study's ``attrs`` record and this worker has not charged yet;
        returns the number of trials running."""
        overhead = attrs.get("overhead", [])
        for item in overhead[self._overheads :]:
            self.tracker.charge(TrialCost.from_dict(item))
        self._overheads = len(overhead)
        own = _SESSION + self.session.id if self.session else None
        self._spans = [
            (float(v["start"]), float(v["end"]))
            for k, v in attrs.items()
            if k.startswith(_SESSION) and k != own and isinstance(v, dict)
        ]
        running = 0
        for trial in trials:
            if trial.state == TrialState.RUNNING:
                running += 1
            elif trial.state in (TrialState.COMPLETE, TrialState.FAIL) and trial.number not in self._charged:
                cost = trial.user_attrs.get("cost")
                if cost:
                    self.charge(trial.number, TrialCost.from_dict({**cost, "label": f"trial {trial.number}"}))
        return running

    @classmethod
    def of(cls, study: optuna.Study, settings: SearchSettings) -> BudgetTracker:
        """The whole study's budget, every session's span included (what the manifest records)."""
        budget = cls(settings)
        budget.refresh(study.get_trials(deepcopy=False), study.user_attrs)
        return budget.tracker


def _enqueue_first(study: optuna.Study, settings: SearchSettings) -> None:
    """The baselines and the enqueued architectures (``SearchSettings.first_points``) the study holds no
    trial of, or only failed ones: a baseline that failed (a timeout too short for it, a cause since fixed)
    runs again in the next session, as the failure streak's message promises."""
    space = settings.search_space
    trials = study.get_trials(deepcopy=False)
    known = {t.user_attrs.get("baseline") for t in trials if t.state != TrialState.FAIL}
    for name, arch in settings.first_points.items():
        if name not in known:
            study.enqueue_trial(space.encode(arch), user_attrs={"baseline": name})


def _run_one(
    study: optuna.Study,
    storage: Any,
    runner: TrialRunner,
    trials: Sequence[FrozenTrial],
    progress: SearchProgress | None = None,
) -> tuple[int, TrialRecord | None]:
    """Ask one trial, run it, tell its outcome. While it runs the trial carries this worker's identity and
    heartbeat, so that a kill leaves a trial the next worker recognises as lost. The sampled parameters
    with the architecture, and the outcome's records, are each one storage transaction. A duplicate
    promotion is pruned unrun (record None); an architecture ``trials`` hold a result of is answered from
    it (:func:`~nas.search.trial.run_trial`'s repeats). ``progress`` is shown the trial while it runs."""
    trial = study.ask()
    step = None
    if runner.ladder is not None:
        if (twin := _duplicate_of(study.get_trials(deepcopy=False), trial)) is not None:
            trial.set_user_attr("fail_reason", f"a duplicate of trial {twin}'s promotion, not run")
            study.tell(trial, state=TrialState.PRUNED)
            return trial.number, None
        step = (int(trial.user_attrs.get("lineage", trial.number)), int(trial.user_attrs.get("rung", 0)))
    number = trial.number
    shown: dict[str, Any] = {}
    if progress is not None:
        progress.trial_started(number, rung=step[1] if step else None)
        shown = {
            "on_arch": lambda arch: progress.trial_step(number, arch=arch.key),
            "report": lambda epoch, metrics: progress.trial_step(number, epoch=epoch),
        }

    def sample() -> Arch:
        with batched_writes(storage):
            arch = runner.space.sample(trial)  # the sampler's suggestions run here: part of the trial's cost
            trial.set_user_attr("arch", arch.key)
            trial.set_user_attr("arch_json", arch.to_json())
            if step is not None and step[1] == 0:
                trial.set_user_attr("rung", 0)
                trial.set_user_attr("lineage", step[0])
        return arch

    # the worker record is its own write, at once: a kill during the sampling leaves a trial that the next
    # worker knows lost at once, instead of after LOST_AFTER_SECONDS without a heartbeat
    with Heartbeat(trial, runner.gpus):  # until its outcome is told
        known = None  # a promotion trains on
        if step is None or step[1] == 0:
            known = earlier_results((t.number, t.user_attrs, t.state == TrialState.COMPLETE) for t in trials)
        record = run_trial(runner, sample, number=number, step=step, known=known, **shown)
        with batched_writes(storage):
            attrs = record.attrs()
            for key in ("baseline", "metrics", "cost", "fail_reason", "constraints", "feasible", "rejected"):
                trial.set_user_attr(key, attrs[key])
            if record.repeat_of is not None:
                trial.set_user_attr("repeat_of", record.repeat_of)
            for name in DASHBOARD_METRICS:  # numbers of their own: optuna-dashboard sorts and plots them
                if isinstance(record.metrics.get(name), (int, float)):
                    trial.set_user_attr(name, record.metrics[name])
            for name, value in record.constraints.items():  # what TPE, NSGA-II and GP read as feasibility
                trial.set_constraint(name, value)
        if record.ok:
            study.tell(trial, record.values)
        else:
            study.tell(trial, state=TrialState.FAIL)
    if record.interrupted:  # --resume runs it again
        enqueue_rerun(study, next(t for t in study.get_trials(deepcopy=False) if t.number == trial.number))
    return trial.number, record


def _show_finished(
    progress: SearchProgress, trials: Sequence[FrozenTrial], names: Sequence[str], this_session: bool
) -> None:
    """Show ``progress`` the finished trials of ``trials`` it has not seen (the study's whole front)."""
    progress.add_rows(
        (
            trial_row(t.number, t.state.name, t.user_attrs, dict(zip(names, t.values, strict=True)))
            if t.values is not None
            else trial_row(t.number, t.state.name, t.user_attrs)
            for t in trials
            if t.state.is_finished() and not progress.knows(t.number)
        ),
        this_session,
    )


def worker_loop(
    settings: SearchSettings,
    worker: int = 0,
    progress: SearchProgress | None = None,
    session: Session | None = None,
    opened: tuple[optuna.Study, Any] | None = None,
) -> int:
    """Run trials until the shared budget is spent and no trial of the study runs anywhere (a worker whose
    budget is taken by trials running elsewhere waits for them: one may be lost and need a re-run); returns
    the number this worker ran. Ctrl-C / SIGTERM fails the running trial as interrupted, queues it again and
    raises KeyboardInterrupt."""
    session = session or Session()
    study, storage = opened or open_study(settings, worker=worker, create=False, session=session)[::2]
    runner = worker_runner(settings)
    runner.prepare()  # a helper loads what the driver's set-up made (a trained supernet); not charged again
    budget = StudyBudget(settings, session)
    streak = RejectionStreak(runner.limits)
    ran, attrs, looked = 0, study.user_attrs, time.monotonic()
    watch = StudyFile(storage_url(settings), restore=worker == 0)  # the study's file removed: restore, stop
    names = [o.name for o in settings.parsed_objectives]
    if progress is not None:
        progress.use_budget(budget.tracker)
        _show_finished(progress, study.get_trials(deepcopy=False), names, this_session=False)  # earlier
    try:
        while True:
            stopping.check()  # a signal received between trials stops the worker here
            watch.check()
            trials = study.get_trials(deepcopy=False)
            if fail_lost_trials(study, trials):  # a killed worker's trial is failed and queued again
                continue
            if progress is not None:  # what other workers finished meanwhile
                _show_finished(progress, trials, names, this_session=True)
            if time.monotonic() - looked > ATTRS_SECONDS:  # other sessions' spans; set-up overhead
                attrs, looked = study.user_attrs, time.monotonic()
                _record_session(study, session)
            running = budget.refresh(trials, attrs)
            if not budget.tracker.can_start(pending=running):
                if not running:
                    watch.check()  # the last trial's records are where the table will be read
                    return ran
                time.sleep(WAIT_SECONDS)  # they may finish, or be found lost and leave work to re-run
                continue
            if runner.ladder is not None:
                promotion = next_promotion(rung_results(trials), runner.ladder, runner.directions)
                if promotion is not None:
                    _enqueue_promotion(study, trials, promotion)
            number, record = _run_one(study, storage, runner, trials, progress)
            if record is None:  # a duplicate promotion, not run
                continue
            budget.charge(number, record.cost)
            ran += 1
            if progress is not None:
                progress.trial_done(number, record, budget.tracker)
            if record.interrupted:
                raise KeyboardInterrupt
            if record.reason and record.reason.startswith("cannot write:"):  # every later trial would too
                cannot = f"cannot write {record.reason.removeprefix('cannot write: ')}"
                state = disk_state(settings.run_dir)
                raise WriteFailed(f"{cannot}: {state}" if state else cannot)
            # NothingFeasible ends a worker that only rejects, repeats, or fails the same way
            streak.add(record.rejected, record.metrics, record.repeat_of is not None, record.reason)
    finally:
        # its span to its last trial, whichever way the loop ended (a storage that fails here is reported
        # by the exception already on its way, not by this write)
        with contextlib.suppress(Exception):
            _record_session(study, session)
        watch.close()


def run_optuna(
    settings: SearchSettings,
    progress: SearchProgress | None = None,
    started: Callable[[str], None] | None = None,
) -> int:
    """The whole search: open or resume the study, enqueue baselines, do the evaluator's set-up once (a
    one-shot supernet, charged as overhead), run the workers until the budget is spent; returns the number
    of trials this process's workers ran. Extra workers (``settings.workers`` > 1) run as processes on this
    machine against the same storage; workers on other machines join by running the same command with
    ``--resume``. ``started(url)`` is called once the study is open (the storage's URL, as shown)."""
    session = Session()
    study, url, storage = open_study(settings, create=True, session=session)
    if started is not None:
        started(url)
    runner = worker_runner(settings)  # worker 0's, the preflight's
    _enqueue_first(study, settings)
    _record_session(study, session)
    setup = runner.prepare()
    if setup is not None:
        study.set_user_attr("overhead", [*study.user_attrs.get("overhead", []), setup.to_dict()])
    with WorkerPool(worker_loop, settings, session) as helpers:
        ran = worker_loop(settings, 0, progress, session, (study, storage))
    return ran + helpers.ran

"""The Ray Tune driver (``--backend ray``): :func:`~nas.search.trial.run_trial` as a Tune function trial.

A ``Tuner`` runs one function trial per architecture with the resources asked for (``cpus_per_trial``,
``gpus_per_trial``) on a local Ray or the cluster at ``address`` (``auto`` inside ``ray job submit``, or
``ray://host:10001``). Architectures come from ``OptunaSearch`` over the space's ``sample`` (define-by-run),
with the space's baselines as its first points, behind :class:`BudgetedSearcher`, which stops suggesting
once the next trial would overrun the budget and keeps at most ``concurrency`` trials running. Each Ray
worker process keeps one :class:`~nas.search.trial.TrialRunner` across the trials it runs (``reuse_actors``).
An evaluator with set-up work (a one-shot supernet) does it once, in a Ray task with a trial's resources,
before the first trial; it is charged as overhead, as on the Optuna driver.

The search's record is ``runs/<study>/ray_ledger.jsonl``, one JSON line appended per event: each session's
budget, the set-up overhead, and each finished trial's record (the trials table is read from it, and the
budget and each session's wall-clock span rebuilt from it). Tune's results and the searcher's state live in
``runs/<study>/ray/``. ``--resume`` continues with ``Tuner.restore`` (errored trials are retried), and a
trial whose worker process dies is retried up to twice (``FailureConfig``). A trial that fails reports its
reason and NaN objectives, so it is recorded as failed in the trials table (and told to the inner searcher as
FAIL) and the search goes on. Tune takes Ctrl-C itself: ``tuner.fit()`` saves the experiment and returns,
which the driver tells from the searcher's end (it never said FINISHED) and raises as KeyboardInterrupt,
after charging the trials that were running as overhead.

On a fidelity ladder the searcher decides promotions with the rule the Optuna driver uses
(:func:`nas.study.fidelity.next_promotion`, over the rung results in its ledger and the rungs it has under
way): a promotion is a Tune trial of its own whose config names the lineage and rung (the inner
``OptunaSearch`` suggests, and is told, rung-0 trials only). A promoted trial continues the lineage's
checkpoint under ``runs/<study>/ladder/``: on a multi-node cluster that folder must be on storage every node
sees (as the kept weights are).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray.tune.search import Searcher, SearchGenerator

from nas.core.arch import Arch
from nas.core.atomic import Held, sole
from nas.core.option_names import option
from nas.search.progress import SearchProgress
from nas.search.samplers import make_sampler
from nas.search.trial import Earlier, TrialRecord, earlier_results, run_trial, worker_runner
from nas.study.budget import BudgetTracker, Session, TrialCost, wall_seconds
from nas.study.constraints import NothingFeasible, RejectionStreak
from nas.study.fidelity import next_promotion, rung_result
from nas.study.settings import SearchSettings
from nas.study.terms import check_terms, study_terms
from nas.study.trials_table import frame_from_rows, trial_row
from nas.system import ray_watchdog
from search_spaces import get_space

__all__ = ["BudgetedGenerator", "BudgetedSearcher", "collect_ray", "run_ray"]

SESSION_LOCK = "ray_session.lock"  # in the run folder: held by the one driver searching the study
_NUMBER = "__number"  # the trial's sequence number, added to the config the trainable receives
_STEP = "__step"  # on a ladder, a promotion's [lineage, rung]
_REPEAT = "__repeat"  # a suggested architecture the study has a result of: that result (Earlier's fields)


@dataclass
class _Driving:
    """What this driver's session shares with its searcher, which Tune pickles with the experiment (a
    restored one is another object): found by study in :data:`_DRIVING` while ``tuner.fit()`` runs."""

    progress: SearchProgress | None
    session: Session = field(default_factory=Session)  # this session's span
    enqueued: dict[str, dict[str, Any]] = field(default_factory=dict)  # a resume's first points, encoded
    stopped: NothingFeasible | None = None  # why the searcher stopped before the budget ran out
    finished: bool = False  # the searcher said FINISHED: else fit() returned on a Ctrl-C Tune took
    running: dict[str, tuple[int, float]] = field(default_factory=dict)  # trial id -> (number, its start)


_DRIVING: dict[str, _Driving] = {}


def _settings_dict(settings: SearchSettings) -> dict[str, Any]:
    """The settings as the workers get them: folders made absolute, since Tune runs each function trial in a
    working directory of its own (a relative ``runs`` would put weights and latency tables there)."""
    out = settings.choices()
    for name in ("runs_dir", "data_dir"):
        if out[name] is not None:
            out[name] = str(Path(out[name]).expanduser().resolve())
    kind, _, folder = out["dataset"].partition(":")
    if kind == "imagefolder" and folder:
        out["dataset"] = f"imagefolder:{Path(folder).expanduser().resolve()}"
    return out


def ray_trial(config: dict[str, Any], settings: dict[str, Any]) -> None:
    """One trial on a Ray worker: the suggested parameters replayed through the space, run, reported."""
    import optuna
    from ray import tune

    runner = worker_runner(settings)
    runner.prepare()  # loads what the driver's set-up task made (a trained supernet); not charged again
    params = {k: v for k, v in config.items() if k not in (_NUMBER, _STEP, _REPEAT)}
    number = config.get(_NUMBER, -1)
    step = tuple(config[_STEP]) if config.get(_STEP) else None
    earlier = Earlier(**config[_REPEAT]) if config.get(_REPEAT) else None
    record = run_trial(
        runner,
        lambda: runner.space.sample(optuna.trial.FixedTrial(params)),
        number=number,
        step=step,
        known=lambda arch: earlier,  # the searcher looked it up in the ledger
    )
    values = record.values or [math.nan] * len(runner.objectives)  # objectives on top, for the searcher
    tune.report({**record.attrs(), **dict(zip(runner.objectives, values, strict=True)), "number": number})


def _setup_task(settings: dict[str, Any]) -> dict[str, Any] | None:
    """The evaluator's set-up (a one-shot supernet trained into the run directory), run once in a Ray task;
    returns its cost."""
    cost = worker_runner(settings).prepare()
    return cost.to_dict() if cost is not None else None


def ledger_path(settings: SearchSettings) -> Path:
    return (settings.run_dir / "ray_ledger.jsonl").resolve()


def _append(path: Path, entry: dict[str, Any]) -> None:
    """One line appended in one write: a process killed mid-search leaves whole lines (or, at worst, a cut
    last line, which :func:`read_ledger` skips)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry, default=str) + "\n").encode())
    finally:
        os.close(fd)


@dataclass
class Ledger:
    """What ``runs/<study>/ray_ledger.jsonl`` holds: the study's terms (:mod:`nas.study.terms`), the latest
    budget, the overhead charges, each finished trial's record by Tune trial id (the first, should Tune run it
    again), and each session's span."""

    terms: dict[str, Any] = field(default_factory=dict)
    budget: str | None = None
    overhead: list[dict[str, Any]] = field(default_factory=list)
    trials: dict[str, dict[str, Any]] = field(default_factory=dict)
    sessions: dict[str, list[float]] = field(default_factory=dict)

    def add(self, entry: dict[str, Any]) -> None:
        if "terms" in entry:
            self.terms.update(entry["terms"])
        if "budget" in entry:
            self.budget = entry["budget"]
        if "overhead" in entry:
            self.overhead.append(entry["overhead"])
        if "trial" in entry:
            self.trials.setdefault(entry["trial"], entry)
            span = self.sessions.setdefault(entry["session"], [entry["session_start"], entry["end"]])
            span[1] = max(span[1], entry["end"])

    def tracker(self, budget: str, spans: Any = None, ladder: tuple[int, int] | None = None) -> BudgetTracker:
        """The budget with every charge so far; wall time over the sessions' spans (or ``spans()``)."""
        spans = spans or (lambda: list(self.sessions.values()))
        tracker = BudgetTracker(budget, wall=lambda: wall_seconds(spans()), ladder=ladder)
        for cost in [*self.overhead, *(t["attrs"]["cost"] for t in self.trials.values())]:
            tracker.charge(TrialCost.from_dict(cost))
        return tracker


def read_ledger(path: Path) -> Ledger:
    ledger = Ledger()
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        try:
            ledger.add(json.loads(line))
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line cut by a kill mid-write
    return ledger


class BudgetedSearcher(Searcher):
    """Suggests from ``inner`` until the budget's next trial would not fit; records every completed trial
    (once, by Tune trial id) in the ledger, charges it and shows it in the live view.

    The ledger, not Tune's experiment state, is the record of finished trials: Tune saves its state every
    few seconds, and a driver killed between two saves forgets the trials finished since (their numbers are
    then given to new trials only if no record holds them)."""

    def __init__(self, inner: Any, settings: SearchSettings) -> None:
        super().__init__(metric=inner.metric, mode=inner.mode)
        self.inner, self.max_concurrent = inner, settings.concurrency
        self.path, self.view = ledger_path(settings), settings.study_name
        self.objectives = tuple(o.name for o in settings.parsed_objectives)
        self.directions = tuple(o.direction for o in settings.parsed_objectives)
        self.streak = RejectionStreak(settings.limits)
        self.stopped: str | None = None  # why it stopped suggesting before the budget ran out
        self.live: set[str] = set()
        self.numbers: dict[str, int] = {}
        self.space, self.narrow = settings.space, settings.narrow
        self.ladder = settings.ladder
        self.ladder_shape = settings.ladder_shape
        self.steps: dict[str, tuple[int, int]] = {}  # on a ladder: each trial's (lineage, rung)
        self._open()

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles the searcher: the ledger is read anew
        return {k: v for k, v in self.__dict__.items() if k not in ("session", "ledger", "tracker", "used")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a searcher pickled before the ladder existed searches on a single fidelity
        # (and one pickled before narrowing existed, over the whole space)
        self.__dict__.update({"ladder": None, "ladder_shape": None, "steps": {}, "narrow": {}, **state})
        self._open()

    def _open(self) -> None:
        """Read the ledger (``run_ray`` wrote this session's budget) and join this session."""
        self.session = self._driving().session
        self.ledger = read_ledger(self.path)
        others = [span for sid, span in self.ledger.sessions.items() if sid != self.session.id]
        self.tracker = self.ledger.tracker(
            self.ledger.budget, lambda: [*others, self.session.span()], self.ladder_shape
        )
        self.used = set(self.numbers.values()) | {t["number"] for t in self.ledger.trials.values()}
        self._enqueue_new()

    def _enqueue_new(self) -> None:
        """At a resume, queue the named networks given now (``--enqueue``) that the study has not run, first
        in the inner searcher's Optuna study, as the first session's were (OptunaSearch enqueues its
        ``points_to_evaluate`` there): the inner searcher suggests them and learns their results. A network
        whose trials all failed is queued again (as on Optuna); one queued or running is not."""
        import optuna

        points = self._driving().enqueued
        study = getattr(self.inner, "_ot_study", None)  # OptunaSearch's study: no public accessor
        if not points or study is None:
            return
        ran = {entry["attrs"].get("baseline") for entry in self.ledger.trials.values() if entry["values"]}
        states = (optuna.trial.TrialState.WAITING, optuna.trial.TrialState.RUNNING)
        pending = [t.system_attrs.get("fixed_params") or t.params for t in study.get_trials(states=states)]
        for name, params in points.items():
            if name not in ran and params not in pending:
                study.enqueue_trial(params)

    def set_search_properties(self, metric: Any, mode: Any, config: dict, **spec: Any) -> bool:
        return True  # metric and mode are the inner searcher's (declared objectives)

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        config = self._suggest(trial_id)
        if config == Searcher.FINISHED:
            self._driving().finished = True
        elif config is not None:
            self._driving().running[trial_id] = (config[_NUMBER], time.time())
        return config

    def _suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self.stopped is not None:
            return None if self.live else Searcher.FINISHED
        if len(self.live) >= self.max_concurrent:
            return None
        if not self.tracker.can_start(pending=len(self.live - self.ledger.trials.keys())):  # not yet charged
            return None if self.live else Searcher.FINISHED
        promotion = self._promotion()
        if promotion is not None:
            config = {**self._params_of(promotion.lineage), _STEP: [promotion.lineage, promotion.rung]}
        else:
            config = self.inner.suggest(trial_id)
            if config is None or config == Searcher.FINISHED:
                return config
            earlier = self._earlier(config)
            if earlier is not None:  # answered from the ledger by the trial, not trained again
                config = {**config, _REPEAT: dataclasses.asdict(earlier)}
        number = min(set(range(len(self.used) + 1)) - self.used)  # the lowest no trial holds
        self.live.add(trial_id)
        self.used.add(number)
        self.numbers[trial_id] = number
        if self.ladder is not None:
            self.steps[trial_id] = (promotion.lineage, promotion.rung) if promotion else (number, 0)
        progress = self._driving().progress
        if progress is not None:  # shown from its start; the epochs run on a worker, unseen here
            progress.use_budget(self.tracker)
            rung = self.steps[trial_id][1] if trial_id in self.steps else None
            progress.trial_started(number, rung=rung, arch=self._arch_of(config).key)
        return {**config, _NUMBER: number}

    def _driving(self) -> _Driving:
        """The state this session shares with its driver (a searcher outside ``run_ray`` gets its own)."""
        return _DRIVING.get(self.view) or _Driving(None)

    def _arch_of(self, config: dict[str, Any]) -> Any:
        """The architecture a suggested config samples."""
        import optuna

        params = {k: v for k, v in config.items() if k not in (_NUMBER, _STEP, _REPEAT)}
        return get_space(self.space, self.narrow).sample(optuna.trial.FixedTrial(params))

    def _promotion(self) -> Any:
        """The promotion the ladder's rule asks for now (None: a new trial, or no ladder)."""
        if self.ladder is None:
            return None
        results = []
        for trial_id, (lineage, rung) in self.steps.items():
            entry = self.ledger.trials.get(trial_id) or {"attrs": {}, "values": None}
            values = [entry["values"][o] for o in self.objectives] if entry["values"] else None
            results.append(rung_result(lineage, rung, entry["attrs"], values))
        results = [r for r in results if r is not None]
        return next_promotion(results, self.ladder, self.directions)

    def _earlier(self, params: dict[str, Any]) -> Earlier | None:
        """The ledger's earlier result of the architecture ``params`` sample
        (:func:`~nas.search.trial.earlier_results`)."""
        recorded = ((e["number"], e["attrs"], bool(e["values"])) for e in self.ledger.trials.values())
        return earlier_results(recorded)(self._arch_of(params))

    def _params_of(self, lineage: int) -> dict[str, Any]:
        """The suggested parameters of ``lineage``'s architecture (from its rung-0 record)."""
        entry = next(e for e in self.ledger.trials.values() if e["number"] == lineage)
        return get_space(self.space, self.narrow).encode(Arch.from_json(entry["attrs"]["arch_json"]))

    def _inner_knows(self, trial_id: str) -> bool:
        """Whether the inner searcher suggested ``trial_id`` (a promotion it never saw)."""
        return trial_id not in self.steps or self.steps[trial_id][1] == 0

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if self._inner_knows(trial_id):
            self.inner.on_trial_result(trial_id, result)
        result = _nested(result)
        if "cost" in result:  # a trial reports once, at its end: recorded before Tune writes result.json
            self._record(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.live.discard(trial_id)
        nested = _nested(result or {})
        if self._inner_knows(trial_id):
            told = getattr(self.inner, "_ot_trials", {}).get(trial_id)  # OptunaSearch's: no public accessor
            for name, value in (nested.get("constraints") or {}).items():
                if told is not None:  # what its sampler (TPE, NSGA-II, GP) reads as feasibility, as on Optuna
                    told.set_constraint(name, float(value))
            values = [(result or {}).get(o) for o in self.objectives]
            if any(v is None or math.isnan(v) for v in values):  # a failed trial: FAIL, as on Optuna
                result, error = None, True  # (OptunaSearch cannot tell NaN, and left it RUNNING for ever)
            self.inner.on_trial_complete(trial_id, result=result, error=error)
        self._record(trial_id, nested)

    def _record(self, trial_id: str, result: dict[str, Any]) -> None:
        """Append the trial's record to the ledger (once), charge it, show it."""
        if trial_id in self.ledger.trials:
            return
        number = self.numbers.get(trial_id, -1)
        if trial_id in self.steps and "rung" not in result:  # it errored before it could report its rung
            result = {**result, "lineage": self.steps[trial_id][0], "rung": self.steps[trial_id][1]}
        record = _record_of(result, number, self.objectives, self.directions, self.tracker.budget)
        entry = {
            "trial": trial_id,
            "number": number,
            "session": self.session.id,
            "session_start": self.session.start,
            "end": time.time(),
            "attrs": record.attrs(),
            "values": dict(zip(self.objectives, record.values, strict=True)) if record.values else None,
        }
        _append(self.path, entry)
        self.ledger.add(entry)
        self.tracker.charge(record.cost)
        driving = self._driving()
        driving.running.pop(trial_id, None)
        if driving.progress is not None:
            driving.progress.trial_done(number, record, self.tracker)
        try:
            self.streak.add(record.rejected, record.metrics, record.repeat_of is not None, record.reason)
        except NothingFeasible as stop:
            self.stopped = str(stop)
            driving.stopped = stop  # raised again by the driver, as the kind it is

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.__getstate__(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))
        self._open()
        # the experiment state is saved with this searcher's, so every trial suggested and not yet recorded
        # is one Tune re-queues on restore (unfinished or errored): it runs again, so it is pending
        self.live = {t for t in self.numbers if t not in self.ledger.trials}


def _nested(result: dict[str, Any]) -> dict[str, Any]:
    """A result as the trial reported it: Tune hands searchers results with nested dicts flattened
    (``cost/seconds``)."""
    out: dict[str, Any] = {}
    for key, value in result.items():
        *parents, leaf = key.split("/")
        node = out
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return out


def _record_of(
    result: dict[str, Any], number: int, objectives: tuple[str, ...], directions: tuple[str, ...], budget: Any
) -> TrialRecord:
    """The record a Ray trial reported; a trial that errored past its retries reported nothing, and is a
    failed trial all the same (else a trials budget whose trials all error would never fill)."""

    def whole(key: str) -> int | None:
        return None if result.get(key) is None else int(result[key])

    cost = result.get("cost")
    return TrialRecord(
        Arch.from_json(result["arch_json"]) if result.get("arch_json") else None,
        result.get("metrics") or {},
        TrialCost.from_dict(cost) if cost else TrialCost(0.0, 1, budget.device or "cpu", f"trial {number}"),
        result.get("fail_reason", "error: the Ray trial errored and reported nothing") or None,
        result.get("baseline", ""),
        objectives,
        directions,
        {k: float(v) for k, v in (result.get("constraints") or {}).items()},
        bool(result.get("rejected")),
        whole("rung"),
        whole("lineage"),
        whole("repeat_of"),
    )


class BudgetedGenerator(SearchGenerator):
    """Tune's wrapper of :class:`BudgetedSearcher`, except that "finished" is not restored.

    Tune marks the generator finished when the budget runs out and saves that flag with the experiment; a
    restored search would then start no trial even with a larger budget. The budget alone decides here: the
    restored searcher asks the (possibly new) budget before every trial.
    """

    def set_state(self, state: dict) -> None:
        super().set_state({**state, "finished": False})


class _DefineByRun:
    """``space.sample`` as OptunaSearch's define-by-run function (a class, so the searcher pickles)."""

    def __init__(self, space: str, narrow: dict[str, Any]) -> None:
        self.space, self.narrow = space, narrow

    def __call__(self, trial: Any) -> None:
        # one pickled before narrowing existed has no ``narrow``: the whole space
        get_space(self.space, getattr(self, "narrow", None)).sample(trial)


def make_searcher(settings: SearchSettings) -> BudgetedGenerator:
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    space = settings.search_space
    points = [space.encode(arch) for arch in settings.first_points.values()]
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    inner = OptunaSearch(
        space=_DefineByRun(settings.space, settings.narrow),
        metric=[o.name for o in settings.parsed_objectives],
        mode=[o.direction[:3] for o in settings.parsed_objectives],
        points_to_evaluate=points or None,
        sampler=make_sampler(settings.sampler_name, settings.seed),
        seed=settings.seed,
    )
    return BudgetedGenerator(BudgetedSearcher(inner, settings))


def experiment_dir(settings: SearchSettings) -> Path:
    return (settings.run_dir / "ray").resolve()


def _init_ray(settings: SearchSettings) -> str | None:
    """Join the cluster ``settings.address`` names, or start a local Ray of this process; the session folder
    of the Ray it started (which the search then shuts down on every way out, so no Ray process outlives it),
    None if it joined one."""
    import ray

    if ray.is_initialized():
        return None
    try:
        if settings.address:
            ray.init(address=settings.address, log_to_driver=False)
            return None
        # "local": always a fresh Ray of this process, never a cluster a `ray start` left recorded (nor what
        # is left of one whose driver was SIGKILLed, which its watchdog ends: nas.system.ray_watchdog)
        context = ray.init(
            address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False
        )
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = f"join the Ray cluster at {settings.address}" if settings.address else "start a local Ray"
        raise ValueError(f"address: cannot {where}: {err}") from None
    return context.address_info["session_dir"]


def _start_session(settings: SearchSettings, gpus: float, recorded: Callable[[], None]) -> None:
    """Record the study's terms (those it lacks) and this session's budget in the ledger (then call
    ``recorded``), and charge the evaluator's set-up (a Ray task with a trial's resources) as overhead,
    before the first trial."""
    import ray

    path = ledger_path(settings)
    known = read_ledger(path).terms
    missing = {name: value for name, value in study_terms(settings).items() if name not in known}
    _append(path, {"terms": missing, "budget": settings.budget} if missing else {"budget": settings.budget})
    recorded()
    if settings.evaluator_spec.needs_setup:
        config = _settings_dict(settings)
        if settings.supernet_workers > 1 and settings.evaluator_spec.data_parallel:
            # the task only starts the Ray Train workers, which hold the CPUs and GPUs; they need to know
            # whether trials hold GPUs as this driver resolved it, not as the task (without one) would
            task = ray.remote(num_cpus=0, num_gpus=0)(_setup_task)
            config["gpus_per_trial"] = gpus
        else:
            task = ray.remote(num_cpus=settings.cpus_per_trial, num_gpus=gpus)(_setup_task)
        cost = ray.get(task.remote(config))
        if cost is not None:
            _append(path, {"overhead": cost})


def run_ray(
    settings: SearchSettings,
    progress: SearchProgress | None = None,
    started: Callable[[str], None] | None = None,
) -> Any:
    """Run (or, with ``resume``, restore and continue) the Ray Tune search; returns the ``ResultGrid``.
    ``started(path)`` is called once the session is recorded in the ledger (the experiment's path)."""
    _check_experiment(settings)  # refused before anything is made, Ray started or the folder locked
    settings.run_dir.mkdir(parents=True, exist_ok=True)
    try:
        with sole(settings.run_dir / SESSION_LOCK):
            _check_experiment(settings)  # a session that ended since the check above may have started it
            return _run_ray(settings, progress, started)
    except Held as held:
        raise ValueError(
            f"study {settings.study_name!r} is being searched by another Ray session ({held.holder}); a Ray "
            f"study takes one driver (more trials at once: {option('concurrency', 4)}), so wait for it to "
            f"end, then continue with {option('resume')}"
        ) from None


def _check_experiment(settings: SearchSettings) -> None:
    """A new study has no Ray results yet; a resumed one has them, under the terms asked for now."""
    from ray import tune

    exp = experiment_dir(settings)
    if exp.exists() and not settings.resume and tune.Tuner.can_restore(str(exp)):
        raise ValueError(
            f"study {settings.study_name!r} already has Ray results in {exp}; pass {option('resume')} to "
            f"continue it, or choose another {option('study', 'NAME')}"
        )
    if settings.resume and not tune.Tuner.can_restore(str(exp)):
        raise ValueError(
            f"study {settings.study_name!r} has no Ray results in {exp} to resume; drop "
            f"{option('resume')} to start it"
        )
    if settings.resume:  # refused before Ray starts
        check_terms(settings.study_name, read_ledger(ledger_path(settings)).terms, study_terms(settings))


def _run_ray(
    settings: SearchSettings, progress: SearchProgress | None, started: Callable[[str], None] | None
) -> Any:
    exp = experiment_dir(settings)
    session = _init_ray(settings)  # joined before the stale ledger goes: an unreachable cluster keeps it
    # a local Ray's processes end with this search: on its way out by ray.shutdown(), and if it is killed
    # without one (SIGKILL), by the watchdog, which sees the pipe from this process close
    watchdog = ray_watchdog.start(session) if session else None
    try:
        if not settings.resume:
            ledger_path(settings).unlink(missing_ok=True)  # left by a search that never reached a trial
        gpus = settings.trial_gpus  # the budget's device was checked against it (nas.search.preflight)
        return _fit(settings, exp, gpus, progress, started)
    finally:
        if session:
            import ray

            ray.shutdown()
            ray_watchdog.stop(watchdog)


def _fit(
    settings: SearchSettings,
    exp: Path,
    gpus: float,
    progress: SearchProgress | None,
    started: Callable[[str], None] | None,
) -> Any:
    from ray import tune

    driving = _DRIVING[settings.study_name] = _Driving(progress)  # the searcher finds it by study
    if settings.resume:  # the networks to evaluate first that this session adds
        space = settings.search_space
        driving.enqueued = {n: space.encode(a) for n, a in settings.first_points.items()}
    if settings.resume and progress is not None:  # the whole study's front, earlier sessions' included
        progress.add_rows(collect_ray(settings)[0].to_dict("records"))
    _start_session(settings, gpus, lambda: started(str(exp)) if started is not None else None)
    trainable = tune.with_resources(
        tune.with_parameters(ray_trial, settings=_settings_dict(settings)),
        {"cpu": settings.cpus_per_trial, "gpu": gpus},
    )
    if settings.resume:
        tuner = tune.Tuner.restore(str(exp), trainable=trainable, resume_errored=True)
    else:
        tuner = tune.Tuner(
            trainable,
            # concurrency is the searcher's (Tune's own limit would ignore a generator); a worker process
            # is reused by the next trial, so torch and the space are imported once per worker, not per trial
            tune_config=tune.TuneConfig(
                search_alg=make_searcher(settings), num_samples=-1, reuse_actors=True
            ),
            run_config=tune.RunConfig(
                name=exp.name,
                storage_path=str(exp.parent),
                failure_config=tune.FailureConfig(max_failures=2),
                verbose=0,
            ),
        )
    try:
        grid = tuner.fit()
    except KeyboardInterrupt:  # SIGTERM (nas.system.stopping), or a second Ctrl-C
        _charge_interrupted(settings, driving, gpus)
        raise
    finally:
        _DRIVING.pop(settings.study_name, None)
    if driving.stopped is not None:
        raise driving.stopped
    if not driving.finished:  # Tune takes Ctrl-C itself: fit() saves the experiment and returns
        _charge_interrupted(settings, driving, gpus)
        raise KeyboardInterrupt
    return grid


def _charge_interrupted(settings: SearchSettings, driving: _Driving, gpus: float) -> None:
    """The trials running at an interruption, charged as overhead up to now, as on Optuna (they run again
    at the resume, where Tune restores them)."""
    now = time.time()
    for number, start in driving.running.values():
        cost = TrialCost.of(
            now - start, gpus=math.ceil(gpus), label=f"interrupted trial {number}", overhead=True
        )
        _append(ledger_path(settings), {"overhead": cost.to_dict()})


def collect_ray(settings: SearchSettings) -> tuple[Any, str, BudgetTracker]:
    """The trials table of the Ray search (same columns as the Optuna driver's), read from its ledger; the
    experiment's path; the budget."""
    from datetime import UTC, datetime, timedelta

    ledger = read_ledger(ledger_path(settings))
    rows = []
    for entry in ledger.trials.values():
        end = datetime.fromtimestamp(entry["end"], UTC)
        start = end - timedelta(seconds=entry["attrs"]["cost"]["seconds"])
        state = "COMPLETE" if entry["values"] else "FAIL"  # INFEASIBLE: trial_row reads the record
        rows.append(trial_row(entry["number"], state, entry["attrs"], entry["values"], start, end))
    objectives = [o.name for o in settings.parsed_objectives]
    return (
        frame_from_rows(rows, objectives),
        str(experiment_dir(settings)),
        ledger.tracker(ledger.budget or settings.budget, ladder=settings.ladder_shape),
    )

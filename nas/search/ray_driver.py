"""The Ray Tune driver (``--backend ray``): :func:`~nas.search.trial.run_trial` as a Tune function trial.

A ``Tuner`` runs one function trial per architecture with the resources asked for (``cpus_per_trial``,
``gpus_per_trial``) on a local Ray or the cluster at ``address`` (``auto`` inside ``ray job submit``, or
``ray://host:10001``). Architectures come from ``OptunaSearch`` over the space's ``sample`` (define-by-run),
with the space's baselines as its first points, behind :class:`BudgetedSearcher`, which stops suggesting
once the next trial would overrun the budget and keeps at most ``concurrency`` trials running. Each Ray
worker process keeps one :class:`~nas.search.trial.TrialRunner` across the trials it runs (``reuse_actors``).
An evaluator with set-up work (a one-shot supernet) does it once, in a Ray task with a trial's resources,
before the first trial; it is charged as overhead, as on the Optuna driver.

The budget's state (the budget, each trial's cost by Tune trial id, overhead, the wall-clock span of each
session) is plain JSON in ``runs/<study>/ray_budget.json``; Tune results and the searcher's state live in
``runs/<study>/ray/``. ``--resume`` continues with ``Tuner.restore`` (errored trials are retried), and a
trial whose worker process dies is retried up to twice (``FailureConfig``). A trial that fails reports its
reason and NaN objectives, so it is recorded as failed in the trials table and the search goes on.
"""

from __future__ import annotations

import json
import math
import os
import pickle
from pathlib import Path
from typing import Any

from ray.tune.search import Searcher, SearchGenerator

from nas.atomic import replaced
from nas.search.budget import BudgetTracker, Session, TrialCost, wall_seconds
from nas.search.progress import SearchProgress
from nas.search.settings import SearchSettings
from nas.search.trial import TrialRecord, TrialRunner, run_trial

__all__ = ["BudgetedGenerator", "BudgetedSearcher", "collect_ray", "run_ray"]

_NUMBER = "__number"  # the trial's sequence number, added to the config the trainable receives
_RUNNERS: dict[str, TrialRunner] = {}  # this worker process's runner, by its settings
_LIVE_VIEWS: dict[str, SearchProgress] = {}  # the searcher is pickled with the experiment: views by name


def _settings_dict(settings: SearchSettings) -> dict[str, Any]:
    import dataclasses

    out = dataclasses.asdict(settings)
    out.pop("extra")
    return out


def _runner(settings: dict[str, Any]) -> TrialRunner:
    key = json.dumps(settings, sort_keys=True, default=str)
    if key not in _RUNNERS:
        _RUNNERS.clear()  # a reused worker of another search: its runner is not needed again
        runner = _RUNNERS[key] = TrialRunner(SearchSettings(**settings))
        runner.prepare()  # loads what the driver's set-up task made (a trained supernet); not charged again
    return _RUNNERS[key]


def ray_trial(config: dict[str, Any], settings: dict[str, Any]) -> None:
    """One trial on a Ray worker: the suggested parameters replayed through the space, run, reported."""
    import optuna
    from ray import tune

    runner = _runner(settings)
    params = {k: v for k, v in config.items() if k != _NUMBER}
    number = config.get(_NUMBER, -1)
    record = run_trial(runner, lambda: runner.space.sample(optuna.trial.FixedTrial(params)), number=number)
    values = record.values or [math.nan] * len(runner.objectives)  # objectives on top, for the searcher
    tune.report({**record.attrs(), **dict(zip(runner.objectives, values, strict=True)), "number": number})


def _setup_task(settings: dict[str, Any]) -> dict[str, Any] | None:
    """The evaluator's set-up (a one-shot supernet trained into the run directory), run once in a Ray task;
    returns its cost."""
    cost = TrialRunner(SearchSettings(**settings)).prepare()
    return cost.to_dict() if cost is not None else None


def budget_path(settings: SearchSettings) -> Path:
    return (settings.run_dir / "ray_budget.json").resolve()


def read_ledger(path: Path) -> dict[str, Any]:
    """The budget's state (``budget``, ``charges`` by trial id, ``overhead``, ``spans`` by session)."""
    data = json.loads(path.read_text()) if path.exists() else {}
    return {"charges": {}, "overhead": [], "spans": {}, **data}


def _write_ledger(path: Path, ledger: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced(path) as tmp:
        tmp.write_text(json.dumps(ledger, indent=1) + "\n")


def _tracker(ledger: dict[str, Any], wall: Any = None) -> BudgetTracker:
    spans = [tuple(s) for s in ledger["spans"].values()]
    tracker = BudgetTracker(ledger["budget"], wall=wall or (lambda: wall_seconds(spans)))
    for item in [*ledger["overhead"], *ledger["charges"].values()]:
        tracker.charge(TrialCost.from_dict(item))
    return tracker


class BudgetedSearcher(Searcher):
    """Suggests from ``inner`` until the budget's next trial would not fit; charges every completed trial
    (once, by Tune trial id) to the ledger and shows it in the live view."""

    def __init__(self, inner: Any, settings: SearchSettings) -> None:
        super().__init__(metric=inner.metric, mode=inner.mode)
        self.inner, self.max_concurrent = inner, settings.concurrency
        self.ledger_path, self.view = budget_path(settings), settings.study_name
        self.objectives = tuple(o.name for o in settings.parsed_objectives)
        self.live: set[str] = set()
        self.numbers: dict[str, int] = {}
        self._open()

    def __getstate__(self) -> dict[str, Any]:  # Tune pickles the searcher: the ledger is read anew
        return {k: v for k, v in self.__dict__.items() if k not in ("session", "ledger", "tracker")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._open()

    def _open(self) -> None:
        """Read the ledger (written by ``run_ray`` for this session) and start this session's span."""
        self.session = Session()
        self.ledger = read_ledger(self.ledger_path)
        others = [tuple(s) for s in self.ledger["spans"].values()]
        self.tracker = _tracker(self.ledger, wall=lambda: wall_seconds([*others, self.session.span()]))

    def set_search_properties(self, metric: Any, mode: Any, config: dict, **spec: Any) -> bool:
        return True  # metric and mode are the inner searcher's (declared objectives)

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if len(self.live) >= self.max_concurrent:
            return None
        if not self.tracker.can_start(pending=len(self.live)):
            return None if self.live else Searcher.FINISHED
        config = self.inner.suggest(trial_id)
        if config is None or config == Searcher.FINISHED:
            return config
        self.live.add(trial_id)
        self.numbers[trial_id] = len(self.numbers)
        return {**config, _NUMBER: self.numbers[trial_id]}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.live.discard(trial_id)
        self.inner.on_trial_complete(trial_id, result=result, error=error)
        cost = (result or {}).get("cost")
        if not cost or trial_id in self.ledger["charges"]:
            return
        number = self.numbers.get(trial_id, -1)
        self.ledger["charges"][trial_id] = cost
        self.ledger["spans"][self.session.id] = list(self.session.span())
        _write_ledger(self.ledger_path, self.ledger)
        self.tracker.charge(TrialCost.from_dict(cost))
        progress = _LIVE_VIEWS.get(self.view)
        if progress is not None:
            progress.trial_done(number, _record_of(result, self.objectives), self.tracker)

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.__getstate__(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))
        self.live = set()  # trials that were running are re-run or retried by Tune on restore
        self._open()


def _record_of(result: dict[str, Any], objectives: tuple[str, ...]) -> TrialRecord:
    """The record a Ray trial reported (for the live view)."""
    from nas.arch import Arch

    arch = Arch.from_json(result["arch_json"]) if result.get("arch_json") else None
    return TrialRecord(
        arch,
        result.get("metrics") or {},
        TrialCost.from_dict(result["cost"]),
        result.get("fail_reason") or None,
        result.get("baseline", ""),
        objectives,
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

    def __init__(self, space: str) -> None:
        self.space = space

    def __call__(self, trial: Any) -> None:
        from search_spaces import get_space

        get_space(self.space).sample(trial)


def make_searcher(settings: SearchSettings) -> BudgetedGenerator:
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    from nas.search.samplers import make_sampler
    from search_spaces import get_space

    space = get_space(settings.space)
    baselines = space.baselines()
    points = [space.encode(baselines[n].arch) for n in space.baseline_names().values()]
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    inner = OptunaSearch(
        space=_DefineByRun(settings.space),
        metric=[o.name for o in settings.parsed_objectives],
        mode=[o.direction[:3] for o in settings.parsed_objectives],
        points_to_evaluate=points if settings.baselines else None,
        sampler=make_sampler(settings.sampler_name, settings.seed),
        seed=settings.seed,
    )
    return BudgetedGenerator(BudgetedSearcher(inner, settings))


def experiment_dir(settings: SearchSettings) -> Path:
    return (settings.run_dir / "ray").resolve()


def _init_ray(settings: SearchSettings) -> None:
    import ray

    if ray.is_initialized():
        return
    try:
        if settings.address:
            ray.init(address=settings.address, log_to_driver=False)
        else:
            # "local": always a fresh Ray of this process, never a cluster a `ray start` left recorded
            ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as err:
        where = f"join the Ray cluster at {settings.address}" if settings.address else "start a local Ray"
        raise ValueError(f"address: cannot {where}: {err}") from None


def _trial_gpus(settings: SearchSettings) -> float:
    """GPUs each trial asks Ray for: ``--gpus-per-trial``, else 1 where this machine has CUDA."""
    if settings.gpus_per_trial is not None:
        return settings.gpus_per_trial
    from evaluators.complexity import pick_device

    return 1 if pick_device().type == "cuda" else 0


def _start_session_ledger(settings: SearchSettings, gpus: float) -> None:
    """Write this session's budget into the ledger and charge the evaluator's set-up (a Ray task with a
    trial's resources) as overhead, before the first trial."""
    import ray

    path = budget_path(settings)
    ledger = read_ledger(path)
    ledger["budget"] = settings.budget
    _write_ledger(path, ledger)
    if settings.evaluator_spec.needs_setup:
        task = ray.remote(num_cpus=settings.cpus_per_trial, num_gpus=gpus)(_setup_task)
        cost = ray.get(task.remote(_settings_dict(settings)))
        if cost is not None:
            ledger["overhead"].append(cost)
            _write_ledger(path, ledger)


def run_ray(settings: SearchSettings, progress: SearchProgress | None = None) -> Any:
    """Run (or, with ``resume``, restore and continue) the Ray Tune search; returns the ``ResultGrid``."""
    from ray import tune

    from nas.search.budget import Budget

    exp = experiment_dir(settings)
    if exp.exists() and not settings.resume and tune.Tuner.can_restore(str(exp)):
        raise ValueError(
            f"study {settings.study_name!r} already has Ray results in {exp}; pass --resume to continue it, "
            "or choose another --study"
        )
    if settings.resume and not tune.Tuner.can_restore(str(exp)):
        raise ValueError(
            f"study {settings.study_name!r} has no Ray results in {exp} to resume; drop --resume to start it"
        )
    gpus = _trial_gpus(settings)
    budget = Budget.parse(settings.budget)
    if budget.device == "gpu" and not gpus:
        raise ValueError(
            f"budget {budget} counts GPU time but trials hold no GPU; give --gpus-per-trial or a cpu budget"
        )
    _init_ray(settings)
    _start_session_ledger(settings, gpus)
    if progress is not None:
        _LIVE_VIEWS[settings.study_name] = progress
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
        return tuner.fit()
    finally:
        _LIVE_VIEWS.pop(settings.study_name, None)


def _times(result: dict[str, Any]) -> tuple[Any, Any]:
    """(start, end) of a trial as UTC datetimes, from its result's timestamp and duration (the attempt that
    finished, when it was retried)."""
    from datetime import UTC, datetime, timedelta

    if "timestamp" not in result:
        return None, None
    end = datetime.fromtimestamp(float(result["timestamp"]), UTC)
    return end - timedelta(seconds=float(result.get("time_total_s", 0.0))), end


def collect_ray(settings: SearchSettings) -> tuple[Any, str, BudgetTracker]:
    """The trials table of the Ray experiment (same columns as the Optuna driver's), its path, the budget."""
    from ray.tune import ExperimentAnalysis

    from results.store import frame_from_rows, trial_row

    exp = experiment_dir(settings)
    objectives = [o.name for o in settings.parsed_objectives]
    rows = []
    if exp.exists():
        for trial in ExperimentAnalysis(str(exp)).trials:
            result = trial.last_result or {}
            failed = trial.status == "ERROR" or bool(result.get("fail_reason")) or not result
            attrs = {
                "arch": result.get("arch", ""),
                "arch_json": result.get("arch_json", ""),
                "baseline": result.get("baseline", ""),
                "metrics": result.get("metrics") or {},
                "cost": result.get("cost"),
                "fail_reason": result.get("fail_reason") or (f"Ray trial {trial.status}" if failed else ""),
            }
            values = None if failed else {name: result.get(name) for name in objectives}
            number = trial.config.get(_NUMBER, result.get("number", -1))
            start, end = _times(result)
            rows.append(trial_row(number, "FAIL" if failed else "COMPLETE", attrs, values, start, end))
    ledger = read_ledger(budget_path(settings))
    ledger.setdefault("budget", settings.budget)
    return frame_from_rows(rows, objectives), str(exp), _tracker(ledger)

"""The Ray Tune driver (``--backend ray``): the same define-by-run space, budget and trials table on Ray.

A ``Tuner`` runs one function trial per architecture with the resources asked for (``cpus_per_trial``,
``gpus_per_trial``) on a local Ray or the cluster at ``address`` (``auto`` inside ``ray job submit``, or
``ray://host:10001``). Architectures come from ``OptunaSearch`` over the space's ``sample`` (define-by-run),
with the space's baselines as its first points, behind :class:`BudgetedSearcher`, which stops suggesting
once the next trial would overrun the budget (the same :class:`~nas.search.budget.BudgetTracker` rule as
the Optuna driver) and keeps at most ``concurrency`` trials running. Results and searcher state live in
``runs/<study>/ray/``; ``--resume`` continues with ``Tuner.restore`` (errored trials are retried), and a
trial whose worker process dies is retried up to twice (``FailureConfig``).

A trial that raises (a diverged run, an out-of-memory error) reports its reason and NaN objectives instead of
failing the Ray trial, so it is recorded as failed in the trials table and the search goes on.
"""

from __future__ import annotations

import math
import os
import pickle
import time
from pathlib import Path
from typing import Any

from ray.tune.search import Searcher, SearchGenerator

from nas.search.budget import BudgetTracker, TrialCost
from nas.search.failures import deadline, failure_reason, release_memory
from nas.search.progress import SearchProgress
from nas.search.settings import SearchSettings

__all__ = ["BudgetedGenerator", "BudgetedSearcher", "collect_ray", "run_ray"]

_NUMBER = "__number"  # the trial's sequence number, added to the config the trainable receives


def _settings_dict(settings: SearchSettings) -> dict[str, Any]:
    import dataclasses

    out = dataclasses.asdict(settings)
    out.pop("extra")
    return out


def ray_trial(config: dict[str, Any], settings: dict[str, Any]) -> None:
    """One trial on a Ray worker: sample the architecture from the suggested params, evaluate, report."""
    import optuna
    from ray import tune

    from nas.search.trial import TrialRunner

    st = SearchSettings(**settings)
    params = {k: v for k, v in config.items() if k != _NUMBER}
    runner = TrialRunner(st)
    arch = runner.space.sample(optuna.trial.FixedTrial(params))
    baselines = {b.arch.key: name for name, b in runner.space.baselines().items()}
    report: dict[str, Any] = {
        "number": config.get(_NUMBER, -1),
        "arch": arch.key,
        "arch_json": arch.to_json(),
        "baseline": baselines.get(arch.key, ""),
        "fail_reason": "",
    }
    start = time.perf_counter()
    reason = None
    try:
        runner.prepare()
        with deadline(st.trial_timeout):
            result = runner.run(arch)
        metrics = {k: v for k, v in result.metrics.items() if isinstance(v, (int, float, str, bool))}
        report.update(metrics, metrics=metrics)  # objectives at the top for the searcher; all for the table
        report.update(
            cost_seconds=result.seconds, cost_devices=result.devices, cost_device=result.device_kind
        )
    except Exception as err:  # recorded as a failed trial; the search goes on
        reason = failure_reason(err)
    if reason is not None:
        release_memory()
        report.update({o.name: math.nan for o in st.parsed_objectives})
        report["fail_reason"] = reason
        report.update(
            cost_seconds=time.perf_counter() - start,
            cost_devices=runner.devices_held(),
            cost_device=runner.device_kind,
        )
    tune.report(report)


def _cost(result: dict[str, Any], label: str) -> TrialCost | None:
    if not result or "cost_seconds" not in result:
        return None
    gpus = int(result.get("cost_devices") or 1) if result.get("cost_device") == "gpu" else 0
    return TrialCost.of(float(result["cost_seconds"]), gpus=gpus, label=label)


class BudgetedSearcher(Searcher):
    """Suggests from ``inner`` until the budget's next trial would not fit; charges every completed trial."""

    def __init__(self, inner: Any, budget: str, max_concurrent: int, budget_file: Path) -> None:
        super().__init__(metric=inner.metric, mode=inner.mode)
        self.inner, self.budget, self.max_concurrent = inner, budget, max_concurrent
        self.budget_file = budget_file  # a resumed search may bring a new budget: read at every decision
        self.charges: dict[str, dict[str, Any]] = {}  # by trial id: a trial re-run on restore is charged once
        self.live: set[str] = set()
        self.numbers: dict[str, int] = {}

    def tracker(self) -> BudgetTracker:
        budget = self.budget_file.read_text().strip() if self.budget_file.exists() else self.budget
        charges = list(self.charges.values())
        return BudgetTracker.from_dict({"budget": budget, "charges": charges, "elapsed": 0.0})

    def set_search_properties(self, metric: Any, mode: Any, config: dict, **spec: Any) -> bool:
        return True  # metric and mode are the inner searcher's (declared objectives)

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if len(self.live) >= self.max_concurrent:
            return None
        if not self.tracker().can_start(pending=len(self.live)):
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
        cost = _cost(result or {}, f"trial {self.numbers.get(trial_id, '?')}")
        if cost is not None:
            self.charges[trial_id] = cost.to_dict()
        self.inner.on_trial_complete(trial_id, result=result, error=error)

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.__dict__.copy(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))
        if isinstance(self.charges, list):  # saved before charges were keyed by trial id
            self.charges = {f"saved-{i}": c for i, c in enumerate(self.charges)}
        self.live = set()  # trials that were running are re-run or retried by Tune on restore


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

    from nas.search.optuna_driver import _sampler
    from search_spaces import get_space

    space = get_space(settings.space)
    objectives = settings.parsed_objectives
    points = [space.encode(b.arch) for b in space.baselines().values()] if settings.baselines else None
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    inner = OptunaSearch(
        space=_DefineByRun(settings.space),
        metric=[o.name for o in objectives],
        mode=[o.direction[:3] for o in objectives],
        points_to_evaluate=points,
        sampler=_sampler(settings, 0),
        seed=settings.seed,
    )
    searcher = BudgetedSearcher(inner, settings.budget, settings.concurrency, budget_file(settings))
    return BudgetedGenerator(searcher)


def experiment_dir(settings: SearchSettings) -> Path:
    return (settings.run_dir / "ray").resolve()


def budget_file(settings: SearchSettings) -> Path:
    return (settings.run_dir / "ray_budget.txt").resolve()


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


_LIVE_VIEWS: dict[str, SearchProgress] = {}  # the Tuner pickles its callbacks; they refer to views by name


class _ProgressCallback:
    """Feeds the driver's live view from Tune's trial completions (held by name: consoles do not pickle)."""

    def __init__(self, settings: SearchSettings, view: str) -> None:
        self.budget, self.view = settings.budget, view
        self.objectives = [o.name for o in settings.parsed_objectives]
        self.charges: list[dict[str, Any]] = []

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        progress = _LIVE_VIEWS.get(self.view)
        result = trial.last_result or {}
        cost = _cost(result, "trial")
        if cost is not None:
            self.charges.append(cost.to_dict())
        if progress is None:
            return
        failed = bool(result.get("fail_reason")) or not result
        row = {
            "number": result.get("number", len(self.charges) - 1),
            "arch": result.get("arch", "?"),
            "baseline": result.get("baseline", ""),
            "state": "FAIL" if failed else "COMPLETE",
            "values": None if failed else [result.get(name) for name in self.objectives],
            "seconds": cost.seconds if cost else 0.0,
            "fail_reason": result.get("fail_reason", ""),
        }
        tracker = BudgetTracker.from_dict({"budget": self.budget, "charges": self.charges, "elapsed": 0.0})
        progress.trial_done(row, tracker)


def _progress_callback(settings: SearchSettings, progress: SearchProgress | None) -> list[Any]:
    from ray.tune import Callback

    if progress is None:
        return []
    _LIVE_VIEWS[settings.study_name] = progress
    cls = type("ProgressCallback", (_ProgressCallback, Callback), {})
    return [cls(settings, settings.study_name)]


def run_ray(settings: SearchSettings, progress: SearchProgress | None = None) -> Any:
    """Run (or, with ``resume``, restore and continue) the Ray Tune search; returns the ``ResultGrid``."""
    from ray import tune

    from evaluators.complexity import pick_device

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
    gpus = settings.gpus_per_trial
    if gpus is None:
        gpus = 1 if pick_device().type == "cuda" else 0
    from nas.search.budget import Budget

    budget = Budget.parse(settings.budget)
    if budget.device == "gpu" and not gpus:
        raise ValueError(
            f"budget {budget} counts GPU time but trials hold no GPU; give --gpus-per-trial or a cpu budget"
        )
    budget_file(settings).parent.mkdir(parents=True, exist_ok=True)
    budget_file(settings).write_text(f"{budget}\n")
    _init_ray(settings)
    trainable = tune.with_resources(
        tune.with_parameters(ray_trial, settings=_settings_dict(settings)),
        {"cpu": settings.cpus_per_trial, "gpu": gpus},
    )
    if settings.resume:
        _progress_callback(settings, progress)  # the restored callback finds this view by the study's name
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
                callbacks=_progress_callback(settings, progress),
                verbose=0,
            ),
        )
    return tuner.fit()


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
    rows, charges = [], []
    if exp.exists():
        analysis = ExperimentAnalysis(str(exp))
        for trial in analysis.trials:
            result = trial.last_result or {}
            cost = _cost(result, "trial")
            if cost is not None:
                charges.append(cost.to_dict())
            failed = trial.status == "ERROR" or bool(result.get("fail_reason")) or not result
            reason = result.get("fail_reason") or (f"Ray trial {trial.status}" if failed else "")
            attrs = {
                "arch": result.get("arch", ""),
                "arch_json": result.get("arch_json", ""),
                "baseline": result.get("baseline", ""),
                "fail_reason": reason,
                "metrics": result.get("metrics") or {},
                "cost": cost.to_dict() if cost else None,
            }
            values = None if failed else {name: result.get(name) for name in objectives}
            number = trial.config.get(_NUMBER, result.get("number", -1))
            start, end = _times(result)
            rows.append(trial_row(number, "FAIL" if failed else "COMPLETE", attrs, values, start, end))
    tracker = BudgetTracker.from_dict({"budget": settings.budget, "charges": charges, "elapsed": 0.0})
    return frame_from_rows(rows, objectives), str(exp), tracker

"""Retraining a study's networks: ``nas retrain STUDY`` -> ``runs/<study>/retrain/``.

A search ranks architectures by a cheap estimate (a short proxy training, a supernet's shared weights). What
a user takes away is decided by longer training: this module retrains the chosen trials of a study (its
Pareto front by default, ``trials`` or the front's ``top`` best) and the space's baselines that the study
ran, identically: :func:`evaluators.train.train_arch` under one schedule
(:class:`~evaluators.train.FullTrainConfig`) and the study's proxy profile (its network scale and image
size) unless another is given, once per seed of ``seeds`` (the seed draws the weights, the validation split
and the data order, so the networks of one seed see the same split and are paired). The trainings run seed
by seed (every network's first seed before any second seed), so an interrupted retraining already holds
whole comparisons.

Each training is a ``nas train`` run folder, ``<out>/<label>/seed<N>/`` (``label``: ``trial_<N>``, or the
baseline's or enqueued network's name made safe for a folder), checkpointed every epoch: a rerun skips the
finished ones and resumes the interrupted one, and a run folder another process is training is skipped
(several ``nas retrain`` processes may share a study's retraining, one per GPU or machine).
``<out>/retrain.json`` records the schedule; a rerun under another schedule is refused, since its figures
would not compare.

:func:`summarize` reads what has finished into a :class:`Retraining`: per network its searched objectives
and retrained top-1 (mean, sample std, n over seeds); per baseline the found network that beats it at no more
cost (the study's cost objectives, ``macs`` where it has none) with the best retrained mean, and their paired
difference over the common seeds (:func:`results.stats.paired`); and the rank agreement (Spearman, Kendall)
between the search's top-1 and the retrained mean. :mod:`results.retrain_page` writes it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from evaluators.data import load_dataset
from evaluators.proxy import TrainingDiverged
from evaluators.ranking import kendall_tau, spearman
from evaluators.train import TrainingHeld, train_arch
from nas.core.arch import Arch
from nas.core.atomic import merge_json, replaced
from nas.core.bounds import MAX_SEED
from nas.study.front import front_numbers
from nas.study.objectives import Objective, parse_objectives
from nas.study.trials_table import completed_trial, top_rung
from results.analysis import load_run
from results.stats import paired
from search_spaces import get_space

__all__ = [
    "MAX_SEEDS",
    "Comparison",
    "Member",
    "RetrainPlan",
    "Retraining",
    "RunResult",
    "cost_metrics",
    "finished_runs",
    "plan_retrain",
    "read_run",
    "retraining_folders",
    "run_retrain",
    "summarize",
]

MAX_SEEDS = 20
SCHEDULE_FILE = "retrain.json"
DEFAULT_FOLDER = "retrain"  # in the study's run directory
ELSEWHERE_FILE = "retrainings.json"  # in the study's run directory: the retrainings written elsewhere (--out)


@dataclass(frozen=True)
class Member:
    """One network to retrain: the study's trial ``number``, labelled by its baseline's (or enqueued
    network's) name or ``trial_<number>``, with the values the search measured (``searched``)."""

    label: str
    number: int
    baseline: str
    arch: Arch
    searched: dict[str, float]

    @property
    def folder(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.label).strip("._") or f"trial_{self.number}"


@dataclass(frozen=True)
class RetrainPlan:
    """What :func:`run_retrain` trains: every member once per seed, under one schedule."""

    study: str
    out: Path
    members: tuple[Member, ...]
    seeds: tuple[int, ...]
    profile: Any  # search_spaces.base.ProxyProfile
    dataset: str
    data_dir: str | None
    config: Any  # evaluators.train.FullTrainConfig; its seed is each run's
    objectives: tuple[Objective, ...]
    run_dir: Path | None = None  # the study's, where a retraining in another folder is recorded

    def folder(self, member: Member, seed: int) -> Path:
        return self.out / member.folder / f"seed{seed}"

    def schedule(self) -> dict[str, Any]:
        """What the figures depend on besides the network and the seed (``retrain.json``)."""
        config = {k: v for k, v in self.config.record().items() if k != "seed"}
        return {"profile": dataclasses.asdict(self.profile), "dataset": self.dataset, "config": config}

    def runs(self) -> Iterator[tuple[int, Member]]:
        """(seed, member) in training order: seed by seed."""
        for seed in self.seeds:
            for member in self.members:
                yield seed, member


def plan_retrain(
    run_dir: str | Path,
    *,
    config: Any,
    trials: Sequence[int] | None = None,
    top: int | None = None,
    baselines: bool = True,
    seeds: Sequence[int] = (0, 1, 2),
    profile: str | None = None,
    dataset: str | None = None,
    data_dir: str | None = None,
    out: str | Path | None = None,
) -> RetrainPlan:
    """The plan for the study in ``run_dir``; every choice is checked here, before anything trains, and a
    bad one is a ValueError of one sentence."""
    run_dir = Path(run_dir)
    frame, manifest = load_run(run_dir)
    settings = manifest["settings"]
    objectives = parse_objectives(list(settings["objectives"]))
    seeds = _check_seeds(seeds)
    if trials is not None and top is not None:
        raise ValueError("top: give --trial or --top, not both (--top takes the front's best)")
    rows = {int(n): row for n, (_, row) in zip(frame["number"], frame.iterrows(), strict=True)}
    if trials is not None:
        numbers = list(dict.fromkeys(int(n) for n in trials))
        for number in numbers:
            completed_trial(frame, number, manifest.get("study"), "retrain")
    else:
        numbers = front_numbers(frame, settings["objectives"], top_rung(settings))
        if top is not None:
            if top < 1:
                raise ValueError(f"top: must be at least 1, got {top}")
            first = objectives[0]
            best = first.direction == "maximize"
            best_first = sorted(numbers, key=lambda n: _value(rows[n], first.name), reverse=best)
            numbers = best_first[:top]
    if baselines:
        numbers += _baseline_numbers(frame)
    members: dict[str, Member] = {}
    for number in numbers:
        member = _member(rows[number], objectives)
        members.setdefault(member.arch.key, member)  # a network once, under its first (the front's) trial
    if not members:
        raise ValueError(
            f"trial: study {manifest.get('study')!r} has no completed trial to retrain (its front is empty)"
        )
    folders = [m.folder for m in members.values()]
    if len(set(folders)) != len(folders):
        twice = sorted({f for f in folders if folders.count(f) > 1})
        raise ValueError(f"trial: two networks would share the folder {twice[0]}; retrain them apart")
    space = get_space(settings["space"])
    prof = space.profile(profile or settings.get("profile") or "cpu")
    target = Path(out) if out is not None else run_dir / DEFAULT_FOLDER
    plan = RetrainPlan(
        study=str(manifest.get("study") or run_dir.name),
        out=target,
        members=tuple(members.values()),
        seeds=seeds,
        profile=prof,
        dataset=dataset or settings.get("dataset") or "fashion-mnist",
        data_dir=data_dir if data_dir is not None else settings.get("data_dir"),
        config=config,
        objectives=objectives,
        run_dir=run_dir,
    )
    _check_schedule(plan)
    return plan


def retraining_folders(run_dir: str | Path) -> list[Path]:
    """The folders holding retrainings of the study in ``run_dir``: its default one, then those written
    elsewhere (``--out``, recorded in ``retrainings.json``), each only where it holds a retraining now."""
    run_dir = Path(run_dir)
    folders = [run_dir / DEFAULT_FOLDER, *map(Path, _elsewhere(run_dir))]
    return [f for f in dict.fromkeys(folders) if (f / SCHEDULE_FILE).is_file()]


def _elsewhere(run_dir: Path) -> list[str]:
    try:
        folders = json.loads((run_dir / ELSEWHERE_FILE).read_text()).get("folders", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [f for f in folders if isinstance(f, str)] if isinstance(folders, list) else []


def _record_elsewhere(plan: RetrainPlan) -> None:
    """Note a retraining outside the study's default folder in the study's run directory, so that the
    study's report finds it."""
    if plan.run_dir is None or plan.out.resolve() == (plan.run_dir / DEFAULT_FOLDER).resolve():
        return

    run_dir, folder = plan.run_dir, str(plan.out.resolve())
    merge_json(
        run_dir / ELSEWHERE_FILE, lambda: {"folders": list(dict.fromkeys([*_elsewhere(run_dir), folder]))}
    )


def _check_seeds(seeds: Sequence[int]) -> tuple[int, ...]:
    out = tuple(dict.fromkeys(seeds))
    if not out or len(out) > MAX_SEEDS:
        raise ValueError(f"seeds: between 1 and {MAX_SEEDS} seeds, got {len(out)}")
    for seed in out:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise ValueError(f"seeds: each a whole number from 0 to {MAX_SEED}, got {seed!r}")
    return out


def _baseline_numbers(frame: pd.DataFrame) -> list[int]:
    """One completed trial per baseline (and enqueued network) the study ran: its highest rung's."""
    done = frame[(frame["state"] == "COMPLETE") & (frame["baseline"].fillna("").astype(str) != "")]
    if "rung" in done:
        done = done.sort_values("rung", kind="stable")
    last = done.drop_duplicates("baseline", keep="last")
    return [int(n) for n in last.sort_values("number")["number"]]


def _value(row: pd.Series, name: str) -> float:
    value = pd.to_numeric(row.get(name), errors="coerce")
    return float(value) if value is not None and math.isfinite(value) else math.nan


def _member(row: pd.Series, objectives: Sequence[Objective]) -> Member:
    number = int(row["number"])
    baseline = str(row.get("baseline") or "") if not pd.isna(row.get("baseline")) else ""
    names = dict.fromkeys([*(o.name for o in objectives), "top1", "macs", "params"])
    searched = {name: v for name in names if not math.isnan(v := _value(row, name))}
    return Member(
        baseline or f"trial_{number}", number, baseline, Arch.from_json(str(row["arch_json"])), searched
    )


def _check_schedule(plan: RetrainPlan) -> None:
    """A retraining folder holds one schedule: a rerun under another is refused, naming what differs."""
    path = plan.out / SCHEDULE_FILE
    if not path.exists():
        return
    try:
        recorded = json.loads(path.read_text()).get("schedule")
    except (OSError, ValueError, AttributeError):
        raise ValueError(f"out: {path} is not a retraining record; choose another --out") from None
    now = plan.schedule()
    if recorded == now:
        return
    flat_now, flat_then = _flat(now), _flat(recorded if isinstance(recorded, dict) else {})
    differ = [k for k in sorted(flat_now.keys() | flat_then.keys()) if flat_now.get(k) != flat_then.get(k)]
    shown = ", ".join(f"{k} {flat_then.get(k)!r} (now {flat_now.get(k)!r})" for k in differ[:3])
    raise ValueError(
        f"out: {plan.out} holds a retraining under another schedule ({shown}); give the same settings to "
        "continue it, or another --out"
    )


def _flat(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        if isinstance(item, dict):
            out.update(_flat(item, f"{name}."))
        else:
            out[name] = item
    return out


# --- training ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunResult:
    """One finished training of ``label`` with ``seed``: its last epoch's top-1 (the EMA weights' where
    the schedule keeps an EMA), epochs and training seconds."""

    label: str
    seed: int
    top1: float
    epochs: int
    train_seconds: float
    folder: str


Started = Callable[[int, int, Member, int], Any]  # (index, total, member, seed) -> a (report, progress) pair


def run_retrain(
    plan: RetrainPlan,
    *,
    started: Started | None = None,
    finished: Callable[[RunResult | None, Member, int, str], None] | None = None,
    device: Any = None,
    download: bool = False,
) -> tuple[list[RunResult], list[str]]:
    """Train every run of ``plan`` not finished yet; returns every finished run's result (earlier ones
    included) and a sentence per run skipped (another process trains it, or its training diverged).

    ``started(i, total, member, seed)`` is called before a training and may return ``(report, progress)``
    callbacks for it (:func:`evaluators.train.train_arch`); ``finished(result, member, seed, skipped)``
    after it (``result`` None with the reason it was skipped). A run finished earlier calls neither."""
    plan.out.mkdir(parents=True, exist_ok=True)
    with replaced(plan.out / SCHEDULE_FILE) as tmp:
        tmp.write_text(json.dumps({"study": plan.study, "schedule": plan.schedule()}, indent=1) + "\n")
    _record_elsewhere(plan)
    results, skipped = [], []
    data: dict[int, Any] = {}
    runs = list(plan.runs())
    for index, (seed, member) in enumerate(runs, start=1):
        folder = plan.folder(member, seed)
        done = read_run(folder, member.label, seed, plan.config.epochs)
        why = ""
        if done is None:
            if seed not in data:
                data = {
                    seed: load_dataset(
                        plan.dataset,
                        img_size=plan.profile.img_size,
                        data_dir=plan.data_dir,
                        seed=seed,
                        download=download,
                    )
                }
            callbacks = started(index, len(runs), member, seed) if started is not None else None
            report, progress = callbacks or (None, None)
            try:
                train_arch(
                    member.arch,
                    plan.profile,
                    data[seed],
                    folder,
                    config=dataclasses.replace(plan.config, seed=seed),
                    resume=(folder / "checkpoint.pt").exists(),
                    device=device,
                    report=report,
                    progress=progress,
                )
            except TrainingHeld:
                why = f"{member.label} seed {seed}: another process is training it ({folder})"
            except TrainingDiverged as err:
                why = f"{member.label} seed {seed}: {err}"
            else:
                done = read_run(folder, member.label, seed, plan.config.epochs)
                why = "" if done is not None else f"{member.label} seed {seed}: no history.json in {folder}"
            if finished is not None:
                finished(done, member, seed, why)
        if done is not None:
            results.append(done)
        else:
            skipped.append(why)
    return results, skipped


def read_run(folder: Path, label: str, seed: int, epochs: int) -> RunResult | None:
    """The finished training in ``folder`` (its ``history.json`` with all ``epochs``), else None."""
    path = folder / "history.json"
    try:
        history = json.loads(path.read_text())["history"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(history, list) or len(history) != epochs or not isinstance(history[-1], dict):
        return None
    last = history[-1]
    top1 = last.get("top1_ema", last.get("top1"))
    if not isinstance(top1, (int, float)):
        return None
    seconds = sum(float(e.get("train_seconds") or 0.0) for e in history if isinstance(e, dict))
    return RunResult(label, seed, float(top1), epochs, seconds, str(folder))


def finished_runs(plan: RetrainPlan) -> list[RunResult]:
    """The runs of ``plan`` that have finished, read from their folders."""
    found = (read_run(plan.folder(m, s), m.label, s, plan.config.epochs) for s, m in plan.runs())
    return [r for r in found if r is not None]


# --- summary ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """A baseline against the found network that beats it at no more cost (``found`` None when the study
    has none at that cost with a finished run): their paired statistics (:func:`results.stats.paired`)."""

    baseline: str
    found: str | None
    costs: tuple[str, ...]
    stats: dict[str, Any] | None


@dataclass(frozen=True)
class Retraining:
    """What the retraining shows so far (:func:`summarize`)."""

    plan: RetrainPlan
    runs: tuple[RunResult, ...]
    members: pd.DataFrame  # one row per member: label, trial, baseline, arch, searched values, retrained
    comparisons: tuple[Comparison, ...]
    agreement: dict[str, float] | None  # Spearman and Kendall of searched top-1 vs retrained mean, and n
    costs: tuple[str, ...]  # what "no more cost" compares (:func:`cost_metrics`)

    def runs_table(self) -> pd.DataFrame:
        return pd.DataFrame([dataclasses.asdict(r) for r in self.runs])


def cost_metrics(objectives: Sequence[Objective], columns: Any) -> tuple[str, ...]:
    """The study's cost objectives (every objective but top-1), ``macs`` where it declares none."""
    costs = tuple(o.name for o in objectives if o.name != "top1")
    return costs or (("macs",) if "macs" in columns else ())


def summarize(plan: RetrainPlan, runs: Sequence[RunResult]) -> Retraining:
    """The members' table, the comparisons with the baselines and the rank agreement of ``runs``."""
    by_label: dict[str, dict[int, float]] = {m.label: {} for m in plan.members}
    for run in runs:
        by_label.setdefault(run.label, {})[run.seed] = run.top1
    rows = []
    for m in plan.members:
        values = list(by_label[m.label].values())
        rows.append(
            {
                "label": m.label,
                "trial": m.number,
                "baseline": bool(m.baseline),
                "arch": m.arch.key,
                **{f"searched_{k}": v for k, v in m.searched.items()},
                "top1_mean": statistics.fmean(values) if values else math.nan,
                "top1_std": statistics.stdev(values) if len(values) > 1 else math.nan,
                "seeds": len(values),
            }
        )
    members = pd.DataFrame(rows)
    costs = cost_metrics(plan.objectives, {k for m in plan.members for k in m.searched})
    comparisons = tuple(_compare(plan, by_label, costs))
    both = [
        (m.searched["top1"], statistics.fmean(by_label[m.label].values()))
        for m in plan.members
        if "top1" in m.searched and by_label[m.label]
    ]
    agreement = None
    if len(both) >= 3:
        searched, retrained = [a for a, _ in both], [b for _, b in both]
        agreement = {
            "spearman": spearman(searched, retrained),
            "kendall": kendall_tau(searched, retrained),
            "n": len(both),
        }
    return Retraining(plan, tuple(runs), members, comparisons, agreement, costs)


def _compare(
    plan: RetrainPlan, by_label: dict[str, dict[int, float]], costs: tuple[str, ...]
) -> Iterator[Comparison]:
    directions = {o.name: o.direction for o in plan.objectives}
    found = [m for m in plan.members if not m.baseline and by_label[m.label]]

    def within(m: Member, b: Member) -> bool:
        for name in costs:
            mine, theirs = m.searched.get(name), b.searched.get(name)
            if mine is None or theirs is None:
                return False
            if (mine > theirs) if directions.get(name, "minimize") == "minimize" else (mine < theirs):
                return False
        return True

    for b in plan.members:
        if not b.baseline:
            continue
        candidates = [m for m in found if within(m, b)]
        if not candidates:
            yield Comparison(b.label, None, costs, None)
            continue
        first_cost = costs[0] if costs else None
        best = max(
            candidates,
            key=lambda m: (
                statistics.fmean(by_label[m.label].values()),
                -(m.searched.get(first_cost, 0.0) if first_cost else 0.0),
                -m.number,
            ),
        )
        yield Comparison(b.label, best.label, costs, paired(by_label[best.label], by_label[b.label]))

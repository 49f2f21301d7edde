"""Retraining a study's networks under a protocol a reviewer accepts: ``nas retrain STUDY`` ->
``runs/<study>/retrain/``.

A search ranks architectures by a cheap estimate (a short proxy training, a supernet's shared weights). What
a user takes away is decided by longer training, and a claim that a found network beats a hand-designed one
holds only under a sound comparison. This module retrains:

- the chosen **found** networks: the study's Pareto front by default, ``trials`` or the front's ``top`` best
  (a chosen trial that is a baseline counts as a baseline);
- as **references**, every baseline of the space (and every network the user enqueued in the study) that
  some found network does not exceed in cost, not a hand-picked subset: its cost is counted here, not taken
  from the study, so a baseline the study never ran is compared too. A baseline cheaper than every found
  network is listed as not compared;
- as a **random control** for each found network, ``controls`` architectures drawn as the space's random
  sampler draws them (seeded by ``control_seed`` and the found network), kept where they cost no more than
  it at both scales (below): a random search under the same limit;

each identically, :func:`evaluators.train.train_arch` under one schedule
(:class:`~evaluators.train.FullTrainConfig`) and the study's proxy profile (its network scale and image
size) unless another is given, once per seed of ``seeds`` (the seed draws the weights, the held-out split and
the data order, so the networks of one seed are paired). The trainings run seed by seed (every network's
first seed before any second seed), so an interrupted retraining already holds whole comparisons.

**Scored on the test split.** Each training is scored once, at its end, on the dataset's official test split
(:func:`evaluators.data.load_test`), which no search opens. ``score_on="val"`` scores on the held-out part of
the training images instead; those are images the study saw (it evaluated architectures on its validation
split and trained them on the rest), so it is refused unless ``allow_seen`` asks for it, with the count of
seen images in the sentence (:func:`evaluators.data.study_overlap` on the split the study's manifest
records); the page then says so.

**Costs at both scales.** Every network's params and MACs are counted (:func:`evaluators.complexity.count`)
at the search's scale (the network itself at the study's ``--macs-img-size``, 3 channels, 1000 classes, as
the search counts them) and at the scale trained (the profile's shrunk network at its image size, with the
dataset's channels and classes). A comparison is made where the found network costs no more at the search's
scale (the rule the search optimized under); its ``equal_cost`` says whether that also holds at the scale
trained, or by how much it fails.

**Statistics.** Per comparison: the paired difference found - reference over the seeds both finished, a
two-sided paired t-test, the bootstrap 95% interval of the mean difference (:mod:`results.stats`), and the
p-values of every comparison of the run corrected together by Holm's step-down method; the verdict is the
corrected one.

**Training long enough.** With ``plateau``, two networks (the first found network and the first reference)
are trained again for twice the epochs on the first seed; the plateau is reached where that changes each one's
test top-1 by less than :data:`PLATEAU_POINTS`, and the page says which.

Each training is a ``nas train`` run folder, ``<out>/<label>/seed<N>/`` (``<out>/plateau/<label>/seed<N>/``
for the doubled ones), checkpointed every epoch: a rerun skips the finished ones and resumes the interrupted
one, and a run folder another process is training is skipped (several ``nas retrain`` processes may share a
study's retraining, one per GPU or machine). ``<out>/retrain.json`` records the schedule; a rerun under
another schedule is refused, since its figures would not compare.

:func:`summarize` reads what has finished into a :class:`Retraining`; :mod:`results.retrain_page` writes it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evaluators.data import load_dataset, load_test, study_overlap
from evaluators.proxy import TrainingDiverged
from evaluators.ranking import kendall_tau, spearman
from evaluators.registry import get_evaluator
from evaluators.train import TrainingHeld, train_arch
from nas.core.arch import Arch
from nas.core.atomic import merge_json, replaced
from nas.core.bounds import MAX_SEED
from nas.study.front import front_numbers
from nas.study.objectives import Objective, parse_objectives
from nas.study.trials_table import completed_trial, top_rung
from results.analysis import load_run
from results.stats import corrected_verdict, holm, paired
from search_spaces import get_space

__all__ = [
    "MAX_SEEDS",
    "PLATEAU_POINTS",
    "Comparison",
    "Member",
    "RetrainPlan",
    "Retraining",
    "RunResult",
    "combine_plans",
    "finished_runs",
    "plan_retrain",
    "read_run",
    "retraining_folders",
    "run_retrain",
    "summarize",
]

MAX_SEEDS = 20
MAX_CONTROLS = 20
CONTROL_DRAWS = 1000  # random architectures drawn per found network to find its controls
PLATEAU_POINTS = 0.3  # doubling the epochs moves test top-1 by less than this: the training has plateaued
SCHEDULE_FILE = "retrain.json"
DEFAULT_FOLDER = "retrain"  # in the study's run directory
ELSEWHERE_FILE = "retrainings.json"  # in the study's run directory: the retrainings written elsewhere (--out)
PLATEAU_FOLDER = "plateau"  # in the retraining's folder
SEARCH_COSTS = ("macs", "params")  # at the search's scale
TRAINED_COSTS = ("macs_trained", "params_trained")  # at the scale trained
SCORES = ("test", "val")
# (in_chans, classes) of the datasets whose files say nothing the plan needs to read
_TASKS = {"fashion-mnist": (1, 10), "cifar10": (3, 10), "cifar100": (3, 100), "synthetic": (3, 10)}


@dataclass(frozen=True)
class Member:
    """One network to retrain: a ``found`` network (a trial of the study), a ``baseline`` (one of the
    space's, or a network the user enqueued) or a random ``control`` of the found network ``control_of``.

    ``number`` is its trial in the study (None for a baseline the study did not run and for a control),
    ``searched`` what the search measured of it, ``costs`` its params and MACs at the search's scale
    (``macs``, ``params``) and at the scale trained (``macs_trained``, ``params_trained``)."""

    label: str
    role: str
    arch: Arch
    number: int | None = None
    searched: dict[str, float] = field(default_factory=dict)
    costs: dict[str, float] = field(default_factory=dict)
    control_of: str = ""

    @property
    def baseline(self) -> bool:
        return self.role == "baseline"

    @property
    def folder(self) -> str:
        fallback = f"trial_{self.number}" if self.number is not None else "network"
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", self.label).strip("._") or fallback


@dataclass(frozen=True)
class Training:
    """One training of the plan: ``member`` with ``seed`` for ``epochs`` in ``folder``."""

    member: Member
    seed: int
    epochs: int
    folder: Path
    plateau: bool = False


@dataclass(frozen=True)
class RetrainPlan:
    """What :func:`run_retrain` trains: every member once per seed under one schedule, and the plateau
    check's doubled trainings."""

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
    score_on: str = "test"
    seen: str = ""  # with score_on "val" allowed on images the study saw: how many, in a sentence
    test_folder: str | None = None
    macs_img_size: int = 224
    controls: int = 0
    control_seed: int = 0
    control_shortfall: tuple[str, ...] = ()  # a sentence per found network with fewer controls than asked
    not_compared: tuple[str, ...] = ()  # the baselines no found network is compared with (:meth:`eligible`)
    max_cost_ratio: float | None = None  # compare only with baselines of at most this many times the MACs
    plateau: tuple[str, ...] = ()  # the labels of the networks the plateau check trains twice as long

    def folder(self, member: Member, seed: int) -> Path:
        return self.out / member.folder / f"seed{seed}"

    def schedule(self) -> dict[str, Any]:
        """What the figures depend on besides the network and the seed (``retrain.json``)."""
        config = {k: v for k, v in self.config.record().items() if k != "seed"}
        return {
            "profile": dataclasses.asdict(self.profile),
            "dataset": self.dataset,
            "config": config,
            "score_on": self.score_on,
        }

    def runs(self) -> Iterator[tuple[int, Member]]:
        """(seed, member) of the main trainings, in training order: seed by seed."""
        for seed in self.seeds:
            for member in self.members:
                yield seed, member

    def trainings(self) -> list[Training]:
        """Every training, in order: the main ones seed by seed, then the plateau check's."""
        out = [Training(m, s, self.config.epochs, self.folder(m, s)) for s, m in self.runs()]
        by_label = {m.label: m for m in self.members}
        for label in self.plateau:
            member, seed = by_label[label], self.seeds[0]
            folder = self.out / PLATEAU_FOLDER / member.folder / f"seed{seed}"
            out.append(Training(member, seed, 2 * self.config.epochs, folder, plateau=True))
        return out

    def found(self) -> list[Member]:
        return [m for m in self.members if m.role == "found"]

    def eligible(self, found: Member, baseline: Member) -> bool:
        return eligible(found, baseline, self.max_cost_ratio)

    def references(self, found: Member) -> list[tuple[Member, str]]:
        """What ``found`` is compared with, each with its ``equal_cost`` sentence: every baseline it does
        not exceed at the search's scale (whether it does not at the scale trained either), then its controls
        (whether each costs no more than it at both scales, as drawn)."""
        out = []
        for b in self.members:
            if b.role == "baseline" and self.eligible(found, b):
                out.append((b, equal_cost(found.costs, b.costs)))
        # a control is drawn no costlier than the found network: the rule a random search under its cost keeps
        out += [(c, equal_cost(c.costs, found.costs)) for c in self.members if c.control_of == found.label]
        return out


def equal_cost(mine: dict[str, float], theirs: dict[str, float]) -> str:
    """``both`` where ``mine`` costs no more than ``theirs`` at both scales, else at which scale it costs
    more, on what and by how much (``fails at the scale trained (macs +18%, params +22%)``)."""

    def over(names: Sequence[str]) -> list[str]:
        return [
            f"{name.removesuffix('_trained')} {100 * (mine[name] / theirs[name] - 1):+.0f}%"
            for name in names
            if name in mine and name in theirs and mine[name] > theirs[name] > 0
        ]

    failed = [
        f"fails at {where} ({', '.join(items)})"
        for where, items in (
            ("the search's scale", over(SEARCH_COSTS)),
            ("the scale trained", over(TRAINED_COSTS)),
        )
        if items
    ]
    return "; ".join(failed) or "both"


def eligible(found: Member, baseline: Member, max_cost_ratio: float | None = None) -> bool:
    """Whether ``found`` is compared with ``baseline``: it costs no more at the search's scale (MACs and
    params), and, with ``max_cost_ratio`` R, the baseline has at most R times its MACs there."""
    if not _within(found.costs, baseline.costs, SEARCH_COSTS):
        return False
    return max_cost_ratio is None or baseline.costs["macs"] <= max_cost_ratio * found.costs["macs"]


def _within(mine: dict[str, float], theirs: dict[str, float], names: Sequence[str]) -> bool:
    return all(name in mine and name in theirs and mine[name] <= theirs[name] for name in names)


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
    score_on: str = "test",
    allow_seen: bool = False,
    test_folder: str | None = None,
    controls: int = 3,
    control_seed: int = 0,
    plateau: bool = True,
    max_cost_ratio: float | None = None,
) -> RetrainPlan:
    """The plan for the study in ``run_dir``; every choice is checked here, before anything trains, and a
    bad one is a ValueError of one sentence."""
    run_dir = Path(run_dir)
    frame, manifest = load_run(run_dir)
    settings = manifest["settings"]
    objectives = parse_objectives(list(settings["objectives"]))
    seeds = _check_seeds(seeds)
    if score_on not in SCORES:
        raise ValueError(f"score-on: test or val, not {score_on!r}")
    if isinstance(controls, bool) or not isinstance(controls, int) or not 0 <= controls <= MAX_CONTROLS:
        raise ValueError(f"controls: a whole number from 0 to {MAX_CONTROLS}, got {controls!r}")
    if (
        isinstance(control_seed, bool)
        or not isinstance(control_seed, int)
        or not 0 <= control_seed <= MAX_SEED
    ):
        raise ValueError(f"control-seed: a whole number from 0 to {MAX_SEED}, got {control_seed!r}")
    if trials is not None and top is not None:
        raise ValueError("top: give --trial or --top, not both (--top takes the front's best)")
    if max_cost_ratio is not None and not (isinstance(max_cost_ratio, (int, float)) and max_cost_ratio >= 1):
        raise ValueError(f"max-cost-ratio: a number of at least 1, got {max_cost_ratio!r}")
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
    space = get_space(settings["space"])
    prof = space.profile(profile or settings.get("profile") or "cpu")
    name = dataset or settings.get("dataset") or "fashion-mnist"
    where = data_dir if data_dir is not None else settings.get("data_dir")
    if test_folder is not None and score_on != "test":
        raise ValueError("test-folder: it names the test split, which --score-on val does not score on")
    scale = _Scale(int(settings.get("macs_img_size") or 224), prof, *_task(name, where, manifest))
    chosen: dict[str, Member] = {}
    for number in numbers:
        member = _study_member(rows[number], objectives, scale)
        chosen.setdefault(member.arch.key, member)  # a network once, under its first (the front's) trial
    if not chosen:
        raise ValueError(
            f"trial: study {manifest.get('study')!r} has no completed trial to retrain (its front is empty)"
        )
    found = [m for m in chosen.values() if m.role == "found"]
    references: list[Member] = []
    not_compared: list[str] = []
    if baselines:
        for member in _references(space, frame, objectives, scale):
            if member.arch.key in chosen:
                continue
            if any(eligible(f, member, max_cost_ratio) for f in found):
                references.append(member)
            else:
                not_compared.append(member.label)
    members = [*chosen.values(), *references]
    taken = {m.arch.key for m in members}
    shortfall = []
    for f in found:
        drawn = _controls(space, f, controls, control_seed, scale, taken)
        if len(drawn) < controls:
            shortfall.append(
                f"{f.label}: {len(drawn)} of {controls} random controls cost no more than it at both scales "
                f"in {CONTROL_DRAWS} draws"
            )
        members += drawn
        taken |= {c.arch.key for c in drawn}
    folders = [m.folder for m in members]
    if len(set(folders)) != len(folders):
        twice = sorted({f for f in folders if folders.count(f) > 1})
        raise ValueError(f"trial: two networks would share the folder {twice[0]}; retrain them apart")
    first_found = next((m.label for m in members if m.role == "found"), None)
    first_reference = next((m.label for m in members if m.role == "baseline"), None)
    target = Path(out) if out is not None else run_dir / DEFAULT_FOLDER
    plan = RetrainPlan(
        study=str(manifest.get("study") or run_dir.name),
        out=target,
        members=tuple(members),
        seeds=seeds,
        profile=prof,
        dataset=name,
        data_dir=where,
        config=config,
        objectives=objectives,
        run_dir=run_dir,
        score_on=score_on,
        test_folder=test_folder,
        macs_img_size=scale.search_img_size,
        controls=controls,
        control_seed=control_seed,
        control_shortfall=tuple(shortfall),
        not_compared=tuple(not_compared),
        max_cost_ratio=max_cost_ratio,
        plateau=tuple(x for x in (first_found, first_reference) if x is not None) if plateau else (),
    )
    _check_schedule(plan)
    if score_on == "val":
        plan = dataclasses.replace(plan, seen=_check_unseen(plan, manifest, settings, allow_seen))
    return plan


@dataclass(frozen=True)
class _Scale:
    """Where costs are counted: the search's image size, and the profile trained with the task's shape."""

    search_img_size: int
    profile: Any
    in_chans: int
    num_classes: int

    def costs(self, arch: Arch, within: dict[str, float] | None = None) -> dict[str, float]:
        """``arch``'s params and MACs at both scales; with ``within``, {} where it costs more than that at
        the search's scale (the scale trained is then not counted)."""
        from evaluators.complexity import count  # heavy: torch, fvcore

        searched = count(arch, img_size=self.search_img_size, in_chans=3, num_classes=1000)
        out = {"macs": float(searched.macs), "params": float(searched.params)}
        if within is not None and not _within(out, within, SEARCH_COSTS):
            return {}
        trained = count(
            self.profile.apply(arch),
            img_size=self.profile.img_size,
            in_chans=self.in_chans,
            num_classes=self.num_classes,
        )
        return {**out, "macs_trained": float(trained.macs), "params_trained": float(trained.params)}


def _task(name: str, data_dir: str | None, manifest: dict[str, Any]) -> tuple[int, int]:
    """(in_chans, classes) of the dataset ``name``: the study's record where it trained on it, else known
    or counted (an image folder's class folders), without reading any image."""
    recorded = manifest.get("data")
    if isinstance(recorded, dict) and recorded.get("dataset") == name.partition(":")[0]:
        with_shape = recorded.get("in_chans"), recorded.get("num_classes")
        if all(isinstance(v, int) for v in with_shape):
            return with_shape  # type: ignore[return-value]
    kind, _, arg = name.partition(":")
    if kind in _TASKS:
        return _TASKS[kind]
    if kind == "imagefolder" and arg:
        root = Path(arg).expanduser()
        root = root / "train" if (root / "train").is_dir() else root
        classes = [p for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
        if classes:
            return 3, len(classes)
    raise ValueError(f"dataset: unknown {name!r}, or an image folder without class folders")


def _check_unseen(plan: RetrainPlan, manifest: dict[str, Any], settings: dict[str, Any], allow: bool) -> str:
    """With ``--score-on val``: the images of each seed's held-out split the study saw, refused unless
    ``allow``; returns the sentence the page shows ('' where the study saw none)."""
    recorded = manifest.get("data")
    if recorded is None and plan.dataset != settings.get("dataset"):
        return ""
    if recorded is None and _trains_nothing(settings):
        return ""  # an evaluator that only counts saw no image
    counts = []
    for seed in plan.seeds:
        split = load_dataset(
            plan.dataset, img_size=plan.profile.img_size, data_dir=plan.data_dir, seed=seed, download=False
        )
        overlap = study_overlap(recorded, split) if isinstance(recorded, dict) else None
        if overlap is None:
            said = (
                f"score-on: study {plan.study!r} did not record which images it evaluated on (it predates "
                "split records), so the held-out split may hold images it saw"
            )
            if not allow:
                raise ValueError(f"{said}; score on the test split (the default) or pass --allow-seen-images")
            return said
        if overlap["evaluated"] or overlap["trained"]:
            counts.append((seed, overlap, len(split.val)))
    if not counts:
        return ""
    seed, overlap, size = counts[0]
    said = (
        f"the held-out split of seed {seed} holds {overlap['evaluated']:,} of its {size:,} images that study "
        f"{plan.study!r} evaluated architectures on and {overlap['trained']:,} it trained them on"
    )
    if not allow:
        raise ValueError(
            f"score-on: {said}; score on the test split (the default) or pass --allow-seen-images to score "
            "on them anyway"
        )
    return f"Scored on images the study saw ({said}): the found networks' figures are biased upward."


def _trains_nothing(settings: dict[str, Any]) -> bool:
    """Whether the study's evaluator only counts (reads no image)."""
    try:
        return get_evaluator(str(settings.get("evaluator") or "")).counts_only
    except ValueError:
        return False


def _references(
    space: Any, frame: pd.DataFrame, objectives: Sequence[Objective], scale: _Scale
) -> list[Member]:
    """Every baseline of the space (under its first name where two are one network), with what the study
    measured of it where it ran it, then the networks the user enqueued in the study."""
    rows = {}
    for number in _baseline_numbers(frame):
        row = frame.loc[frame["number"] == number].iloc[0]
        rows[Arch.from_json(str(row["arch_json"])).key] = row
    out = []
    baselines = space.baselines()
    for key, name in space.baseline_names().items():
        row = rows.pop(key, None)
        searched = _searched(row, objectives) if row is not None else {}
        number = int(row["number"]) if row is not None else None
        arch = baselines[name].arch
        out.append(Member(name, "baseline", arch, number, searched, scale.costs(arch)))
    for row in rows.values():  # the user's enqueued networks
        arch = Arch.from_json(str(row["arch_json"]))
        label = str(row["baseline"])
        out.append(
            Member(label, "baseline", arch, int(row["number"]), _searched(row, objectives), scale.costs(arch))
        )
    return out


def _controls(space: Any, found: Member, k: int, seed: int, scale: _Scale, taken: set[str]) -> list[Member]:
    """Up to ``k`` architectures drawn by the space's random sampler (seeded by ``seed`` and ``found``'s
    network) that cost no more than ``found`` at both scales and are none of ``taken``."""
    if k == 0:
        return []
    rng = random.Random(f"{seed}:{found.arch.key}")
    out: list[Member] = []
    seen: set[str] = set()
    limit = (*SEARCH_COSTS, *TRAINED_COSTS)
    for _ in range(CONTROL_DRAWS):
        arch = space.sample_random(rng)
        if arch.key in taken or arch.key in seen:
            continue
        seen.add(arch.key)
        costs = scale.costs(arch, within=found.costs)
        if costs and _within(costs, found.costs, limit):
            label = f"random{len(out) + 1}_{found.folder}"
            out.append(Member(label, "control", arch, None, {}, costs, control_of=found.label))
            if len(out) == k:
                break
    return out


def combine_plans(plans: Sequence[RetrainPlan], out: str | Path) -> RetrainPlan:
    """One retraining of several studies' plans (independent searches of one space, say), in ``out``: their
    found networks and controls under labels prefixed by their study (``<study>:trial_<N>``), each baseline
    once, so it trains once per seed and every comparison is corrected together. The plans must share the
    schedule, the seeds, the profile, the data and the split scored (ValueError in one sentence otherwise)."""
    if not plans:
        raise ValueError("combine: no plan")
    first = plans[0]
    for plan in plans[1:]:
        for name in (
            "seeds",
            "profile",
            "dataset",
            "config",
            "score_on",
            "macs_img_size",
            "controls",
            "max_cost_ratio",
        ):
            if getattr(plan, name) != getattr(first, name):
                raise ValueError(f"combine: the plans of {first.study!r} and {plan.study!r} differ in {name}")
    members: dict[str, Member] = {}
    renamed: dict[tuple[str, str], str] = {}
    for plan in plans:
        for m in plan.members:
            if m.role == "baseline":
                members.setdefault(m.arch.key, m)
                renamed[(plan.study, m.label)] = members[m.arch.key].label
                continue
            label = f"{plan.study}:{m.label}"
            renamed[(plan.study, m.label)] = label
            of = f"{plan.study}:{m.control_of}" if m.control_of else ""
            members[f"{plan.study}:{m.arch.key}:{m.label}"] = dataclasses.replace(
                m, label=label, control_of=of
            )
    compared = {m.label for m in members.values() if m.role == "baseline"}
    not_compared = [x for x in dict.fromkeys(x for p in plans for x in p.not_compared) if x not in compared]
    combined = dataclasses.replace(
        first,
        study=" + ".join(p.study for p in plans),
        out=Path(out),
        members=tuple(members.values()),
        run_dir=None,
        seen=" ".join(dict.fromkeys(p.seen for p in plans if p.seen)),
        control_shortfall=tuple(f"{p.study}:{why}" for p in plans for why in p.control_shortfall),
        not_compared=tuple(not_compared),
        plateau=tuple(renamed[(first.study, label)] for label in first.plateau),
    )
    folders = [m.folder for m in combined.members]
    if len(set(folders)) != len(folders):
        raise ValueError("combine: two networks would share a folder; give the studies distinct names")
    _check_schedule(combined)
    return combined


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


def _searched(row: pd.Series, objectives: Sequence[Objective]) -> dict[str, float]:
    names = dict.fromkeys([*(o.name for o in objectives), "top1", "macs", "params"])
    return {name: v for name in names if not math.isnan(v := _value(row, name))}


def _study_member(row: pd.Series, objectives: Sequence[Objective], scale: _Scale) -> Member:
    """A chosen trial: a found network, or a baseline where the study ran it as one."""
    number = int(row["number"])
    baseline = str(row.get("baseline") or "") if not pd.isna(row.get("baseline")) else ""
    arch = Arch.from_json(str(row["arch_json"]))
    role = "baseline" if baseline else "found"
    label = baseline or f"trial_{number}"
    return Member(label, role, arch, number, _searched(row, objectives), scale.costs(arch))


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
    """One finished training of ``label`` with ``seed``: its score (``top1``: the test split's, or the
    held-out split's last epoch under ``--score-on val``; the EMA weights' where the schedule keeps an EMA),
    its last epoch's held-out top-1 (``val_top1``), epochs and training seconds; ``plateau`` for the plateau
    check's doubled training."""

    label: str
    seed: int
    top1: float
    epochs: int
    train_seconds: float
    folder: str
    val_top1: float = math.nan
    plateau: bool = False


Started = Callable[[int, int, Member, int], Any]  # (index, total, member, seed) -> a (report, progress) pair


def run_retrain(
    plan: RetrainPlan,
    *,
    started: Started | None = None,
    finished: Callable[[RunResult | None, Member, int, str], None] | None = None,
    device: Any = None,
    download: bool = False,
) -> tuple[list[RunResult], list[str]]:
    """Train every training of ``plan`` not finished yet (:meth:`RetrainPlan.trainings`); returns every
    finished one's result (earlier ones included) and a sentence per one skipped (another process trains
    it, or its training diverged).

    ``started(i, total, member, seed)`` is called before a training and may return ``(report, progress)``
    callbacks for it (:func:`evaluators.train.train_arch`); ``finished(result, member, seed, skipped)``
    after it (``result`` None with the reason it was skipped). A training finished earlier calls neither."""
    plan.out.mkdir(parents=True, exist_ok=True)
    with replaced(plan.out / SCHEDULE_FILE) as tmp:
        record = {"study": plan.study, "schedule": plan.schedule(), "protocol": protocol(plan)}
        tmp.write_text(json.dumps(record, indent=1) + "\n")
    _record_elsewhere(plan)
    results, skipped = [], []
    data: dict[int, Any] = {}
    tests: dict[int, Any] = {}  # loaded once (per seed for synthetic data, whose patterns the seed draws)
    trainings = plan.trainings()
    for index, t in enumerate(trainings, start=1):
        done = read_run(t.folder, t.member.label, t.seed, t.epochs, plan.score_on, t.plateau)
        why = ""
        if done is None:
            if t.seed not in data:
                data = {
                    t.seed: load_dataset(
                        plan.dataset,
                        img_size=plan.profile.img_size,
                        data_dir=plan.data_dir,
                        seed=t.seed,
                        download=download,
                    )
                }
            test_seed = t.seed if plan.dataset == "synthetic" else 0
            if plan.score_on == "test" and test_seed not in tests:
                tests[test_seed] = load_test(
                    plan.dataset,
                    img_size=plan.profile.img_size,
                    data_dir=plan.data_dir,
                    in_chans=data[t.seed].in_chans,
                    test_folder=plan.test_folder,
                    download=download,
                    seed=test_seed,
                )
            callbacks = started(index, len(trainings), t.member, t.seed) if started is not None else None
            report, progress = callbacks or (None, None)
            try:
                train_arch(
                    t.member.arch,
                    plan.profile,
                    data[t.seed],
                    t.folder,
                    config=dataclasses.replace(plan.config, seed=t.seed, epochs=t.epochs),
                    resume=(t.folder / "checkpoint.pt").exists(),
                    device=device,
                    report=report,
                    progress=progress,
                    test=tests.get(test_seed),
                )
            except TrainingHeld:
                why = f"{t.member.label} seed {t.seed}: another process is training it ({t.folder})"
            except TrainingDiverged as err:
                why = f"{t.member.label} seed {t.seed}: {err}"
            else:
                done = read_run(t.folder, t.member.label, t.seed, t.epochs, plan.score_on, t.plateau)
                why = (
                    ""
                    if done is not None
                    else f"{t.member.label} seed {t.seed}: no history.json in {t.folder}"
                )
            if finished is not None:
                finished(done, t.member, t.seed, why)
        if done is not None:
            results.append(done)
        else:
            skipped.append(why)
    return results, skipped


def protocol(plan: RetrainPlan) -> dict[str, Any]:
    """What the retraining compares and how, as ``retrain.json`` records it beside the schedule."""
    return {
        "score_on": plan.score_on,
        "seen": plan.seen,
        "macs_img_size": plan.macs_img_size,
        "controls": plan.controls,
        "control_seed": plan.control_seed,
        "control_shortfall": list(plan.control_shortfall),
        "not_compared": list(plan.not_compared),
        "max_cost_ratio": plan.max_cost_ratio,
        "plateau": list(plan.plateau),
        "members": [
            {
                "label": m.label,
                "role": m.role,
                "trial": m.number,
                "control_of": m.control_of,
                "arch": m.arch.key,
            }
            for m in plan.members
        ],
    }


def read_run(
    folder: Path, label: str, seed: int, epochs: int, score_on: str = "test", plateau: bool = False
) -> RunResult | None:
    """The finished training in ``folder`` (its ``history.json`` with all ``epochs`` and, scored on the
    test split, the test score), else None."""
    path = folder / "history.json"
    try:
        record = json.loads(path.read_text())
        history = record["history"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(history, list) or len(history) != epochs or not isinstance(history[-1], dict):
        return None
    last = history[-1]
    val = last.get("top1_ema", last.get("top1"))
    if score_on == "test":
        scored = record.get("test")
        top1 = scored.get("test_top1_ema", scored.get("test_top1")) if isinstance(scored, dict) else None
    else:
        top1 = val
    if not isinstance(top1, (int, float)):
        return None
    seconds = sum(float(e.get("train_seconds") or 0.0) for e in history if isinstance(e, dict))
    val_top1 = float(val) if isinstance(val, (int, float)) else math.nan
    return RunResult(label, seed, float(top1), epochs, seconds, str(folder), val_top1, plateau)


def finished_runs(plan: RetrainPlan) -> list[RunResult]:
    """The trainings of ``plan`` that have finished, read from their folders."""
    found = (
        read_run(t.folder, t.member.label, t.seed, t.epochs, plan.score_on, t.plateau)
        for t in plan.trainings()
    )
    return [r for r in found if r is not None]


# --- summary ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """A found network against a reference (``kind``: a ``baseline`` it does not exceed in cost at the
    search's scale, or one of its random controls, ``control``); ``equal_cost`` says whether it also costs
    no more at the scale trained (:func:`equal_cost`); ``stats`` the paired statistics
    (:func:`results.stats.paired`, None before a seed of both has finished), ``p_holm`` its p-value
    corrected with every other comparison of the run, and the verdict by it."""

    found: str
    reference: str
    kind: str
    equal_cost: str
    stats: dict[str, Any] | None
    p_holm: float | None
    verdict: str


@dataclass(frozen=True)
class Retraining:
    """What the retraining shows so far (:func:`summarize`)."""

    plan: RetrainPlan
    runs: tuple[RunResult, ...]
    members: pd.DataFrame  # one row per member: label, role, trial, arch, costs, searched values, retrained
    comparisons: tuple[Comparison, ...]
    agreement: dict[str, float] | None  # Spearman and Kendall of searched top-1 vs retrained mean, and n
    plateau: dict[str, Any]  # the plateau check: per network its scores at both lengths, and whether reached

    def runs_table(self) -> pd.DataFrame:
        return pd.DataFrame([dataclasses.asdict(r) for r in self.runs], columns=_RUN_COLUMNS)

    @property
    def tested(self) -> int:
        """The comparisons with a p-value: the family Holm's correction holds together."""
        return sum(1 for c in self.comparisons if c.p_holm is not None)


_RUN_COLUMNS = [f.name for f in dataclasses.fields(RunResult)]


def summarize(plan: RetrainPlan, runs: Sequence[RunResult]) -> Retraining:
    """The members' table, the comparisons (Holm-corrected together), the rank agreement and the plateau
    check of ``runs``."""
    by_label: dict[str, dict[int, float]] = {m.label: {} for m in plan.members}
    longer: dict[str, RunResult] = {}
    for run in runs:
        if run.plateau:
            longer[run.label] = run
        else:
            by_label.setdefault(run.label, {})[run.seed] = run.top1
    rows = []
    for m in plan.members:
        values = list(by_label[m.label].values())
        rows.append(
            {
                "label": m.label,
                "role": m.role,
                "trial": m.number,
                "control_of": m.control_of,
                "arch": m.arch.key,
                **m.costs,
                **{f"searched_{k}": v for k, v in m.searched.items()},
                "top1_mean": statistics.fmean(values) if values else math.nan,
                "top1_std": statistics.stdev(values) if len(values) > 1 else math.nan,
                "seeds": len(values),
            }
        )
    members = pd.DataFrame(rows)
    pairs = []
    for f in plan.found():
        for ref, cost in plan.references(f):
            stats = (
                paired(by_label[f.label], by_label[ref.label], ("found", ref.role))
                if by_label[f.label] and by_label[ref.label]
                else None
            )
            pairs.append((f, ref, cost, stats))
    p_values = [(s or {}).get("difference", {}).get("p") for *_, s in pairs]
    corrected = holm(p_values)
    comparisons = tuple(
        Comparison(
            f.label,
            ref.label,
            ref.role,
            cost,
            stats,
            p_holm,
            corrected_verdict(stats["difference"], p_holm, ("found", ref.role))
            if stats is not None
            else "no seed with both networks trained yet",
        )
        for (f, ref, cost, stats), p_holm in zip(pairs, corrected, strict=True)
    )
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
    return Retraining(plan, tuple(runs), members, comparisons, agreement, _plateau(plan, by_label, longer))


def _plateau(
    plan: RetrainPlan, by_label: dict[str, dict[int, float]], longer: dict[str, RunResult]
) -> dict[str, Any]:
    """Per plateau network: its score after the schedule's epochs and after twice as many (the first seed),
    the change; ``reached`` True where every change is below :data:`PLATEAU_POINTS`, False where one is not,
    None until both trainings of every network have finished (or where the check is off)."""
    if not plan.plateau:
        return {"networks": [], "reached": None, "threshold": PLATEAU_POINTS}
    seed = plan.seeds[0]
    networks = []
    for label in plan.plateau:
        short, long = by_label.get(label, {}).get(seed), longer.get(label)
        change = long.top1 - short if long is not None and short is not None else None
        networks.append(
            {
                "label": label,
                "seed": seed,
                "epochs": plan.config.epochs,
                "top1": short,
                "doubled_epochs": 2 * plan.config.epochs,
                "doubled_top1": long.top1 if long is not None else None,
                "change": change,
            }
        )
    changes = [n["change"] for n in networks]
    reached = None if any(c is None for c in changes) else all(abs(c) < PLATEAU_POINTS for c in changes)
    return {"networks": networks, "reached": reached, "threshold": PLATEAU_POINTS}

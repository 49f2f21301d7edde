"""Several studies side by side: ``nas compare runs/a runs/b ...`` -> :class:`Comparison`.

Which sampler, fidelity, narrowing or space finds the better front for the same money? Each study is
analysed as its report analyses it (:func:`results.analysis.analyse`: its front of feasible, top-rung
results), and then all of them are measured on one box: the hypervolume's reference point is, per objective,
the worst of the studies' own reference points (so every study's front counts), the ideal point the best of
their ideal points, and each study's hypervolume after each trial is normalized by that one box, so the
values compare.

Budgets differ between studies, so the comparison is made at equal device time too: each study's hypervolume
when it had spent as much as the study that spent least (``equal_spend``). A study's device time is its
set-up overhead (a one-shot supernet's training), counted before its first trial, and then its trials'
charges in trial order; a lost trial's charge (overhead too: the time up to its last heartbeat) is counted
at its own trial's place, where it was spent.

A claim about a search method rests on several seeds: ``by`` (``--by sampler``) groups the studies by a
setting (:data:`GROUP_BY`) and gives each group's mean and spread over its studies.

Studies compare only on the same objectives (names and directions): others are refused in one sentence.
Where they measure them differently (another evaluator or its config, proxy profile, dataset, image size of
the MACs, or limits), :attr:`Comparison.differences` names what differs, and the page and the command say
so.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from nas.study.budget import human_seconds
from nas.study.objectives import Objective
from nas.study.pareto import hypervolume_history
from nas.study.trials_table import at_top_rung
from results.analysis import Analysis, analyse, load_run, space_searched

__all__ = ["GROUP_BY", "MAX_STUDIES", "Comparison", "StudyResult", "check_by", "compare", "group_value"]

MAX_STUDIES = 20  # studies on one page: the plots' colours and legends stay readable
# what the trials measure (besides the objectives' names): a study that differs in one is compared as measured
_MEASURED = ("evaluator", "evaluator_config", "profile", "dataset", "macs_img_size")
GROUP_BY = ("sampler", "fidelity", "space", "evaluator", "profile", "backend")  # what --by may group on


@dataclass(frozen=True, eq=False)
class StudyResult:
    """One study of a comparison: its report's analysis and its hypervolume on the comparison's box."""

    label: str  # its run directory's name (its path where two share a name)
    run_dir: Path
    manifest: dict[str, Any]
    analysis: Analysis
    spent: list[float]  # device-seconds spent up to each row of ``analysis.frame``, overhead first
    hypervolume: list[float]  # after each row, normalized on the comparison's box
    overhead: float  # device-seconds of set-up (the first point of ``spent`` starts there)

    @property
    def total_spent(self) -> float:
        return self.spent[-1] if self.spent else self.overhead

    def hypervolume_at(self, seconds: float) -> float:
        """The hypervolume once the study had spent ``seconds`` (0 before its first trial ended)."""
        reached = [hv for hv, spent in zip(self.hypervolume, self.spent, strict=True) if spent <= seconds]
        return reached[-1] if reached else 0.0


@dataclass(frozen=True, eq=False)
class Comparison:
    objectives: tuple[Objective, ...]
    studies: list[StudyResult]
    reference: dict[str, float]
    ideal: dict[str, float]
    equal_spend: float  # device-seconds: what the study that spent least spent
    differences: list[str]  # what the studies measure differently, one phrase each
    by: str | None = None  # the setting that groups the studies (GROUP_BY), or none

    def groups(self) -> dict[str, list[StudyResult]]:
        """The studies by their value of ``by`` (in the order first met); one group of all without it."""
        out: dict[str, list[StudyResult]] = {}
        for study in self.studies:
            out.setdefault(group_value(study.manifest, self.by) if self.by else "all", []).append(study)
        return out

    def group_table(self) -> pd.DataFrame:
        """One row per group: its studies, the mean and spread (sample standard deviation; none for one
        study) of their final hypervolumes and of those at equal device time, their mean device time."""
        at_equal = f"hypervolume at {human_seconds(self.equal_spend)}"
        rows = []
        for value, members in self.groups().items():
            finals = [s.hypervolume[-1] if s.hypervolume else 0.0 for s in members]
            equal = [s.hypervolume_at(self.equal_spend) for s in members]
            rows.append(
                {
                    self.by or "group": value,
                    "studies": len(members),
                    "hypervolume mean": statistics.fmean(finals),
                    "hypervolume std": statistics.stdev(finals) if len(finals) > 1 else math.nan,
                    f"{at_equal} mean": statistics.fmean(equal),
                    f"{at_equal} std": statistics.stdev(equal) if len(equal) > 1 else math.nan,
                    "device time mean": human_seconds(statistics.fmean(s.total_spent for s in members)),
                }
            )
        return pd.DataFrame(rows)

    def table(self) -> pd.DataFrame:
        """One row per study: what it searched, what it spent, its front and hypervolumes, its best values."""
        rows = []
        for study in self.studies:
            settings, analysis = study.manifest.get("settings") or {}, study.analysis
            states = analysis.frame["state"].astype(str)
            row: dict[str, Any] = {
                "study": study.label,
                "space": space_searched(study.manifest),
                "sampler": settings.get("sampler"),
                "fidelity": group_value(study.manifest, "fidelity"),
                "evaluator": settings.get("evaluator"),
                "trials": f"{int((states == 'COMPLETE').sum())} of {len(states)}",
                "device time": human_seconds(study.total_spent),
                "front": len(analysis.front),
                "hypervolume": study.hypervolume[-1] if study.hypervolume else 0.0,
                f"hypervolume at {human_seconds(self.equal_spend)}": study.hypervolume_at(self.equal_spend),
            }
            for k, o in enumerate(self.objectives):
                values = [analysis.points[i][k] for i in analysis.front]
                best = (max if o.direction == "maximize" else min)(values) if values else float("nan")
                row[f"best {o.name}"] = best
            rows.append(row)
        return pd.DataFrame(rows)


def compare(run_dirs: Sequence[str | Path], by: str | None = None) -> Comparison:
    """The comparison of the studies in ``run_dirs`` (two or more), grouped by the setting ``by`` (one of
    :data:`GROUP_BY`) if given; ValueError in one sentence if they are not studies that compare."""
    check_by(by)
    dirs = [Path(d) for d in run_dirs]
    if not 2 <= len(dirs) <= MAX_STUDIES:
        raise ValueError(f"compare: give 2 to {MAX_STUDIES} run directories, got {len(dirs)}")
    resolved = [d.resolve() for d in dirs]
    twice = next((d for i, d in enumerate(dirs) if resolved[i] in resolved[:i]), None)
    if twice is not None:
        raise ValueError(f"compare: {twice} is given twice")
    loaded = [load_run(d) for d in dirs]
    analyses = [analyse(frame, manifest, importance=False) for frame, manifest in loaded]
    objectives = analyses[0].objectives
    for d, analysis in zip(dirs[1:], analyses[1:], strict=True):
        if analysis.objectives != objectives:
            raise ValueError(
                f"compare: {dirs[0]} searches {_names(objectives)} and {d} {_names(analysis.objectives)}; "
                "studies compare only on the same objectives"
            )
    reference, ideal = {}, {}
    for o in objectives:
        refs, ideals = [a.reference[o.name] for a in analyses], [a.ideal[o.name] for a in analyses]
        worse, better = (min, max) if o.direction == "maximize" else (max, min)
        reference[o.name], ideal[o.name] = worse(refs), better(ideals)
    labels = _labels(dirs)
    studies = [
        _study(label, d, manifest, analysis, reference, ideal)
        for label, d, (_, manifest), analysis in zip(labels, dirs, loaded, analyses, strict=True)
    ]
    return Comparison(
        objectives=objectives,
        studies=studies,
        reference=reference,
        ideal=ideal,
        equal_spend=min(s.total_spent for s in studies),
        differences=_differences(labels, [m for _, m in loaded]),
        by=by,
    )


def check_by(by: str | None) -> None:
    """ValueError in one sentence unless ``by`` is None or a setting the studies may be grouped by."""
    if by is not None and by not in GROUP_BY:
        raise ValueError(f"by: unknown setting {by!r}; allowed: {', '.join(GROUP_BY)}")


def group_value(manifest: dict[str, Any], by: str) -> str:
    """A study's value of the setting ``by``, as the table shows it (the space with its narrowing)."""
    if by == "space":
        return space_searched(manifest)
    settings = manifest.get("settings") or {}
    return str(settings.get(by, "single" if by == "fidelity" else None))


def _study(
    label: str,
    run_dir: Path,
    manifest: dict[str, Any],
    analysis: Analysis,
    reference: dict[str, float],
    ideal: dict[str, float],
) -> StudyResult:
    objectives = analysis.objectives
    on_top = at_top_rung(analysis.frame, analysis.top_rung)
    counted = [
        p if p is not None and ok and up else None
        for p, ok, up in zip(analysis.points, analysis.feasible, on_top, strict=True)
    ]
    box = math.prod(abs(ideal[o.name] - reference[o.name]) for o in objectives)
    raw = hypervolume_history(
        counted, [o.direction for o in objectives], [reference[o.name] for o in objectives]
    )
    setup, spent = _spent(manifest, analysis)
    return StudyResult(
        label=label,
        run_dir=run_dir,
        manifest=manifest,
        analysis=analysis,
        spent=spent,
        hypervolume=[hv / box if box else 0.0 for hv in raw],
        overhead=setup,
    )


# a trial's charge: "trial 3", "rejected trial 3", "lost trial 3", "interrupted trial 3" (nas.search)
_TRIAL = re.compile(r"(?:[a-z]+ )?trial (\d+)")


def _spent(manifest: dict[str, Any], analysis: Analysis) -> tuple[float, list[float]]:
    """The study's set-up overhead, and the device-seconds it had spent by each row of its table: the
    set-up first, then the trials' charges (each row's own, rejected, repeated and lost ones included), and
    a trial's overhead charge that no row carries (a Ray trial interrupted while it ran) at the row of its
    number (or the next row, or the last)."""
    charges = ((manifest.get("budget") or {}).get("spent") or {}).get("charges") or []
    numbers = [int(n) for n in analysis.frame["number"]]
    own = analysis.frame["charge"] if "charge" in analysis.frame else [None] * len(numbers)
    carried = {n for n, c in zip(numbers, pd.to_numeric(own, errors="coerce"), strict=True) if pd.notna(c)}
    setup, placed = 0.0, [0.0] * len(numbers)
    last = len(numbers) - 1 if numbers else None
    for charge in charges:
        if not (isinstance(charge, dict) and charge.get("overhead")):
            continue
        try:
            seconds = float(charge["seconds"]) * float(charge.get("devices", 1))
        except (KeyError, TypeError, ValueError):
            continue
        trial = _TRIAL.fullmatch(str(charge.get("label", "")))
        if trial and int(trial.group(1)) in carried:
            continue  # its row's charge holds it (counting it here too counted it twice)
        row = next((i for i, n in enumerate(numbers) if n >= int(trial.group(1))), last) if trial else None
        if row is None:
            setup += seconds
        else:
            placed[row] += seconds
    later = list(itertools.accumulate(placed))
    return setup, [setup + s + extra for s, extra in zip(analysis.spent, later, strict=True)]


def _differences(labels: list[str], manifests: list[dict[str, Any]]) -> list[str]:
    """What the studies measure differently: ``evaluator: proxy (a), oneshot (b)``."""
    out = []
    for key in (*_MEASURED, "limits"):
        values = [(m.get(key) if key == "limits" else (m.get("settings") or {}).get(key)) for m in manifests]
        if any(v != values[0] for v in values[1:]):
            shown = ", ".join(f"{_short(v)} ({label})" for v, label in zip(values, labels, strict=True))
            out.append(f"{key.replace('_', ' ')}: {shown}")
    return out


def _labels(dirs: list[Path]) -> list[str]:
    """Each study's label: its folder's name, or its path where two folders share a name."""
    names = [d.name or str(d) for d in dirs]
    return [str(d) if names.count(n) > 1 else n for d, n in zip(dirs, names, strict=True)]


def _names(objectives: Sequence[Objective]) -> str:
    return ", ".join(str(o) for o in objectives)


def _short(value: Any) -> str:
    text = "none" if value in (None, {}) else str(value)
    return text if len(text) <= 80 else text[:77] + "..."

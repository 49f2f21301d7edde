"""The analysis of a study that its report shows: ``analyse(frame, manifest)`` -> :class:`Analysis`.

``load_run(run_dir)`` reads what a search left in ``runs/<study>/`` (``trials.parquet`` or ``trials.csv`` and
``manifest.json``); :func:`analyse` computes, once, the front, the hypervolume after each trial, the
comparison with each baseline and what the summary says of limits and rungs. :mod:`results.plots` draws it
and :mod:`results.report` writes the page.

Under limits (``--max-macs``, ``--at-cost-of``, ...; the manifest's ``limits``) the front and the hypervolume
are of the feasible trials only. On a fidelity ladder (``--fidelity ladder``, the manifest's settings) the
front, the hypervolume and the baseline comparison are of the top rung's results only (a baseline at the
highest rung it reached); the summary gives the trials per rung and the rank agreement between adjacent rungs
(Spearman of top-1 over the architectures that completed both: the ones the lower rung promoted, so it reads
lower than that rung ranks; benchmarks/rung_agreement.py measures it on an unselected sample).

Hypervolume needs a reference point that stays fixed across the sessions of a study, so that values compare.
:func:`reference_point` fixes it at the first report: ``top1`` 0 %; every other objective twice the worst
value among the space's baselines that the study ran (they run first unless ``--no-baselines``), or 1.1 x the
worst value of any completed trial when it ran none; a report of a study with no completed trial fixes
nothing (its hypervolume is 0 whatever the point). It is stored in the manifest
(``report.reference_point``) and read back by every later report, whatever the trials found since. The
hypervolume is normalized to [0, 1]: divided by the volume of the box from the reference point to the ideal
point (:func:`ideal_point`: top-1 100 %, 0 for a minimized metric), so 1 would be the ideal reached; the raw
volume (MACs x params, say 4.25e+11) says nothing to a reader.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evaluators.ranking import spearman
from nas.core import userfiles
from nas.core.arch import Arch
from nas.core.bounds import shown
from nas.study.manifest import manifest_problem
from nas.study.objectives import Objective, parse_objectives
from nas.study.pareto import dominates, hypervolume_history, pareto_front
from nas.study.trials_table import at_top_rung, feasible_rows, top_rung
from results.importance import ChoiceImportance, choice_importance
from search_spaces import get_space
from search_spaces.narrowed import describe

__all__ = [
    "COST_AXES",
    "Analysis",
    "BaselineComparison",
    "DominatingTrial",
    "analyse",
    "baseline_labels",
    "feasible_fractions",
    "front_table",
    "ideal_point",
    "load_run",
    "reference_point",
    "rejections",
    "space_searched",
]

TABLE_BYTES = 256 << 20  # a trials table's bound: ~1 KiB a trial, so some 250,000 trials
COST_AXES = ("macs", "params")  # the x axes of the scatter plots, when the table has them


def load_run(run_dir: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(trials table, manifest) of a run directory; ValueError in one sentence if it holds no study."""
    run_dir = Path(run_dir)
    manifest_path = run_dir / "manifest.json"
    try:
        manifest = userfiles.load_store(manifest_path)
    except FileNotFoundError:
        raise ValueError(
            f"study: no manifest.json in {run_dir}; is it a run directory of `nas search`?"
        ) from None
    except ValueError as err:  # not JSON, too deep or large, not a regular file: what is wrong with it
        raise ValueError(f"study: {manifest_path} {err}") from None
    settings = manifest.get("settings") if isinstance(manifest, dict) else None
    objectives = settings.get("objectives") if isinstance(settings, dict) else None
    try:
        parse_objectives(list(objectives))
    except (TypeError, ValueError):
        raise ValueError(
            f"study: {manifest_path} records no valid objectives (settings.objectives); "
            "is it a manifest written by `nas search`?"
        ) from None
    problem = manifest_problem(manifest)
    if problem is not None:
        raise ValueError(f"study: {manifest_path} {problem}; is it a manifest written by `nas search`?")
    table = next((run_dir / n for n in ("trials.parquet", "trials.csv") if (run_dir / n).exists()), None)
    if table is None:
        raise ValueError(f"study: no trials table in {run_dir}")
    try:  # a regular file of bounded size (a FIFO would block, /dev/zero fill memory)
        userfiles.check_regular(table, "trials table", TABLE_BYTES, userfiles.STORE_BOUNDS.of)
    except ValueError as err:
        raise ValueError(f"study: {err}") from None
    try:
        if table.suffix == ".parquet":
            frame = _read_parquet(table)
        else:
            frame = pd.read_csv(table, keep_default_na=False, na_values=[""])
    except Exception as err:  # pyarrow and pandas raise several kinds on a damaged file
        raise ValueError(f"study: {table} cannot be read ({_reason(err)})") from None
    objectives = [o.name for o in parse_objectives(list(manifest["settings"]["objectives"]))]
    missing = [c for c in dict.fromkeys([*_REQUIRED_COLUMNS, *objectives]) if c not in frame.columns]
    if missing:
        raise ValueError(
            f"study: {table} is not a trials table of `nas search` (no {', '.join(missing)} column)"
        )
    return _checked_cells(frame, table), manifest


# the columns every trials table has held, which the report reads in every row
_REQUIRED_COLUMNS = ("number", "state", "arch", "baseline", "fail_reason", "arch_json")
# a trial's number, and the numbers of trials and rungs it refers to
_WHOLE_COLUMNS = ("number", "rung", "lineage", "repeat_of")
_MOST_TRIALS = 2**31 - 1


def _missing(value: Any) -> bool:
    """Whether a cell is empty: None, NA, NaN or an empty string."""
    if isinstance(value, str):
        return not value
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _checked_cells(frame: pd.DataFrame, table: Path) -> pd.DataFrame:
    """``frame`` with its trial and rung numbers checked (a whole number from 0, and a trial number in each
    row, once) and read as numbers, and each architecture readable; a ValueError of one sentence naming the
    table, the row and the column of the first cell that is not. A CSV's rows are counted from the first
    under the header."""
    rows = " below the header" if table.suffix == ".csv" else ""

    def bad(i: int, column: str, why: str) -> ValueError:
        return ValueError(f"study: {table}, row {i + 1}{rows}, column {column}: {why}")

    frame = frame.reset_index(drop=True)
    for column in (c for c in _WHOLE_COLUMNS if c in frame.columns):
        cells = frame[column]
        real = cells.map(lambda v: isinstance(v, (numbers.Real, str)) and not isinstance(v, (bool, np.bool_)))
        numeric = pd.to_numeric(cells.where(real), errors="coerce").astype("float64")
        empty = cells.map(_missing).astype(bool)
        ok = real & numeric.notna() & numeric.between(0, _MOST_TRIALS) & (numeric % 1 == 0)
        ok |= empty & (column != "number")
        if not ok.all():
            i = int((~ok).to_numpy().argmax())
            what = "a trial number" if column == "number" else "empty or a number"
            cell = cells[i].item() if isinstance(cells[i], np.generic) else cells[i]  # 1.5: no np.float64
            raise bad(i, column, f"{shown(cell)} is not {what}, a whole number from 0 to {_MOST_TRIALS:,}")
        frame[column] = numeric.astype("int64") if column == "number" else numeric.where(~empty)
    twice = frame["number"].duplicated()
    if twice.any():
        i = int(twice.to_numpy().argmax())
        raise bad(i, "number", f"trial {frame['number'][i]} is in an earlier row too")
    for i, text in enumerate(frame["arch_json"]):
        if _missing(text):
            continue  # a trial that never had an architecture
        try:
            Arch.from_json(text)
        except ValueError as err:
            raise bad(i, "arch_json", str(err)) from None
    return frame


def _read_parquet(path: Path) -> pd.DataFrame:
    """A parquet trials table, once its metadata says its columns take at most TABLE_BYTES unpacked (a
    compressed page of a few kilobytes may unpack to gigabytes)."""
    import pyarrow.parquet as pq  # pandas' parquet engine, imported where pandas imports it: on first use

    meta = pq.ParquetFile(path).metadata
    size = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    if size > TABLE_BYTES:
        raise ValueError(f"its columns unpack to {size:,} bytes, over the limit of {TABLE_BYTES:,} bytes")
    return pd.read_parquet(path)


def _reason(err: Exception) -> str:
    """An exception's message in one line (its first), or its type when it has none."""
    lines = str(getattr(err, "strerror", None) or err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def _objectives(manifest: dict[str, Any]) -> tuple[Objective, ...]:
    return parse_objectives(list(manifest["settings"]["objectives"]))


def reference_point(
    objectives: Sequence[Objective], manifest: dict[str, Any], frame: pd.DataFrame
) -> dict[str, float]:
    """The hypervolume reference of the study (see the module docstring): the manifest's if it has one."""
    stored = (manifest.get("report") or {}).get("reference_point") or {}
    done = frame[frame["state"] == "COMPLETE"]
    baselines = done[done["baseline"].fillna("").astype(str) != ""]
    out: dict[str, float] = {}
    for o in objectives:
        if o.name in stored and not (o.direction == "minimize" and float(stored[o.name]) == 0.0):
            # (a minimized 0 spans no volume: what a report before any completed trial stored until
            # 2026-12, taken as not fixed yet)
            out[o.name] = float(stored[o.name])
            continue
        if o.name == "top1":
            out[o.name] = 0.0
            continue
        pool, scale = (baselines, 2.0) if len(baselines) else (done, 1.1)
        values = pd.to_numeric(pool.get(o.name), errors="coerce").dropna()
        values = [float(v) for v in values if math.isfinite(v)]
        if not values:  # no completed trial yet: provisional, never stored (report.write_report)
            out[o.name] = 0.0
        elif o.direction == "minimize":
            out[o.name] = max(values) * scale
        else:
            worst = min(values)
            out[o.name] = worst - (scale - 1.0) * abs(worst)
    return out


def ideal_point(objectives: Sequence[Objective], frame: pd.DataFrame) -> dict[str, float]:
    """The best value each objective can take, the far corner of the hypervolume's box: ``top1`` 100 %,
    0 for a minimized metric (counts, times and losses are never negative); a maximized metric other
    than top-1 (``--objectives macs:max``) has no such bound and takes the best completed value."""
    out = {}
    for o in objectives:
        if o.direction == "minimize":
            out[o.name] = 0.0
        elif o.name == "top1":
            out[o.name] = 100.0
        else:
            done = pd.to_numeric(frame.loc[frame["state"] == "COMPLETE", o.name], errors="coerce")
            out[o.name] = float(done.max()) if done.notna().any() else 0.0
    return out


def _points(frame: pd.DataFrame, objectives: Sequence[Objective]) -> list[list[float] | None]:
    """Each row's objective values, None for a trial that did not complete (or has a non-finite value)."""
    out: list[list[float] | None] = []
    for _, row in frame.iterrows():
        values = [pd.to_numeric(row.get(o.name), errors="coerce") for o in objectives]
        ok = row["state"] == "COMPLETE" and all(v is not None and math.isfinite(v) for v in values)
        out.append([float(v) for v in values] if ok else None)
    return out


def feasible_fractions(frame: pd.DataFrame, parts: int = 4) -> list[float]:
    """The fraction of sampled trials (baselines aside) within the limits, in each of ``parts`` equal
    stretches of the search in trial order."""
    frame = frame.sort_values("number", kind="stable")
    sampled = frame[(frame["baseline"].fillna("").astype(str) == "") & frame["state"].isin(_SAMPLED)]
    ok = feasible_rows(sampled)
    size = len(ok) / parts
    chunks = [ok[round(i * size) : round((i + 1) * size)] for i in range(parts)]
    return [sum(c) / len(c) for c in chunks if c]


_SAMPLED = ("COMPLETE", "INFEASIBLE")


def rejections(frame: pd.DataFrame) -> dict[str, int]:
    """How many samples were rejected over each limit (a sample over two limits counts for both)."""
    rejected = frame[frame["state"] == "INFEASIBLE"]
    out: dict[str, int] = {}
    for column in sorted(c for c in frame.columns if c.startswith("constraint_")):
        over = int((pd.to_numeric(rejected[column], errors="coerce") > 0).sum())
        if over:
            out[column.removeprefix("constraint_")] = over
    return out


@dataclass(frozen=True, eq=False)
class DominatingTrial:
    """A found architecture that dominates a baseline, and by how much in each objective (``margins``: points
    of top-1, a relative change of a cost)."""

    number: int
    arch: str
    margins: dict[str, str]


@dataclass(frozen=True, eq=False)
class BaselineComparison:
    """A baseline's result (on a ladder, at the highest rung it reached) and the front's architectures that
    dominate it, in trial order."""

    baseline: str  # its label (:func:`baseline_labels`)
    feasible: bool  # within the search's limits
    number: int
    values: dict[str, float]  # its objective values
    dominated_by: list[DominatingTrial]


@dataclass(frozen=True, eq=False)
class Analysis:
    """What the report shows of a study, computed once by :func:`analyse`. A row is a position in ``frame``
    (the trials table sorted by trial number); the lists of one value per row follow that order."""

    objectives: tuple[Objective, ...]
    frame: pd.DataFrame
    points: list[list[float] | None]  # each row's objective values; None: not completed (or not finite)
    feasible: list[bool]  # whether each row met the limits
    limits: dict[str, float]  # the limit on each bounded metric
    front: list[int]  # the front's rows: completed, feasible and, on a ladder, of the top rung
    top_rung: int | None  # None for a single fidelity
    faded: list[int]  # a ladder's results below the top rung (a baseline's highest rung stays a baseline)
    rungs: list[tuple[str, str]]  # the summary's lines on a ladder
    reference: dict[str, float]  # the hypervolume's fixed reference point
    ideal: dict[str, float]
    hypervolume: list[float]  # after each row, normalized: the fraction of the box from reference to ideal
    spent: list[float]  # the budget charged up to each row (device-seconds)
    baselines: list[BaselineComparison]
    labels: list[str]  # each row's baseline label; empty for a sampled architecture
    importance: ChoiceImportance


def analyse(frame: pd.DataFrame, manifest: dict[str, Any], *, importance: bool = True) -> Analysis:
    """Front, hypervolume history (per trial and per budget spent) and baseline domination of a study; its
    choice importances unless ``importance`` is False (a comparison shows none, so it skips them)."""
    objectives = _objectives(manifest)
    directions = [o.direction for o in objectives]
    frame = frame.sort_values("number", kind="stable").reset_index(drop=True)
    points = _points(frame, objectives)
    feasible = feasible_rows(frame)
    top = top_rung(manifest.get("settings") or {})
    on_top = at_top_rung(frame, top)
    done = [i for i, p in enumerate(points) if p is not None]
    # the front is of what met the limits and, on a ladder, was trained to the top rung
    within = [i for i in done if feasible[i] and on_top[i]]
    front = [within[i] for i in pareto_front([points[i] for i in within], directions)]
    reference = reference_point(objectives, manifest, frame)
    ideal = ideal_point(objectives, frame)
    ref = [reference[o.name] for o in objectives]
    box = math.prod(abs(ideal[o.name] - reference[o.name]) for o in objectives)
    history = [
        hv / box if box else 0.0
        for hv in hypervolume_history(
            [p if ok and up else None for p, ok, up in zip(points, feasible, on_top, strict=True)],
            directions,
            ref,
        )
    ]
    charges = frame["charge"] if "charge" in frame else pd.Series(0.0, index=frame.index)  # an old table
    spent = pd.to_numeric(charges, errors="coerce").fillna(0.0).cumsum().tolist()
    baselines: list[BaselineComparison] = []
    is_baseline = frame["baseline"].fillna("").astype(str) != ""
    labels = baseline_labels(frame, manifest.get("space"))
    highest = _highest_rungs(frame, done)
    for i in done:
        if not is_baseline[i] or i not in highest:
            continue
        beaters = [j for j in within if not is_baseline[j] and dominates(points[j], points[i], directions)]
        dominated_by = [
            DominatingTrial(
                int(frame.loc[j, "number"]),
                str(frame.loc[j, "arch"]),
                {o.name: _margin(o, points[j][k], points[i][k]) for k, o in enumerate(objectives)},
            )
            for j in beaters
        ]
        values = dict(zip([o.name for o in objectives], points[i], strict=True))
        baselines.append(
            BaselineComparison(labels[i], feasible[i], int(frame.loc[i, "number"]), values, dominated_by)
        )
    return Analysis(
        objectives=objectives,
        frame=frame,
        points=points,
        feasible=feasible,
        limits={k: float(v) for k, v in (manifest.get("limits") or {}).items() if k != "at_cost_of"},
        front=front,
        top_rung=top,
        faded=[i for i in done if not on_top[i] and not (is_baseline[i] and i in highest)],
        rungs=_rung_rows(frame, top),
        reference=reference,
        ideal=ideal,
        hypervolume=history,
        spent=spent,
        baselines=baselines,
        labels=labels,
        importance=(
            choice_importance(frame, objectives, manifest.get("space"), within)
            if importance
            else ChoiceImportance({}, len(within), "not computed")
        ),
    )


def space_searched(manifest: dict[str, Any]) -> str:
    """The space, and the narrowing the search kept it to (``--narrow``), as the command line writes it."""
    narrow = (manifest.get("settings") or {}).get("narrow")
    if not narrow or not isinstance(narrow, dict) or not all(isinstance(v, list) for v in narrow.values()):
        return str(manifest.get("space"))
    return f"{manifest.get('space')}, narrowed to {describe(narrow)}"


def baseline_labels(frame: pd.DataFrame, space_name: str | None) -> list[str]:
    """Each row's baseline label: its name, and where the space has two baselines of one network (the
    layout study's C-C-T-T is CoAtNet-0: the search runs it once) both names, ``CoAtNet-0 = C-C-T-T``;
    empty for a sampled architecture."""
    names: dict[str, list[str]] = {}
    try:
        for name, baseline in get_space(str(space_name)).baselines().items():
            names.setdefault(baseline.arch.key, []).append(name)
    except ValueError:  # a space this version does not know: its names as the table holds them
        pass
    out = []
    for name, key in zip(frame["baseline"].fillna("").astype(str), frame["arch"].astype(str), strict=True):
        same = names.get(key, [])
        out.append(" = ".join([name, *(n for n in same if n != name)]) if name and name in same else name)
    return out


def _highest_rungs(frame: pd.DataFrame, done: list[int]) -> set[int]:
    """The rows among ``done`` that are their lineage's highest completed rung (all of them without a
    ladder)."""
    if "rung" not in frame or "lineage" not in frame:
        return set(done)
    best: dict[Any, int] = {}
    for i in done:
        lineage = frame.loc[i, "lineage"]
        if pd.isna(lineage):
            best[("row", i)] = i
            continue
        if lineage not in best or frame.loc[i, "rung"] > frame.loc[best[lineage], "rung"]:
            best[lineage] = i
    return set(best.values())


def _rung_rows(frame: pd.DataFrame, top: int | None) -> list[tuple[str, str]]:
    """The summary's lines on a ladder: completed trials per rung, and the rank agreement (Spearman of
    top-1) between adjacent rungs over the architectures that completed both. Those are the ones the lower
    rung promoted, a sample its own order cut, so the figure reads lower than the rung ranks: on coatnet's
    cpu ladder -0.26 online where 150 architectures drawn from the same rung 0 and trained through every rung
    gave +0.52 (benchmarks/rung_agreement.py)."""
    if top is None or "rung" not in frame:
        return []

    done = frame[(frame["state"] == "COMPLETE") & frame["rung"].notna()]
    counts = ", ".join(f"rung {r}: {int((done['rung'] == r).sum())}" for r in range(top + 1))
    agreement = []
    if "top1" in done:
        by_rung = {r: done[done["rung"] == r].set_index("lineage")["top1"] for r in range(top + 1)}
        for r in range(top):
            both = by_rung[r].index.intersection(by_rung[r + 1].index)
            if len(both) >= 3:
                rho = spearman(by_rung[r][both].tolist(), by_rung[r + 1][both].tolist())
                agreement.append(f"rung {r} to {r + 1}: {rho:+.2f} (n={len(both)})")
            else:
                agreement.append(f"rung {r} to {r + 1}: - (n={len(both)})")
    return [
        (f"completed trials per rung (front: rung {top} only)", counts),
        (
            "rank agreement between rungs (Spearman of top-1 over the promoted trials: a sample the lower "
            "rung chose, so it reads low)",
            "; ".join(agreement) or "-",
        ),
    ]


def _margin(objective: Objective, found: float, baseline: float) -> str:
    """How much better ``found`` is: points for top-1, a relative change for costs."""
    if objective.name == "top1":
        return f"{found - baseline:+.2f} pt"
    if baseline:
        return f"{100 * (found - baseline) / abs(baseline):+.1f}%"
    return f"{found - baseline:+.4g}"


def _stage_columns(arch_json: str) -> dict[str, str]:
    """The architecture's stem, each stage and its head (one column each), read from its JSON."""
    arch = Arch.from_json(arch_json)
    out = {"stem": arch.stem.key}
    out.update({f"stage {i}": stage.key for i, stage in enumerate(arch.stages, start=1)})
    out["head"] = arch.head.key or arch.head.kind
    return out


def front_table(analysis: Analysis) -> pd.DataFrame:
    """The front's rows: number, baseline, objectives, params, MACs, and per-stage choices."""
    frame = analysis.frame
    names = [o.name for o in analysis.objectives]
    cols = ["number", "baseline", *names, *[c for c in COST_AXES if c in frame and c not in names]]
    rows = []
    for i in sorted(analysis.front, key=lambda i: int(frame.loc[i, "number"])):
        row = {c: frame.loc[i, c] for c in cols}
        row.update(_stage_columns(frame.loc[i, "arch_json"]))
        rows.append(row)
    return pd.DataFrame(rows)

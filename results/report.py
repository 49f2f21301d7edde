"""The report of a study: ``report.html`` (self-contained, opens offline), ``pareto.png`` and ``pareto.csv``.

``write_report(run_dir)`` reads what a search left in ``runs/<study>/`` (``trials.parquet`` or ``trials.csv``
and ``manifest.json``) and writes, beside them:

- ``report.html``: interactive plotly figures with plotly.js embedded (no network needed): the declared
  objectives against MACs and against params (log axes with round ticks, 25M / 4.2G) with the Pareto front
  highlighted, the space's baselines labelled and each point's arch key on hover; the hypervolume after each
  trial (integer ticks) and against the budget spent; the front as a table with each stage's choice; which
  choices matter for each objective (:mod:`results.importance`); a drawing of each front architecture
  (:mod:`results.arch_drawing`), reached from the front table's trial numbers and by clicking a point of a
  plot; for each baseline, the found architectures that dominate it and by how much; the failed trials with
  their reasons; the manifest;
- ``pareto.png`` (matplotlib) and ``pareto.csv`` (the front's rows of the trials table).

Baseline labels are placed in pixels on plots of a fixed size (:func:`results.plot_layout.place_labels`),
so that none overlaps another or a point, or leaves the plot; a network that is two of the space's baselines
(the layout study's C-C-T-T is CoAtNet-0, run once) is labelled once with both names, ``CoAtNet-0 = C-C-T-T``.

Under limits (``--max-macs``, ``--at-cost-of``, ...; the manifest's ``limits``) the front and the hypervolume
are of the feasible trials only; each limit is drawn as a line on the plots whose axis it bounds; baselines
over a limit stay on the plots, marked "over the limit"; and the summary says how many samples were rejected,
over which limit, and how the feasible fraction of samples changed over the search (a sampler told of the
limits draws fewer infeasible samples as it learns).

On a fidelity ladder (``--fidelity ladder``, the manifest's settings) the front, the hypervolume and the
baseline comparison are of the top rung's results only; lower rungs are drawn faded, a baseline at the
highest rung it reached; the summary gives the trials per rung and the rank agreement between adjacent rungs
(Spearman of top-1 over the architectures that completed both): how far a low rung can be trusted.

Hypervolume needs a reference point that stays fixed across the sessions of a study, so that values compare.
:func:`reference_point` fixes it at the first report: ``top1`` 0 %; every other objective twice the worst
value among the space's baselines that the study ran (they run first unless ``--no-baselines``), or 1.1 x the
worst value of any completed trial when it ran none. It is stored in the manifest
(``report.reference_point``) and read back by every later report, whatever the trials found since. The
report shows the hypervolume normalized to [0, 1]: divided by the volume of the box from the reference point
to the ideal point (:func:`ideal_point`: top-1 100 %, 0 for a minimized metric), so 1 would be the ideal
reached; the raw volume (MACs x params, say 4.25e+11) says nothing to a reader.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nas.arch import Arch
from nas.atomic import replaced
from nas.search.credentials import redact_all
from nas.search.manifest import read_manifest, update_manifest
from nas.search.objectives import Objective, parse_objectives
from results.arch_drawing import arch_svg
from results.importance import FRONT, ChoiceImportance, choice_importance
from results.pareto import dominates, hypervolume_history, pareto_front
from results.plot_layout import Box, integer_step, log_ticks, place_labels
from results.store import at_top_rung, feasible_rows, top_rung, why_no_front

__all__ = ["baseline_labels", "ideal_point", "load_run", "reference_point", "write_report"]

COST_AXES = ("macs", "params")  # the x axes of the scatter plots, when the table has them


def load_run(run_dir: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(trials table, manifest) of a run directory; ValueError in one sentence if it holds no study."""
    run_dir = Path(run_dir)
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.exists():
        raise ValueError(f"study: no manifest.json in {run_dir}; is it a run directory of `nas search`?")
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"study: {manifest_path} is not valid JSON ({err.msg})") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"study: {manifest_path} cannot be read ({_reason(err)})") from None
    settings = manifest.get("settings") if isinstance(manifest, dict) else None
    objectives = settings.get("objectives") if isinstance(settings, dict) else None
    try:
        parse_objectives(list(objectives))
    except (TypeError, ValueError):
        raise ValueError(
            f"study: {manifest_path} records no valid objectives (settings.objectives); "
            "is it a manifest written by `nas search`?"
        ) from None
    table = next((run_dir / n for n in ("trials.parquet", "trials.csv") if (run_dir / n).exists()), None)
    if table is None:
        raise ValueError(f"study: no trials table in {run_dir}")
    try:
        if table.suffix == ".parquet":
            frame = pd.read_parquet(table)
        else:
            frame = pd.read_csv(table, keep_default_na=False, na_values=[""])
    except Exception as err:  # pyarrow and pandas raise several kinds on a damaged file
        raise ValueError(f"study: {table} cannot be read ({_reason(err)})") from None
    missing = [c for c in ("number", "state", "arch_json") if c not in frame.columns]
    if missing:
        raise ValueError(
            f"study: {table} is not a trials table of `nas search` (no {', '.join(missing)} column)"
        )
    return frame, manifest


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
        if o.name in stored:
            out[o.name] = float(stored[o.name])
            continue
        if o.name == "top1":
            out[o.name] = 0.0
            continue
        pool, scale = (baselines, 2.0) if len(baselines) else (done, 1.1)
        values = pd.to_numeric(pool.get(o.name), errors="coerce").dropna()
        values = [float(v) for v in values if math.isfinite(v)]
        if not values:
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


# --- analysis ----------------------------------------------------------------------------------------------


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


def analyse(frame: pd.DataFrame, manifest: dict[str, Any]) -> dict[str, Any]:
    """Front, hypervolume history (per trial and per budget spent) and baseline domination of a study."""
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
    spent = pd.to_numeric(frame.get("charge"), errors="coerce").fillna(0.0).cumsum().tolist()
    baselines = []
    is_baseline = frame["baseline"].fillna("").astype(str) != ""
    labels = baseline_labels(frame, manifest.get("space"))
    highest = _highest_rungs(frame, done)
    for i in done:
        if not is_baseline[i] or i not in highest:
            continue
        beaters = [j for j in within if not is_baseline[j] and dominates(points[j], points[i], directions)]
        margins = [
            {
                "number": int(frame.loc[j, "number"]),
                "arch": frame.loc[j, "arch"],
                **{o.name: _margin(o, points[j][k], points[i][k]) for k, o in enumerate(objectives)},
            }
            for j in beaters
        ]
        baselines.append(
            {
                "baseline": labels[i],
                "feasible": feasible[i],
                "number": int(frame.loc[i, "number"]),
                "values": dict(zip([o.name for o in objectives], points[i], strict=True)),
                "dominated_by": margins,
            }
        )
    return {
        "objectives": objectives,
        "frame": frame,
        "points": points,
        "feasible": feasible,
        "limits": {k: float(v) for k, v in (manifest.get("limits") or {}).items() if k != "at_cost_of"},
        "front": front,
        "top_rung": top,
        # a ladder's results below the top rung (a baseline's highest rung stays marked as the baseline)
        "faded": [i for i in done if not on_top[i] and not (is_baseline[i] and i in highest)],
        "rungs": _rung_rows(frame, top),
        "reference": reference,
        "ideal": ideal,
        "hypervolume": history,  # normalized: the fraction of the box from the reference to the ideal
        "spent": spent,
        "baselines": baselines,
        "labels": labels,
        "importance": choice_importance(frame, objectives, manifest.get("space"), within),
    }


def baseline_labels(frame: pd.DataFrame, space_name: str | None) -> list[str]:
    """Each row's baseline label: its name, and where the space has two baselines of one network (the
    layout study's C-C-T-T is CoAtNet-0: the search runs it once) both names, ``CoAtNet-0 = C-C-T-T``;
    empty for a sampled architecture."""
    from search_spaces import get_space

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
    top-1) between adjacent rungs over the architectures that completed both."""
    if top is None or "rung" not in frame:
        return []
    from evaluators.ranking import spearman

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
        ("rank agreement between rungs (Spearman of top-1)", "; ".join(agreement) or "-"),
    ]


def _margin(objective: Objective, found: float, baseline: float) -> str:
    """How much better ``found`` is: points for top-1, a relative change for costs."""
    if objective.name == "top1":
        return f"{found - baseline:+.2f} pt"
    if baseline:
        return f"{100 * (found - baseline) / abs(baseline):+.1f}%"
    return f"{found - baseline:+.4g}"


# --- output ------------------------------------------------------------------------------------------------


def _axes(analysis: dict[str, Any]) -> list[tuple[str, str]]:
    """(x, y) pairs to plot: y is the first maximized objective (else the first), x each cost column."""
    objectives = analysis["objectives"]
    frame = analysis["frame"]
    y = next((o.name for o in objectives if o.direction == "maximize"), objectives[0].name)
    xs = [c for c in COST_AXES if c in frame and c != y]
    xs += [o.name for o in objectives if o.name not in xs and o.name != y]
    return [(x, y) for x in xs]


def _label(name: str) -> str:
    return {"top1": "top-1 (%)", "macs": "MACs", "params": "params", "latency_ms": "latency (ms)"}.get(
        name, name
    )


_WIDTH, _HEIGHT = 1080, 540  # the scatter plots' size in pixels: fixed, so labels are placed in pixels
_MARGIN = {"l": 70, "r": 30, "t": 96, "b": 56}  # the title and the legend sit above the plot


def _scatter_figure(analysis: dict[str, Any], x: str, y: str) -> Any:
    import plotly.graph_objects as go

    frame, points, front = analysis["frame"], analysis["points"], set(analysis["front"])
    done = [i for i, p in enumerate(points) if p is not None]
    base = frame["baseline"].fillna("").astype(str)
    labels = analysis["labels"]
    fig = go.Figure()

    def trace(rows: list[int], name: str, **style: Any) -> None:
        sub = frame.loc[rows]
        fig.add_trace(
            go.Scatter(
                x=pd.to_numeric(sub[x], errors="coerce"),
                y=pd.to_numeric(sub[y], errors="coerce"),
                name=name,
                customdata=list(zip(sub["number"], sub["arch"], [labels[i] for i in rows], strict=True)),
                hovertemplate="trial %{customdata[0]} %{customdata[2]}<br>%{customdata[1]}<br>"
                + f"{x} %{{x:.4g}}<br>{y} %{{y:.4g}}<extra></extra>",
                **style,
            )
        )

    faded = set(analysis["faded"])
    others = [i for i in done if i not in front and not base[i] and i not in faded]
    trace(others, "trials", mode="markers", marker={"color": "#9aa5b1", "size": 7})
    if faded:
        lower = [i for i in done if i in faded]
        trace(lower, "lower rungs", mode="markers", marker={"color": "#9aa5b1", "size": 6, "opacity": 0.3})
    rejected = _plottable(frame, frame.index[frame["state"] == "INFEASIBLE"], x, y)
    if rejected:
        trace(rejected, "rejected (over a limit)", mode="markers", marker={"symbol": "x", "color": "#e3b5b5"})
    feasible = analysis["feasible"]
    marked: list[int] = []
    for over in (False, True):
        baselines = [i for i in done if base[i] and feasible[i] != over and i not in faded]
        marked += baselines
        if baselines:
            trace(
                baselines,
                "baselines over the limits" if over else "baselines",
                mode="markers",
                marker={
                    "symbol": "star-open" if over else "star",
                    "size": 15,
                    "color": "#1f77b4",
                    "line": {"width": 1, "color": "black"},
                },
            )
    for axis, name in (("x", x), ("y", y)):
        if name in analysis["limits"]:
            limit = analysis["limits"][name]
            line = {
                "line_dash": "dash",
                "line_color": "#d62728",
                "annotation_text": f"limit {_short(name, limit)}",
            }
            fig.add_vline(x=limit, **line) if axis == "x" else fig.add_hline(y=limit, **line)
    # drawn last: a baseline that is on the front shows the front's red inside its star
    ordered = sorted(front, key=lambda i: float(pd.to_numeric(frame.loc[i, x], errors="coerce")))
    line = _objective_plane(analysis, x, y)
    trace(
        ordered,
        "Pareto front" if line else f"Pareto front ({_front_of(analysis)})",
        mode="lines+markers" if line else "markers",
        marker={"color": "#d62728", "size": 8},
    )
    shown = sorted({*done, *rejected})
    axes = {
        a: _axis_layout(analysis, frame, shown, name, log=name in COST_AXES)
        for a, name in (("x", x), ("y", y))
    }
    _label_baselines(fig, frame, marked, [i for i in shown if i not in marked], labels, axes, x, y)
    fig.update_layout(
        title={"text": f"{_label(y)} vs {_label(x)}", "y": 0.98, "yanchor": "top"},
        xaxis={"title": _label(x), **axes["x"]},
        yaxis={"title": _label(y), **axes["y"]},
        width=_WIDTH,
        height=_HEIGHT,
        margin={**_MARGIN, "autoexpand": False},
        legend={"orientation": "h", "x": 0, "y": 1.02, "xanchor": "left", "yanchor": "bottom"},
    )
    return fig


def _axis_layout(
    analysis: dict[str, Any], frame: pd.DataFrame, rows: list[int], name: str, *, log: bool
) -> dict[str, Any]:
    """A plot axis over the values of ``rows`` (and the metric's limit), padded by 6 %; a log axis (costs)
    gets round ticks labelled like 25M, 4.2G."""
    values = [float(v) for v in pd.to_numeric(frame.loc[rows, name], errors="coerce") if math.isfinite(v)]
    if name in analysis["limits"]:
        values.append(analysis["limits"][name])
    if log:
        values = [v for v in values if v > 0]
    if not values:
        return {"type": "log" if log else "linear"}
    low, high = min(values), max(values)
    if log:
        a, b = math.log10(low), math.log10(high)
        pad = 0.06 * (b - a) or 0.05
        ticks = log_ticks(10 ** (a - pad), 10 ** (b + pad))
        return {
            "type": "log",
            "range": [a - pad, b + pad],
            "tickvals": ticks,
            "ticktext": [_short(name, t) for t in ticks],
        }
    pad = 0.06 * (high - low) or max(abs(high) * 0.05, 1.0)
    return {"type": "linear", "range": [low - pad, high + pad]}


def _label_baselines(
    fig: Any,
    frame: pd.DataFrame,
    marked: list[int],
    unmarked: list[int],
    labels: list[str],
    axes: dict[str, dict[str, Any]],
    x: str,
    y: str,
) -> None:
    """Write each baseline's label beside its star, placed in pixels (:func:`place_labels`) so that
    none overlaps another, covers a point or leaves the plot; a leader line joins it to its star."""
    if not marked or "range" not in axes["x"] or "range" not in axes["y"]:
        return
    width = _WIDTH - _MARGIN["l"] - _MARGIN["r"]
    height = _HEIGHT - _MARGIN["t"] - _MARGIN["b"]

    def coordinate(row: int, name: str, axis: str) -> float:
        value = float(pd.to_numeric(frame.loc[row, name], errors="coerce"))
        return math.log10(value) if axes[axis]["type"] == "log" else value  # plotly's own log coordinates

    def pixels(row: int) -> tuple[float, float]:
        (x0, x1), (y0, y1) = axes["x"]["range"], axes["y"]["range"]
        px = (coordinate(row, x, "x") - x0) / (x1 - x0) * width
        py = (1 - (coordinate(row, y, "y") - y0) / (y1 - y0)) * height
        return px, py

    def drawable(row: int) -> bool:
        values = [pd.to_numeric(frame.loc[row, name], errors="coerce") for name in (x, y)]
        return all(
            math.isfinite(v) and (v > 0 or axes[axis]["type"] != "log")
            for v, axis in zip(values, "xy", strict=True)
        )

    ordered = sorted(filter(drawable, marked), key=pixels)
    texts = [labels[i] for i in ordered]
    offsets = place_labels(
        [pixels(i) for i in ordered],
        texts,
        Box(0, 0, width, height),
        [pixels(i) for i in unmarked if drawable(i)],
    )
    for row, text, (dx, dy) in zip(ordered, texts, offsets, strict=True):
        fig.add_annotation(
            x=coordinate(row, x, "x"),
            y=coordinate(row, y, "y"),
            text=html.escape(text),
            ax=dx,
            ay=dy,
            showarrow=True,
            arrowhead=0,
            arrowwidth=0.8,
            arrowcolor="#7a8794",
            standoff=7,
            font={"size": 10},
            bgcolor="rgba(255,255,255,0.85)",
            name=f"baseline label {row}",
        )


def _plottable(frame: pd.DataFrame, rows: Any, x: str, y: str) -> list[int]:
    """The rows among ``rows`` with a finite value on both axes."""
    xs, ys = pd.to_numeric(frame[x], errors="coerce"), pd.to_numeric(frame[y], errors="coerce")
    return [i for i in rows if math.isfinite(xs[i]) and math.isfinite(ys[i])]


def _short(name: str, value: float) -> str:
    from nas.search.constraints import format_count

    return f"{value:.3g} ms" if name == "latency_ms" else format_count(value)


def _objective_plane(analysis: dict[str, Any], x: str, y: str) -> bool:
    """Whether the plot's axes are the study's two objectives: only there is the front a line."""
    return {o.name for o in analysis["objectives"]} == {x, y}


def _front_of(analysis: dict[str, Any]) -> str:
    return "of " + ", ".join(o.name for o in analysis["objectives"])


def _hypervolume_figure(analysis: dict[str, Any]) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    frame = analysis["frame"]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("over trials", "over budget spent"))
    numbers = list(frame["number"])
    fig.add_trace(
        go.Scatter(x=numbers, y=analysis["hypervolume"], mode="lines+markers", name="per trial"), 1, 1
    )
    hours = [s / 3600 for s in analysis["spent"]]
    fig.add_trace(go.Scatter(x=hours, y=analysis["hypervolume"], mode="lines", name="per device-hour"), 1, 2)
    step = integer_step(max(numbers, default=0) - min(numbers, default=0) + 1)
    fig.update_xaxes(title_text="trial number", tickmode="linear", tick0=0, dtick=step, row=1, col=1)
    fig.update_xaxes(title_text="device-hours spent", row=1, col=2)
    top = max([*analysis["hypervolume"], 0.0])
    fig.update_yaxes(
        title_text="hypervolume (normalized)", range=[0, min(1.0, top * 1.1) or 1.0], row=1, col=1
    )
    fig.update_yaxes(range=[0, min(1.0, top * 1.1) or 1.0], row=1, col=2)
    fig.update_layout(title=_hypervolume_title(analysis), height=420, showlegend=False, margin={"t": 110})
    return fig


def _hypervolume_title(analysis: dict[str, Any]) -> str:
    """What the normalized hypervolume is a fraction of, in the objectives' own units."""

    def point(values: dict[str, float]) -> str:
        return ", ".join(f"{k} {_short(k, v) if k in COST_AXES else f'{v:.4g}'}" for k, v in values.items())

    return (
        "Hypervolume, normalized: the fraction of the box from the fixed reference point "
        f"({point(analysis['reference'])})<br>to the ideal point ({point(analysis['ideal'])}) that the front "
        "dominates (0: nothing, 1: the ideal reached)"
    )


def _stage_columns(arch_json: str) -> dict[str, str]:
    """The architecture's stem, each stage and its head (one column each), read from its JSON."""
    arch = Arch.from_json(arch_json)
    out = {"stem": arch.stem.key}
    out.update({f"stage {i}": stage.key for i, stage in enumerate(arch.stages, start=1)})
    out["head"] = arch.head.key or arch.head.kind
    return out


def front_table(analysis: dict[str, Any]) -> pd.DataFrame:
    """The front's rows: number, baseline, objectives, params, MACs, and per-stage choices."""
    frame = analysis["frame"]
    names = [o.name for o in analysis["objectives"]]
    cols = ["number", "baseline", *names, *[c for c in COST_AXES if c in frame and c not in names]]
    rows = []
    for i in sorted(analysis["front"], key=lambda i: int(frame.loc[i, "number"])):
        row = {c: frame.loc[i, c] for c in cols}
        row.update(_stage_columns(frame.loc[i, "arch_json"]))
        rows.append(row)
    return pd.DataFrame(rows)


def _html_table(frame: pd.DataFrame, links: dict[str, str] | None = None) -> str:
    """``frame`` as an HTML table; a column named in ``links`` links each cell to ``#<prefix><value>``."""

    def cell(column: str, value: Any) -> str:
        if isinstance(value, float):
            text = "" if math.isnan(value) else f"{value:.4g}"
        else:
            text = html.escape(str(value if value is not None else ""))
        if links and column in links and text:
            return f"<a href='#{links[column]}{text}'>{text}</a>"
        return text

    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{cell(c, v)}</td>" for c, v in zip(frame.columns, row, strict=True)) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _importance_html(importance: ChoiceImportance) -> str:
    """The importances as a table: one row per choice (most important first), one column per objective
    (and the front), each cell a share with a bar."""
    if not importance.importances:
        return f"<p>No importances: {html.escape(importance.reason)}.</p>"
    targets = list(importance.importances)
    head = "".join(
        f"<th>{'reaching the front' if t == FRONT else html.escape(_label(t))}</th>" for t in targets
    )
    rows = []
    for choice in importance.choices():
        cells = []
        for t in targets:
            share = importance.importances[t].get(choice)
            if share is None:  # a choice this objective's trials never took
                cells.append("<td></td>")
                continue
            bar = f"background: linear-gradient(90deg, #c6dbef {100 * share:.1f}%, transparent 0)"
            cells.append(f"<td class='share' style='{bar}'>{100 * share:.0f}%</td>")
        rows.append(f"<tr><td>{html.escape(choice)}</td>{''.join(cells)}</tr>")
    return (
        f"<p>PED-ANOVA (Optuna) over {importance.trials} completed trials: how much each choice of the "
        "space decides whether a trial is among the best for an objective (its share of the total; "
        "conditional choices such as s1.k count where they exist).</p>"
        f"<table id='importance'><thead><tr><th>choice</th>{head}</tr></thead><tbody>{''.join(rows)}"
        "</tbody></table>"
    )


def _drawings_html(analysis: dict[str, Any]) -> str:
    """A drawing of each front architecture, in trial order, each with the anchor the front links to."""
    frame, names = analysis["frame"], [o.name for o in analysis["objectives"]]
    cards = []
    for i in sorted(analysis["front"], key=lambda i: int(frame.loc[i, "number"])):
        number = int(frame.loc[i, "number"])
        values = ", ".join(f"{_label(n)} {_short(n, v) if n in COST_AXES else f'{v:.4g}'}"
                           for n, v in zip(names, analysis["points"][i], strict=True))  # fmt: skip
        label = analysis["labels"][i]
        title = f"trial {number}" + (f" ({label})" if label else "")
        cards.append(
            f"<div class='arch-card' id='arch-{number}'><h3>{html.escape(title)}</h3>"
            f"<p>{html.escape(values)}<br><code>{html.escape(str(frame.loc[i, 'arch']))}</code></p>"
            f"{arch_svg(Arch.from_json(frame.loc[i, 'arch_json']), title=title)}</div>"
        )
    return "".join(cards)


# clicking a point of a plot shows its architecture's drawing (the front's members have one)
_CLICK_TO_DRAWING = """<script>
document.querySelectorAll('.plotly-graph-div').forEach(function (div) {
  div.on('plotly_click', function (event) {
    var data = event.points.length ? event.points[0].customdata : null;
    var card = data ? document.getElementById('arch-' + data[0]) : null;
    if (card) { location.hash = card.id; }
  });
});
</script>"""


def _baseline_table(analysis: dict[str, Any]) -> pd.DataFrame:
    names = [o.name for o in analysis["objectives"]]
    rows = []
    for b in analysis["baselines"]:
        best = b["dominated_by"][:5]
        rows.append(
            {
                "baseline": b["baseline"] + ("" if b["feasible"] else " (over the limits)"),
                "trial": b["number"],
                **{n: b["values"][n] for n in names},
                "dominated by": len(b["dominated_by"]),
                "dominating trials (margins)": "; ".join(
                    f"#{m['number']} " + ", ".join(f"{n} {m[n]}" for n in names) for m in best
                )
                + (" ..." if len(b["dominated_by"]) > 5 else ""),
            }
        )
    return pd.DataFrame(rows)


_CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 24px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
th { background: #f0f0f0; }
pre { background: #f7f7f7; padding: 12px; font-size: 12px; overflow-x: auto; }
td.share { min-width: 90px; }
.arch-card { margin: 8px 0 18px; }
.arch-card:target { outline: 2px solid #d62728; outline-offset: 4px; }
.arch-card h3 { margin: 0 0 2px; font-size: 15px; }
.arch-card p { margin: 0 0 4px; font-size: 13px; }
.summary td:first-child { font-weight: 600; }
"""


def write_report(run_dir: str | Path) -> Path:
    """Write ``report.html``, ``pareto.png`` and ``pareto.csv`` into ``run_dir``; returns the HTML's path."""
    run_dir = Path(run_dir)
    frame, manifest = load_run(run_dir)
    analysis = analyse(frame, manifest)
    _store_reference(run_dir, manifest, analysis["reference"])

    front = front_table(analysis)
    front_rows = analysis["frame"].loc[sorted(analysis["front"])]
    _atomic_write(run_dir / "pareto.csv", front_rows.to_csv(index=False))
    _write_png(analysis, run_dir / "pareto.png")

    figures = [_scatter_figure(analysis, x, y) for x, y in _axes(analysis)] + [_hypervolume_figure(analysis)]
    plots = [
        fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
        for i, fig in enumerate(figures)
    ]
    states = analysis["frame"]["state"].value_counts().to_dict()
    failed = analysis["frame"][analysis["frame"]["state"] == "FAIL"][["number", "arch", "fail_reason"]]
    budget = manifest.get("budget") or {}
    summary = pd.DataFrame(
        [
            ("study", manifest.get("study")),
            ("space", manifest.get("space")),
            ("evaluator", (manifest.get("evaluator") or {}).get("name")),
            ("objectives", ", ".join(str(o) for o in analysis["objectives"])),
            ("budget", budget.get("given")),
            ("budget spent", _budget_spent(budget)),
            ("trials", ", ".join(f"{k} {v}" for k, v in states.items())),
            *_limit_rows(manifest, analysis["frame"]),
            *analysis["rungs"],
            ("front size", len(analysis["front"])),
            (
                "final hypervolume (normalized to [0, 1]; see Hypervolume)",
                f"{analysis['hypervolume'][-1]:.4f}" if analysis["hypervolume"] else "-",
            ),
        ],
        columns=["", "value"],
    )
    title = f"NAS report: {manifest.get('study')}"
    why = why_no_front(analysis["frame"], analysis["top_rung"])
    empty = f"<p>The front is empty: {html.escape(why)}.</p>"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>",
        f"<div class='summary'>{_html_table(summary)}</div>",
        "<h2>Pareto front</h2>",
        *plots[:-1],
        "<h2>Hypervolume</h2>",
        plots[-1],
        "<h2>Architectures on the front</h2>",
        _html_table(front, links={"number": "arch-"}) if len(front) else empty,
        "<h2>Which choices matter</h2>",
        _importance_html(analysis["importance"]),
        "<h2>Drawings of the front's architectures</h2>",
        "<p>Stem, stages (block and mixer, depth, width, stride) and head; a box's height grows with its "
        "width. Click a trial number above, or a point of a plot, to come here.</p>",
        _drawings_html(analysis) or empty,
        "<h2>Baselines and the architectures that dominate them</h2>",
        _html_table(_baseline_table(analysis)) if analysis["baselines"] else "<p>No baseline was run.</p>",
        "<h2>Failed trials</h2>",
        _html_table(failed) if len(failed) else "<p>None.</p>",
        "<h2>Manifest</h2>",
        # redacted again: a manifest written before passwords were hidden may still hold one
        f"<pre>{html.escape(json.dumps(redact_all(read_manifest(run_dir)), indent=1))}</pre>",
        _CLICK_TO_DRAWING,
        "</body></html>",
    ]
    path = run_dir / "report.html"
    _atomic_write(path, "\n".join(parts))
    return path


def _limit_rows(manifest: dict[str, Any], frame: pd.DataFrame) -> list[tuple[str, str]]:
    """The summary's lines on limits: what they were, what was rejected, how feasibility changed."""
    from nas.search.constraints import Limits

    limits = Limits.from_dict(manifest.get("limits"))
    if not limits:
        return []
    over = rejections(frame)
    rejected = int((frame["state"] == "INFEASIBLE").sum())
    why = "; ".join(f"{n} over the {name} limit" for name, n in over.items())
    fractions = ", ".join(f"{f:.0%}" for f in feasible_fractions(frame))
    return [
        ("limits", limits.describe()),
        ("samples rejected", f"{rejected} ({why})" if rejected else "0"),
        ("feasible fraction of samples, by quarter of the search", fractions or "-"),
    ]


def _budget_spent(budget: dict[str, Any]) -> str:
    """The budget tracker's own summary line, rebuilt from the manifest's stored state."""
    from nas.search.budget import BudgetTracker

    try:
        return BudgetTracker.from_dict(budget["spent"]).summary()
    except (KeyError, TypeError, ValueError):
        return "-"


def _store_reference(run_dir: Path, manifest: dict[str, Any], reference: dict[str, float]) -> None:
    if (manifest.get("report") or {}).get("reference_point") == reference:
        return

    def update(stored: dict[str, Any]) -> None:
        report = stored.setdefault("report", {})
        report["reference_point"] = reference
        report["reference_rule"] = (
            "fixed at the first report: top1 0; other objectives 2 x the worst baseline the study ran "
            "(1.1 x the worst completed trial if it ran none)"
        )

    update_manifest(run_dir, update)


def _atomic_write(path: Path, text: str) -> None:
    with replaced(path) as tmp:
        tmp.write_text(text)


def _write_png(analysis: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame, points, front = analysis["frame"], analysis["points"], analysis["front"]
    axes_pairs = _axes(analysis)
    fig, axes = plt.subplots(1, len(axes_pairs), figsize=(5.5 * len(axes_pairs), 4.2), squeeze=False)
    base = frame["baseline"].fillna("").astype(str)
    done = [i for i, p in enumerate(points) if p is not None]
    to_label = []
    for ax, (x, y) in zip(axes.flat, axes_pairs, strict=True):
        xs = pd.to_numeric(frame[x], errors="coerce")
        ys = pd.to_numeric(frame[y], errors="coerce")
        faded = set(analysis["faded"])
        shown = [i for i in done if i not in faded]
        ax.scatter(xs[shown], ys[shown], s=14, color="#9aa5b1", label="trials")
        if faded:
            lower = sorted(faded)
            ax.scatter(xs[lower], ys[lower], s=10, color="#9aa5b1", alpha=0.3, label="lower rungs")
        rejected = _plottable(frame, frame.index[frame["state"] == "INFEASIBLE"], x, y)
        if rejected:
            ax.scatter(xs[rejected], ys[rejected], s=14, marker="x", color="#e3b5b5", label="rejected")
        marked = [i for i in shown if base[i]]
        within = [i for i in marked if analysis["feasible"][i]]
        over = [i for i in marked if not analysis["feasible"][i]]
        ax.scatter(
            xs[within], ys[within], marker="*", s=150, color="#1f77b4", edgecolor="k", label="baselines"
        )
        if over:
            ax.scatter(
                xs[over], ys[over], marker="*", s=150, facecolor="none", edgecolor="#1f77b4",
                label="baselines over the limits",
            )  # fmt: skip
        for name, draw in ((x, ax.axvline), (y, ax.axhline)):
            if name in analysis["limits"]:
                limit = analysis["limits"][name]
                draw(limit, color="#d62728", ls="--", lw=1, label=f"{name} limit {_short(name, limit)}")
        ordered = sorted(front, key=lambda i: xs[i])
        line = _objective_plane(analysis, x, y)
        label = "Pareto front" if line else f"Pareto front ({_front_of(analysis)})"
        ax.plot(xs[ordered], ys[ordered], "o-" if line else "o", color="#d62728", ms=4, label=label, zorder=3)
        for name, axis in ((x, ax.xaxis), (y, ax.yaxis)):
            if name in COST_AXES:
                _log_axis(ax, axis, name)
        ax.set_xlabel(_label(x))
        ax.set_ylabel(_label(y))
        ax.grid(alpha=0.3)
        named = _plottable(frame, marked, x, y)
        unnamed = _plottable(frame, [i for i in [*shown, *rejected] if i not in named], x, y)
        to_label.append((ax, [(xs[i], ys[i]) for i in named], [analysis["labels"][i] for i in named],
                         [(xs[i], ys[i]) for i in unnamed]))  # fmt: skip
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    for ax, marked_points, texts, other_points in to_label:  # placed once the axes have their final size
        _label_png(fig, ax, marked_points, texts, other_points)
    with replaced(path) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)


def _log_axis(ax: Any, axis: Any, name: str) -> None:
    """A matplotlib log axis with the plotly plots' round ticks (:func:`log_ticks`), labelled 25M, 4.2G."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    (ax.set_xscale if axis is ax.xaxis else ax.set_yscale)("log")
    low, high = ax.get_xlim() if axis is ax.xaxis else ax.get_ylim()
    if low > 0:
        axis.set_major_locator(FixedLocator(log_ticks(low, high)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: _short(name, value)))
    axis.set_minor_formatter(NullFormatter())


def _label_png(
    fig: Any, ax: Any, points: list[tuple[float, float]], texts: list[str], others: list[tuple[float, float]]
) -> None:
    """The baselines' labels of one matplotlib plot, placed as in the HTML (:func:`place_labels`)."""
    if not points:
        return
    top = fig.bbox.height  # matplotlib's display y grows up, place_labels' down

    def pixels(data: list[tuple[float, float]]) -> list[tuple[float, float]]:
        return [(float(px), top - float(py)) for px, py in ax.transData.transform(data)]

    box = ax.get_window_extent()
    area = Box(box.x0, top - box.y1, box.x1, top - box.y0)
    scale = 72 / fig.dpi  # pixels to points
    offsets = place_labels(pixels(points), texts, area, pixels(others) if others else [])
    for (x, y), text, (dx, dy) in zip(points, texts, offsets, strict=True):
        ax.annotate(
            text, (x, y), xytext=(dx * scale, -dy * scale), textcoords="offset points", fontsize=7,
            ha="center", va="center", arrowprops={"arrowstyle": "-", "color": "#7a8794", "lw": 0.6},
        )  # fmt: skip

"""The report's plots of an :class:`~results.analysis.Analysis`: plotly figures for ``report.html`` and
matplotlib's ``pareto.png``.

The scatter plots put the first maximized objective against MACs and against params (log axes with round
ticks, 25M / 4.2G) and any other objective, with the Pareto front highlighted, the space's baselines labelled
and each point's arch key on hover; each limit is drawn as a line on the plots whose axis it bounds, and a
baseline over a limit is marked "over the limit"; a ladder's lower rungs are drawn faded. The hypervolume is
drawn after each trial (integer ticks) and against the budget spent.

Baseline labels are placed in pixels on plots of a fixed size (:func:`results.plot_layout.place_labels`),
so that none overlaps another or a point, or leaves the plot; a network that is two of the space's baselines
(the layout study's C-C-T-T is CoAtNet-0, run once) is labelled once with both names, ``CoAtNet-0 = C-C-T-T``.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import pandas as pd

from nas.core.atomic import replaced
from nas.study.constraints import format_count
from results.analysis import COST_AXES, Analysis
from results.plot_layout import Box, integer_step, log_ticks, place_labels

__all__ = [
    "axes_pairs",
    "axis_label",
    "axis_layout",
    "fixed_size",
    "hypervolume_figure",
    "label_baselines",
    "point_text",
    "scatter_figure",
    "short_value",
    "shown_value",
    "trials_trace",
    "write_png",
]


def axes_pairs(analysis: Analysis) -> list[tuple[str, str]]:
    """(x, y) pairs to plot: y is the first maximized objective (else the first), x each cost column."""
    objectives = analysis.objectives
    frame = analysis.frame
    y = next((o.name for o in objectives if o.direction == "maximize"), objectives[0].name)
    xs = [c for c in COST_AXES if c in frame and c != y]
    xs += [o.name for o in objectives if o.name not in xs and o.name != y]
    return [(x, y) for x in xs]


def axis_label(name: str) -> str:
    return {"top1": "top-1 (%)", "macs": "MACs", "params": "params", "latency_ms": "latency (ms)"}.get(
        name, name
    )


_WIDTH, _HEIGHT = 1080, 540  # the scatter plots' size in pixels: fixed, so labels are placed in pixels

_MARGIN = {"l": 70, "r": 30, "t": 96, "b": 56}  # the title and the legend sit above the plot


def scatter_figure(analysis: Analysis, x: str, y: str) -> Any:
    import plotly.graph_objects as go

    frame, points, front = analysis.frame, analysis.points, set(analysis.front)
    done = [i for i, p in enumerate(points) if p is not None]
    base = frame["baseline"].fillna("").astype(str)
    labels = analysis.labels
    fig = go.Figure()

    def trace(rows: list[int], name: str, **style: Any) -> None:
        fig.add_trace(trials_trace(frame, rows, x, y, name, [labels[i] for i in rows], **style))

    faded = set(analysis.faded)
    others = [i for i in done if i not in front and not base[i] and i not in faded]
    trace(others, "trials", mode="markers", marker={"color": "#9aa5b1", "size": 7})
    if faded:
        lower = [i for i in done if i in faded]
        trace(lower, "lower rungs", mode="markers", marker={"color": "#9aa5b1", "size": 6, "opacity": 0.3})
    rejected = _plottable(frame, frame.index[frame["state"] == "INFEASIBLE"], x, y)
    if rejected:
        trace(rejected, "rejected (over a limit)", mode="markers", marker={"symbol": "x", "color": "#e3b5b5"})
    feasible = analysis.feasible
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
        if name in analysis.limits:
            limit = analysis.limits[name]
            line = {
                "line_dash": "dash",
                "line_color": "#d62728",
                "annotation_text": f"limit {short_value(name, limit)}",
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
        a: axis_layout(frame, shown, name, log=name in COST_AXES, also=_limit(analysis, name))
        for a, name in (("x", x), ("y", y))
    }
    label_baselines(fig, frame, marked, [i for i in shown if i not in marked], labels, axes, x, y)
    fixed_size(fig, f"{axis_label(y)} vs {axis_label(x)}", axes, axis_label(x), axis_label(y))
    return fig


def _limit(analysis: Analysis, name: str) -> tuple[float, ...]:
    return (analysis.limits[name],) if name in analysis.limits else ()


def fixed_size(fig: Any, title: str, axes: dict[str, dict[str, Any]], x_title: str, y_title: str) -> None:
    """Lay ``fig`` out at the scatter plots' fixed size in pixels (where :func:`label_baselines` placed its
    labels), its legend in one row above the plot."""
    fig.update_layout(
        title={"text": title, "y": 0.98, "yanchor": "top"},
        xaxis={"title": x_title, **axes["x"]},
        yaxis={"title": y_title, **axes["y"]},
        width=_WIDTH,
        height=_HEIGHT,
        margin={**_MARGIN, "autoexpand": False},
        legend={"orientation": "h", "x": 0, "y": 1.02, "xanchor": "left", "yanchor": "bottom"},
    )


def trials_trace(
    frame: pd.DataFrame, rows: list[int], x: str, y: str, name: str, tags: list[str], **style: Any
) -> Any:
    """``rows`` of a trials table as one plotly trace of ``y`` against ``x``; hovering a point shows its
    trial number, its tag (a baseline's name, a study's), its arch key and both values."""
    import plotly.graph_objects as go

    sub = frame.loc[rows]
    return go.Scatter(
        x=pd.to_numeric(sub[x], errors="coerce"),
        y=pd.to_numeric(sub[y], errors="coerce"),
        name=name,
        customdata=list(zip(sub["number"], sub["arch"], tags, strict=True)),
        hovertemplate="trial %{customdata[0]} %{customdata[2]}<br>%{customdata[1]}<br>"
        + f"{x} %{{x:.4g}}<br>{y} %{{y:.4g}}<extra></extra>",
        **style,
    )


def axis_layout(
    frame: pd.DataFrame, rows: list[int], name: str, *, log: bool, also: tuple[float, ...] = ()
) -> dict[str, Any]:
    """A plot axis over the values of ``rows`` of column ``name`` (and the values ``also``: a limit, error
    bars' ends), padded by 6 %; a log axis (costs) gets round ticks labelled like 25M, 4.2G."""
    values = [float(v) for v in pd.to_numeric(frame.loc[rows, name], errors="coerce") if math.isfinite(v)]
    values += [float(v) for v in also if math.isfinite(v)]
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
            "ticktext": [short_value(name, t) for t in ticks],
        }
    pad = 0.06 * (high - low) or max(abs(high) * 0.05, 1.0)
    return {"type": "linear", "range": [low - pad, high + pad]}


def label_baselines(
    fig: Any,
    frame: pd.DataFrame,
    marked: list[int],
    unmarked: list[int],
    labels: list[str],
    axes: dict[str, dict[str, Any]],
    x: str,
    y: str,
) -> None:
    """Write each baseline's label beside its star (``marked``: rows of ``frame``, ``labels`` indexed by
    row; ``unmarked``: the other points), placed in pixels (:func:`place_labels`) so that none overlaps
    another, covers a point or leaves the plot; a leader line joins it to its star."""
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


def short_value(name: str, value: float) -> str:
    return f"{value:.3g} ms" if name == "latency_ms" else format_count(value)


def _objective_plane(analysis: Analysis, x: str, y: str) -> bool:
    """Whether the plot's axes are the study's two objectives: only there is the front a line."""
    return {o.name for o in analysis.objectives} == {x, y}


def _front_of(analysis: Analysis) -> str:
    return "of " + ", ".join(o.name for o in analysis.objectives)


def hypervolume_figure(analysis: Analysis) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    frame = analysis.frame
    fig = make_subplots(rows=1, cols=2, subplot_titles=("over trials", "over budget spent"))
    numbers = list(frame["number"])
    fig.add_trace(go.Scatter(x=numbers, y=analysis.hypervolume, mode="lines+markers", name="per trial"), 1, 1)
    hours = [s / 3600 for s in analysis.spent]
    fig.add_trace(go.Scatter(x=hours, y=analysis.hypervolume, mode="lines", name="per device-hour"), 1, 2)
    step = integer_step(max(numbers, default=0) - min(numbers, default=0) + 1)
    fig.update_xaxes(title_text="trial number", tickmode="linear", tick0=0, dtick=step, row=1, col=1)
    fig.update_xaxes(title_text="device-hours spent", row=1, col=2)
    top = max([*analysis.hypervolume, 0.0])
    fig.update_yaxes(
        title_text="hypervolume (normalized)", range=[0, min(1.0, top * 1.1) or 1.0], row=1, col=1
    )
    fig.update_yaxes(range=[0, min(1.0, top * 1.1) or 1.0], row=1, col=2)
    fig.update_layout(title=_hypervolume_title(analysis), height=420, showlegend=False, margin={"t": 110})
    return fig


def shown_value(name: str, value: float) -> str:
    """A value as the report shows it: a cost like 25M or 4.2G, anything else to 4 figures."""
    return short_value(name, value) if name in COST_AXES else f"{value:.4g}"


def point_text(values: dict[str, float]) -> str:
    """A point of the objectives as the report writes it: ``top1 0, macs 8.4G``."""
    return ", ".join(f"{k} {shown_value(k, v)}" for k, v in values.items())


def _hypervolume_title(analysis: Analysis) -> str:
    """What the normalized hypervolume is a fraction of, in the objectives' own units."""
    return (
        "Hypervolume, normalized: the fraction of the box from the fixed reference point "
        f"({point_text(analysis.reference)})<br>to the ideal point ({point_text(analysis.ideal)}) that the "
        "front dominates (0: nothing, 1: the ideal reached)"
    )


def write_png(analysis: Analysis, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame, points, front = analysis.frame, analysis.points, analysis.front
    pairs = axes_pairs(analysis)
    fig, axes = plt.subplots(1, len(pairs), figsize=(5.5 * len(pairs), 4.2), squeeze=False)
    base = frame["baseline"].fillna("").astype(str)
    done = [i for i, p in enumerate(points) if p is not None]
    to_label = []
    for ax, (x, y) in zip(axes.flat, pairs, strict=True):
        xs = pd.to_numeric(frame[x], errors="coerce")
        ys = pd.to_numeric(frame[y], errors="coerce")
        faded = set(analysis.faded)
        shown = [i for i in done if i not in faded]
        ax.scatter(xs[shown], ys[shown], s=14, color="#9aa5b1", label="trials")
        if faded:
            lower = sorted(faded)
            ax.scatter(xs[lower], ys[lower], s=10, color="#9aa5b1", alpha=0.3, label="lower rungs")
        rejected = _plottable(frame, frame.index[frame["state"] == "INFEASIBLE"], x, y)
        if rejected:
            ax.scatter(xs[rejected], ys[rejected], s=14, marker="x", color="#e3b5b5", label="rejected")
        marked = [i for i in shown if base[i]]
        within = [i for i in marked if analysis.feasible[i]]
        over = [i for i in marked if not analysis.feasible[i]]
        ax.scatter(
            xs[within], ys[within], marker="*", s=150, color="#1f77b4", edgecolor="k", label="baselines"
        )
        if over:
            ax.scatter(
                xs[over], ys[over], marker="*", s=150, facecolor="none", edgecolor="#1f77b4",
                label="baselines over the limits",
            )  # fmt: skip
        for name, draw in ((x, ax.axvline), (y, ax.axhline)):
            if name in analysis.limits:
                limit = analysis.limits[name]
                draw(limit, color="#d62728", ls="--", lw=1, label=f"{name} limit {short_value(name, limit)}")
        ordered = sorted(front, key=lambda i: xs[i])
        line = _objective_plane(analysis, x, y)
        label = "Pareto front" if line else f"Pareto front ({_front_of(analysis)})"
        ax.plot(xs[ordered], ys[ordered], "o-" if line else "o", color="#d62728", ms=4, label=label, zorder=3)
        plotted = _plottable(frame, [*shown, *faded, *rejected], x, y)
        if not plotted:  # every trial failed (the report lists why): matplotlib cannot log-scale no value
            ax.text(0.5, 0.5, "no trial to plot", transform=ax.transAxes, ha="center", color="#7a8794")
            ax.set_xticks([])
            ax.set_yticks([])
        for name, axis in ((x, ax.xaxis), (y, ax.yaxis)):
            if name in COST_AXES and plotted:
                _log_axis(ax, axis, name)
        ax.set_xlabel(axis_label(x))
        ax.set_ylabel(axis_label(y))
        ax.grid(alpha=0.3)
        named = _plottable(frame, marked, x, y)
        unnamed = _plottable(frame, [i for i in [*shown, *rejected] if i not in named], x, y)
        to_label.append((ax, [(xs[i], ys[i]) for i in named], [analysis.labels[i] for i in named],
                         [(xs[i], ys[i]) for i in unnamed]))  # fmt: skip
    if done:
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
    axis.set_major_formatter(FuncFormatter(lambda value, _: short_value(name, value)))
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

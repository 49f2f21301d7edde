"""The page of a :class:`~results.comparison.Comparison`: ``compare.html`` (offline, interactive) and
``compare.csv`` (its table).

The fronts of all studies on one plot per pair of axes (each study in its own colour, its other results
faint), the hypervolume of each against the device time it spent (a dashed line at the spend of the study that
spent least, where the table's "hypervolume at" column reads them) and against its trials.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import pandas as pd

from nas.study.budget import human_seconds
from results.analysis import COST_AXES
from results.comparison import Comparison, group_value
from results.page import CSS, check_outputs, html_table, write_text
from results.plots import axes_pairs, axis_label, point_text, short_value, trials_trace

__all__ = ["groups_shown", "write_comparison"]

_WIDTH, _HEIGHT = 1080, 540


def write_comparison(comparison: Comparison, out: str | Path) -> list[Path]:
    """Write the page to ``out`` (an .html file), its table beside it (.csv) and, where the studies are
    grouped, the groups' table (.groups.csv); the paths written."""
    out = Path(out)
    if out.suffix.lower() != ".html":
        raise ValueError(f"out: {out} must end in .html (the table is written beside it, as .csv)")
    if not out.parent.is_dir():
        raise ValueError(f"out: {out.parent} is not a folder")
    check_outputs(out, out.with_suffix(".csv"), out.with_suffix(".groups.csv"))
    table = comparison.table()
    groups = comparison.group_table() if comparison.by else None
    figures = [_fronts_figure(comparison, x, y) for x, y in axes_pairs(comparison.studies[0].analysis)]
    figures += [_hypervolume_figure(comparison, by_time=True), _hypervolume_figure(comparison, by_time=False)]
    plots = [
        fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
        for i, fig in enumerate(figures)
    ]
    labels = ", ".join(s.label for s in comparison.studies)
    title = f"NAS comparison: {labels}"
    differ = "".join(f"<li>{html.escape(d)}</li>" for d in comparison.differences)
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>",
        f"<h2>By {html.escape(comparison.by)}</h2>{html_table(groups_shown(groups))}"
        if groups is not None
        else "",
        "<h2>Studies</h2>" if groups is not None else "",
        html_table(_shown(table, comparison)),
        (
            "<p><b>The studies measure their objectives differently</b>, so their values compare only as "
            f"measured:</p><ul>{differ}</ul>"
            if differ
            else ""
        ),
        f"<p>{html.escape(_box_text(comparison))}</p>",
        "<h2>Pareto fronts</h2>",
        *plots[:-2],
        "<h2>Hypervolume</h2>",
        *plots[-2:],
        "</body></html>",
    ]
    written = [out, out.with_suffix(".csv")]
    write_text(out, "\n".join(parts))
    write_text(written[1], table.to_csv(index=False))
    if groups is not None:
        written.append(out.with_suffix(".groups.csv"))
        write_text(written[2], groups.to_csv(index=False))
    return written


def _shown(table: pd.DataFrame, comparison: Comparison) -> pd.DataFrame:
    """The table as the page shows it: each best value as the report writes it (4.2G, 25M, 71.3)."""
    shown = table.copy()
    for o in comparison.objectives:
        column = f"best {o.name}"
        shown[column] = ["-" if math.isnan(v) else short_value(o.name, v) for v in table[column]]
    return shown


def groups_shown(groups: pd.DataFrame) -> pd.DataFrame:
    """The groups' table as the page and the command show it: each mean with its spread, ``0.2650 ±
    0.0120`` (the mean alone for a group of one study)."""
    shown = groups.drop(columns=[c for c in groups.columns if c.endswith(" std")])
    for column in [c for c in groups.columns if c.endswith(" mean") and c != "device time mean"]:
        spread = groups[column.removesuffix(" mean") + " std"]
        pairs = zip(groups[column], spread, strict=True)
        shown[column] = [f"{m:.4f}" + ("" if math.isnan(s) else f" ± {s:.4f}") for m, s in pairs]
        shown = shown.rename(columns={column: column.removesuffix(" mean") + " (mean ± std)"})
    return shown


def _box_text(comparison: Comparison) -> str:
    return (
        "Every hypervolume here is measured on one box, so that they compare: from the reference point "
        f"({point_text(comparison.reference)}, the worst of the studies' own) to the ideal point "
        f"({point_text(comparison.ideal)}), and normalized to [0, 1] by its volume. It can differ from a "
        "study's own report, whose box is its own. Device time counts a study's set-up (a one-shot "
        "supernet's training) first, and a lost trial's time where it ran. At equal device time "
        f"({human_seconds(comparison.equal_spend)}, what "
        "the study that spent least spent), the table gives each study's hypervolume then."
    )


def _colour(comparison: Comparison, i: int) -> str:
    """Study ``i``'s colour: its own, or its group's where the studies are grouped."""
    import plotly.colors

    palette = plotly.colors.qualitative.Dark24
    if comparison.by:
        study = comparison.studies[i]
        i = next(n for n, members in enumerate(comparison.groups().values()) if study in members)
    return palette[i % len(palette)]


def _name(comparison: Comparison, i: int) -> str:
    """Study ``i`` in a legend: its label, and its group's value where the studies are grouped."""
    study = comparison.studies[i]
    if not comparison.by:
        return study.label
    return f"{study.label} ({comparison.by} {group_value(study.manifest, comparison.by)})"


def _fronts_figure(comparison: Comparison, x: str, y: str) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, study in enumerate(comparison.studies):
        analysis, colour = study.analysis, _colour(comparison, i)
        frame = analysis.frame
        counted = [r for r, p in enumerate(analysis.points) if p is not None and r not in analysis.front]
        front = sorted(analysis.front, key=lambda r: float(pd.to_numeric(frame.loc[r, x], errors="coerce")))
        for rows, name, style in (
            (counted, f"{_name(comparison, i)}: other results", {"mode": "markers", "opacity": 0.25,
                                                         "marker": {"color": colour, "size": 6}}),
            (front, _name(comparison, i), {"mode": "lines+markers", "marker": {"color": colour, "size": 8},
                                  "line": {"color": colour, "shape": "hv"}}),
        ):  # fmt: skip
            tags = [f"of {html.escape(study.label)}"] * len(rows)
            fig.add_trace(trials_trace(frame, rows, x, y, name, tags, legendgroup=study.label, **style))
    fig.update_layout(
        title=f"{axis_label(y)} vs {axis_label(x)}: each study's front",
        xaxis={"title": axis_label(x), "type": "log" if x in COST_AXES else "linear", "exponentformat": "SI"},
        yaxis={"title": axis_label(y), "type": "log" if y in COST_AXES else "linear", "exponentformat": "SI"},
        width=_WIDTH,
        height=_HEIGHT,
    )
    return fig


def _hypervolume_figure(comparison: Comparison, *, by_time: bool) -> Any:
    import plotly.graph_objects as go

    longest = max(s.total_spent for s in comparison.studies)
    unit, size = _time_unit(longest)
    fig = go.Figure()
    for i, study in enumerate(comparison.studies):
        xs = [s / size for s in study.spent] if by_time else [n + 1 for n in range(len(study.hypervolume))]
        if by_time:  # the study starts once its overhead is spent, at hypervolume 0
            xs, ys = [study.overhead / size, *xs], [0.0, *study.hypervolume]
        else:
            ys = study.hypervolume
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=_name(comparison, i),
                mode="lines",
                line={"color": _colour(comparison, i), "shape": "hv"},
            )
        )
    if by_time:
        fig.add_vline(
            x=comparison.equal_spend / size,
            line_dash="dash",
            line_color="#555",
            annotation_text=f"equal device time ({human_seconds(comparison.equal_spend)})",
        )
    fig.update_layout(
        title="hypervolume (normalized, one box) vs " + (f"device time ({unit})" if by_time else "trials"),
        xaxis={"title": f"device time ({unit})" if by_time else "trials"},
        yaxis={"title": "hypervolume", "rangemode": "tozero"},
        width=_WIDTH,
        height=450,
    )
    return fig


def _time_unit(seconds: float) -> tuple[str, float]:
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= 2 * size:
            return unit, size
    return "s", 1.0

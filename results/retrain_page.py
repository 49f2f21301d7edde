"""The page of a :class:`~results.retrain.Retraining`: ``<out>/retrain.html`` (offline, interactive) and its
tables, ``members.csv`` (one row per network), ``comparisons.csv`` (one per baseline) and ``runs.csv`` (one
per finished training).

The plot puts each network's retrained top-1 (mean over its seeds, +-1 sample std) against the study's first
cost objective (log axis), the baselines as labelled stars, and the top-1 the search measured for it as a
faint point joined to it by a dotted line: how far the search's estimate sat from the retrained figure.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import pandas as pd

from nas.study.budget import human_seconds
from results.analysis import COST_AXES
from results.page import CSS, html_table, write_text
from results.plots import axis_label, axis_layout, fixed_size, label_baselines
from results.retrain import Retraining

__all__ = ["comparisons_table", "write_retraining"]


def write_retraining(retraining: Retraining) -> list[Path]:
    """Write the page and its three tables into the plan's folder; the paths written, the page first."""
    out = retraining.plan.out
    members = retraining.members
    comparisons = comparisons_table(retraining)
    runs = retraining.runs_table()
    paths = [out / "retrain.html", out / "members.csv", out / "comparisons.csv", out / "runs.csv"]
    write_text(paths[0], _page(retraining, comparisons))
    write_text(paths[1], members.to_csv(index=False))
    write_text(paths[2], comparisons.to_csv(index=False))
    write_text(paths[3], runs.to_csv(index=False))
    return paths


def comparisons_table(retraining: Retraining) -> pd.DataFrame:
    """One row per baseline: the found network that beats it at no more cost, both sides' retrained top-1,
    the paired difference with its interval and p-value, and the verdict."""
    rows = []
    for c in retraining.comparisons:
        row: dict[str, Any] = {"baseline": c.baseline, "found": c.found or ""}
        s = c.stats or {}
        diff = s.get("difference", {})
        ci = diff.get("ci") or [math.nan, math.nan]
        row.update(
            found_top1=_get(s, "found", "mean"),
            found_std=_get(s, "found", "std"),
            baseline_top1=_get(s, "baseline", "mean"),
            baseline_std=_get(s, "baseline", "std"),
            seeds=s.get("n", 0),
            difference=_num(diff.get("mean")),
            ci_low=ci[0],
            ci_high=ci[1],
            p=_num(diff.get("p")),
            verdict=s.get("verdict")
            or f"no found network at no more cost has finished training ({', '.join(c.costs) or 'cost'})",
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=_COMPARISON_COLUMNS)


_COMPARISON_COLUMNS = [
    "baseline",
    "found",
    "found_top1",
    "found_std",
    "baseline_top1",
    "baseline_std",
    "seeds",
    "difference",
    "ci_low",
    "ci_high",
    "p",
    "verdict",
]


def _get(stats: dict[str, Any], side: str, key: str) -> float:
    return _num((stats.get(side) or {}).get(key))


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else math.nan


def _page(retraining: Retraining, comparisons: pd.DataFrame) -> str:
    plan = retraining.plan
    title = f"Retrained: {plan.study}"
    figure = _figure(retraining)
    plot = (
        figure.to_html(full_html=False, include_plotlyjs=True, config={"displaylogo": False})
        if figure is not None
        else "<p>No network has finished a training yet.</p>"
    )
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>",
        f"<p>{html.escape(schedule_text(retraining))}</p>",
        "<h2>Found networks against the baselines, at no more cost</h2>",
        html_table(comparisons) if len(comparisons) else "<p>The retraining holds no baseline.</p>",
        f"<p>{html.escape(agreement_text(retraining))}</p>",
        "<h2>Retrained top-1 against cost</h2>",
        plot,
        "<h2>Networks</h2>",
        html_table(retraining.members),
        "</body></html>",
    ]
    return "\n".join(parts)


def schedule_text(retraining: Retraining) -> str:
    """The schedule in one sentence, and how many trainings have finished."""
    plan = retraining.plan
    c = plan.config
    images = f"{c.train_samples:,} images" if c.train_samples else "the whole training split"
    total = len(plan.members) * len(plan.seeds)
    seconds = sum(r.train_seconds for r in retraining.runs)
    networks = f"{len(plan.members)} network" + ("s" if len(plan.members) != 1 else "")
    epochs = f"{c.epochs} epoch" + ("s" if c.epochs != 1 else "")
    return (
        f"{networks}, each trained {epochs} of {images} of {plan.dataset} under the {plan.profile.name} "
        f"profile ({plan.profile.img_size} px), batch {c.batch_size}, "
        f"lr {c.lr:g}, once per seed {', '.join(map(str, plan.seeds))}; {len(retraining.runs)} of {total} "
        f"trainings finished ({human_seconds(seconds)} of training). A comparison takes, for each baseline, "
        "the found network with the best retrained mean among those no costlier on "
        f"{', '.join(retraining.costs) or 'any cost'}, and tests their difference over the seeds both "
        "finished (two-sided paired t-test, 95% interval)."
    )


def agreement_text(retraining: Retraining) -> str:
    a = retraining.agreement
    if a is None:
        return (
            "Rank agreement between the search's top-1 and the retrained top-1: not measured (it needs 3 "
            "networks with both)."
        )
    return (
        f"Rank agreement between the search's top-1 and the retrained top-1 over {a['n']} networks: "
        f"Spearman {a['spearman']:.3f}, Kendall {a['kendall']:.3f}."
    )


def _figure(retraining: Retraining) -> Any:
    import plotly.graph_objects as go

    members = retraining.members
    done = members[members["seeds"] > 0].reset_index(drop=True)
    x_name = next((c for c in retraining.costs if f"searched_{c}" in members), None)
    if not len(done) or x_name is None:
        return None
    x, y = f"searched_{x_name}", "top1_mean"
    std = done["top1_std"].fillna(0.0)
    searched = done["searched_top1"] if "searched_top1" in done else pd.Series(math.nan, index=done.index)
    fig = go.Figure()
    with_search = [i for i in done.index if math.isfinite(searched[i])]
    if with_search:  # each retrained point joined to what the search measured of it
        xs: list[Any] = []
        ys: list[Any] = []
        for i in with_search:
            xs += [done.loc[i, x], done.loc[i, x], None]
            ys += [searched[i], done.loc[i, y], None]
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines",
                line={"dash": "dot", "width": 1, "color": "#9aa5b1"},
                showlegend=False,
                hoverinfo="skip",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=done.loc[with_search, x],
                y=searched[with_search],
                mode="markers",
                name="top-1 as the search measured it",
                marker={"size": 7, "color": "#9aa5b1", "opacity": 0.6},
                text=list(done.loc[with_search, "label"]),
                hovertemplate="%{text}: searched top-1 %{y:.2f}<extra></extra>",
            )
        )
    for is_baseline, name, marker in (
        (False, "found", {"symbol": "circle", "size": 9, "color": "#d62728"}),
        (True, "baselines", {"symbol": "star", "size": 15, "color": "#1f77b4", "line": {"width": 1}}),
    ):
        rows = [i for i in done.index if bool(done.loc[i, "baseline"]) == is_baseline]
        if not rows:
            continue
        part = done.loc[rows]
        fig.add_trace(
            go.Scatter(
                x=part[x],
                y=part[y],
                error_y={"type": "data", "array": std[rows], "visible": True, "thickness": 1},
                mode="markers",
                name=f"{name} (retrained: mean +- std over seeds)",
                marker=marker,
                customdata=list(zip(part["label"], part["arch"], part["seeds"], strict=True)),
                hovertemplate="%{customdata[0]}<br>%{customdata[1]}<br>"
                + f"{x_name} %{{x:.4g}}<br>top-1 %{{y:.2f}} over %{{customdata[2]}} seeds<extra></extra>",
            )
        )
    ends = (*(done[y] + std), *(done[y] - std), *searched[with_search])
    axes = {
        "x": axis_layout(done, list(done.index), x, log=x_name in COST_AXES),
        "y": axis_layout(done, list(done.index), y, log=False, also=tuple(ends)),
    }
    marked = [i for i in done.index if bool(done.loc[i, "baseline"])]
    unmarked = [i for i in done.index if i not in marked]
    label_baselines(fig, done, marked, unmarked, list(done["label"]), axes, x, y)
    fixed_size(
        fig,
        f"retrained top-1 vs {axis_label(x_name)}",
        axes,
        f"{axis_label(x_name)} (as the search counted them)",
        "top-1 (%)",
    )
    return fig

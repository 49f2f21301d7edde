"""The page of a :class:`~results.retrain.Retraining`: ``<out>/retrain.html`` (offline, interactive) and its
tables, ``members.csv`` (one row per network, with its costs at both scales), ``comparisons.csv`` (one per
found network and reference) and ``runs.csv`` (one per finished training).

The page states the protocol first (the split scored, the schedule, the comparisons' rule, the controls, the
correction and n, the plateau check), then the comparisons. The plot puts each network's retrained top-1
(mean over its seeds, +-1 sample std) against its MACs at the search's scale (log axis), the baselines as
labelled stars, the random controls as grey crosses, and the top-1 the search measured for it as a faint
point joined to it by a dotted line: how far the search's estimate sat from the retrained figure.
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

__all__ = [
    "agreement_text",
    "comparisons_table",
    "plateau_text",
    "protocol_lines",
    "schedule_text",
    "write_retraining",
]


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
    """One row per comparison: the found network and its reference (a baseline or a random control), whether
    "at no more cost" holds at both scales, both sides' retrained top-1, the paired difference with its t and
    bootstrap intervals, the raw and the Holm-corrected p-value, and the verdict (by the corrected one)."""
    rows = []
    for c in retraining.comparisons:
        s = c.stats or {}
        diff = s.get("difference", {})
        ci = diff.get("ci") or [math.nan, math.nan]
        boot = diff.get("bootstrap") or [math.nan, math.nan]
        rows.append(
            {
                "found": c.found,
                "reference": c.reference,
                "kind": c.kind,
                "equal_cost": c.equal_cost,
                "found_top1": _get(s, "found", "mean"),
                "found_std": _get(s, "found", "std"),
                "reference_top1": _get(s, c.kind, "mean"),
                "reference_std": _get(s, c.kind, "std"),
                "seeds": s.get("n", 0),
                "difference": _num(diff.get("mean")),
                "ci_low": ci[0],
                "ci_high": ci[1],
                "bootstrap_low": boot[0],
                "bootstrap_high": boot[1],
                "p": _num(diff.get("p")),
                "p_holm": _num(c.p_holm),
                "verdict": c.verdict,
            }
        )
    return pd.DataFrame(rows, columns=_COMPARISON_COLUMNS)


_COMPARISON_COLUMNS = [
    "found",
    "reference",
    "kind",
    "equal_cost",
    "found_top1",
    "found_std",
    "reference_top1",
    "reference_std",
    "seeds",
    "difference",
    "ci_low",
    "ci_high",
    "bootstrap_low",
    "bootstrap_high",
    "p",
    "p_holm",
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
        "<h2>Protocol</h2>",
        "".join(f"<p>{html.escape(line)}</p>" for line in protocol_lines(retraining)),
        "<h2>Found networks against every eligible baseline and their random controls</h2>",
        html_table(comparisons) if len(comparisons) else "<p>The retraining holds no comparison.</p>",
        f"<p>{html.escape(plateau_text(retraining))}</p>",
        f"<p>{html.escape(agreement_text(retraining))}</p>",
        "<h2>Retrained top-1 against cost</h2>",
        plot,
        "<h2>Networks</h2>",
        html_table(retraining.members),
        "</body></html>",
    ]
    return "\n".join(parts)


def schedule_text(retraining: Retraining) -> str:
    """The schedule and the split scored in one sentence, and how many trainings have finished."""
    plan = retraining.plan
    c = plan.config
    images = f"{c.train_samples:,} images" if c.train_samples else "the whole training split"
    total = len(plan.trainings())
    seconds = sum(r.train_seconds for r in retraining.runs)
    networks = f"{len(plan.members)} network" + ("s" if len(plan.members) != 1 else "")
    epochs = f"{c.epochs} epoch" + ("s" if c.epochs != 1 else "")
    scored = (
        "scored once at the end on the official test split, which no search opens"
        if plan.score_on == "test"
        else "scored on the held-out part of the training images"
    )
    return (
        f"{networks}, each trained {epochs} of {images} of {plan.dataset} (less the held-out split) under "
        f"the {plan.profile.name} profile ({plan.profile.img_size} px), batch {c.batch_size}, lr {c.lr:g}, "
        f"once per seed {', '.join(map(str, plan.seeds))}, {scored}; {len(retraining.runs)} of {total} "
        f"trainings finished ({human_seconds(seconds)} of training)."
    )


def protocol_lines(retraining: Retraining) -> list[str]:
    """The protocol, a sentence per point: the schedule and split, what is compared at what cost, the
    controls, the statistics (the correction and n), what was left out."""
    plan = retraining.plan
    lines = [schedule_text(retraining)]
    if plan.seen:
        lines.append(plan.seen)
    lines.append(
        "Each found network is compared with every baseline of the space (and every network enqueued in the "
        f"study) whose MACs and params at the search's scale ({plan.macs_img_size} px, 3 channels, 1000 "
        "classes) it does not exceed; the equal_cost column says whether that also holds at the scale "
        f"trained ({plan.profile.img_size} px, the {plan.profile.name} profile's network), or where it fails."
    )
    if plan.max_cost_ratio is not None:
        lines.append(
            f"Only baselines of at most {plan.max_cost_ratio:g} times a found network's MACs at the search's "
            "scale are compared with it (--max-cost-ratio)."
        )
    if plan.not_compared:
        why = "cheaper than every found network" + (
            f", or over {plan.max_cost_ratio:g} times its MACs" if plan.max_cost_ratio is not None else ""
        )
        lines.append(f"Not compared ({why}): {', '.join(plan.not_compared)}.")
    if plan.controls:
        lines.append(
            f"Random controls: for each found network, {plan.controls} architectures drawn by the space's "
            f"random sampler (seed {plan.control_seed} and the found network's key) that cost no more than "
            "it at both scales."
        )
        lines += [f"Fewer controls than asked: {why}." for why in plan.control_shortfall]
    else:
        lines.append("Random controls: none (--controls 0).")
    n = min((c.stats or {}).get("n", 0) for c in retraining.comparisons) if retraining.comparisons else 0
    most = max((c.stats or {}).get("n", 0) for c in retraining.comparisons) if retraining.comparisons else 0
    seeds = f"{n}" if n == most else f"{n} to {most}"
    lines.append(
        "Statistics: per comparison the paired difference found - reference over the seeds both finished "
        f"(n = {seeds}), a two-sided paired t-test with its 95% interval, the percentile bootstrap 95% "
        f"interval of the mean difference, and Holm's correction of the p-values of all {retraining.tested} "
        "tested comparisons of this retraining together (family-wise error 0.05); the verdict is by the "
        "corrected p-value."
    )
    return lines


def plateau_text(retraining: Retraining) -> str:
    """The plateau check in a sentence."""
    check = retraining.plateau
    if not check["networks"]:
        return "Plateau check: off (--no-plateau)."
    said = []
    for n in check["networks"]:
        if n["change"] is None:
            said.append(f"{n['label']}: not finished")
        else:
            said.append(
                f"{n['label']} {n['top1']:.2f} -> {n['doubled_top1']:.2f} ({n['change']:+.2f} points)"
            )
    first = check["networks"][0]
    head = (
        f"Plateau check (seed {first['seed']}, {first['epochs']} -> {first['doubled_epochs']} epochs, "
        f"reached where every change is below {check['threshold']:g} points): {'; '.join(said)}"
    )
    verdict = {
        None: "not decided yet",
        True: "reached",
        False: "NOT reached: longer training changes the figures",
    }
    return f"{head}. {verdict[check['reached']]}."


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
    x_name = "macs"
    if not len(done) or x_name not in done:
        return None
    x, y = x_name, "top1_mean"
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
    for role, name, marker in (
        ("found", "found", {"symbol": "circle", "size": 9, "color": "#d62728"}),
        ("control", "random controls", {"symbol": "x", "size": 8, "color": "#7f7f7f"}),
        ("baseline", "baselines", {"symbol": "star", "size": 15, "color": "#1f77b4", "line": {"width": 1}}),
    ):
        rows = [i for i in done.index if done.loc[i, "role"] == role]
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
    marked = [i for i in done.index if done.loc[i, "role"] == "baseline"]
    unmarked = [i for i in done.index if i not in marked]
    label_baselines(fig, done, marked, unmarked, list(done["label"]), axes, x, y)
    fixed_size(
        fig,
        f"retrained top-1 vs {axis_label(x_name)}",
        axes,
        f"{axis_label(x_name)} at the search's scale ({retraining.plan.macs_img_size} px)",
        "top-1 (%)",
    )
    return fig

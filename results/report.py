"""The report of a study: ``report.html`` (self-contained, opens offline), ``pareto.png`` and ``pareto.csv``.

``write_report(run_dir)`` reads what a search left in ``runs/<study>/`` (:func:`results.analysis.load_run`),
analyses it once (:func:`results.analysis.analyse`) and writes, beside it:

- ``report.html``: a summary (budget spent, trials, limits and rejections, trials per rung and the rank
  agreement between rungs on a ladder, front size, final hypervolume); the interactive plotly figures of
  :mod:`results.plots`, with plotly.js embedded (no network needed); the front as a table with each stage's
  choice; which choices matter for each objective (:mod:`results.importance`); a drawing of each front
  architecture (:mod:`results.arch_drawing`), reached from the front table's trial numbers and by clicking a
  point of a plot; for each baseline, the found architectures that dominate it and by how much; the failed
  trials with their reasons; for each retraining ``nas retrain`` wrote (``retrain/`` beside it, its
  default folder, and any other ``--out``, which it records in ``retrainings.json``), its schedule and
  split, each found network against every baseline it does not exceed in cost and its random controls,
  retrained (Holm-corrected), and a link to the retraining's page (:mod:`results.retrain`); the
  manifest. An empty front says why (:func:`nas.study.trials_table.why_no_front`).
- ``pareto.png`` (matplotlib, :func:`results.plots.write_png`) and ``pareto.csv`` (the front's rows of the
  trials table).

Under limits the summary says how many samples were rejected, over which limit, and how the feasible fraction
of samples changed over the search (a sampler told of the limits draws fewer infeasible samples as it
learns). The hypervolume's reference point (:func:`results.analysis.reference_point`) is stored in the
manifest at the first report, so that every later one compares.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from nas.core import userfiles
from nas.core.arch import Arch
from nas.study.budget import BudgetTracker
from nas.study.constraints import Limits
from nas.study.credentials import redact_all
from nas.study.manifest import read_manifest, update_manifest
from nas.study.trials_table import why_no_front
from results.analysis import (
    Analysis,
    analyse,
    feasible_fractions,
    front_table,
    load_run,
    rejections,
    space_searched,
)
from results.arch_drawing import arch_svg
from results.importance import FRONT, ChoiceImportance
from results.page import CSS, check_outputs, html_table, write_text
from results.plots import axes_pairs, axis_label, hypervolume_figure, scatter_figure, shown_value, write_png
from results.retrain import DEFAULT_FOLDER, SCHEDULE_FILE, retraining_folders

__all__ = ["write_report"]


def write_report(run_dir: str | Path) -> Path:
    """Write ``report.html``, ``pareto.png`` and ``pareto.csv`` into ``run_dir``; returns the HTML's path."""
    run_dir = Path(run_dir)
    frame, manifest = load_run(run_dir)
    check_outputs(*(run_dir / name for name in ("pareto.csv", "pareto.png", "report.html")))
    analysis = analyse(frame, manifest)
    if (analysis.frame["state"] == "COMPLETE").any():  # before, the point is a placeholder (no values)
        _store_reference(run_dir, manifest, analysis.reference)

    front = front_table(analysis)
    front_rows = analysis.frame.loc[sorted(analysis.front)]
    write_text(run_dir / "pareto.csv", front_rows.to_csv(index=False))
    write_png(analysis, run_dir / "pareto.png")

    figures = [scatter_figure(analysis, x, y) for x, y in axes_pairs(analysis)] + [
        hypervolume_figure(analysis)
    ]
    plots = [
        fig.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False})
        for i, fig in enumerate(figures)
    ]
    states = analysis.frame["state"].value_counts().to_dict()
    failed = analysis.frame[analysis.frame["state"] == "FAIL"][["number", "arch", "fail_reason"]]
    budget = manifest.get("budget") or {}
    summary = pd.DataFrame(
        [
            ("study", manifest.get("study")),
            ("space", space_searched(manifest)),
            ("evaluator", (manifest.get("evaluator") or {}).get("name")),
            ("objectives", ", ".join(str(o) for o in analysis.objectives)),
            ("budget", budget.get("given")),
            ("budget spent", _budget_spent(budget)),
            ("trials", ", ".join(f"{k} {v}" for k, v in states.items())),
            *_limit_rows(manifest, analysis.frame),
            *analysis.rungs,
            ("front size", len(analysis.front)),
            (
                "final hypervolume (normalized to [0, 1]; see Hypervolume)",
                f"{analysis.hypervolume[-1]:.4f}" if analysis.hypervolume else "-",
            ),
        ],
        columns=["", "value"],
    )
    title = f"NAS report: {manifest.get('study')}"
    why = why_no_front(analysis.frame, analysis.top_rung)
    empty = f"<p>The front is empty: {html.escape(why)}.</p>"
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>",
        f"<div class='summary'>{html_table(summary)}</div>",
        "<h2>Pareto front</h2>",
        *plots[:-1],
        "<h2>Hypervolume</h2>",
        plots[-1],
        "<h2>Architectures on the front</h2>",
        html_table(front, links={"number": "arch-"}) if len(front) else empty,
        "<h2>Which choices matter</h2>",
        _importance_html(analysis.importance),
        "<h2>Drawings of the front's architectures</h2>",
        "<p>Stem, stages (block and mixer, depth, width, stride) and head; a box's height grows with its "
        "width. Click a trial number above, or a point of a plot, to come here.</p>",
        _drawings_html(analysis) or empty,
        "<h2>Baselines and the architectures that dominate them</h2>",
        html_table(_baseline_table(analysis)) if analysis.baselines else "<p>No baseline was run.</p>",
        "<h2>Failed trials</h2>",
        html_table(failed) if len(failed) else "<p>None.</p>",
        _retrained_html(run_dir),
        "<h2>Manifest</h2>",
        # redacted again: a manifest written before passwords were hidden may still hold one
        f"<pre>{html.escape(json.dumps(redact_all(read_manifest(run_dir)), indent=1))}</pre>",
        _CLICK_TO_DRAWING,
        "</body></html>",
    ]
    path = run_dir / "report.html"
    write_text(path, "\n".join(parts))
    return path


def _retrained_html(run_dir: Path) -> str:
    """Each retraining of the study (:func:`results.retrain.retraining_folders`): its schedule, its
    comparisons (read as CSV data) and a link to its page; nothing for one whose table cannot be read."""
    parts = []
    for folder in retraining_folders(run_dir):
        try:  # a regular file of bounded size (a FIFO would block, /dev/zero fill memory)
            userfiles.check_regular(folder / "comparisons.csv", "table", userfiles.STORE_BOUNDS.max_bytes)
            table = pd.read_csv(folder / "comparisons.csv", keep_default_na=False, na_values=[""])
        except (OSError, ValueError):
            continue
        shown = table[[c for c in _RETRAINED_COLUMNS if c in table.columns]].copy()
        for column in ("found_top1", "reference_top1", "difference", "p_holm"):
            if column in shown:
                shown[column] = pd.to_numeric(shown[column], errors="coerce").round(2)
        page = Path(os.path.relpath(folder / "retrain.html", run_dir)).as_posix()
        link = f"<a href='{html.escape(page, quote=True)}'>{html.escape(page)}</a>"
        where = "" if folder == run_dir / DEFAULT_FOLDER else f" --out {folder}"
        parts.append(
            f"<h2>Retrained (nas retrain{html.escape(where)})</h2><p>{html.escape(_schedule(folder))}Each "
            "found network against every baseline it does not exceed in cost and against its random "
            f"controls, over seeds, Holm-corrected; the protocol, the spread and the plot: {link}.</p>"
            + (html_table(shown) if len(shown) else "<p>The retraining holds no comparison.</p>")
        )
    return "\n".join(parts)


def _schedule(folder: Path) -> str:
    """A retraining's schedule in a sentence, from its ``retrain.json``; empty if that cannot be read."""
    try:
        schedule = userfiles.load_store(folder / SCHEDULE_FILE)["schedule"]  # bounded: nested, a FIFO
        config, profile = schedule["config"], schedule["profile"]
        images = f"{config['train_samples']:,} images" if config.get("train_samples") else "all images"
        epochs = f"{config['epochs']} epoch" + ("" if config["epochs"] == 1 else "s")
        where = f"{schedule['dataset']}, {profile['name']} profile ({profile['img_size']} px)"
        split = "the held-out training images" if schedule.get("score_on") == "val" else "the test split"
        return f"Trained {epochs} of {images} of {where}, scored on {split}. "
    except (OSError, ValueError, KeyError, TypeError):
        return ""


_RETRAINED_COLUMNS = (
    "found", "reference", "kind", "equal_cost", "found_top1", "reference_top1", "seeds", "difference",
    "p_holm", "verdict",
)  # fmt: skip


def _importance_html(importance: ChoiceImportance) -> str:
    """The importances as a table: one row per choice (most important first), one column per objective
    (and the front), each cell a share with a bar."""
    if not importance.importances:
        return f"<p>No importances: {html.escape(importance.reason)}.</p>"
    targets = list(importance.importances)
    head = "".join(
        f"<th>{'reaching the front' if t == FRONT else html.escape(axis_label(t))}</th>" for t in targets
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


def _drawings_html(analysis: Analysis) -> str:
    """A drawing of each front architecture, in trial order, each with the anchor the front links to."""
    frame, names = analysis.frame, [o.name for o in analysis.objectives]
    cards = []
    for i in sorted(analysis.front, key=lambda i: int(frame.loc[i, "number"])):
        number = int(frame.loc[i, "number"])
        values = ", ".join(
            f"{axis_label(n)} {shown_value(n, v)}" for n, v in zip(names, analysis.points[i], strict=True)
        )
        label = analysis.labels[i]
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


def _baseline_table(analysis: Analysis) -> pd.DataFrame:
    names = [o.name for o in analysis.objectives]
    rows = []
    for b in analysis.baselines:
        best = b.dominated_by[:5]
        rows.append(
            {
                "baseline": b.baseline + ("" if b.feasible else " (over the limits)"),
                "trial": b.number,
                **{n: b.values[n] for n in names},
                "dominated by": len(b.dominated_by),
                "dominating trials (margins)": "; ".join(
                    f"#{m.number} " + ", ".join(f"{n} {m.margins[n]}" for n in names) for m in best
                )
                + (" ..." if len(b.dominated_by) > 5 else ""),
            }
        )
    return pd.DataFrame(rows)


def _limit_rows(manifest: dict[str, Any], frame: pd.DataFrame) -> list[tuple[str, str]]:
    """The summary's lines on limits: what they were, what was rejected, how feasibility changed."""
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

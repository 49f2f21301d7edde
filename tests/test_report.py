"""results.report: the report of a real short search, and the page rendered by headless Chromium offline."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from nas.api import run_search
from nas.study.settings import SearchSettings
from nas.study.trials_table import frame_from_rows, save_trials, trial_row, why_no_front
from results.analysis import analyse, load_run
from results.report import write_report
from search_spaces import get_space

FRONT_RED = (0xD6, 0x27, 0x28)  # the front's colour in the plots


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real complexity search of the coatnet space: its 10 baselines first (9 networks: C-C-T-T is
    CoAtNet-0), then 3 sampled architectures."""
    settings = SearchSettings(
        space="coatnet",
        evaluator="complexity",
        objectives=("macs", "params"),
        budget="12trials",
        macs_img_size=32,
        runs_dir=str(tmp_path_factory.mktemp("runs")),
        study="report",
    )
    outcome = run_search(settings)
    assert outcome.report == outcome.run_dir / "report.html"
    return outcome.run_dir


def test_report_has_the_front_every_baseline_and_the_hypervolume(searched: Path) -> None:
    page = (searched / "report.html").read_text()
    # plotly.js is embedded: no script or stylesheet is fetched (its source names a CDN only for maps)
    assert not re.search(r"<script[^>]*\bsrc=", page) and not re.search(r"<link[^>]*\bhref=\"?https?:", page)
    assert "Plotly.newPlot" in page and len(page) > 3_000_000
    assert "Pareto front" in page and "Hypervolume" in page and "over budget spent" in page
    for name in get_space("coatnet").baselines():
        assert name in page
    assert "CoAtNet-0 = C-C-T-T" in page  # one network, labelled once with both names
    frame, manifest = load_run(searched)
    front = pd.read_csv(searched / "pareto.csv")
    assert len(front) >= 1 and set(front["number"]) <= set(frame["number"])
    for number in front["number"]:
        assert f"<td><a href='#arch-{number}'>{number}</a></td>" in page  # in the front table, linked
        assert f"id='arch-{number}'" in page  # to its drawing
    assert (searched / "pareto.png").stat().st_size > 10_000
    reference = manifest["report"]["reference_point"]
    assert set(reference) == {"macs", "params"}


def test_reference_point_stays_fixed_across_reports(searched: Path, tmp_path: Path) -> None:
    run = shutil.copytree(searched, tmp_path / "run")  # the shared run stays as the search left it
    first = json.loads((run / "manifest.json").read_text())["report"]["reference_point"]
    frame = pd.read_parquet(run / "trials.parquet")
    frame.loc[0, "macs"] = frame["macs"].max() * 100  # a later, worse trial must not move the reference
    frame.to_parquet(run / "trials.parquet", index=False)
    write_report(run)
    assert json.loads((run / "manifest.json").read_text())["report"]["reference_point"] == first


def _hand_made_run(run: Path) -> Path:
    """A run directory of two completed coatnet trials and a failed one, with a fixed reference point."""
    space = get_space("coatnet")
    rows = []
    for number, (name, top1, macs) in enumerate([("CoAtNet-0", 80.0, 2e8), ("C-C-C-C", 60.0, 1e8)]):
        arch = space.baselines()[name].arch
        attrs = {"arch": arch.key, "arch_json": arch.to_json(), "metrics": {"top1": top1, "macs": macs}}
        rows.append(trial_row(number, "COMPLETE", attrs, {"top1": top1, "macs": macs}))
    rows.append(trial_row(2, "FAIL", {"fail_reason": "diverged"}))
    run.mkdir()
    save_trials(frame_from_rows(rows, ["top1", "macs"]), run)
    manifest = {
        "study": "hand",
        "space": "coatnet",
        "settings": {"objectives": ["top1:max", "macs:min"]},
        "report": {"reference_point": {"top1": 0.0, "macs": 1e9}},
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_hypervolume_is_normalized_between_the_reference_and_the_ideal_point(tmp_path: Path) -> None:
    run = _hand_made_run(tmp_path / "run")
    analysis = analyse(*load_run(run))
    assert analysis.ideal == {"top1": 100.0, "macs": 0.0}
    # by hand: 80 x 8e8 + 60 x 9e8 - 60 x 8e8 = 7e10 of the box 100 x 1e9
    assert analysis.hypervolume == pytest.approx([0.64, 0.70, 0.70])
    page = write_report(run).read_text()
    assert "<td>0.7000</td>" in page and "normalized to [0, 1]" in page
    assert "7e+10" not in page and "70000000000" not in page  # the raw volume is shown nowhere


def test_an_empty_front_says_why(tmp_path: Path) -> None:
    """No trial completed, none reached a ladder's top rung, none met the limits: each says so, in the
    report and to ``nas search`` (``why_no_front``)."""
    run = _hand_made_run(tmp_path / "run")
    frame, manifest = load_run(run)
    assert why_no_front(frame[frame["state"] == "FAIL"], None) == "no trial has completed yet"
    infeasible = frame.assign(feasible=False)
    assert why_no_front(infeasible, None) == "no completed trial met the search's limits"
    # the same trials on a 3-rung ladder, trained to rungs 0 and 1 only
    laddered = frame.assign(rung=[0, 1, 0], lineage=[0, 0, 2])
    reason = why_no_front(laddered, 2)
    assert reason.startswith("no trial has reached the ladder's top rung (rung 2) yet")
    save_trials(laddered, run)
    manifest["settings"].update(fidelity="ladder", rungs=3)
    (run / "manifest.json").write_text(json.dumps(manifest))
    page = write_report(run).read_text()
    assert f"<p>The front is empty: {html.escape(reason)}.</p>" in page
    assert pd.read_csv(run / "pareto.csv").empty


def test_a_study_whose_every_trial_failed_has_a_report(tmp_path: Path) -> None:
    """matplotlib refused to log-scale the cost axis of a plot with no point, so no report said why every
    trial of a study had failed."""
    run = _hand_made_run(tmp_path / "run")
    frame, _ = load_run(run)
    save_trials(frame[frame["state"] == "FAIL"].reset_index(drop=True), run)
    page = write_report(run).read_text()
    assert "The front is empty: no trial has completed yet." in page and "<td>diverged</td>" in page
    assert (run / "pareto.png").stat().st_size > 0 and pd.read_csv(run / "pareto.csv").empty


def test_the_reference_point_is_fixed_only_once_a_trial_completed(tmp_path: Path) -> None:
    """A report of a study with no completed trial (its first trials failed, or were interrupted) stored
    a reference of 0 for every minimized objective, and every later report read it back: a hypervolume
    of 0 for ever. Such a stored 0 is now taken as not fixed."""
    run = _hand_made_run(tmp_path / "run")
    frame, manifest = load_run(run)
    del manifest["report"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    save_trials(frame[frame["state"] == "FAIL"].reset_index(drop=True), run)
    write_report(run)
    assert "report" not in json.loads((run / "manifest.json").read_text())  # nothing to fix it by yet
    save_trials(frame, run)  # the study's trials completed since
    write_report(run)
    fixed = {"top1": 0.0, "macs": 2e8 * 1.1}  # no baseline label here: 1.1 x the worst completed trial
    assert json.loads((run / "manifest.json").read_text())["report"]["reference_point"] == pytest.approx(
        fixed
    )
    # a manifest that stored the placeholder is mended at its next report, and the hypervolume is not 0
    manifest["report"] = {"reference_point": {"top1": 0.0, "macs": 0.0}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert analyse(*load_run(run)).hypervolume[-1] > 0
    write_report(run)
    assert json.loads((run / "manifest.json").read_text())["report"]["reference_point"] == pytest.approx(
        fixed
    )


def test_an_output_that_is_a_folder_is_one_sentence_and_nothing_is_written(tmp_path: Path) -> None:
    """A report.html that is a folder stopped the report with a traceback after pareto.csv and pareto.png
    were rewritten; a page that cannot be written is one sentence."""
    from results.page import write_text

    run = _hand_made_run(tmp_path / "run")
    write_report(run)
    written = {name: (run / name).stat().st_mtime_ns for name in ("pareto.csv", "pareto.png")}
    (run / "report.html").unlink()
    (run / "report.html").mkdir()
    with pytest.raises(ValueError, match=r"cannot write .*report.html: it is a folder"):
        write_report(run)
    assert {name: (run / name).stat().st_mtime_ns for name in written} == written
    with pytest.raises(ValueError, match=r"cannot write .*/nowhere/page.html: No such file or directory"):
        write_text(tmp_path / "nowhere" / "page.html", "<p>")


def test_missing_run_directory_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no manifest\.json"):
        write_report(tmp_path)


def _chromium(page: Path, *args: str) -> str:
    """Open ``page`` in headless Chromium with no network (``args``: what to do with it); its stdout."""
    done = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--proxy-server=http://127.0.0.1:9",  # any network request fails: the page must not need one
            "--proxy-bypass-list=<-loopback>",
            "--virtual-time-budget=10000",
            "--window-size=1200,1400",
            *args,
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,  # a hung browser, not a busy machine
    )
    return done.stdout


needs_chromium = pytest.mark.skipif(
    shutil.which("chromium") is None, reason="Debian's chromium is not installed"
)


@needs_chromium
def test_headless_chromium_renders_the_plot_offline(searched: Path, tmp_path: Path) -> None:
    from matplotlib.image import imread

    shot = tmp_path / "report.png"
    _chromium(searched / "report.html", f"--screenshot={shot}")
    shutil.copy(shot, searched / "report_screenshot.png")
    pixels = (imread(shot)[..., :3] * 255).round().astype(int)
    red = ((abs(pixels - FRONT_RED)).sum(axis=-1) < 30).sum()
    assert red > 50, "the Pareto front's markers are not on the page: plotly did not draw"


# Measures the rendered page: every plot's labels (plotly annotations) against their figure and each other,
# the importance table's rows and the drawings' boxes; the result is written into the page as JSON.
_MEASURE = """<script>
setTimeout(function () {
  var plots = [], inside = function (a, b) {
    var e = 0.5;  // sub-pixel rounding
    return a.left >= b.left - e && a.right <= b.right + e && a.top >= b.top - e && a.bottom <= b.bottom + e;
  };
  document.querySelectorAll('.js-plotly-plot').forEach(function (div) {
    var figure = div.querySelector('.main-svg').getBoundingClientRect();
    var plot = div.querySelector('.nsewdrag').getBoundingClientRect();
    var labels = Array.from(div.querySelectorAll('g.annotation')).map(function (g) {
      var box = (g.querySelector('rect.bg') || g).getBoundingClientRect();
      return {text: g.textContent, in_figure: inside(box, figure), in_plot: inside(box, plot),
              left: box.left, right: box.right, top: box.top, bottom: box.bottom};
    });
    plots.push({labels: labels});
  });
  var drawn = Array.from(document.querySelectorAll('.arch-card svg rect')).filter(function (r) {
    return r.getBoundingClientRect().width > 20;
  }).length;
  var out = document.createElement('pre');
  out.id = 'measured';
  out.textContent = JSON.stringify({
    plots: plots, importance_rows: document.querySelectorAll('#importance tbody tr').length,
    drawn_boxes: drawn, cards: document.querySelectorAll('.arch-card').length});
  document.body.appendChild(out);
}, 3000);
</script>"""


@needs_chromium
def test_labels_render_unclipped_without_overlap_with_importances_and_drawings(
    searched: Path, tmp_path: Path
) -> None:
    page = tmp_path / "measured.html"
    page.write_text((searched / "report.html").read_text().replace("</body>", _MEASURE + "</body>"))
    shot = tmp_path / "labels.png"
    _chromium(page, f"--screenshot={shot}")  # the report with its 10 baselines, as a reader sees it
    assert shot.stat().st_size > 10_000
    dom = _chromium(page, "--dump-dom")
    found = re.search(r"<pre id=\"measured\">(.*?)</pre>", dom, re.S)
    assert found, "the measuring script did not run: the page failed to load"
    measured = json.loads(html.unescape(found.group(1)))
    scatter = measured["plots"][0]["labels"]
    names = get_space("coatnet").baseline_names().values()
    labels = [label for label in scatter if any(label["text"].startswith(n) for n in names)]
    assert len(labels) == 9 and sum(" = " in label["text"] for label in labels) == 1
    for plot in measured["plots"]:
        for label in plot["labels"]:
            assert label["in_figure"], f"label {label['text']!r} is clipped"
        for i, a in enumerate(plot["labels"]):
            for b in plot["labels"][i + 1 :]:
                apart = a["right"] <= b["left"] or b["right"] <= a["left"] or a["bottom"] <= b["top"]
                assert apart or b["bottom"] <= a["top"], f"labels {a['text']!r} and {b['text']!r} overlap"
    assert all(label["in_plot"] for label in labels)
    frame, _ = load_run(searched)
    done = int((frame["state"] == "COMPLETE").sum())
    assert measured["importance_rows"] >= 10 and done >= 8  # one row per choice of the space
    front = pd.read_csv(searched / "pareto.csv")
    assert measured["cards"] == len(front)
    assert measured["drawn_boxes"] >= 5 * len(front)  # stem, 4 stages (or fewer behind a patch), head

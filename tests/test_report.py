"""results.report: the report of a real short search, and the page rendered by headless Chromium offline."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from nas.search.run import run_search
from nas.search.settings import SearchSettings
from results.report import load_run, write_report
from search_spaces import get_space

FRONT_RED = (0xD6, 0x27, 0x28)  # the front's colour in the plots


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real complexity search of the sasa space: its 9 baselines first, then 3 sampled architectures."""
    settings = SearchSettings(
        space="sasa",
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
    for name in get_space("sasa").baselines():
        assert name in page
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


def test_missing_run_directory_is_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no manifest\.json"):
        write_report(tmp_path)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed")
def test_headless_chromium_renders_the_plot_offline(searched: Path, tmp_path: Path) -> None:
    from matplotlib.image import imread

    shot = tmp_path / "report.png"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--proxy-server=http://127.0.0.1:9",  # any network request fails: the page must not need one
            "--proxy-bypass-list=<-loopback>",
            "--virtual-time-budget=10000",
            "--window-size=1200,1400",
            f"--screenshot={shot}",
            (searched / "report.html").as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=600,  # a hung browser, not a busy machine
    )
    shutil.copy(shot, searched / "report_screenshot.png")
    pixels = (imread(shot)[..., :3] * 255).round().astype(int)
    red = ((abs(pixels - FRONT_RED)).sum(axis=-1) < 30).sum()
    assert red > 50, "the Pareto front's markers are not on the page: plotly did not draw"

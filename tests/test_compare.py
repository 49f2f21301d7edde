"""`nas compare`: studies side by side, every hypervolume on one box (checked against an independent 2-D
computation), at equal device time too (overhead first); studies that do not compare are refused in one
sentence, and what they measure differently is said."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from cheap_search import cheap_settings
from typer.testing import CliRunner

from nas.api import run_search
from nas.cli.commands import app
from results.comparison import compare

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def studies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three cheap sasa studies under one runs folder: TPE (12 trials), random (6) and one with the MACs
    counted at another image size (6)."""
    runs = tmp_path_factory.mktemp("compare")
    run_search(cheap_settings(runs, study="tpe", budget="12trials", baselines=False, sampler="tpe"))
    run_search(cheap_settings(runs, study="random", budget="6trials", baselines=False, sampler="random"))
    run_search(cheap_settings(runs, study="big", budget="6trials", macs_img_size=64, seed=1))
    return runs


def _area(points: list[tuple[float, float]], reference: tuple[float, float]) -> float:
    """The 2-D hypervolume of minimized ``points`` up to ``reference``, by a sweep over x: a check written
    apart from nas.study.pareto."""
    inside = sorted(p for p in points if p[0] < reference[0] and p[1] < reference[1])
    area, best_y = 0.0, reference[1]
    for i, (x, y) in enumerate(inside):
        best_y = min(best_y, y)
        right = inside[i + 1][0] if i + 1 < len(inside) else reference[0]
        area += (right - x) * (reference[1] - best_y)
    return area


def test_hypervolumes_are_on_one_box_and_compare_at_equal_device_time(studies: Path) -> None:
    comparison = compare([studies / "tpe", studies / "random"])
    tpe, rnd = comparison.studies
    assert [s.label for s in comparison.studies] == ["tpe", "random"]
    # the box: the worse reference point of the two, the ideal 0 for both minimized metrics
    for name in ("macs", "params"):
        assert comparison.reference[name] == max(tpe.analysis.reference[name], rnd.analysis.reference[name])
        assert comparison.ideal[name] == 0.0
    ref = (comparison.reference["macs"], comparison.reference["params"])
    for study in (tpe, rnd):
        table = study.analysis.frame
        points = [(float(m), float(p)) for m, p in zip(table["macs"], table["params"], strict=True)]
        assert len(study.hypervolume) == len(points)
        for n in (1, len(points) // 2, len(points)):  # after the first trial, halfway, at the end
            assert study.hypervolume[n - 1] == pytest.approx(_area(points[:n], ref) / (ref[0] * ref[1]))
        charges = pd.to_numeric(table["charge"]).tolist()
        assert study.spent == pytest.approx([sum(charges[: i + 1]) for i in range(len(charges))])
    assert comparison.equal_spend == min(tpe.total_spent, rnd.total_spent)
    row = comparison.table().set_index("study")
    at_equal = next(c for c in row.columns if c.startswith("hypervolume at"))
    least, most = sorted((tpe, rnd), key=lambda s: s.total_spent)
    assert row.loc[least.label, at_equal] == least.hypervolume[-1]  # all it spent
    within = [i for i, s in enumerate(most.spent) if s <= least.total_spent]
    assert row.loc[most.label, at_equal] == (most.hypervolume[within[-1]] if within else 0.0)
    for study in (tpe, rnd):
        assert row.loc[study.label, "hypervolume"] == study.hypervolume[-1]
        front = study.analysis.frame.loc[study.analysis.front]
        assert row.loc[study.label, "best macs"] == front["macs"].min()
    assert list(row["trials"]) == ["12 of 12", "6 of 6"] and list(row["sampler"]) == ["tpe", "random"]
    assert comparison.differences == []


def test_set_up_is_spent_before_the_first_trial_and_a_trials_charge_once_where_it_ran(
    studies: Path, tmp_path: Path
) -> None:
    """A one-shot study's supernet training (an overhead charge) comes first on the device-time axis."""
    import shutil

    copy = tmp_path / "oneshot"
    shutil.copytree(studies / "random", copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["budget"]["spent"]["charges"].insert(
        0, {"seconds": 50.0, "devices": 2, "device": "cpu", "label": "supernet", "overhead": True}
    )
    (copy / "manifest.json").write_text(json.dumps(manifest))
    plain, charged = compare([studies / "random", copy]).studies
    assert charged.overhead == 100.0 and charged.spent == pytest.approx([s + 100.0 for s in plain.spent])
    assert charged.hypervolume == plain.hypervolume
    # a trial's overhead charge that its row carries (rejected, repeated, lost) is counted once: it was
    # counted twice, as set-up too, so a study of many rejections had spent them before its first trial
    numbers = list(plain.analysis.frame["number"])
    row = {"seconds": 7.0, "devices": 1, "device": "cpu", "overhead": True}
    manifest["budget"]["spent"]["charges"].append({**row, "label": f"rejected trial {numbers[3]}"})
    (copy / "manifest.json").write_text(json.dumps(manifest))
    _, carried = compare([studies / "random", copy]).studies
    assert carried.overhead == 100.0 and carried.spent == pytest.approx([s + 100.0 for s in plain.spent])
    # one no row carries (a Ray trial interrupted while it ran) was spent where that trial ran
    gone = max(numbers) + 1
    manifest["budget"]["spent"]["charges"].append({**row, "label": f"interrupted trial {gone}"})
    (copy / "manifest.json").write_text(json.dumps(manifest))
    _, interrupted = compare([studies / "random", copy]).studies
    assert interrupted.overhead == 100.0
    expected = [s + 100.0 + (7.0 if i == len(numbers) - 1 else 0.0) for i, s in enumerate(plain.spent)]
    assert interrupted.spent == pytest.approx(expected)


def test_what_the_studies_measure_differently_is_named(studies: Path) -> None:
    comparison = compare([studies / "random", studies / "big"])
    assert comparison.differences == ["macs img size: 32 (random), 64 (big)"]


@pytest.mark.parametrize(
    ("which", "message"),
    [
        (["random"], "compare: give 2 to 20 run directories, got 1"),
        (["random", "random"], "compare: {runs}/random is given twice"),
        (["random", "nothing"], "study: no manifest.json in {runs}/nothing; is it a run directory"),
    ],
)
def test_studies_that_do_not_compare_are_refused(studies: Path, which: list[str], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        compare([studies / w for w in which])
    assert str(caught.value).startswith(message.format(runs=studies)), str(caught.value)


def test_other_objectives_are_refused(studies: Path, tmp_path: Path) -> None:
    run_search(cheap_settings(tmp_path, study="one", objectives=("macs",), budget="2trials", baselines=False))
    with pytest.raises(ValueError) as caught:
        compare([studies / "random", tmp_path / "one"])
    assert str(caught.value) == (
        f"compare: {studies / 'random'} searches macs:min, params:min and {tmp_path / 'one'} macs:min; "
        "studies compare only on the same objectives"
    )


def test_nas_compare_writes_the_page_and_the_table(studies: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.html"
    result = CliRunner().invoke(
        app, ["compare", "tpe", "random", "big", "--runs-dir", str(studies), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"comparison: {out}" in text and "tpe │ tpe │ single │ 12 of 12" in text
    assert "note: the studies measure their objectives differently" in text and "64 (big)" in text
    page = out.read_text()
    assert page.count("<table>") == 1 and "MACs vs params: each study's front" in page
    assert "hypervolume (normalized, one box) vs device time" in page and "<ul><li>macs img size" in page
    table = pd.read_csv(tmp_path / "c.csv")
    assert list(table["study"]) == ["tpe", "random", "big"] and math.isfinite(table["hypervolume"].sum())
    for args, message in (
        (["tpe", "--out", str(tmp_path / "c.txt")], "error: compare: give 2 to 20 run directories, got 1"),
        (["tpe", "random", "--out", str(tmp_path / "c.txt")], "error: out: "),
        (["tpe", "random", "--out", str(tmp_path / "no" / "c.html")], "error: out: "),
        (["tpe", "../x"], "error: "),
    ):
        result = CliRunner().invoke(app, ["compare", *args, "--runs-dir", str(studies)])
        output = " ".join(result.output.split())
        assert result.exit_code == 2 and output.startswith(message), output
        assert len(result.output.strip().splitlines()) <= 2, result.output  # one sentence, no traceback


def test_studies_grouped_by_a_setting_give_each_groups_mean_and_spread(studies: Path, tmp_path: Path) -> None:
    import statistics

    comparison = compare([studies / "tpe", studies / "random", studies / "big"], by="sampler")
    tpe, rnd, big = comparison.studies
    assert comparison.groups() == {"tpe": [tpe, big], "random": [rnd]}
    groups = comparison.group_table().set_index("sampler")
    finals = [tpe.hypervolume[-1], big.hypervolume[-1]]
    assert groups.loc["tpe", "studies"] == 2 and groups.loc["random", "studies"] == 1
    assert groups.loc["tpe", "hypervolume mean"] == pytest.approx(statistics.fmean(finals))
    assert groups.loc["tpe", "hypervolume std"] == pytest.approx(statistics.stdev(finals))
    assert math.isnan(groups.loc["random", "hypervolume std"])  # one study: no spread
    assert groups.loc["random", "hypervolume mean"] == rnd.hypervolume[-1]
    out = tmp_path / "by.html"
    args = ["tpe", "random", "big", "--by", "sampler", "--runs-dir", str(studies), "--out", str(out)]
    result = CliRunner().invoke(app, ["compare", *args])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "by sampler: over each group's studies" in text and "nan" not in text
    big, tpe = comparison.studies[2], comparison.studies[0]
    assert f"{statistics.fmean([tpe.hypervolume[-1], big.hypervolume[-1]]):.4f} ±" in text
    assert list(pd.read_csv(tmp_path / "by.groups.csv")["sampler"]) == ["tpe", "random"]
    page = out.read_text()
    assert "<h2>By sampler</h2>" in page and "hypervolume (mean ± std)" in page
    assert "tpe (sampler tpe)" in page  # each study's legend names its group
    result = CliRunner().invoke(app, ["compare", "tpe", "random", "--by", "seed", "--runs-dir", str(studies)])
    assert result.exit_code == 2 and " ".join(result.output.split()) == (
        "error: by: unknown setting 'seed'; allowed: sampler, fidelity, space, evaluator, profile, backend"
    )

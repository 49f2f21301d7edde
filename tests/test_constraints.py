"""Hard limits (--max-macs, --max-params, --max-latency, --at-cost-of): parsing, the check before anything is
built, what the samplers are told, the stop of a search where nothing is feasible, resumes, and the report."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pandas as pd
import pytest
from cheap_search import cheap_settings
from typer.testing import CliRunner

from evaluators.complexity import count
from nas.api import run_search
from nas.cli.commands import app
from nas.core.arch import Arch
from nas.search.trial import TrialRunner
from nas.study import constraints
from nas.study.constraints import Limits, parse_count, parse_ms
from nas.study.storage import open_storage
from results.analysis import analyse, feasible_fractions, load_run, rejections
from results.plots import scatter_figure
from search_spaces import get_space

LIMIT = 65e6  # sasa at 32 px: about half the space's samples are under it, three baselines over


@pytest.mark.parametrize(
    ("text", "value"),
    [("4.2G", 4.2e9), ("25M", 25e6), ("800k", 8e5), ("800K", 8e5), ("4.2e9", 4.2e9), ("1200", 1200.0),
     (" 3 G ", 3e9), (7, 7.0), (1.5e6, 1.5e6)],
)  # fmt: skip
def test_counts_parse_with_their_units(text: str | float, value: float) -> None:
    assert parse_count(text, "max-macs") == pytest.approx(value)


@pytest.mark.parametrize(
    ("text", "value"), [("12ms", 12.0), ("12", 12.0), ("0.5s", 500.0), ("800us", 0.8), (3, 3.0)]
)
def test_times_parse_to_milliseconds(text: str | float, value: float) -> None:
    assert parse_ms(text) == pytest.approx(value)


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--max-macs", "4.2X", "max-macs: expected a count"),
        ("--max-macs", "-1G", "max-macs: expected a count"),
        ("--max-macs", "0", "max-macs: must be a positive count"),
        ("--max-params", "lots", "max-params: expected a count"),
        ("--max-latency", "12 parsecs", "max-latency: expected a time"),
        ("--max-latency", "0ms", "max-latency: must be a positive time"),
        ("--at-cost-of", "ResNet-9000", "at-cost-of: the sasa space has no baseline 'ResNet-9000'"),
        ("--latency-device", "gpu", "latency-device: 'gpu' is not a device"),
        ("--latency-batch", "0", "latency-batch: must be a whole number between 1 and"),
    ],
)
def test_a_bad_limit_is_one_sentence_and_exit_2(tmp_path: Path, flag: str, value: str, says: str) -> None:
    result = CliRunner().invoke(
        app,
        ["search", "--space", "sasa", "--evaluator", "complexity", "--budget", "3trials",
         "--runs-dir", str(tmp_path), flag, value],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert says in message and "Traceback" not in message, message
    assert not any(tmp_path.iterdir())  # nothing started


def test_at_cost_of_sets_the_baselines_own_macs_and_params_and_the_smaller_limit_wins(tmp_path: Path) -> None:
    baseline = get_space("sasa").baselines()["ResNet-26 conv"].arch
    own = count(baseline, img_size=32)
    limits = cheap_settings(tmp_path, at_cost_of="ResNet-26 conv").limits
    assert (limits.macs, limits.params, limits.at_cost_of) == (own.macs, own.params, "ResNet-26 conv")
    tighter = cheap_settings(tmp_path, at_cost_of="ResNet-26 conv", max_params="1M").limits
    assert (tighter.macs, tighter.params) == (own.macs, 1e6)
    assert Limits.from_dict(limits.to_dict()) == limits
    assert limits.violations({"macs": own.macs, "params": own.params * 2}) == {"macs": 0.0, "params": 1.0}


def test_samples_over_the_limit_are_rejected_unevaluated_and_the_sampler_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluated: list[str] = []
    real = TrialRunner.evaluate

    def spy(self: TrialRunner, arch: Arch, report=None):
        evaluated.append(arch.key)
        return real(self, arch, report)

    monkeypatch.setattr(TrialRunner, "evaluate", spy)
    settings = cheap_settings(tmp_path, max_macs=LIMIT, budget="16trials")
    table = run_search(settings).trials
    baselines = table["baseline"].fillna("") != ""
    done, rejected = table[table["state"] == "COMPLETE"], table[table["state"] == "INFEASIBLE"]
    assert len(done) == 16 and len(rejected) >= 1  # a trials budget counts evaluated networks only
    sampled = table[(table["state"] == "COMPLETE") & ~baselines]
    assert (sampled["macs"] <= LIMIT).all() and sampled["feasible"].all()
    over = table[baselines & (table["macs"] > LIMIT)]  # references: evaluated whatever their cost, and marked
    assert set(over["baseline"]) == {
        "ResNet-38 conv", "ResNet-50 conv", "ResNet-50 conv-stem+attention", "ResNet-50 full-attention",
    }  # fmt: skip
    assert (over["state"] == "COMPLETE").all() and not over["feasible"].any()
    assert (rejected["macs"] > LIMIT).all() and not rejected["feasible"].any()
    assert (rejected["constraint_macs"] == rejected["macs"] / LIMIT - 1).all()
    assert not set(rejected["arch"]) & set(evaluated)  # never built nor scored
    assert rejected["macs"].notna().all()  # what was measured is in the table

    study = optuna.load_study(study_name="t", storage=open_storage(settings)[0])
    told = {t.number: t.constraints for t in study.trials}
    for _, row in table.iterrows():  # every trial's sampler record: the relative excess over the limit
        assert told[row["number"]] == {"macs": pytest.approx(row["macs"] / LIMIT - 1)}
    best = {t.number for t in study.best_trials}  # Optuna's own front leaves the infeasible out
    assert best and best <= set(done[done["feasible"]]["number"])


def test_a_space_where_nothing_fits_stops_with_a_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(constraints, "REJECTED_IN_A_ROW", 6)
    result = CliRunner().invoke(
        app,
        ["search", "--space", "sasa", "--evaluator", "complexity", "--budget", "1h", "--no-baselines",
         "--macs-img-size", "32", "--max-macs", "1M", "--runs-dir", str(tmp_path), "--study", "t"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    message = " ".join(result.output.split())
    assert "stopped: the last 6 samples were all over the limits (macs <= 1M)" in message
    assert "loosen the limits" in message and "Traceback" not in message
    table = pd.read_csv(tmp_path / "t" / "trials.csv")
    assert list(table["state"]) == ["INFEASIBLE"] * 6


def test_a_study_resumes_only_under_its_own_limits(tmp_path: Path) -> None:
    run_search(cheap_settings(tmp_path, max_macs=LIMIT, budget="2trials", baselines=False))
    with pytest.raises(
        ValueError, match=r"was searched under macs <= 65M; it cannot be resumed under no limits"
    ):
        run_search(cheap_settings(tmp_path, budget="3trials", baselines=False, resume=True))
    more = run_search(
        cheap_settings(tmp_path, max_macs="65M", budget="3trials", baselines=False, resume=True)
    )
    assert (more.trials["state"] == "COMPLETE").sum() == 3


def test_the_report_draws_the_limit_counts_the_rejected_and_keeps_the_front_feasible(tmp_path: Path) -> None:
    outcome = run_search(cheap_settings(tmp_path, max_macs=LIMIT, budget="20trials"))
    frame, manifest = load_run(outcome.run_dir)
    assert manifest["limits"] == {"macs": LIMIT}
    analysis = analyse(frame, manifest)
    assert analysis.front and all(analysis.feasible[i] for i in analysis.front)
    assert all(frame.loc[i, "macs"] <= LIMIT for i in analysis.front)
    figure = scatter_figure(analysis, "params", "macs")
    lines = [s for s in figure.layout.shapes if s.y0 == s.y1 == LIMIT]
    assert len(lines) == 1  # the macs limit, across the plot
    names = [trace.name for trace in figure.data]
    assert "baselines over the limits" in names and "rejected (over a limit)" in names
    rejected = int((frame["state"] == "INFEASIBLE").sum())
    assert rejections(frame) == {"macs": rejected} and rejected >= 1
    fractions = feasible_fractions(frame)
    assert len(fractions) == 4 and all(0 <= f <= 1 for f in fractions)
    html = (outcome.run_dir / "report.html").read_text()
    assert "macs &lt;= 65M" in html and f"{rejected} ({rejected} over the macs limit)" in html
    assert not math.isnan(analysis.hypervolume[-1])


@pytest.mark.parametrize("sampler", ["nsga2", "random"])
def test_every_sampler_gets_the_constraint_values(tmp_path: Path, sampler: str) -> None:
    settings = cheap_settings(tmp_path, max_macs=LIMIT, budget="10trials", sampler=sampler, baselines=False)
    table = run_search(settings).trials.set_index("number")
    study = optuna.load_study(study_name="t", storage=open_storage(settings)[0])
    for trial in study.trials:
        assert trial.constraints == {"macs": pytest.approx(table.loc[trial.number, "macs"] / LIMIT - 1)}
    assert {t.number for t in study.best_trials} <= set(table.index[table["feasible"]])


def test_latency_is_an_objective_and_a_limit_from_a_table_searches_share(tmp_path: Path) -> None:
    """Latency at the search's size (32 px here) from the device's table under <runs>/latency/: a second
    search over the same architectures measures nothing, and a limit on it rejects as MACs limits do."""
    settings = {"objectives": ("latency_ms", "macs"), "budget": "4trials", "baselines": False}
    first = run_search(cheap_settings(tmp_path, study="a", **settings)).trials
    assert (first["state"] == "COMPLETE").all() and (first["latency_ms"] > 0).all()
    assert first["latency_device"].nunique() == 1 and (first["latency_batch"] == 1).all()
    (table,) = (tmp_path / "latency").glob("*.json")
    assert table.stem == first["latency_device"][0]
    measured = table.read_bytes()
    again = run_search(cheap_settings(tmp_path, study="b", **settings)).trials  # same seed: same networks
    assert table.read_bytes() == measured  # nothing measured again
    assert list(again["latency_ms"]) == list(first["latency_ms"])

    limit = float(first["latency_ms"].median())
    limited = run_search(cheap_settings(tmp_path, study="c", max_latency=limit, **settings)).trials
    done = limited[limited["state"] == "COMPLETE"]
    assert len(done) == 4 and (done["latency_ms"] <= limit).all()
    rejected = limited[limited["state"] == "INFEASIBLE"]
    assert (rejected["latency_ms"] > limit).all()
    assert (limited["constraint_latency_ms"] == limited["latency_ms"] / limit - 1).all()

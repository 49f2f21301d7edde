"""The table evaluator (issue 68): ``--evaluator table:PATH`` answers every trial from a table of trained
networks and charges the seconds it records on a simulated clock. On a synthetic table of the whole micro
space (made-up curves): a search's trials equal the table's rows, its clock is the sum of their recorded
seconds, the fidelity ladder promotes by the curves at each rung's epochs, both engines answer alike, and a
table that cannot answer is refused in one sentence before anything is written."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from evaluators.registry import get_evaluator
from evaluators.table import COLUMNS, TableConfig, TableEvaluator, load_table, write_table
from nas.api import run_search
from nas.cli.commands import app
from nas.core.arch import Arch
from nas.study.fidelity import Ladder, Promotion, next_promotion, rung_result
from nas.study.settings import SearchSettings
from search_spaces import get_space
from search_spaces.micro import TABLE_EPOCHS, TABLE_TRAIN_IMAGES, MicroSpace

EPOCHS = TABLE_EPOCHS  # the micro space's cpu profile answers at its schedule's end
META = {
    "space": "micro",
    "dataset": "synthetic",
    "img_size": 32,
    "in_chans": 1,
    "num_classes": 10,
    "images_per_epoch": TABLE_TRAIN_IMAGES,
    "val_images": 100,
    "test_images": 100,
    "threads": 1,
}


def _curve(i: int, seed: int) -> list[float]:
    """Made up: odd architectures learn early and end low, even ones start low and end high, so a rung's
    order is not the last epoch's."""
    early = 60.0 + (i % 7) - 20.0 * (i % 2 == 0)
    final = 80.0 + 0.5 * (i % 11) - 6.0 * (i % 2)
    shape = 0.3 if i % 2 else 3.0
    return [early + (final - early) * (e / EPOCHS) ** shape + 0.25 * seed for e in range(1, EPOCHS + 1)]


def synthetic_rows(epochs: int = EPOCHS, seeds: tuple[int, ...] = (0, 1)) -> list[dict[str, Any]]:
    space = MicroSpace()
    rows = []
    for i, arch in enumerate(space.architectures()):
        for seed in seeds:
            top1 = _curve(i, seed)[:epochs]
            rows.append(
                {
                    "arch_id": space.arch_id(arch),
                    "arch_index": i,
                    "arch": arch.key,
                    "arch_json": arch.to_json(),
                    "seed": seed,
                    "epochs": epochs,
                    "val_top1": top1,
                    "val_loss": [2.0 - t / 50 for t in top1],
                    "train_loss": [1.5 - e / 20 for e in range(epochs)],
                    "train_seconds": [1.0 + 0.25 * (i % 5) + 0.01 * e + 0.5 * seed for e in range(epochs)],
                    "eval_seconds": [0.25 + 0.125 * (i % 3) + 0.001 * e for e in range(epochs)],
                    "train_wall_seconds": [2.0] * epochs,
                    "eval_wall_seconds": [0.5] * epochs,
                    "test_top1": top1[-1] - 1.0,
                    "test_loss": 0.5,
                    "test_seconds": 3.0,
                    "params": 1000 + i,
                    "macs": 10_000 + i,
                    "macs_paper": 11_000 + i,
                    "latency_torch_b1_ms": 1.0,
                    "latency_torch_b32_ms": 10.0,
                    "latency_ort_b1_ms": math.nan if i % 3 == 0 else 0.5,
                    "latency_ort_b32_ms": math.nan if i % 3 == 0 else 5.0,
                    "onnx_exports": i % 3 != 0,
                    "onnx_error": "" if i % 3 else "made up",
                }
            )
    return rows


@pytest.fixture(scope="module")
def table_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_table(synthetic_rows(), META, tmp_path_factory.mktemp("table") / "micro.parquet")


def _settings(runs: Path, table: Path, **changes: Any) -> SearchSettings:
    values: dict[str, Any] = {
        "space": "micro",
        "evaluator": f"table:{table}",
        "budget": "12trials",
        "macs_img_size": 32,
        "runs_dir": str(runs),
        "study": "t",
        **changes,
    }
    return SearchSettings(**values)


def _rows(table: Path) -> dict[tuple[str, int], dict[str, Any]]:
    return {(r.arch_id, r.seed): {**r.values, **r.curves} for r in load_table(table).rows()}


def _charged(run_dir: Path) -> float:
    spent = json.loads((run_dir / "manifest.json").read_text())["budget"]["spent"]
    return math.fsum(c["seconds"] * c["devices"] for c in spent["charges"])


def _check_trials_are_rows(frame: pd.DataFrame, table: Path, seed: int) -> float:
    """Every evaluated trial is its row of the table at its epochs; returns the seconds the rows record for
    them (train seconds of the epochs each trained, one validation at its last)."""
    rows, space = _rows(table), MicroSpace()
    evaluated = (
        frame[(frame["state"] == "COMPLETE") & frame["repeat_of"].isna()]
        if "repeat_of" in frame
        else (frame[frame["state"] == "COMPLETE"])
    )
    assert len(evaluated)
    recorded = []
    for trial in evaluated.itertuples():
        arch_id = space.arch_id(Arch.from_json(trial.arch_json))
        row = rows[(arch_id, seed)]
        start = 0 if getattr(trial, "rung", 0) in (0, None) or pd.isna(trial.rung) else None
        end = int(trial.epochs)
        if start is None:  # a promotion: from the epochs of its lineage's rung below
            below = evaluated[(evaluated["lineage"] == trial.lineage) & (evaluated["rung"] == trial.rung - 1)]
            start = int(below["epochs"].iloc[0])
        assert trial.table_id == arch_id and trial.table_seed == seed
        assert trial.top1 == row["val_top1"][end - 1] and trial.loss == row["val_loss"][end - 1]
        assert trial.train_loss == row["train_loss"][end - 1]
        assert trial.scored_params == row["params"] and trial.scored_macs == row["macs"]
        seconds = math.fsum(row["train_seconds"][start:end]) + row["eval_seconds"][end - 1]
        assert trial.train_seconds == pytest.approx(math.fsum(row["train_seconds"][start:end]), abs=1e-9)
        assert trial.cost_seconds == pytest.approx(seconds, abs=1e-9)  # the clock: what the row records
        recorded.append(seconds)
    not_evaluated = frame[~frame.index.isin(evaluated.index)]
    assert (not_evaluated["cost_seconds"] == 0).all()  # a repeat or a rejected sample ran nothing
    return math.fsum(recorded)


# --- the file ---------------------------------------------------------------------------------------------


def test_a_table_reads_back_as_written(table_file: Path) -> None:
    table = load_table(table_file)
    assert len(table) == 500 and table.seeds == (0, 1) and table.epochs == EPOCHS and table.space == "micro"
    assert table.ids == tuple(MicroSpace().arch_id(a) for a in MicroSpace().architectures())
    row = table.row("patch-L5-R-E", 1)
    written = next(r for r in synthetic_rows() if r["arch_id"] == "patch-L5-R-E" and r["seed"] == 1)
    assert list(row.curves["val_top1"]) == written["val_top1"]  # exactly: float64 throughout
    assert {name: row.values[name] for name in ("params", "onnx_exports", "onnx_error")} == {
        name: written[name] for name in ("params", "onnx_exports", "onnx_error")
    }
    mean = table.row("patch-L5-R-E", "mean")
    assert mean.curves["val_top1"][-1] == pytest.approx(
        (_curve(row.values["arch_index"], 0)[-1] + _curve(row.values["arch_index"], 1)[-1]) / 2
    )


def test_the_evaluator_answers_at_the_epochs_asked_from_the_seed_chosen(table_file: Path) -> None:
    table, space = load_table(table_file), get_space("micro")
    profile = space.profile("cpu")
    arch = space.from_id("conv-C-L3-R")
    rows = _rows(table_file)
    for search_seed, policy, table_seed in ((0, "search", 0), (3, "search", 1), (0, "1", 1)):
        got = TableEvaluator(table, TableConfig(str(table_file), policy), profile, search_seed).evaluate(arch)
        row = rows[("conv-C-L3-R", table_seed)]
        assert got["top1"] == row["val_top1"][-1] and got["table_seed"] == table_seed
        assert got["simulated_seconds"] == pytest.approx(sum(row["train_seconds"]) + row["eval_seconds"][-1])
    mean = TableEvaluator(table, TableConfig(str(table_file), "mean"), profile).evaluate(arch)
    assert mean["top1"] == pytest.approx(
        (rows[("conv-C-L3-R", 0)]["val_top1"][-1] + rows[("conv-C-L3-R", 1)]["val_top1"][-1]) / 2
    )
    short = TableEvaluator(table, TableConfig(str(table_file)), dataclasses.replace(profile, epochs=4))
    reported: list[tuple[int, dict]] = []
    got = short.evaluate(arch, report=lambda epoch, metrics: reported.append((epoch, metrics)))
    assert got["epochs"] == 4 and got["top1"] == rows[("conv-C-L3-R", 0)]["val_top1"][3]
    assert [epoch for epoch, _ in reported] == [1, 2, 3, 4] and "top1" in reported[-1][1]
    with pytest.raises(ValueError, match="is not in the micro space"):
        short.evaluate(get_space("coatnet").baselines()["CoAtNet-0"].arch)
    with pytest.raises(ValueError, match="seed 7 is not among the table's seeds 0, 1"):
        TableEvaluator(table, TableConfig(str(table_file), "7"), profile)


def test_a_partial_table_fails_the_trial_of_an_architecture_it_lacks(tmp_path: Path) -> None:
    path = write_table(synthetic_rows()[:20], META, tmp_path / "part.parquet")
    evaluator = TableEvaluator(load_table(path), TableConfig(str(path)), get_space("micro").profile("cpu"))
    with pytest.raises(ValueError, match="has no row of patch-E-E-E at seed 0"):
        evaluator.evaluate(MicroSpace().from_id("patch-E-E-E"))


# --- searches ---------------------------------------------------------------------------------------------


def test_a_table_search_trials_are_the_tables_rows_and_its_clock_their_seconds(
    tmp_path: Path, table_file: Path
) -> None:
    outcome = run_search(_settings(tmp_path, table_file, seed=1, budget="14trials"))
    frame = outcome.trials
    assert (frame["state"] != "FAIL").all()
    recorded = _check_trials_are_rows(frame, table_file, seed=1)
    assert _charged(outcome.run_dir) == pytest.approx(recorded, abs=1e-6)
    baselines = frame[frame["baseline"] != ""]
    assert set(baselines["baseline"]) == set(get_space("micro").baselines())  # run first, from the table
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    assert manifest["evaluator"]["config"] == {"path": str(table_file), "seed": "search"}
    assert manifest["data"] is None  # no image was read


def test_a_time_budget_is_spent_in_the_tables_seconds(tmp_path: Path, table_file: Path) -> None:
    outcome = run_search(_settings(tmp_path, table_file, budget="150s", baselines=False))
    recorded = _check_trials_are_rows(outcome.trials, table_file, seed=0)
    charged = _charged(outcome.run_dir)
    assert charged == pytest.approx(recorded, abs=1e-6)
    largest = max(outcome.trials["cost_seconds"])
    assert 150 - largest <= charged <= 150 + largest  # it stopped within a trial of the budget, on its clock


def test_the_ladder_promotes_by_the_tables_curves(tmp_path: Path, table_file: Path) -> None:
    settings = _settings(
        tmp_path, table_file, fidelity="ladder", objectives="top1", budget="24trials", baselines=False
    )
    outcome = run_search(settings)
    frame = outcome.trials.sort_values("number")
    recorded = _check_trials_are_rows(frame, table_file, seed=0)
    assert _charged(outcome.run_dir) == pytest.approx(recorded, abs=1e-6)
    done = frame[frame["state"] == "COMPLETE"]
    # rung r trains to the rung's images over the table's images per epoch: 1, 3 and 9 epochs
    assert dict(zip(done["rung"].astype(int), done["epochs"].astype(int), strict=False)) == {0: 1, 1: 3, 2: 9}
    assert (done["rung"] == 2).any()
    # replay the one promotion rule over the table's own values: every trial is what it chose
    rows, space = _rows(table_file), MicroSpace()
    ladder = Ladder(3, 3, TABLE_TRAIN_IMAGES)
    results = []
    for trial in frame.itertuples():
        rung, lineage = int(trial.rung), int(trial.lineage)
        expected = next_promotion(results, ladder, ("maximize",))
        assert expected == (Promotion(lineage, rung) if rung else None), trial.number
        attrs = {"repeat_of": None if pd.isna(trial.repeat_of) else trial.repeat_of}
        top1 = rows[(space.arch_id(Arch.from_json(trial.arch_json)), 0)]["val_top1"][(1, 3, 9)[rung] - 1]
        result = rung_result(lineage, rung, attrs, (top1,) if trial.state in ("COMPLETE", "REPEAT") else None)
        if result is not None:
            results.append(result)
    # the curves cross: some lineage promoted from rung 0 ends below one that was not
    finals = {
        int(t.lineage): rows[(space.arch_id(Arch.from_json(t.arch_json)), 0)]["val_top1"][-1]
        for t in done[done["rung"] == 0].itertuples()
    }
    promoted = set(done.loc[done["rung"] == 1, "lineage"].astype(int))
    assert min(finals[lineage] for lineage in promoted) < max(
        finals[lineage] for lineage in set(finals) - promoted
    )


@pytest.mark.integration
def test_ray_answers_from_the_table_as_optuna_does(tmp_path: Path, table_file: Path) -> None:
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        outcome = run_search(_settings(tmp_path, table_file, backend="ray", concurrency=2, budget="10trials"))
    finally:
        ray.shutdown()
    assert (outcome.trials["state"] != "FAIL").all()
    recorded = _check_trials_are_rows(outcome.trials, table_file, seed=0)
    assert _charged(outcome.run_dir) == pytest.approx(recorded, abs=1e-6)


# --- refusals ---------------------------------------------------------------------------------------------


def _refused(tmp_path: Path, *args: str) -> str:
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["search", "--budget", "5trials", "--runs-dir", str(runs), *args])
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert "Traceback" not in result.output and message.count(". ") <= 1, message
    assert not runs.exists() or not any(runs.iterdir())  # nothing written
    return message


def test_a_missing_or_garbled_table_is_one_sentence_and_exit_2(tmp_path: Path, table_file: Path) -> None:
    micro = ("--space", "micro", "--evaluator")
    assert "no such file" in _refused(tmp_path, *micro, f"table:{tmp_path / 'nowhere.parquet'}")
    garbled = tmp_path / "garbled.parquet"
    garbled.write_bytes(b"PAR1 this is no table" * 50)
    assert "is not a Parquet table" in _refused(tmp_path, *micro, f"table:{garbled}")
    plain = tmp_path / "plain.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(plain)
    assert "no nas.table metadata" in _refused(tmp_path, *micro, f"table:{plain}")
    assert "is a directory" in _refused(tmp_path, *micro, f"table:{tmp_path}")
    assert "needs the table's file" in _refused(tmp_path, *micro, "table:")
    short = write_table(
        [{**r, "val_top1": r["val_top1"][:3]} for r in synthetic_rows()[:4]], META, tmp_path / "short.parquet"
    )
    assert "curves are not 9 epochs long" in _refused(tmp_path, *micro, f"table:{short}")
    lacking = tmp_path / "lacking.parquet"
    import pyarrow.parquet as pq

    data = pq.read_table(table_file)
    pq.write_table(data.drop_columns(["val_loss"]).replace_schema_metadata(data.schema.metadata), lacking)
    assert "lacks the column(s) val_loss" in _refused(tmp_path, *micro, f"table:{lacking}")


def test_a_table_that_cannot_answer_the_search_is_refused(tmp_path: Path, table_file: Path) -> None:
    table = f"table:{table_file}"
    assert "holds the micro space, not sasa" in _refused(tmp_path, "--space", "sasa", "--evaluator", table)
    micro = ("--space", "micro", "--evaluator", table)
    assert "curves end at 9 epoch(s)" in _refused(tmp_path, *micro, "--proxy-epochs", "10")
    assert "top rung trains" in _refused(
        tmp_path, *micro, "--fidelity", "ladder", "--min-fidelity", "3072", "--budget", "20trials"
    )
    assert "--rung-schedule top" in _refused(
        tmp_path, *micro, "--fidelity", "ladder", "--rung-schedule", "rung", "--budget", "20trials"
    )
    assert "simulated clock" in _refused(tmp_path, *micro, "--budget", "1wall-hours")
    assert "unknown 'tables:x'" in _refused(tmp_path, "--space", "micro", "--evaluator", "tables:x")


def test_the_registry_names_the_table_evaluator_by_its_file() -> None:
    spec = get_evaluator("table:some/where.parquet")
    assert spec.name == "table" and spec.simulated and not spec.reads_data and spec.ladder
    assert spec.make_config({}) == TableConfig("some/where.parquet", "search")
    with pytest.raises(ValueError, match=r"allowed: complexity, proxy, oneshot, table:PATH"):
        get_evaluator("table")
    assert set(COLUMNS) >= {"val_top1", "test_top1", "latency_ort_b32_ms", "onnx_exports"}

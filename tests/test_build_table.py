"""benchmarks/build_table.py without its training (issue 68): rows cached one by one and skipped when there,
shards that split the space, a cache of other settings refused, and the assembled table what the evaluator
reads. Its training itself is smoke-run by hand (its docstring); a row takes a minute."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benchmark_scripts import load_benchmark
from test_table import synthetic_rows

from evaluators.table import load_table

build_table = load_benchmark("build_table")
ROWS = {(r["arch_id"], r["seed"]): r for r in synthetic_rows()}
COSTS = ("params", "macs", "macs_paper", "latency_torch_b1_ms", "latency_torch_b32_ms", "latency_ort_b1_ms",
         "latency_ort_b32_ms", "onnx_exports", "onnx_error")  # fmt: skip


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """run_row and run_costs answered from the synthetic table; the calls are listed."""
    calls: list[tuple[str, Any]] = []

    def run_row(index: int, arch_id: str, seed: int, args: Any, data: Any, test: Any) -> dict[str, Any]:
        calls.append(("row", (arch_id, seed)))
        row = {k: v for k, v in ROWS[(arch_id, seed)].items() if k not in COSTS}
        return {**row, "epochs": args.epochs, "test_wall_seconds": 1.0}

    def run_costs(arch_id: str) -> dict[str, Any]:
        calls.append(("costs", arch_id))
        row = ROWS[(arch_id, 0)]
        return {k: (None if k.startswith("latency") and row[k] != row[k] else row[k]) for k in COSTS}

    monkeypatch.setattr(build_table, "run_row", run_row)
    monkeypatch.setattr(build_table, "run_costs", run_costs)
    monkeypatch.setattr(build_table, "_data", lambda args: (None, None))
    return calls


def _main(out: Path, *args: str) -> None:
    build_table.main(["--out", str(out), "--work", str(out / "work"), "--epochs", "9", *args])


def test_rows_are_cached_as_they_end_and_skipped_when_there(tmp_path: Path, fake: list) -> None:
    _main(tmp_path, "--limit", "4", "--shard", "0/2")
    assert fake == [
        *[("costs", "conv-C-C-C"), ("row", ("conv-C-C-C", 0)), ("row", ("conv-C-C-C", 1))],
        *[("costs", "conv-C-C-L5"), ("row", ("conv-C-C-L5", 0)), ("row", ("conv-C-C-L5", 1))],
    ]
    (tmp_path / "cache" / "conv-C-C-L5-s1.json").unlink()  # as if killed before it was written
    fake.clear()
    _main(tmp_path, "--limit", "4", "--shard", "0/2")
    assert fake == [("row", ("conv-C-C-L5", 1))]
    fake.clear()
    _main(tmp_path, "--limit", "4", "--shard", "1/2")
    assert [arch for kind, arch in fake if kind == "costs"] == ["conv-C-C-L3", "conv-C-C-R"]
    settings = json.loads((tmp_path / "cache" / "settings.json").read_text())
    assert settings["images_per_epoch"] == 1536 and settings["config"]["batch_size"] == 64


def test_a_cache_of_other_settings_is_refused(tmp_path: Path, fake: list) -> None:
    _main(tmp_path, "--limit", "1")
    with pytest.raises(
        SystemExit, match=r"holds rows built with other settings \(images_per_epoch, train_images\)"
    ):
        _main(tmp_path, "--limit", "1", "--train-images", "1024")


def test_the_assembled_table_is_what_the_evaluator_reads(tmp_path: Path, fake: list, capsys) -> None:
    _main(tmp_path, "--limit", "3")
    with pytest.raises(SystemExit, match=r"8 rows are missing \(e\.g\. conv-C-C-R-s0\)"):
        _main(tmp_path, "--limit", "7", "--assemble", "--no-build")
    _main(tmp_path, "--limit", "3", "--assemble", "--no-build")
    table = load_table(tmp_path / "micro.parquet")
    assert table.ids == ("conv-C-C-C", "conv-C-C-L3", "conv-C-C-L5") and table.seeds == (0, 1)
    assert table.epochs == 9 and table.images_per_epoch == 1536 and table.meta["complete"]
    row, written = table.row("conv-C-C-L3", 1), ROWS[("conv-C-C-L3", 1)]
    assert list(row.curves["val_top1"]) == written["val_top1"] and row.values["params"] == written["params"]
    _main(tmp_path, "--limit", "7", "--status")
    assert "6 of 14 rows done (8 to go)" in capsys.readouterr().out

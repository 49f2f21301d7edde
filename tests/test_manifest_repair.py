"""A manifest.json that is not JSON is never silently replaced on --resume: the search refuses it in one
sentence, and --repair sets it aside and rebuilds it, keeping the report's reference point it could read."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nas.cli.commands import app


def _search(tmp_path: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        app,
        ["search", "--space", "sasa", "--evaluator", "complexity", "--macs-img-size", "32",
         "--runs-dir", str(tmp_path), "--study", "t", *extra],
    )  # fmt: skip
    return result.exit_code, " ".join(result.output.split())


@pytest.fixture
def study(tmp_path: Path) -> Path:
    code, output = _search(tmp_path, "--budget", "3trials", "--no-baselines")
    assert code == 0, output
    return tmp_path / "t"


def _db_state(run_dir: Path) -> tuple[int, list[str]]:
    """The study file's inode and its content as SQL. Not its bytes: a search that only opens the study may
    checkpoint the write-ahead log an earlier search left into the main file, the same rows in new places."""
    path = run_dir / "study.db"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as con:
        return path.stat().st_ino, list(con.iterdump())


@pytest.mark.parametrize(
    ("corrupt", "says"),
    [
        (lambda data: data[: len(data) // 2], "is not valid JSON ("),  # cut by a full disk
        (lambda data: b"[1, 2]", "holds a JSON list, not an object"),
        (lambda data: b"\xff" + data, "is not UTF-8 text (byte 0xff at offset 0)"),
        (lambda data: b"[" * 100_000 + b"]" * 100_000, "nests lists and mappings deeper than 32 levels"),
    ],
)
def test_a_corrupt_manifest_is_refused_in_one_sentence_and_left_as_it_is(
    study: Path, tmp_path: Path, corrupt, says: str
) -> None:
    path = study / "manifest.json"
    path.write_bytes(corrupt(path.read_bytes()))
    before, db = path.read_bytes(), _db_state(study)
    code, output = _search(tmp_path, "--budget", "6trials", "--no-baselines", "--resume")
    assert code == 2, output
    assert says in output and "--repair" in output and "Traceback" not in output
    assert output.count("error:") == 1
    assert path.read_bytes() == before and _db_state(study) == db  # no trial ran, nothing replaced
    assert sorted(p.name for p in study.iterdir() if "corrupt" in p.name) == []


def test_repair_sets_the_corrupt_manifest_aside_and_keeps_its_reference_point(
    study: Path, tmp_path: Path
) -> None:
    path = study / "manifest.json"
    original = json.loads(path.read_text())
    reference = original["report"]["reference_point"]
    text = path.read_text()
    cut = text[: text.index('"reference_rule"')]  # the reference point survives, the rest is cut
    path.write_text(cut)
    code, output = _search(tmp_path, "--budget", "5trials", "--no-baselines", "--resume", "--repair")
    assert code == 0, output
    repaired = json.loads(path.read_text())
    assert repaired["report"]["reference_point"] == reference  # the hypervolume stays comparable
    (aside,) = [p for p in study.iterdir() if p.name.startswith("manifest.json.corrupt-")]
    assert aside.read_text() == cut and repaired["repaired"]["set_aside"] == aside.name
    # a resumed session's sampler is seeded by its session id, so it may propose an architecture the study
    # has (roughly 1 run in 500 here): answered from the study as a REPEAT, which the budget does not count
    assert repaired["trials"]["COMPLETE"] == 5 and set(repaired["trials"]) <= {"COMPLETE", "REPEAT"}
    assert repaired["study"] == "t"
    # once repaired, a plain resume goes on
    code, output = _search(tmp_path, "--budget", "6trials", "--no-baselines", "--resume")
    assert code == 0, output


def test_repair_without_resume_is_refused(tmp_path: Path) -> None:
    code, output = _search(tmp_path, "--budget", "2trials", "--repair")
    assert code == 2 and "repair: only with --resume" in output
    assert not (tmp_path / "t").exists()


@pytest.mark.timeout(120)  # reading a FIFO would wait for a writer forever
def test_a_manifest_that_is_a_fifo_is_refused_and_repair_sets_it_aside_unread(
    study: Path, tmp_path: Path
) -> None:
    path = study / "manifest.json"
    path.unlink()
    os.mkfifo(path)
    code, output = _search(tmp_path, "--budget", "4trials", "--no-baselines", "--resume")
    assert code == 2 and "cannot be read (it is a FIFO, not a regular file)" in output, output
    code, output = _search(tmp_path, "--budget", "4trials", "--no-baselines", "--resume", "--repair")
    assert code == 0, output
    (aside,) = [p for p in study.iterdir() if p.name.startswith("manifest.json.corrupt-")]
    assert aside.is_fifo() and json.loads(path.read_text())["repaired"]["kept"] == []

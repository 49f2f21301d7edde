"""The command line and the import budget of the package."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from nas.cli import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_import_nas_is_light_and_fast() -> None:
    code = (
        "import sys, time; t = time.perf_counter(); import nas, nas.arch; dt = time.perf_counter() - t; "
        "heavy = [m for m in ('torch', 'ray', 'matplotlib', 'plotly', 'optuna') if m in sys.modules]; "
        "print(dt, heavy)"
    )
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split(" ", 1)
    assert time.perf_counter() - start < 2.0, "python + import nas took 2 s or more"
    assert float(out[0]) < 2.0
    assert out[1].strip() == "[]"


def test_ops_builds_every_op() -> None:
    result = runner.invoke(app, ["ops", "--width", "32", "--size", "8"])
    assert result.exit_code == 0, result.output
    for name in (
        "attn",
        "conv",
        "patch",
        "resnet",
        "C1x32",
        "Bconv1x32",
        "Blocal1x32k7",
        "Trel1x32",
        "Text1x32m64",
    ):
        assert name in result.output


def test_inspect_prints_every_stage() -> None:
    result = runner.invoke(app, ["inspect", str(ROOT / "examples" / "hybrid.json"), "--img-size", "64"])
    assert result.exit_code == 0, result.output
    for part in ("stem conv64", "s1 C2x96", "s2 Tlocal3x192k7", "s3 Text5x384m64", "s4 Trel2x768", "total"):
        assert part in result.output


def test_inspect_bad_input_is_one_sentence_and_exit_2(tmp_path) -> None:
    bad = tmp_path / "even_k.json"
    bad.write_text((ROOT / "examples" / "hybrid.json").read_text().replace('"s2.k": 7', '"s2.k": 4'))
    cases = [
        ([str(bad)], "s2.k: the 'local' mixer needs an odd integer k >= 3, got 4"),
        ([str(tmp_path / "missing.json")], "cannot be read"),
        ([str(ROOT / "examples" / "hybrid.json"), "--img-size", "16"], "is too small for"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["inspect", *args])
        assert result.exit_code == 2
        assert message in result.output
        assert "Traceback" not in result.output
        assert result.output.strip().count("\n") == 0 or len(result.output.strip().splitlines()) <= 3

"""The command line and the import budget of the package."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from nas.cli.commands import app
from nas.core.arch import Arch
from search_spaces import get_space, list_spaces

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def test_import_nas_is_light_and_fast() -> None:
    # CPU seconds of the import, not wall seconds: other processes on a busy machine do not count
    code = (
        "import sys, time; t = time.process_time(); import nas, nas.core.arch; dt = time.process_time() - t; "
        "heavy = [m for m in ('torch', 'ray', 'matplotlib', 'plotly', 'optuna') if m in sys.modules]; "
        "print(dt, heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split(" ", 1)
    assert out[1].strip() == "[]"  # what keeps it fast: nothing heavy is imported
    assert float(out[0]) < 2.0


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
        ([str(bad)], "s2.k: the 'local' mixer needs an odd whole number k between 3 and 31, got 4"),
        ([str(tmp_path / "missing.json")], "cannot be read"),
        ([str(ROOT / "examples" / "hybrid.json"), "--img-size", "16"], "is too small for"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["inspect", *args])
        assert result.exit_code == 2
        assert message in result.output
        assert "Traceback" not in result.output
        assert result.output.strip().count("\n") == 0 or len(result.output.strip().splitlines()) <= 3


def test_spaces_lists_choices_and_cardinality() -> None:
    result = runner.invoke(app, ["spaces"])
    assert result.exit_code == 0, result.output
    for text in ("coatnet", "sasa", "12,716,691,456", "209,952", "ViT_REL", "ResNet-50 full-attention"):
        assert text in result.output
    sasa = runner.invoke(app, ["spaces", "--space", "sasa"], terminal_width=400).output
    cpu = get_space("sasa").profile("cpu")  # what --proxy-epochs changes, next to the profile's name
    assert f"[{cpu.epochs} x {cpu.train_samples:,} images, batch {cpu.batch_size}]" in sasa


def test_baselines_json_is_machine_readable() -> None:
    result = runner.invoke(app, ["baselines", "--space", "sasa", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert len(rows) == 9
    r50 = next(r for r in rows if r["name"] == "ResNet-50 conv")
    assert {"name", "arch", "params", "macs", "paper_params", "paper_macs", "paper_convention"} <= set(r50)
    assert Arch.from_flat(r50["arch"]).key == r50["key"]
    assert r50["paper_convention"] == "2xMACs" and r50["paper_macs"] == 4.1e9
    assert abs(r50["macs"] / r50["paper_macs"] - 1) < 0.01


def test_baselines_table_and_csv() -> None:
    table = runner.invoke(app, ["baselines", "--space", "sasa"])
    assert table.exit_code == 0 and "2xMACs" in table.output and "ResNet-38 conv" in table.output
    csv_out = runner.invoke(app, ["baselines", "--space", "sasa", "--format", "csv"])
    assert csv_out.exit_code == 0 and csv_out.output.splitlines()[0].startswith(
        "name,key,img_size,params,macs"
    )


def test_cost_breaks_down_by_stage() -> None:
    result = runner.invoke(
        app, ["cost", str(ROOT / "examples" / "hybrid.json"), "--img-size", "64", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [p["part"].split()[0] for p in data["parts"]] == ["stem", "s1", "s2", "s3", "s4", "head"]
    assert sum(p["macs"] for p in data["parts"]) == data["macs"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["baselines", "--space", "nope"],
            f"unknown search space 'nope'; available: {', '.join(list_spaces())}",
        ),
        (["baselines", "--format", "xml"], "unknown format 'xml'; allowed: table, json, csv"),
        (["cost", "missing.json"], "cannot be read"),
    ],
)
def test_bad_input_exits_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def _help_lines(args: list[str]) -> list[str]:
    """The rendered help of ``nas ARGS --help`` on a terminal wide enough that nothing wraps."""
    result = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "500", "TERMINAL_WIDTH": "500"})
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def _one_line(text: str) -> str:
    return " ".join(text.split())


COMMANDS = typer.main.get_command(app).commands


def test_every_command_summary_reads_on_one_line() -> None:
    # rich keeps a docstring's line breaks: a summary wrapped in the source is wrapped in `nas --help`
    lines = _help_lines([])
    for name, command in COMMANDS.items():
        summary = _one_line(command.help.split("\n\n")[0])
        assert any(summary in line for line in lines), f"{name}: {summary!r} is broken in nas --help"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_help_is_shown_whole(name: str) -> None:
    # rich reads '[word]' as markup and drops it: a help text must escape it as '\\[word]'
    lines = _help_lines([name])
    for param in COMMANDS[name].params:
        text = getattr(param, "help", None)
        assert text or param.param_type_name != "option", f"{name} --{param.name} has no help"
        if text:
            shown = _one_line(text.replace("\\[", "["))
            assert any(shown in line for line in lines), f"{name} {param.name}: {shown!r} is not shown whole"


@pytest.mark.parametrize("name", ["", *sorted(COMMANDS)])
def test_a_flag_shows_no_value_to_give(name: str) -> None:
    # typer 0.29's rich help types every option, flags too: `--resume <bool>` reads as `--resume true`
    lines = _help_lines([name] if name else [])
    command = typer.main.get_command(app)
    params = COMMANDS[name].params if name else command.params
    flags = [opt for p in params if getattr(p, "is_flag", False) for opt in p.opts if opt.startswith("--")]
    for opt in [*flags, "--help"]:
        shown = [line for line in lines if re.search(rf"\s{re.escape(opt)}(\s|,|/)", line)]
        assert shown, f"{name} {opt} is not in the help"
        assert not any(re.search(rf"{re.escape(opt)}\S*\s+<", line) for line in shown), shown
    other = [p for p in params if not getattr(p, "is_flag", True)]
    assert not other or any("<" in line for line in lines)  # options that take a value still say its type

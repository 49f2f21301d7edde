"""The layers (pyproject.toml's import-linter contract) and the options declared once.

The contract is checked on the repository as it is and on a copy with one upward import added, which it
must refuse naming that import; the command line's `nas search` options, the config file's keys and the
reference page are generated from the settings' declarations.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nas.cli.commands import app
from nas.cli.options import given_settings, settings_options
from nas.cli.reference import reference_page
from nas.study.settings import SearchSettings, declared, load_config

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("nas", "search_spaces", "evaluators", "results")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )


def _copy(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_layers_contract_is_kept():
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("nas/core/bounds.py", "from nas.study import budget"),  # the core imports a study record
        ("evaluators/amp.py", "import nas.search.trial"),  # an evaluator imports the engine
        ("nas/study/objectives.py", "from results import report"),  # a record imports the reports
        ("results/pareto_extra.py", "from nas.cli import commands"),  # a new results module imports the CLI
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path, module, upward):
    root = _copy(tmp_path)
    path = root / module
    text = path.read_text() if path.exists() else '"""A new module."""\n'
    path.write_text(f"{text}\n{upward}  # noqa\n")
    done = _lint_imports(root)
    assert done.returncode != 0
    assert "BROKEN" in done.stdout
    importer = module.removesuffix(".py").replace("/", ".")
    assert importer in done.stdout, done.stdout


def test_every_declared_option_is_one_search_option_with_its_help():
    params = {p.name: p for p in settings_options()}
    assert len(params) == len(declared())
    result = CliRunner().invoke(app, ["search", "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    for name, option in declared().items():
        flag = option.flag or f"--{name.replace('_', '-')}"
        lines = [line for line in result.output.splitlines() if line.strip("│ ").startswith(f"{flag} ")]
        assert len(lines) == 1, flag
        assert option.help.split(".")[0][:40] in lines[0]
        if option.shown is not None:
            assert f"[default: {option.shown}]" in lines[0]
    assert "--config" in result.output


def test_given_options_become_settings_and_a_no_flag_sets_false():
    values = {p.name: p.default for p in settings_options()}
    assert given_settings(values) == {}  # nothing given: a config file's values stand
    values.update(no_baselines=True, resume=True, seed=0, narrow=["s3.op=rel"], budget="2h")
    assert given_settings(values) == {
        "baselines": False,
        "resume": True,
        "seed": 0,
        "narrow": ["s3.op=rel"],
        "budget": "2h",
    }


def test_config_keys_are_the_declared_settings(tmp_path):
    config = tmp_path / "search.yaml"
    config.write_text("".join(f"{name.replace('_', '-')}: null\n" for name in declared()))
    assert set(load_config(config)) == set(declared())
    assert {"evaluator_config"} <= {f for f in SearchSettings.__dataclass_fields__} - set(declared())


def test_the_reference_page_is_generated_from_the_declarations():
    committed = (ROOT / "docs" / "reference.md").read_text()
    assert committed == reference_page(), "run: python -m nas.cli.reference > docs/reference.md"
    for name in declared():
        assert f"| `{name}` |" in committed

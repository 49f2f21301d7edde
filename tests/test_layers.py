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
from nas.cli.options import build, given_options, options_of
from nas.cli.reference import reference_page
from nas.cli.train_options import RetrainOptions, ScheduleOptions, TrainOptions
from nas.core.declare import declared
from nas.study.settings import SearchSettings, load_config

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


COMMANDS = {
    "search": (SearchSettings,),
    "train": (TrainOptions, ScheduleOptions),
    "retrain": (RetrainOptions, ScheduleOptions),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_declared_option_is_one_option_of_its_command_with_its_help(command):
    classes = COMMANDS[command]
    options = {name: option for cls in classes for name, (option, _) in declared(cls).items()}
    params = [p for cls in classes for p in options_of(cls)]
    assert len(params) == len(options)
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    listed = [
        line.strip("│ ").split()[0]
        for line in result.output.splitlines()
        if line.strip("│ ").startswith("--")
    ]
    flags = [option.flag or f"--{name.replace('_', '-')}" for name, option in options.items()]
    assert listed == [*flags, *(["--config"] if command == "search" else []), "--help"]  # all, in order
    for name, option in options.items():
        flag = option.flag or f"--{name.replace('_', '-')}"
        lines = [line for line in result.output.splitlines() if line.strip("│ ").startswith(f"{flag} ")]
        assert len(lines) == 1, flag
        assert option.help.split(".")[0][:40] in lines[0]
        if option.shown is not None:
            assert f"[default: {option.shown}]" in lines[0]


def test_given_options_become_settings_and_a_no_flag_sets_false():
    values = {p.name: p.default for p in options_of(SearchSettings, unset=True)}
    assert given_options(SearchSettings, values) == {}  # nothing given: a config file's values stand
    values.update(no_baselines=True, resume=True, seed=0, narrow=["s3.op=rel"], budget="2h")
    assert given_options(SearchSettings, values) == {
        "baselines": False,
        "resume": True,
        "seed": 0,
        "narrow": ["s3.op=rel"],
        "budget": "2h",
    }


def test_train_and_retrain_options_are_built_from_their_declarations():
    train = {p.name: p.default for cls in COMMANDS["train"] for p in options_of(cls)}
    assert build(TrainOptions, train) == TrainOptions()  # the command's defaults are the declared ones
    schedule = build(ScheduleOptions, {**train, "recipe": "coatnet", "mixup": 0.2, "epochs": 3})
    config = schedule.config(seed=4)
    assert (config.epochs, config.mixup, config.cutmix, config.seed) == (
        3,
        0.2,
        1.0,
        4,
    )  # recipe, flag on top
    retrain = {p.name: p.default for cls in COMMANDS["retrain"] for p in options_of(cls)}
    assert build(RetrainOptions, {**retrain, "no_baselines": True}).baselines is False
    assert build(RetrainOptions, retrain).seed_list() == [0, 1, 2]
    with pytest.raises(ValueError, match="seeds: whole numbers"):
        RetrainOptions(seeds="0,x").seed_list()
    with pytest.raises(ValueError, match="recipe: unknown"):
        ScheduleOptions(recipe="resnet").config()


def test_config_keys_are_the_declared_settings(tmp_path):
    config = tmp_path / "search.yaml"
    config.write_text("".join(f"{name.replace('_', '-')}: null\n" for name in declared(SearchSettings)))
    assert set(load_config(config)) == set(declared(SearchSettings))
    choices = set(SearchSettings().choices())
    assert {"evaluator_config"} <= choices - set(declared(SearchSettings))
    assert not {"run_dir", "parsed_objectives", "trial_device"} & choices  # the plan is derived, not given


def test_the_reference_page_is_generated_from_the_declarations():
    committed = (ROOT / "docs" / "reference.md").read_text()
    assert committed == reference_page(), "run: python -m nas.cli.reference > docs/reference.md"
    for name in declared(SearchSettings):
        assert f"| `{name}` |" in committed

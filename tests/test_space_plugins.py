"""Search spaces of other packages (the ``nas.search_spaces`` entry points), installed for real: found,
searched on both engines and in worker processes, and, broken, refused in one sentence where named and
harmless everywhere else."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from space_plugins import ROOT, install, install_example
from typer.testing import CliRunner

import search_spaces
from nas.cli.commands import app
from nas.core.arch import Arch
from search_spaces import get_space, list_spaces, origin, plugin_problems

runner = CliRunner()

_SUBCLASS = "from isotropic_space import IsotropicSpace\n\nclass Space(IsotropicSpace):\n"
BROKEN = {  # name: (entry point value, {module: source})
    "broken-import": (
        "broken_import:Space",
        {"broken_import": "raise ImportError('no module named\\n   torchx')\n"},  # one line, said
    ),
    "not-a-space": ("not_a_space:build", {"not_a_space": "def build():\n    return None\n"}),
    "misnamed": ("misnamed:Space", {"misnamed": _SUBCLASS + "    pass\n"}),
    "failing-init": (
        "failing_init:Space",
        {
            "failing_init": _SUBCLASS + "    name = 'failing-init'\n\n"
            "    def __init__(self):\n        raise RuntimeError('needs a licence file')\n"
        },
    ),
    "coatnet": ("isotropic_space:IsotropicSpace", {}),
}
PROBLEMS = {
    "broken-import": "cannot be imported: ImportError: no module named torchx",
    "not-a-space": "is not a subclass of search_spaces.SearchSpace",
    "misnamed": "names its space 'isotropic', not 'misnamed'",
    "failing-init": "cannot be built: RuntimeError: needs a licence file",
    "coatnet": "is ignored: coatnet is a built-in space",
}


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example plugin installed in a folder on sys.path (and on PYTHONPATH for processes started)."""
    folder = tmp_path / "site"
    install_example(folder)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    return folder


@pytest.fixture
def broken(site: Path) -> Path:
    """Beside the example, one distribution per way a plugin can be broken."""
    for i, (name, (value, modules)) in enumerate(BROKEN.items()):
        install(site, f"broken-{i}", {name: value}, modules)
    return site


def _nas(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nas", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def test_an_installed_space_is_listed_and_built(site: Path) -> None:
    assert "isotropic" in list_spaces() and {"coatnet", "sasa"} <= set(list_spaces())
    space = get_space("isotropic")
    assert type(space).__module__ == "isotropic_space" and space.name == "isotropic"
    assert all(space.contains(b.arch) for b in space.baselines().values())
    assert get_space("isotropic", {"s1.op": ["rel"]}).cardinality() == space.cardinality() // 5
    assert plugin_problems() == []
    assert origin("isotropic") == "nas-isotropic-space 0.1, isotropic_space:IsotropicSpace"
    assert origin("coatnet") == "built in"
    listing = runner.invoke(app, ["spaces", "--space", "isotropic", "--format", "json"])
    assert json.loads(listing.output)[0]["origin"] == origin("isotropic")


def test_the_example_baseline_is_deit_small(site: Path) -> None:
    # 12 blocks of width 384 behind a patch-16 stem: DeiT-S's 22M parameters and 4.6 GMACs at 224 px
    result = runner.invoke(app, ["baselines", "--space", "isotropic", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    deit = rows["uniform-rel"]
    assert deit["params"] == pytest.approx(22e6, rel=0.005)
    assert deit["macs"] == pytest.approx(4.6e9, rel=0.005)


def test_a_plugin_is_imported_only_when_asked_for(site: Path) -> None:
    sys.modules.pop("isotropic_space", None)
    assert "isotropic" in list_spaces() and get_space("coatnet").name == "coatnet"
    assert "isotropic_space" not in sys.modules


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_a_broken_plugin_is_one_sentence_where_named(broken: Path, name: str) -> None:
    if name == "coatnet":  # a built-in's name: the built-in stands
        assert type(get_space("coatnet")) is search_spaces.CoAtNetSpace
        return
    with pytest.raises(ValueError) as err:
        get_space(name)
    message = str(err.value)
    assert f"the nas.search_spaces entry point {name} = {BROKEN[name][0]} of broken-" in message
    assert message.endswith(PROBLEMS[name]) and "\n" not in message


def test_broken_plugins_are_listed_and_harm_nothing_else(broken: Path) -> None:
    problems = plugin_problems()
    assert len(problems) == len(PROBLEMS)
    for name, problem in PROBLEMS.items():
        assert any(p.startswith(f"the nas.search_spaces entry point {name} = ") and p.endswith(problem)
                   for p in problems), name  # fmt: skip
    listing = runner.invoke(app, ["spaces"])
    assert listing.exit_code == 0, listing.output
    assert "isotropic" in listing.output and "sasa" in listing.output
    assert "no module named torchx" in " ".join(listing.output.split())
    named = runner.invoke(app, ["spaces", "--space", "broken-import"])
    assert named.exit_code == 2 and "cannot be imported: ImportError" in " ".join(named.output.split())


def test_a_search_of_a_broken_plugin_is_refused_before_it_starts(broken: Path, tmp_path: Path) -> None:
    done = _nas("search", "--space", "failing-init", "--evaluator", "complexity", "--budget", "2trials",
                cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "cannot be built: RuntimeError: needs a licence file" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("backend", ["optuna", "ray"])
def test_an_installed_space_is_searched_on_both_engines_in_every_process(
    site: Path, tmp_path: Path, backend: str
) -> None:
    # two worker processes on Optuna, Ray's workers on Ray: each imports the plugin from its environment
    workers = ["--workers", "2"] if backend == "optuna" else ["--backend", "ray"]
    done = _nas(
        "search", "--space", "isotropic", "--evaluator", "complexity", "--objectives", "macs,params",
        "--budget", "4trials", "--study", "iso", *workers, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = tmp_path / "runs" / "iso"
    trials = pd.read_csv(run / "trials.csv")
    assert (trials["state"] == "COMPLETE").sum() == 4
    assert {"uniform-rel", "uniform-ext"} <= set(trials["baseline"].dropna())
    space = get_space("isotropic")
    assert all(space.contains(Arch.from_json(a)) for a in trials["arch_json"])
    assert json.loads((run / "manifest.json").read_text())["settings"]["space"] == "isotropic"
    assert (run / "report.html").exists()
    report = runner.invoke(app, ["report", str(run)])
    assert report.exit_code == 0, report.output


def test_the_example_package_declares_the_entry_point_it_is_tested_under() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "examples" / "space_plugin" / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["nas.search_spaces"] == {"isotropic": "isotropic_space:IsotropicSpace"}

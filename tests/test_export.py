"""Export of found architectures: the exported network is the one the search scored, and it reloads
through nas.create_model, timm.create_model and TorchScript with the same outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import timm
import torch
from typer.testing import CliRunner

import nas.timm_models  # noqa: F401  (registers nas_arch with timm)
from evaluators.complexity import count
from evaluators.data import load_dataset, loaders
from nas.arch import Arch
from nas.cli import app
from nas.create import create_model
from nas.search.run import run_search
from nas.search.settings import SearchSettings
from results.export import export_trials, front_numbers
from search_spaces import get_space


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real proxy search: 3 sampled coatnet architectures trained under the CPU profile."""
    settings = SearchSettings(
        budget="3trials", baselines=False, runs_dir=str(tmp_path_factory.mktemp("runs")), study="exp"
    )
    return run_search(settings).run_dir


def _top1(model: torch.nn.Module, split, profile) -> float:
    _, val = loaders(split, profile.batch_size, seed=0, val_samples=profile.val_samples)
    correct = total = 0
    with torch.inference_mode():
        for x, y in val:
            correct += int((model(x).argmax(1) == y).sum())
            total += len(y)
    return 100.0 * correct / total


def test_search_keeps_only_the_fronts_weights(study: Path) -> None:
    table = pd.read_csv(study / "trials.csv")
    front = set(front_numbers(table, ["top1:max", "macs:min"]))
    kept = {p.name for p in (study / "weights").iterdir()}
    assert kept == {table.set_index("number").loc[n, "weights"] for n in front}


def test_params_and_macs_are_the_architectures_at_224_not_the_proxys(study: Path) -> None:
    table = pd.read_csv(study / "trials.csv")
    for _, row in table.iterrows():
        full = count(Arch.from_json(row["arch_json"]), img_size=224, in_chans=3, num_classes=1000)
        assert (row["params"], row["macs"]) == (full.params, full.macs)
        assert row["scored_params"] < row["params"]  # the proxy-scaled network the evaluator trained


def test_exported_model_is_the_scored_network(study: Path, tmp_path: Path) -> None:
    table = pd.read_csv(study / "trials.csv").set_index("number")
    written = export_trials(study, tmp_path, trials=None)
    assert written, "the front is never empty"
    profile = get_space("coatnet").profile("cpu")
    split = load_dataset("fashion-mnist", img_size=profile.img_size, seed=0)
    for folder in written:
        number = int(folder.name.removeprefix("trial_"))
        arch = Arch.from_json((folder / "arch.json").read_text())
        assert arch.key == table.loc[number, "arch"]
        assert json.loads((folder / "trial.json").read_text())["top1"] == table.loc[number, "top1"]
        model = create_model(folder / "model.pt").eval()
        assert model.arch == profile.apply(arch)  # the proxy-scaled network the search trained
        assert _top1(model, split, profile) == pytest.approx(table.loc[number, "top1"], abs=1e-9)

        x = torch.randn(3, model.in_chans, *model.img_size)
        expected = model(x)
        scripted = torch.jit.load(str(folder / "model.torchscript.pt")).eval()
        torch.testing.assert_close(scripted(x), expected, atol=1e-5, rtol=1e-5)
        via_timm = timm.create_model(
            "nas_arch",
            arch=model.arch,
            num_classes=model.num_classes,
            in_chans=model.in_chans,
            img_size=model.img_size,
            checkpoint_path=str(folder / "model.pt"),
        ).eval()
        torch.testing.assert_close(via_timm(x), expected, atol=0, rtol=0)


def test_export_cli_needs_one_selection_and_refuses_unknown_trials(study: Path) -> None:
    runner = CliRunner()
    neither = runner.invoke(app, ["export", str(study)])
    assert neither.exit_code == 2 and "either --trial" in neither.output
    unknown = runner.invoke(app, ["export", str(study), "--trial", "99"])
    assert unknown.exit_code == 2 and "no trial 99" in unknown.output
    bad_name = runner.invoke(app, ["export", "../etc", "--pareto"])
    assert bad_name.exit_code == 2 and "not a valid name" in bad_name.output


def test_create_model_refuses_contradicting_settings(tmp_path: Path) -> None:
    arch = get_space("coatnet").baselines()["CoAtNet-0"].arch
    small = get_space("coatnet").profile("cpu").apply(arch)
    from nas.create import save_model

    path = save_model(create_model(small, num_classes=10, in_chans=1, img_size=32), tmp_path / "m.pt")
    with pytest.raises(ValueError, match="num_classes: the model file was built with 10"):
        create_model(path, num_classes=1000)
    with pytest.raises(ValueError, match="holds"):
        create_model(arch, checkpoint=path)
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="cannot read"):
        create_model(tmp_path / "junk.pt")

"""Export of found architectures: the exported network is the one the search scored, and it reloads
through nas.create_model, timm.create_model, torch.export, ONNX and TorchScript with the same outputs;
``nas export`` prints every file it wrote."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest
import timm
import torch
from default_search import SEED
from typer.testing import CliRunner

import search_spaces.timm_models  # noqa: F401  (registers nas_arch with timm)
from evaluators.batches import loaders
from evaluators.complexity import count
from evaluators.data import load_dataset
from nas.cli.commands import app
from nas.core.arch import Arch, Stage, Stem
from nas.core.create import create_model
from nas.core.model import build_model
from nas.study.front import front_numbers
from results.export import export_trials
from results.standalone import FILES, write_standalone
from search_spaces import get_space


@pytest.fixture
def study(default_search: Path) -> Path:
    """A real proxy search: 2 sampled coatnet architectures trained under the CPU profile, 1 off the front."""
    return default_search


def _top1(model: torch.nn.Module, split, profile) -> float:
    _, val = loaders(split, profile.batch_size, seed=SEED, val_samples=profile.val_samples)
    correct = total = 0
    with torch.inference_mode():
        for x, y in val:
            correct += int((model(x).argmax(1) == y).sum())
            total += len(y)
    return 100.0 * correct / total


def test_search_keeps_only_the_fronts_weights(study: Path) -> None:
    table = pd.read_csv(study / "trials.csv")
    front = set(front_numbers(table, ["top1:max", "macs:min"]))
    assert len(front) < len(table)  # a trial off the front, whose weights must not be kept
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
    split = load_dataset("fashion-mnist", img_size=profile.img_size, seed=SEED)  # the search's split
    for folder in written:
        assert sorted(p.name for p in folder.iterdir()) == [
            "arch.json",
            "model.pt",
            "model.pt2",
            "trial.json",
        ]
        number = int(folder.name.removeprefix("trial_"))
        arch = Arch.from_json((folder / "arch.json").read_text())
        assert arch.key == table.loc[number, "arch"]
        assert json.loads((folder / "trial.json").read_text())["top1"] == table.loc[number, "top1"]
        model = create_model(folder / "model.pt").eval()
        assert model.arch == profile.apply(arch)  # the proxy-scaled network the search trained
        assert _top1(model, split, profile) == pytest.approx(table.loc[number, "top1"], abs=1e-9)

        x = torch.randn(3, model.in_chans, *model.img_size)
        expected = model(x)
        program = torch.export.load(str(folder / "model.pt2")).module()
        torch.testing.assert_close(program(x), expected, atol=1e-5, rtol=1e-5)
        via_timm = timm.create_model(
            "nas_arch",
            arch=model.arch,
            num_classes=model.num_classes,
            in_chans=model.in_chans,
            img_size=model.img_size,
            checkpoint_path=str(folder / "model.pt"),
        ).eval()
        torch.testing.assert_close(via_timm(x), expected, atol=0, rtol=0)


def test_export_cli_writes_onnx_and_prints_every_file(study: Path, tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install '.[onnx]')")
    from onnx_check import assert_onnx_agrees, validation_images

    number = front_numbers(pd.read_csv(study / "trials.csv"), ["top1:max", "macs:min"])[0]  # has weights
    args = ["export", str(study), "--trial", str(number), "--format", "onnx", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    folder = tmp_path / f"trial_{number}"
    written = [folder / name for name in ("arch.json", "model.onnx", "model.pt", "trial.json")]
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == written
    assert result.output.splitlines() == [str(p) for p in written]
    images = validation_images(get_space("coatnet").profile("cpu").img_size)
    assert_onnx_agrees(create_model(folder / "model.pt"), folder / "model.onnx", images)
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(folder / "model.onnx")).metadata_props}
    # Fashion-MNIST's training pixels on the [0, 1] scale: mean 0.2860, std 0.3530 (the published figures)
    assert json.loads(meta["mean"]) == pytest.approx([0.2860])
    assert json.loads(meta["std"]) == pytest.approx([0.3530])
    assert "(image / 255 - mean) / std with mean [0.286] and std [0.353]" in meta["input"]


# torch.jit.load itself warns that TorchScript is deprecated: the warning that matters is the writer's (none)
@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")
@pytest.mark.parametrize("stem", ["conv", "attn"])
def test_standalone_files_hold_standard_ops_and_write_without_warnings(tmp_path: Path, stem: str) -> None:
    """The attention stem and mixers (local attention's own kernel included) leave standard ops in a
    torch.export program and in a TorchScript file, so both run without this package (TorchScript refuses to
    load a file naming an op it does not know, ``nas::local_attention``); writing any format warns nothing."""
    arch = Arch(
        Stem(stem, 16),
        (
            Stage("transformer", "local", 1, 32, k=3),
            Stage("transformer", "rel", 1, 32, stride=1),
            Stage("bottleneck", "ext", 1, 32),
        ),
    )
    model = build_model(arch, num_classes=10, in_chans=1, img_size=16).eval()
    x = torch.randn(5, 1, 16, 16)
    expected = model(x)
    for fmt in ("export", "torchscript"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (path,) = write_standalone(model, tmp_path, fmt)
        assert path.name == FILES[fmt] and not caught, [str(w.message) for w in caught]
    program = torch.export.load(str(tmp_path / FILES["export"]))
    namespaces = {
        node.target.namespace
        for node in program.graph.nodes
        if isinstance(node.target, torch._ops.OpOverload)
    }
    assert namespaces == {"aten"}
    torch.testing.assert_close(program.module()(x), expected, atol=1e-5, rtol=1e-5)  # the batch is free
    scripted = torch.jit.load(str(tmp_path / FILES["torchscript"]))
    assert {node.kind().split("::")[0] for node in scripted.inlined_graph.nodes()} <= {"aten", "prim"}
    torch.testing.assert_close(scripted(x[:2]), expected[:2], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(scripted(x), expected, atol=1e-5, rtol=1e-5)  # not the traced batch of 2


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
    from nas.core.create import save_model

    path = save_model(create_model(small, num_classes=10, in_chans=1, img_size=32), tmp_path / "m.pt")
    with pytest.raises(ValueError, match="num_classes: the model file was built with 10"):
        create_model(path, num_classes=1000)
    with pytest.raises(ValueError, match="holds"):
        create_model(arch, checkpoint=path)
    (tmp_path / "junk.pt").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="cannot read"):
        create_model(tmp_path / "junk.pt")


def test_onnx_without_its_packages_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    from results import standalone

    monkeypatch.setattr(standalone, "_ONNX_PACKAGES", ("onnx", "no_such_package_for_onnx"))
    with pytest.raises(
        ValueError, match=r"^format: onnx needs the package no_such_package_for_onnx; install"
    ):
        standalone.check_format("onnx")
    standalone.check_format("export")  # the other formats need nothing more


def test_the_exported_front_is_of_feasible_trials_as_the_report_draws_it() -> None:
    """A baseline evaluated over a search's limit dominates nothing on the front (results.analysis's rule)."""
    table = pd.DataFrame(
        {
            "number": [0, 1, 2, 3],
            "state": ["COMPLETE"] * 4,
            "top1": [90.0, 80.0, 70.0, 85.0],
            "macs": [9e9, 2e9, 1e9, 3e9],
            "feasible": [False, True, True, True],  # trial 0: a baseline over --max-macs
        }
    )
    assert front_numbers(table, ["top1:max", "macs:min"]) == [1, 2, 3]
    assert front_numbers(table.drop(columns="feasible"), ["top1:max", "macs:min"]) == [0, 1, 2, 3]
    as_text = table.astype({"feasible": str})  # "False", as a table read back without types gives it
    assert front_numbers(as_text, ["top1:max", "macs:min"]) == [1, 2, 3]


def _ladder_run(run: Path) -> Path:
    """A hand-made laddered study: lineage 0 at rungs 0 and 1 (both complete, one weights file, as a search
    keeps it: by architecture), and trial 2, which failed at rung 0."""
    from nas.study.trials_table import frame_from_rows, save_trials, trial_row

    arch = get_space("coatnet").baselines()["CoAtNet-0"].arch
    rows = []
    for number, rung, top1 in ((0, 0, 40.0), (1, 1, 60.0)):
        attrs = {"arch": arch.key, "arch_json": arch.to_json(), "rung": rung, "lineage": 0,
                 "metrics": {"top1": top1, "macs": 4e9, "weights": "w.pt"}}  # fmt: skip
        rows.append(trial_row(number, "COMPLETE", attrs, {"top1": top1, "macs": 4e9}))
    rows.append(trial_row(2, "FAIL", {"fail_reason": "diverged", "rung": 0, "lineage": 2}))
    (run / "weights").mkdir(parents=True)
    (run / "weights" / "w.pt").write_bytes(b"rung 1's training")
    save_trials(frame_from_rows(rows, ["top1", "macs"]), run)
    settings = {"objectives": ["top1:max", "macs:min"], "fidelity": "ladder", "rungs": 3}
    (run / "manifest.json").write_text(json.dumps({"study": "lad", "space": "coatnet", "settings": settings}))
    return run


def test_a_lower_rung_exports_no_weights_of_a_higher_one(tmp_path: Path) -> None:
    """The rungs of a lineage share one weights file, which holds the highest rung's training: exporting
    trial 0 (rung 0) gave rung 1's network as its model.pt."""
    run = _ladder_run(tmp_path / "run")
    folders = export_trials(run, tmp_path / "out", trials=[0, 1, 1], fmt="none")  # 1 named twice: once
    assert [f.name for f in folders] == ["trial_0", "trial_1"]
    assert not (folders[0] / "model.pt").exists() and (folders[0] / "arch.json").exists()
    assert (folders[1] / "model.pt").read_bytes() == b"rung 1's training"


def test_exporting_an_empty_front_is_one_sentence(tmp_path: Path) -> None:
    """No trial reached the ladder's top rung (2): ``--pareto`` exported nothing and said nothing, exit 0."""
    run = _ladder_run(tmp_path / "run")
    with pytest.raises(ValueError, match=r"has no front to export \(no trial has reached the ladder's top"):
        export_trials(run, tmp_path / "out", trials=None, fmt="none")
    assert not (tmp_path / "out").exists()

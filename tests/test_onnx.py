"""ONNX export (``nas export --format onnx``): every stem, block, mixer (at stride 1 and 2) and head kind,
every baseline of both spaces and seeded samples of each, run with onnxruntime, agree with PyTorch on real
Fashion-MNIST validation images."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch
from onnx_check import assert_onnx_agrees, validation_images
from typer.testing import CliRunner

from nas.cli.commands import app
from nas.core.arch import BLOCK_MIXERS, HEAD_KINDS, MIXER_NAMES, STEM_KINDS, Arch, Head, Stage, Stem
from nas.core.model import build_model
from results.standalone import ONNX_OPSET, onnx_metadata, write_standalone
from search_spaces import get_space

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install '.[onnx]')")

IMG = 32  # the CPU proxy profiles' image size: every stem still leaves a map of 2 x 2 or more
RANDOM_PER_SPACE = 5

# Four small networks that together hold every stem, every block x mixer pair, every mixer at stride 1 and
# at stride 2 (its downsampling pool) and every head; test_every_op_kind_is_covered holds them to that.
EVERY_OP = [
    Arch(
        Stem("conv", 16),
        (
            Stage("mbconv", "conv", 1, 16, stride=1),
            Stage("transformer", "rel", 1, 32),
            Stage("bottleneck", "ext", 1, 32, memory=16),
        ),
        Head("mlp", 32),
    ),
    Arch(
        Stem("resnet", 16),
        (
            Stage("bottleneck", "local", 1, 32, stride=1, k=3, heads=2),
            Stage("bottleneck", "rel", 1, 32),
            Stage("transformer", "conv", 1, 32),
        ),
        Head("norm"),
    ),
    Arch(
        Stem("attn", 16),
        (Stage("transformer", "local", 1, 32, k=5), Stage("transformer", "ext", 1, 32, stride=1)),
    ),
    Arch(
        Stem("patch", 32, patch=4),
        (Stage("transformer", "rel", 1, 32, stride=1), Stage("bottleneck", "conv", 1, 32)),
    ),
]


@pytest.fixture(scope="module")
def images() -> torch.Tensor:
    return validation_images(IMG)


def _export_and_check(arch: Arch, folder: Path, images: torch.Tensor) -> Path:
    model = build_model(arch, num_classes=10, in_chans=1, img_size=IMG).eval()
    (path,) = write_standalone(model, folder, "onnx")
    assert_onnx_agrees(model, path, images)
    return path


def test_every_op_kind_is_covered() -> None:
    stages = [stage for arch in EVERY_OP for stage in arch.stages]
    assert {arch.stem.kind for arch in EVERY_OP} == set(STEM_KINDS)
    assert {arch.head.kind for arch in EVERY_OP} == set(HEAD_KINDS)
    assert {(s.block, s.mixer) for s in stages} == {(b, m) for b, ms in BLOCK_MIXERS.items() for m in ms}
    assert {(s.mixer, s.stride) for s in stages} == set(itertools.product(MIXER_NAMES, (1, 2)))


@pytest.mark.parametrize("arch", EVERY_OP, ids=[a.key for a in EVERY_OP])
def test_onnx_agrees_for_every_op_kind(arch: Arch, images: torch.Tensor, tmp_path: Path) -> None:
    import onnx  # the onnx extra: installed with onnxruntime

    stored = onnx.load(str(_export_and_check(arch, tmp_path, images)))
    assert [o.version for o in stored.opset_import if o.domain == ""] == [ONNX_OPSET]
    meta = {p.key: p.value for p in stored.metadata_props}
    assert meta["opset"] == str(ONNX_OPSET) and Arch.from_json(meta["arch_json"]) == arch
    assert meta == onnx_metadata(build_model(arch, num_classes=10, in_chans=1, img_size=IMG))


@pytest.mark.parametrize(
    "normalization",
    [{"mean": [0.5, 0.5], "std": [0.25]}, {"mean": ["0.5"], "std": [True]}, {"mean": 0.5}, {}],
    ids=["wrong-channels", "not-numbers", "not-a-list", "none"],
)
def test_metadata_states_a_normalization_only_when_it_is_one_number_per_channel(normalization: dict) -> None:
    model = build_model(EVERY_OP[0], num_classes=10, in_chans=1, img_size=IMG)
    meta = onnx_metadata(model, normalization)
    assert "mean" not in meta and "std" not in meta and meta["input"].endswith("normalised as in training")
    meta = onnx_metadata(model, {"mean": [0.25], "std": [0.5]})
    assert (meta["mean"], meta["std"]) == ("[0.25]", "[0.5]") and "mean [0.25] and std [0.5]" in meta["input"]


def test_cli_help_states_the_opset() -> None:
    assert f"opset {ONNX_OPSET}" in " ".join(CliRunner().invoke(app, ["export", "--help"]).output.split())


def test_an_op_without_onnx_form_is_one_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local mixer's own kernel (a custom op) has no ONNX form: were it traced, the export says so."""
    from nas.core.ops import local_attention

    def kernel_always(self, q, k, v):  # the mixer's attend without its export branch
        b, heads, d, h, w = q.shape
        q, k, v = (t.permute(0, 1, 3, 4, 2).reshape(b * heads, h, w, d) for t in (q, k, v))
        out, _ = local_attention._local_attention(q, k, v, self.rel_row, self.rel_col, self.k)
        return out.view(b, heads, h, w, d).permute(0, 1, 4, 2, 3)

    monkeypatch.setattr(local_attention.LocalAttention, "attend", kernel_always)
    arch = Arch(Stem("conv", 8), (Stage("transformer", "local", 1, 16, k=3),))
    with pytest.raises(ValueError) as err:
        write_standalone(build_model(arch, num_classes=10, in_chans=1, img_size=8), tmp_path, "onnx")
    assert str(err.value) == (
        f"format: ONNX opset {ONNX_OPSET} cannot express {arch.key} "
        "(the op nas.local_attention has no ONNX form)"
    )


def _full_set() -> list[tuple[str, Arch]]:
    """Every baseline of both spaces and RANDOM_PER_SPACE seeded samples per space, shrunk by the space's
    CPU profile (1/4 width; 32 px)."""
    out = []
    for name in ("coatnet", "sasa"):
        space = get_space(name)
        profile = space.profile("cpu")
        assert profile.img_size == IMG
        archs = {f"{name}:{b}": base.arch for b, base in space.baselines().items()}
        archs |= {f"{name}:random{seed}": space.sample_random(seed) for seed in range(RANDOM_PER_SPACE)}
        out += [(label, profile.apply(arch)) for label, arch in archs.items()]
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("label", "arch"), _full_set(), ids=[label for label, _ in _full_set()])
def test_onnx_agrees_for_every_baseline_and_random_samples(
    label: str, arch: Arch, images: torch.Tensor, tmp_path: Path
) -> None:
    _export_and_check(arch, tmp_path, images)

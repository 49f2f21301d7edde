"""The ``micro`` space (issue 68): registered, enumerable (250 architectures in a fixed order with stable
ids), its baselines inside it, and every one of its networks builds and trains a step at 32 px."""

from __future__ import annotations

import pytest
import torch
from space_enumeration import count_by_enumeration
from typer.testing import CliRunner

from nas import build_model
from nas.cli.commands import app
from search_spaces import get_space, list_spaces
from search_spaces.micro import MicroSpace

SPACE = MicroSpace()
ARCHS = SPACE.architectures()
IDS = [SPACE.arch_id(arch) for arch in ARCHS]


def test_registered_and_listed() -> None:
    assert "micro" in list_spaces() and isinstance(get_space("micro"), MicroSpace)
    result = CliRunner().invoke(app, ["spaces", "--space", "micro"])
    assert result.exit_code == 0, result.output
    assert "micro" in result.output and "250" in result.output and "C-C-T" in result.output


def test_every_architecture_once_in_a_fixed_order() -> None:
    assert len(ARCHS) == SPACE.cardinality() == count_by_enumeration("micro") == 250
    assert len({arch.key for arch in ARCHS}) == len(set(IDS)) == 250
    assert [a.key for a in MicroSpace().architectures()] == [a.key for a in ARCHS]
    assert all(SPACE.contains(arch) for arch in ARCHS)
    assert {SPACE.sample_random(seed).key for seed in range(200)} <= {arch.key for arch in ARCHS}


def test_ids_are_stable() -> None:
    # the table is keyed by these: an id, and the place of an architecture, must never change
    assert IDS[:6] == ["conv-C-C-C", "conv-C-C-L3", "conv-C-C-L5", "conv-C-C-R", "conv-C-C-E", "conv-C-L3-C"]
    assert IDS[124:126] == ["conv-E-E-E", "patch-C-C-C"] and IDS[-1] == "patch-E-E-E"
    assert ARCHS[3].key == "conv16|C1x16s1|C1x32|Trel1x64"
    assert ARCHS[-1].key == "patch2-16|Text1x16m64s1|Text1x32m64|Text1x64m64"
    assert SPACE.from_id("patch-L5-R-E").key == "patch2-16|Tlocal1x16k5s1|Trel1x32|Text1x64m64"
    for arch_id, arch in zip(IDS, ARCHS, strict=True):
        assert SPACE.from_id(arch_id) == arch


@pytest.mark.parametrize("bad", ["conv-C-C", "conv-C-C-L7", "resnet-C-C-C", "", "conv-C-C-C-C"])
def test_a_bad_id_is_one_sentence(bad: str) -> None:
    with pytest.raises(ValueError, match="is not an id of the micro space; ids read STEM-S1-S2-S3"):
        SPACE.from_id(bad)


def test_an_architecture_outside_the_space_has_no_id() -> None:
    outside = get_space("coatnet").baselines()["CoAtNet-0"].arch
    with pytest.raises(ValueError, match="is not in the micro space"):
        SPACE.arch_id(outside)
    with pytest.raises(ValueError, match="is not in the micro space"):
        SPACE.arch_id(ARCHS[0].replace_stage(1, width=48))


def test_baselines_are_the_papers_micro_analogues_inside_the_space() -> None:
    baselines = SPACE.baselines()
    ids = {name: SPACE.arch_id(b.arch) for name, b in baselines.items()}
    assert ids == {
        "C-C-C": "conv-C-C-C",
        "C-C-T": "conv-C-C-R",
        "C-T-T": "conv-C-R-R",
        "SASA-L5": "conv-L5-L5-L5",
        "ViT-REL": "patch-R-R-R",
        "EANet": "patch-E-E-E",
    }
    assert all(SPACE.contains(b.arch) and "micro analogue" in b.paper.source for b in baselines.values())


def test_the_cpu_profile_trains_the_networks_as_they_are() -> None:
    profile = SPACE.profile("cpu")
    assert profile.img_size == 32 and all(profile.apply(arch) == arch for arch in ARCHS)


@pytest.mark.parametrize("arch_id", IDS)
def test_every_architecture_builds_and_trains_a_step(arch_id: str) -> None:
    arch = SPACE.from_id(arch_id)
    torch.manual_seed(0)
    model = build_model(arch, num_classes=10, in_chans=1, img_size=32)
    logits = model(torch.randn(2, 1, 32, 32))
    assert logits.shape == (2, 10) and torch.isfinite(logits).all()
    logits.logsumexp(1).sum().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)

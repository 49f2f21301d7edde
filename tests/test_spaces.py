"""Search spaces: define-by-run sampling, membership, baselines inside the space, proxy profiles."""

from __future__ import annotations

import math

import optuna
import pytest
import torch
from optuna.trial import FixedTrial
from space_enumeration import count_by_enumeration

from evaluators.supernet import Supernet
from nas import build_model
from nas.core.arch import Arch, Stage, Stem
from nas.core.model import SkipMetaInit
from search_spaces import get_space, list_spaces
from search_spaces.base import _ReplayTrial
from search_spaces.coatnet import CoAtNetSpace

SPACES = list_spaces()
BASELINES = [(space, name) for space in SPACES for name in get_space(space).baselines()]


def test_registry() -> None:
    # the built-in spaces, and the plugins installed (tests/conftest.py installs the example)
    assert {"coatnet", "sasa"} <= set(SPACES) and sorted(SPACES) == SPACES
    with pytest.raises(ValueError, match=f"unknown search space 'nope'; available: {', '.join(SPACES)}$"):
        get_space("nope")


@pytest.mark.parametrize(("space", "name"), BASELINES, ids=[f"{s}:{n}" for s, n in BASELINES])
def test_baseline_is_inside_its_space_and_replays(space: str, name: str) -> None:
    sp = get_space(space)
    arch = sp.baselines()[name].arch
    assert sp.why_not(arch) is None
    assert sp.sample(FixedTrial(sp.encode(arch))) == arch


def test_baseline_layouts_follow_the_papers() -> None:
    coat = get_space("coatnet").baselines()
    assert coat["CoAtNet-0"].arch.key == "conv64|C2x96|C3x192|Trel5x384|Trel2x768|mlp768"
    assert coat["CoAtNet-4"].arch.key == "conv192|C2x192|C12x384|Trel28x768|Trel2x1536|mlp1536"
    assert coat["C-C-T-T"].arch == coat["CoAtNet-0"].arch
    assert [s.block for s in coat["C-T-T-T"].arch.stages] == ["mbconv"] + ["transformer"] * 3
    vit = coat["ViT_REL"].arch
    assert vit.stem == Stem("patch", 384, patch=16) and {s.mixer for s in vit.stages} == {"rel"}
    sasa = get_space("sasa").baselines()
    r50 = sasa["ResNet-50 full-attention"].arch
    assert r50.stem.kind == "attn" and [s.depth for s in r50.stages] == [3, 4, 6, 3]
    assert {(s.mixer, s.k, s.heads) for s in r50.stages} == {("local", 7, 8)}
    assert {s.mixer for s in sasa["ResNet-26 conv"].arch.stages} == {"conv"}


@pytest.mark.parametrize("space", SPACES)
def test_outside_archs_are_refused_with_a_reason(space: str) -> None:
    sp = get_space(space)
    base = next(iter(sp.baselines().values())).arch
    wrong_depth = base.replace_stage(0, depth=64)  # the most blocks a stage may have (nas.core.bounds)
    why = sp.why_not(wrong_depth)
    # a space that chooses depths names the range; one of fixed depths (micro) the network it builds instead
    assert "outside the space's range" in why if "s1.depth" in sp.decisions() else "the space builds" in why
    heads = (
        base.replace_stage(-1, heads=1) if base.stages[-1].mixer != "conv" else base.replace_stage(-1, k=5)
    )
    assert not sp.contains(heads)
    alien = Arch(Stem("conv", 64), (Stage("bottleneck", "ext", 1, 256),))
    assert sp.why_not(alien)


def test_replay_trial_refuses_values_outside_the_choices() -> None:
    trial = _ReplayTrial({"a": 3, "b": "x"})
    assert trial.suggest_int("a", 1, 3) == 3
    with pytest.raises(ValueError, match="b: 'x' is not a choice"):
        trial.suggest_categorical("b", ("y", "z"))


def test_sasa_cardinality_matches_enumeration() -> None:
    assert get_space("sasa").cardinality() == count_by_enumeration("sasa") == 209952


def test_coatnet_cardinality_formula() -> None:
    ops = 3 + 5  # mbconv, rel, ext, local x 5 extents
    per_stage = [ops * 3 * 4, ops * 12 * 4, ops * 28 * 4, ops * 3 * 4]
    expected = (
        3 * math.prod(per_stage) + math.prod(per_stage) + math.prod(per_stage[1:]) + math.prod(per_stage[2:])
    )
    assert get_space("coatnet").cardinality() == expected


@pytest.mark.parametrize("space", SPACES)
def test_sampling_with_optuna_is_seeded_and_inside_the_space(space: str) -> None:
    sp = get_space(space)

    def keys(seed: int) -> list[str]:
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
        archs = []
        for _ in range(20):
            trial = study.ask()
            arch = sp.sample(trial)
            assert sp.why_not(arch) is None
            assert sp.sample(FixedTrial(trial.params)) == arch
            archs.append(arch.key)
            study.tell(trial, 0.0)
        return archs

    first = keys(7)
    assert first == keys(7) and first != keys(8)
    assert len(set(first)) > 15


@pytest.mark.parametrize("space", SPACES)
def test_proxy_profiles_shrink_into_valid_archs(space: str) -> None:
    sp = get_space(space)
    profile = sp.profile("cpu")
    big = sp.baselines()[next(iter(sp.baselines()))].arch
    small = profile.apply(big)
    assert all(s.width <= b.width for s, b in zip(small.stages, big.stages, strict=True))
    relaxed = min(profile.relax_strides, sum(stage.stride == 2 for stage in big.stages))
    assert small.stride == big.stride // 2**relaxed  # relaxed stages run at stride 1 for small images
    assert relaxed == 1 or space not in ("coatnet", "sasa")  # the built-ins' cpu profiles relax one
    model = build_model(small, num_classes=10, in_chans=1, img_size=profile.img_size)
    assert model(torch.randn(2, 1, profile.img_size, profile.img_size)).shape == (2, 10)
    with pytest.raises(ValueError, match="unknown proxy profile 'tiny'"):
        sp.profile("tiny")


# --- variants of the coatnet space (its constructor's keyword arguments) -------------------------------


def test_coatnet_variant_cardinality_matches_enumeration() -> None:
    space = CoAtNetSpace(
        ops=("mbconv", "local"),
        local_k=(3, 5),
        depths=((1, 2), (1, 1), (2, 3)),
        widths=((64, 96), (128,), (256, 512)),
        stem_widths=(32, 64),
        patches=(8,),
    )
    assert space.strides == (4, 8, 16)
    assert space.cardinality() == count_by_enumeration(space)
    assert CoAtNetSpace(patches=()).cardinality() == 3 * math.prod(
        [8 * 3 * 4, 8 * 12 * 4, 8 * 28 * 4, 8 * 3 * 4]
    )


def test_coatnet_variants_keep_the_baselines_they_contain() -> None:
    default = get_space("coatnet").baselines()
    assert CoAtNetSpace(local_k=(7,)).baselines() == default  # no baseline uses local attention
    assert set(CoAtNetSpace(patches=(4, 8)).baselines()) == set(default) - {"ViT_REL"}
    assert CoAtNetSpace(ops=("mbconv", "ext")).baselines() == {"C-C-C-C": default["C-C-C-C"]}
    assert CoAtNetSpace(depths=((1, 3),) * 5, widths=((64,),) * 5).baselines() == {}


def test_a_five_stage_two_op_coatnet_variant_samples_round_trips_and_builds() -> None:
    space = CoAtNetSpace(
        ops=("mbconv", "rel"),
        depths=((1, 3), (1, 12), (1, 28), (1, 3), (1, 2)),
        widths=((64, 96, 128, 192), (128, 192, 256, 384), (256, 384, 512, 768), (512, 768), (1024,)),
    )
    assert space.strides == (4, 8, 16, 32, 64) and "5 stages" in space.description
    assert set(space.choices()) == {"stem", "stem.width", "stem.patch", "s1", "s2", "s3", "s4", "s5"}
    archs = [space.sample_random(seed) for seed in range(30)]
    assert {a.stem.kind for a in archs} == {"conv", "patch"}
    for arch in archs:
        assert space.why_not(arch) is None
        assert space.sample(FixedTrial(space.encode(arch))) == arch
        assert {s.mixer for s in arch.stages} <= {"conv", "rel"} and arch.stride == 64
    last = archs[0].stages[-1]
    ext = Stage("transformer", "ext", last.depth, last.width, stride=last.stride)
    alien = Arch(archs[0].stem, (*archs[0].stages[:-1], ext), archs[0].head)
    assert "s5: transformer(ext) is not a choice" in space.why_not(alien)
    torch.manual_seed(0)
    supernet = Supernet(space, space.profile("cpu"), num_classes=10, in_chans=1).eval()
    x = torch.randn(2, 1, 32, 32)
    for arch in archs[:3]:
        supernet.set_active(arch)
        with torch.no_grad():
            torch.testing.assert_close(supernet.extract(arch).eval()(x), supernet(x), atol=1e-5, rtol=0)
        with torch.device("meta"), SkipMetaInit():  # the network itself, at 224 px: its shapes only
            model = build_model(arch, img_size=224)
        assert model.feature_size == (4, 4) and model.num_features == arch.stages[-1].width


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ops": ("mbconv", "conv")}, "ops: "),
        ({"ops": ()}, "ops: "),
        ({"ops": ("local",), "local_k": ()}, "local_k: "),
        ({"depths": ((1, 3),) * 3}, "depths and widths: one entry per stage each, got 3 and 4"),
        ({"depths": ((2, 1),) * 4}, "every range 1 <= low <= high"),
        ({"depths": ((1, 3),) * 2, "widths": ((64,),) * 2}, "patches: .* strides \\(4, 8\\)"),
    ],
)
def test_coatnet_variant_arguments_are_checked(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CoAtNetSpace(**kwargs)

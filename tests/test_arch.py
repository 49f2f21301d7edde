"""The architecture encoding: canonical values, lossless round trips, clear rejection of invalid input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import archs

from nas.core.arch import Arch, Head, Stage, Stem

COATNET0 = Arch(
    Stem("conv", 64),
    (
        Stage("mbconv", "conv", 2, 96),
        Stage("mbconv", "conv", 3, 192),
        Stage("transformer", "rel", 5, 384),
        Stage("transformer", "rel", 2, 768),
    ),
)


def test_coatnet0_key_and_defaults() -> None:
    assert COATNET0.key == "conv64|C2x96|C3x192|Trel5x384|Trel2x768"
    assert COATNET0.stages[2].heads == 12  # CoAtNet's head size 32
    assert COATNET0.stages[0].k == 3
    assert COATNET0.stride == 32 and COATNET0.min_img_size == 32
    assert COATNET0.num_features == 768 and COATNET0.depth == 12


def test_canonical_defaults_make_equal_values() -> None:
    explicit = Stage("transformer", "rel", 5, 384, stride=2, expand=4, heads=12)
    assert explicit == Stage("transformer", "rel", 5, 384)
    assert Stage("transformer", "ext", 1, 64).memory == 64
    assert Stage("bottleneck", "local", 1, 256, k=7).heads == 8


def test_key_shows_non_defaults() -> None:
    arch = Arch(
        Stem("patch", 96, patch=16),
        (
            Stage("bottleneck", "local", 3, 256, k=7, stride=1, heads=4),
            Stage("transformer", "ext", 2, 128, memory=32, expand=2),
            Stage("mbconv", "conv", 1, 64, k=5),
        ),
        Head("mlp", 128),
    )
    assert arch.key == "patch16-96|Blocal3x256k7h4s1|Text2x128m32e2|C1x64k5|mlp128"


@settings(max_examples=300, deadline=None)
@given(archs())
def test_flat_and_json_round_trip(arch: Arch) -> None:
    flat = arch.to_flat()
    assert all(isinstance(v, (str, int)) for v in flat.values())
    assert Arch.from_flat(flat) == arch
    assert Arch.from_json(arch.to_json()) == arch
    assert Arch.from_flat(json.loads(json.dumps(flat))).key == arch.key


@settings(max_examples=100, deadline=None)
@given(st.lists(archs(max_stages=2), min_size=2, max_size=40))
def test_key_identifies_the_arch(many: list[Arch]) -> None:
    for a in many:
        for b in many:
            assert (a.key == b.key) == (a == b)


def test_save_and_load(tmp_path) -> None:
    path = tmp_path / "a.json"
    COATNET0.save(path)
    assert Arch.load(path) == COATNET0


def test_from_flat_fills_defaults() -> None:
    flat = {
        "stem.kind": "conv",
        "stem.width": 64,
        "s1.block": "transformer",
        "s1.mixer": "local",
        "s1.depth": 2,
        "s1.width": 64,
        "s1.k": 5,
        "s1.memory": None,
    }
    arch = Arch.from_flat(flat)
    assert arch.stages[0] == Stage("transformer", "local", 2, 64, k=5)
    assert arch.head == Head("fc")


INVALID_STAGES = [
    (dict(block="transformer", mixer="local", depth=1, width=64, k=4), "k: the 'local' mixer needs an odd"),
    (
        dict(block="transformer", mixer="local", depth=1, width=64, k=1),
        "odd whole number k between 3 and 31, got 1",
    ),
    (dict(block="transformer", mixer="local", depth=1, width=64), "got None"),
    (dict(block="bottleneck", mixer="conv", depth=1, width=64, k=2), "k: the 'conv' mixer"),
    (dict(block="transformer", mixer="rel", depth=1, width=64, k=3), "k: only the 'conv' and 'local'"),
    (
        dict(block="transformer", mixer="rel", depth=1, width=0),
        "width: must be a whole number between 1 and 8192, got 0",
    ),
    (
        dict(block="transformer", mixer="rel", depth=0, width=64),
        "depth: must be a whole number between 1 and 64, got 0",
    ),
    (dict(block="transformer", mixer="rel", depth=True, width=64), "depth: must be a whole number"),
    (dict(block="transformer", mixer="rel", depth=1.5, width=64), "depth: must be a whole number"),
    # sizes are bounded, so a value is refused before anything of its size is made
    (dict(block="transformer", mixer="rel", depth=10**9, width=64), "between 1 and 64, got 1000000000"),
    (
        dict(block="transformer", mixer="rel", depth=1, width=10**6),
        "width: must be a whole number between 1 and 8192",
    ),
    (dict(block="transformer", mixer="local", depth=1, width=64, k=33), "between 3 and 31, got 33"),
    (
        dict(block="transformer", mixer="rel", depth=1, width=64, heads=512),
        "heads: must be a whole number between 1 and 256",
    ),
    (
        dict(block="transformer", mixer="ext", depth=1, width=64, memory=10**6),
        "memory: must be a whole number between 1 and 4096",
    ),
    (
        dict(block="mbconv", mixer="conv", depth=1, width=64, expand=64),
        "expand: must be a whole number between 1 and 16",
    ),
    (dict(block="mbconv", mixer="conv", depth=1, width=64, stride=True), "stride: must be 1 or 2, got True"),
    (dict(block="mbconv", mixer="conv", depth=1, width=64, stride=2.0), "stride: must be 1 or 2, got 2.0"),
    (dict(block="transformer", mixer="rel", depth=10**5000, width=64), "got an integer of 16610 bits"),
    (
        dict(block="resnext", mixer="conv", depth=1, width=64),
        "block: unknown value 'resnext'; allowed: mbconv",
    ),
    (
        dict(block="transformer", mixer="swin", depth=1, width=64),
        "mixer: unknown value 'swin'; allowed: conv",
    ),
    (
        dict(block="mbconv", mixer="local", depth=1, width=64, k=7),
        "not allowed in a 'mbconv' block; allowed: conv",
    ),
    (
        dict(block="transformer", mixer="rel", depth=1, width=96, heads=5),
        "heads: the 'rel' mixer works on 96",
    ),
    (dict(block="transformer", mixer="local", depth=1, width=24, k=3, heads=8), "must be even"),
    (
        dict(block="transformer", mixer="conv", depth=1, width=64, heads=2),
        "heads: the 'conv' mixer has no heads",
    ),
    (dict(block="transformer", mixer="rel", depth=1, width=64, stride=3), "stride: must be 1 or 2"),
    (dict(block="bottleneck", mixer="conv", depth=1, width=66), "width: a bottleneck of expansion 4"),
    (
        dict(block="transformer", mixer="ext", depth=1, width=64, memory=0),
        "memory: must be a whole number between 1 and 4096, got 0",
    ),
    (dict(block="transformer", mixer="rel", depth=1, width=64, memory=8), "memory: only the 'ext' mixer"),
]


@pytest.mark.parametrize(("kwargs", "message"), INVALID_STAGES)
def test_invalid_stage_names_field_and_allowed_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        Stage(**kwargs)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Stem("vit", 64), "stem.kind: unknown value 'vit'; allowed: conv, resnet, attn, patch"),
        (lambda: Stem("patch", 64), "stem.patch: must be a whole number between 1 and 64, got None"),
        (
            lambda: Stem("patch", 64, patch=4096),
            "stem.patch: must be a whole number between 1 and 64, got 4096",
        ),
        (lambda: Stem("conv", 10**9), "stem.width: must be a whole number between 1 and 8192"),
        (lambda: Head("mlp", 10**9), "head.width: must be a whole number between 1 and 8192"),
        (
            lambda: Arch(Stem("conv", 8), (Stage("mbconv", "conv", 1, 8),) * 17),
            "between 1 and 16 stages, got 17",
        ),
        (lambda: Stem("conv", 64, patch=4), "stem.patch: only the 'patch' stem"),
        (lambda: Stem("attn", 60), "stem.width: the attention stem has 8 heads"),
        (lambda: Head("mlp"), "head.width: must be a whole number between 1 and 8192"),
        (lambda: Head("fc", 10), "head.width: only the 'mlp' head"),
        (lambda: Arch(Stem("conv", 8), ()), "stages: must be a non-empty sequence of Stage"),
    ],
)
def test_invalid_stem_head_arch(build, message: str) -> None:
    with pytest.raises(ValueError) as info:
        build()
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("flat", "message"),
    [
        ({**COATNET0.to_flat(), "s3.k": 4}, "s3.k: only the 'conv' and 'local' mixers take k"),
        ({**COATNET0.to_flat(), "s2.width": 0}, "s2.width: must be a whole number between 1 and 8192, got 0"),
        ({**COATNET0.to_flat(), "s17.depth": 1}, "s17.depth: stages are numbered s1 to s16 at most"),
        ({**COATNET0.to_flat(), "s1000000000.depth": 1}, "unknown field"),
        (
            {**COATNET0.to_flat(), "s2.depth": "9" * 5000},
            "s2.depth: must be a whole number between 1 and 64, got '999",
        ),
        ({**COATNET0.to_flat(), "x" * 10**6: 1}, "'xxxxx"),
        ({**COATNET0.to_flat(), 7: 1}, "7: unknown field"),
        ({**COATNET0.to_flat(), "s9.foo": 1}, "s9.foo: unknown field"),
        ({**COATNET0.to_flat(), "stem.size": 1}, "stem.size: unknown field"),
        ({k: v for k, v in COATNET0.to_flat().items() if not k.startswith("s2.")}, "s2: missing"),
        ({k: v for k, v in COATNET0.to_flat().items() if k != "s1.mixer"}, "s1.mixer: missing"),
        ({k: v for k, v in COATNET0.to_flat().items() if k != "stem.kind"}, "stem.kind: missing"),
        ({"stem.kind": "conv", "stem.width": 8}, "stages: no stage fields"),
        ([1, 2], "arch: expected a dict"),
    ],
)
def test_invalid_flat_dicts(flat, message: str) -> None:
    with pytest.raises(ValueError) as info:
        Arch.from_flat(flat)
    assert message in str(info.value)


def test_truncated_and_missing_files(tmp_path) -> None:
    path = tmp_path / "a.json"
    path.write_text(COATNET0.to_json()[:40])
    with pytest.raises(ValueError, match="not valid JSON"):
        Arch.load(path)
    with pytest.raises(ValueError, match="cannot be read"):
        Arch.load(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("stage", "limit", "expected"),
    [
        (Stage("transformer", "rel", 1, 96), 8, 8),  # 96 / 8 = 12
        (Stage("transformer", "rel", 1, 40, heads=1), 8, 8),  # 40 / 8 = 5
        (Stage("transformer", "local", 1, 40, k=3, heads=1), 8, 5),  # head channels must be even: 40 / 5
        (Stage("bottleneck", "local", 1, 96, k=3, heads=1), 8, 6),  # mixer on 24 channels: 24 / 6 = 4
        (Stage("transformer", "ext", 1, 21, heads=1), 8, 7),
    ],
)
def test_max_heads(stage: Stage, limit: int, expected: int) -> None:
    assert stage.max_heads(limit) == expected

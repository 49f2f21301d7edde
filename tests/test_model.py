"""The model builder: any valid Arch builds and runs at any input size its stride allows."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from strategies import archs
from test_ops import _check_runs_and_trains

from evaluators.proxy import training_memory_format
from nas import build_model
from nas.core.arch import Arch, Head, Stage, Stem
from search_spaces import get_space, list_spaces

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hybrid.json"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(archs(max_stages=3, max_width=32, max_depth=2))
def test_random_archs_build_run_and_train(arch: Arch) -> None:
    torch.manual_seed(0)
    size = 2 * arch.min_img_size  # every map >= 2x2: attention over a single token has no gradient to learn
    model = build_model(arch, num_classes=5, img_size=size)
    assert model.num_features == arch.stages[-1].width
    for side in (arch.min_img_size, size + 3):
        x = torch.randn(2, 3, side, side)
        features = model.forward_features(x)
        last = math.ceil(side / arch.stride)
        assert features.shape == (2, model.num_features, last, last)
    _check_runs_and_trains(model, torch.randn(2, 3, size, size), (2, 5))


def test_example_arch_at_224_and_at_a_proxy_size() -> None:
    arch = Arch.load(EXAMPLE)
    model = build_model(arch, num_classes=10, img_size=224).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 224, 224)).shape == (1, 10)
        assert model.forward_features(torch.randn(1, 3, 64, 96)).shape == (1, 768, 2, 3)
    assert model.feature_size == (7, 7)


def test_image_too_small_is_a_clear_error() -> None:
    arch = Arch(Stem("conv", 16), (Stage("mbconv", "conv", 1, 16),) * 4)
    with pytest.raises(
        ValueError,
        match=r"image size 16x16 is too small for .*total stride is 32, so each side must be at least 32 px",
    ):
        build_model(arch, img_size=16)


def test_heads_and_drop_path() -> None:
    arch = Arch(Stem("patch", 32, patch=4), (Stage("transformer", "rel", 3, 32, stride=1),), Head("mlp", 24))
    model = build_model(arch, num_classes=7, img_size=16, drop_path_rate=0.2, drop_rate=0.1)
    rates = [getattr(block.drop_path, "drop_prob", 0.0) for block in model.stages[0]]
    assert rates == pytest.approx([0.0, 0.1, 0.2])  # linear in depth, as timm
    assert model.forward_head(torch.randn(2, 32, 4, 4), pre_logits=True).shape == (2, 24)
    assert model(torch.randn(2, 3, 16, 16)).shape == (2, 7)


@pytest.mark.parametrize("space", list_spaces())
def test_a_network_in_channels_last_computes_what_it_does_in_nchw(space: str) -> None:
    # every baseline's proxy network and two seeded samples, one grey channel as Fashion-MNIST's: the same
    # values (float64), its features channels-last throughout, and the trainers' format on the CPU
    sp = get_space(space)
    profile = sp.profile("cpu")
    archs = [b.arch for b in sp.baselines().values()] + [sp.sample_random(seed) for seed in (0, 1)]
    for arch in archs:
        torch.manual_seed(0)
        model = build_model(profile.apply(arch), num_classes=10, in_chans=1, img_size=profile.img_size)
        model = model.double().eval()
        x = torch.randn(2, 1, profile.img_size, profile.img_size, dtype=torch.float64)
        with torch.no_grad():
            nchw = model(x)
            features = model.use_memory_format(torch.channels_last).forward_features(x)
            torch.testing.assert_close(model(x), nchw, atol=1e-10, rtol=1e-10, msg=arch.key)
        assert features.is_contiguous(memory_format=torch.channels_last) or features.shape[-2:] == (1, 1)
        assert model.use_memory_format(torch.contiguous_format).memory_format is torch.contiguous_format
    assert training_memory_format(torch.device("cpu")) is torch.channels_last
    assert training_memory_format(torch.device("cuda")) is torch.contiguous_format

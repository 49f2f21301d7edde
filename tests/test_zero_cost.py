"""Zero-cost rankers: finite on every baseline and sample of both spaces at the cpu proxy size, seeded and
deterministic, side-effect free, and equal to hand-computed values on networks small enough to do by hand."""

from __future__ import annotations

import dataclasses
import functools
import math

import optuna
import pytest
import torch
import torch.nn as nn

from evaluators.zero_cost import ZERO_COST, naswot_of, score, synflow_of
from nas import build_model
from nas.core.arch import Arch
from search_spaces import get_space, list_spaces

SPACES = list_spaces()  # the built-in spaces and the installed plugins (tests/conftest.py installs one)
BASELINES = [(space, name) for space in SPACES for name in get_space(space).baselines()]
TASK = {"in_chans": 1, "num_classes": 10}  # Fashion-MNIST-like: grey images, 10 classes


@functools.cache
def _batch(img_size: int) -> torch.Tensor:
    """A small stand-in minibatch; NASWOT only needs distinct images."""
    return torch.randn(6, TASK["in_chans"], img_size, img_size, generator=torch.Generator().manual_seed(0))


def _scores(space: str, arch: Arch) -> dict[str, float]:
    img_size = get_space(space).profile("cpu").img_size
    return {
        name: score(name, arch, img_size=img_size, batch=_batch(img_size), seed=0, **TASK)
        for name in ZERO_COST
    }


def _cpu(space: str, arch: Arch) -> Arch:
    return get_space(space).profile("cpu").apply(arch)


@pytest.mark.parametrize(("space", "name"), BASELINES)
def test_every_ranker_is_finite_on_every_baseline_at_the_cpu_profile(space: str, name: str) -> None:
    scores = _scores(space, _cpu(space, get_space(space).baselines()[name].arch))
    assert all(isinstance(v, float) and math.isfinite(v) for v in scores.values()), scores


@pytest.mark.parametrize("space", SPACES)
def test_every_ranker_is_finite_on_seeded_samples(space: str) -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(2):
        scores = _scores(space, _cpu(space, get_space(space).sample(study.ask())))
        assert all(math.isfinite(v) for v in scores.values()), scores


def test_scores_depend_on_the_seed_alone_and_leave_the_global_rng_alone() -> None:
    arch = _cpu("coatnet", get_space("coatnet").baselines()["ViT_REL"].arch)  # attention, LN, tanh; cheap
    rng = torch.random.get_rng_state()
    kwargs = {"img_size": 32, "batch": _batch(32), **TASK}
    for name in ("synflow", "naswot"):
        first = score(name, arch, seed=3, **kwargs)
        assert score(name, arch, seed=3, **kwargs) == first
        assert score(name, arch, seed=4, **kwargs) != first
    assert torch.equal(torch.random.get_rng_state(), rng)


def test_synflow_and_naswot_leave_the_model_exactly_as_it_was() -> None:
    arch = _cpu("sasa", get_space("sasa").baselines()["ResNet-26 conv"].arch)
    model = build_model(arch, img_size=32, **TASK)
    model.stages.eval()  # a mix of modes, to check each module gets its own flag back
    before = {k: v.clone() for k, v in model.state_dict().items()}
    modes = [m.training for m in model.modules()]
    synflow_of(model, (1, 1, 32, 32))
    naswot_of(model, _batch(32))
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) and before[k].dtype == after[k].dtype for k in before)
    assert [m.training for m in model.modules()] == modes
    assert not any(m._forward_hooks for m in model.modules())


# --- hand-computed values -----------------------------------------------------------------------------


def _linear(weight: list[list[float]], bias: list[float]) -> nn.Linear:
    layer = nn.Linear(len(weight[0]), len(weight))
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.copy_(torch.tensor(bias))
    return layer


def _two_linear_layers(*middle: nn.Module) -> nn.Sequential:
    return nn.Sequential(
        _linear([[1, -2], [3, 0], [-1, 1]], [1, -1, 0]), *middle, _linear([[2, -1, 1]], [-3])
    )


def test_synflow_of_a_linear_network_is_its_closed_form() -> None:
    # R = 1^T |W2| (|W1| 1 + |b1|) + |b2| on an all-ones input. With c = 1^T |W2| = (2, 1, 1),
    # r = |W1| 1 = (3, 3, 2), |b1| = (1, 1, 0): |theta * dR/dtheta| sums to
    #   W1: c . r = 11,  b1: c . |b1| = 3,  W2: c . (r + |b1|) = 14,  b2: |b2| = 3  ->  31.
    assert synflow_of(_two_linear_layers(), (1, 2)) == pytest.approx(math.log(31), rel=1e-12)


def test_synflow_bypasses_normalization_and_the_tanh_head() -> None:
    bn = nn.BatchNorm1d(3)
    with torch.no_grad():  # any scale or shift would change the score if BatchNorm were not bypassed
        bn.weight.fill_(5.0)
        bn.bias.fill_(-2.0)
    net = _two_linear_layers(bn, nn.LayerNorm(3), nn.Tanh())
    assert synflow_of(net, (1, 2)) == pytest.approx(math.log(31), rel=1e-12)


class _Gated(nn.Module):
    """y = softmax(W_q x) * (W_v x): an attention-like weighting of values."""

    def __init__(self) -> None:
        super().__init__()
        self.q = _linear([[1, 0], [0, 0]], [0, 0])
        self.v = _linear([[2, -1], [0, 1]], [0, 0])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.q(x).softmax(-1) * self.v(x)


def test_synflow_holds_attention_weights_constant() -> None:
    # p = softmax(|W_q| 1) = (e, 1) / (e + 1) is a constant: R = p . (|W_v| 1) = (3e + 1) / (e + 1), which
    # is also the whole score (W_v's; W_q scores 0). A live softmax would add p1 (3 - R) for W_q[0, 0].
    expected = math.log((3 * math.e + 1) / (math.e + 1))
    assert synflow_of(_Gated(), (1, 2)) == pytest.approx(expected, rel=1e-12)


def _coded_net() -> nn.Sequential:
    # pre-activations of x = (a, b): (a, b, a + b) -> ReLU; then (u + v - w) -> GELU
    return nn.Sequential(
        _linear([[1, 0], [0, 1], [1, 1]], [0, 0, 0]), nn.ReLU(), _linear([[1, 1, -1]], [0]), nn.GELU()
    )


def test_naswot_is_the_log_determinant_of_the_hamming_kernel() -> None:
    # codes on x1 = (1, -1), x2 = (-1, 1), x3 = (1, 1): ReLU 100, 010, 111 (0 is not > 0);
    # GELU of (1, 1, 0): 1, 1, 0. N_A = 4 units; Hamming distances d12 = 2, d13 = 3, d23 = 3, so
    # K = 4 - d = [[4, 2, 1], [2, 4, 1], [1, 1, 4]] and det K = 4 * 15 - 2 * 7 + 1 * (-2) = 44.
    batch = torch.tensor([[1.0, -1.0], [-1.0, 1.0], [1.0, 1.0]])
    assert naswot_of(_coded_net(), batch) == pytest.approx(math.log(44), rel=1e-12)


def test_naswot_of_inputs_the_network_cannot_tell_apart_is_minus_infinity() -> None:
    batch = torch.tensor([[1.0, -1.0], [2.0, -3.0], [1.0, 1.0]])  # x1 and x2 share every code
    assert naswot_of(_coded_net(), batch) == -math.inf


# --- sanity and errors ----------------------------------------------------------------------------------


def test_a_wider_network_scores_higher_on_params_and_macs() -> None:
    profile = get_space("sasa").profile("cpu")
    arch = get_space("sasa").baselines()["ResNet-26 conv"].arch
    narrow, wide = profile.apply(arch), dataclasses.replace(profile, width_mult=0.5).apply(arch)
    for name in ("params", "macs"):
        assert score(name, wide, img_size=32, **TASK) > score(name, narrow, img_size=32, **TASK)


def test_bad_requests_are_refused_with_a_sentence() -> None:
    arch = _cpu("sasa", get_space("sasa").baselines()["ResNet-26 conv"].arch)
    with pytest.raises(ValueError, match="unknown zero-cost ranker 'jacov'"):
        score("jacov", arch, img_size=32)
    with pytest.raises(ValueError, match="needs a minibatch"):
        score("naswot", arch, img_size=32, **TASK)
    with pytest.raises(ValueError, match="expected"):
        score("naswot", arch, img_size=32, batch=torch.randn(4, 3, 32, 32), **TASK)

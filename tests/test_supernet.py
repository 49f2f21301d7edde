"""The weight-sharing supernet: paths equal their extracted networks, and every shared weight is used."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from evaluators.supernet import Supernet
from nas.core.arch import Arch
from nas.core.model import build_model
from nas.core.ops._layers import channels_last
from search_spaces import get_space, list_spaces

SPACES = list_spaces()  # the built-in spaces and the installed plugins (tests/conftest.py installs one)
# narrowed spaces (--narrow): their supernets hold every path of the narrowing and no weight outside it
NARROWED = {
    "coatnet-narrowed": (
        "coatnet",
        {"stem": "conv", "stem.width": "128,192", "s1.op": "mbconv", "s2.width": "128,192",
         "s3.op": "rel,ext,local", "s3.k": "3,5", "s4.depth": "1..2", "s4.width": "768"},
    ),
    "coatnet-patch": ("coatnet", {"stem": "patch", "stem.patch": "8,16", "s3.op": "mbconv,local"}),
    "sasa-narrowed": ("sasa", {"stem": "resnet", "s2.op": "local", "s2.k": "3,5", "s3.depth": "4..5"}),
}  # fmt: skip


@pytest.fixture(scope="module", params=[*SPACES, *NARROWED])
def supernet(request: pytest.FixtureRequest) -> Supernet:
    space = get_space(*NARROWED[request.param]) if request.param in NARROWED else get_space(request.param)
    torch.manual_seed(0)
    return Supernet(space, space.profile("cpu"), num_classes=10, in_chans=1)


def _with_stage(arch: Arch, index: int, **changes: object) -> Arch:
    stages = list(arch.stages)
    stages[index] = dataclasses.replace(stages[index], **changes)
    return dataclasses.replace(arch, stages=tuple(stages))


def test_extract_equals_active_path(supernet: Supernet) -> None:
    rng = random.Random(0)
    x = torch.randn(3, 1, 32, 32)
    supernet.eval()
    for _ in range(8):
        arch = supernet.sample(rng)
        ran = supernet.set_active(arch)
        assert ran == supernet.profile.apply(arch)
        with torch.no_grad():
            path_out = supernet(x)
            alone = supernet.extract(arch).eval()
            assert alone.arch == ran
            torch.testing.assert_close(alone(x), path_out, atol=1e-5, rtol=0)


@pytest.mark.parametrize("space_name", SPACES)
def test_a_channels_last_supernet_computes_what_it_does_in_nchw(space_name: str) -> None:
    """Its paths (cached before and built after the switch) and the networks it extracts run channels-last
    and give the NCHW path's outputs and gradients, to float64 rounding."""
    space = get_space(space_name)
    torch.manual_seed(0)
    supernet = Supernet(space, space.profile("cpu"), num_classes=10, in_chans=1).double()
    archs = [supernet.sample(random.Random(i)) for i in range(3)]
    x = torch.randn(4, 1, 32, 32, dtype=torch.float64)

    def run(arch: Arch) -> tuple[torch.Tensor, list[torch.Tensor]]:
        supernet.zero_grad(set_to_none=True)
        supernet.set_active(arch)
        out = supernet(x)
        out.square().sum().backward()
        return out.detach(), [p.grad.clone() if p.grad is not None else None for p in supernet.parameters()]

    before = [run(arch) for arch in archs]
    supernet.use_memory_format(torch.channels_last)
    after = [run(arch) for arch in [*archs, supernet.sample(random.Random(99))]]
    for arch in [*archs, supernet.sample(random.Random(99))]:  # paths cached before the switch, one after
        supernet.set_active(arch)
        alone = build_model(supernet.profile.apply(arch), 10, 1, 32).double()
        assert _nchw_convolutions(supernet, x) == _nchw_convolutions(
            alone.use_memory_format(torch.channels_last), x
        ), "a path's maps are not in the format a channels-last network of its own keeps them in"
    for (out0, grads0), (out1, grads1) in zip(before, after, strict=False):
        torch.testing.assert_close(out1, out0, atol=1e-10, rtol=1e-10)
        for g1, g0 in zip(grads1, grads0, strict=True):
            assert (g1 is None) == (g0 is None)
            if g0 is not None:
                torch.testing.assert_close(g1, g0, atol=1e-10, rtol=1e-10)
    supernet.eval()
    alone = supernet.extract(archs[0]).eval()
    assert alone.memory_format is torch.channels_last
    with torch.no_grad():
        supernet.set_active(archs[0])
        torch.testing.assert_close(alone(x), supernet(x), atol=1e-10, rtol=1e-10)


def _nchw_convolutions(net: torch.nn.Module, x: torch.Tensor) -> list[str]:
    """The convolutions whose input map (more than one channel) is not channels-last, by position."""
    found: list[str] = []

    def hook(module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        if isinstance(module, torch.nn.Conv2d):
            found.append(f"{len(found)}:{args[0].shape[1] > 1 and not channels_last(args[0])}")

    handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            net(x)
    finally:
        handle.remove()
    return found


def test_every_shared_weight_is_reachable_by_a_path(supernet: Supernet) -> None:
    """The cover networks are paths of the space; together they use every element of every shared weight."""
    supernet.zero_grad(set_to_none=True)
    for arch in supernet.space.supernet_cover():
        assert supernet.space.contains(arch)
        total = sum(t.sum() for t in supernet.path_tensors(arch).values() if t.requires_grad)
        total.backward()
    for name, param in supernet.named_parameters():
        assert param.grad is not None, f"{name} is on no path"
        if "shortcut" in name:
            # A path whose widths match at stride 1 needs no projection, so the (max, max) corner of S1's
            # shortcut under the cpu profile is used by none; the rest of it is.
            assert bool((param.grad != 0).any()), f"{name} is on no path"
        else:
            assert bool((param.grad != 0).all()), f"part of {name} is on no path"


def test_training_updates_only_the_active_path(supernet: Supernet) -> None:
    arch = supernet.sample(random.Random(3))
    supernet.set_active(arch)
    supernet.train()
    supernet.zero_grad(set_to_none=True)
    used = {(group, key) for *_, group, key, _ in supernet._path(arch).bindings}
    bn = next(((g, k) for g, k in used if k.endswith("running_mean")), None)
    before = supernet.shared(*bn).clone() if bn else None
    supernet(torch.randn(4, 1, 32, 32)).logsumexp(1).sum().backward()
    for group, holder in supernet.weights.items():
        for attr, param in holder.named_parameters(recurse=False):
            key = attr.replace(":", ".")
            if (group, key) not in used:
                assert param.grad is None, f"{group}/{key} is off the path but got a gradient"
    assert any(p.grad is not None and bool(p.grad.abs().sum() > 0) for p in supernet.parameters())
    if bn is not None:  # BatchNorm statistics of the path are updated in the shared buffers
        assert not torch.equal(before, supernet.shared(*bn))


def test_local_windows_share_projections_and_the_table_centre() -> None:
    space = get_space("sasa")
    torch.manual_seed(0)
    net = Supernet(space, space.profile("cpu"), num_classes=10, in_chans=1)
    base = space.baselines()["ResNet-26 conv-stem+attention"].arch
    small, large = _with_stage(base, 1, k=3), _with_stage(base, 1, k=11)
    small_t, large_t = net.path_tensors(small), net.path_tensors(large)
    name = "stages.1.0.mixer.rel_row"
    assert small_t[name].shape[0] == 3 and large_t[name].shape[0] == 11
    torch.testing.assert_close(small_t[name], large_t[name][4:7])
    qkv = "stages.1.0.mixer.qkv.weight"
    torch.testing.assert_close(small_t[qkv], large_t[qkv])


def test_elastic_width_takes_leading_channels_of_q_k_and_v() -> None:
    space = get_space("coatnet")
    torch.manual_seed(0)
    net = Supernet(space, space.profile("cpu"), num_classes=10, in_chans=1)
    base = space.baselines()["CoAtNet-0"].arch
    narrow, wide = _with_stage(base, 2, width=256, heads=None), _with_stage(base, 2, width=512, heads=None)
    name = "stages.2.0.mixer.qkv.weight"  # (3 * width, width, 1, 1) at the proxy's 1/4 width
    a, b = net.path_tensors(narrow)[name], net.path_tensors(wide)[name]
    c_a, c_b = a.shape[0] // 3, b.shape[0] // 3
    for part in range(3):
        torch.testing.assert_close(
            a[part * c_a : (part + 1) * c_a], b[part * c_b : part * c_b + c_a, : a.shape[1]]
        )


def test_rejects_what_is_not_a_path(supernet: Supernet) -> None:
    other = get_space("sasa" if supernet.space.name == "coatnet" else "coatnet").baselines()
    arch = next(iter(other.values())).arch
    with pytest.raises(ValueError, match="not in the"):
        supernet.set_active(arch)
    fresh = Supernet.__new__(Supernet)
    torch.nn.Module.__init__(fresh)
    fresh._active = None
    with pytest.raises(RuntimeError, match="set_active"):
        fresh(torch.zeros(1, 1, 32, 32))


def test_every_sampled_path_fits(supernet: Supernet) -> None:
    rng = random.Random(1)
    for _ in range(150):
        supernet.set_active(supernet.sample(rng))  # raises ValueError if some layer found no shared weights

"""MAC counting: nothing uncounted, cross-checked against FlopCounterMode and analytic formulas, and the
papers' figures reproduced by the baselines."""

from __future__ import annotations

import functools

import optuna
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count

import evaluators.complexity as complexity
from evaluators.complexity import (
    CONVENTIONS,
    clear_count_cache,
    count,
    count_traced,
    flop_count_analysis,
    latency_ms,
    macs_of,
)
from nas import build_model
from nas.core.arch import BLOCK_MIXERS, HEAD_KINDS, MIXER_NAMES, STEM_KINDS, Head, Stage
from nas.core.model import mixer_cfg
from nas.core.ops import BLOCKS, MIXERS, STEMS, MixerCfg
from nas.core.ops.local_attention import LocalAttention
from search_spaces import get_space, list_spaces

PAIRS = [(block, mixer) for block, mixers in BLOCK_MIXERS.items() for mixer in mixers]
BASELINES = [(space, name) for space in list_spaces() for name in get_space(space).baselines()]


@functools.cache
def _baseline_cost(space: str, name: str, img_size: int):
    return count(get_space(space).baselines()[name].arch, img_size=img_size)


def _cpu_flash_attention_flops(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query, key, value)


def _flop_counter_macs(module: nn.Module, x: torch.Tensor) -> float:
    """MACs by torch's FlopCounterMode (2 per multiply-add), taught the CPU flash attention it lacks."""
    mapping = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: _cpu_flash_attention_flops}
    counter = FlopCounterMode(display=False, custom_mapping=mapping)
    with counter, torch.no_grad():
        module.eval()(x)
    return counter.get_total_flops() / 2


# fvcore also counts normalization and adaptive pooling (about 1 per element); FlopCounterMode counts only
# matmul-like ops, so those are left out of fvcore's side of the comparison.
_NON_MATMUL = ("batch_norm", "layer_norm", "group_norm", "adaptive_avg_pool2d", "upsample_bilinear2d")


def _fvcore_matmul_macs(analysis) -> int:
    return analysis.total() - sum(analysis.by_operator().get(op, 0) for op in _NON_MATMUL)


def _block(block: str, mixer: str, width: int = 32, size: int = 8) -> nn.Module:
    stage = Stage(
        block,
        mixer,
        depth=1,
        width=width,
        k=5 if mixer == "local" else None,
        heads=None if mixer == "conv" else 2,
    )
    return BLOCKS.get(block)(width // 2, width, 2, mixer_cfg(stage, (size, size)), 0.0, expand=stage.expand)


@pytest.mark.parametrize(("block", "mixer"), PAIRS, ids=[f"{b}-{m}" for b, m in PAIRS])
def test_every_block_is_fully_counted_and_agrees_with_flop_counter_mode(block: str, mixer: str) -> None:
    op, x = _block(block, mixer), torch.randn(1, 16, 8, 8)
    analysis = flop_count_analysis(op.eval(), x)
    matmul_macs = _fvcore_matmul_macs(analysis)
    assert not analysis.unsupported_ops(), dict(analysis.unsupported_ops())
    if mixer == "local":  # FlopCounterMode sees the blocked implementation, not the op: checked below
        return
    assert matmul_macs == pytest.approx(_flop_counter_macs(op, x), rel=0.02)


@pytest.mark.parametrize("kind", STEM_KINDS)
def test_every_stem_is_fully_counted(kind: str) -> None:
    stem, x = STEMS.get(kind)(3, 16, patch=4 if kind == "patch" else None), torch.randn(1, 3, 32, 32)
    analysis = flop_count_analysis(stem.eval(), x)
    matmul_macs = _fvcore_matmul_macs(analysis)
    assert not analysis.unsupported_ops(), dict(analysis.unsupported_ops())
    assert matmul_macs == pytest.approx(_flop_counter_macs(stem, x), rel=0.02)


# --- analytic formulas, one per mixer (in -> out channels, N output tokens of an H x W map) -----------

C_IN, C_OUT, H, W, HEADS = 16, 32, 6, 10, 4
N = H * W


def _analytic(name: str, k: int, memory: int) -> int:
    if name == "conv":
        return N * k * k * C_IN * C_OUT
    if name == "rel":  # qkv, QK^T and AV over all N x N pairs, output projection
        return N * C_IN * 3 * C_OUT + 2 * N * N * C_OUT + N * C_OUT * C_OUT
    if name == "ext":  # widen x4, M_k and M_v over S slots at 4x channels, project back
        return N * C_IN * 4 * C_OUT + 2 * N * memory * 4 * C_OUT + N * 4 * C_OUT * C_OUT
    # local: qkv, then per query k^2 logits and k^2 weighted values over all channels, plus k row and k
    # column relative logits over half the channels each
    return N * C_IN * 3 * C_OUT + N * C_OUT * (2 * k * k + k)


def _mixer_cfg(name: str, k: int, feat_size: tuple[int, int] = (H, W)) -> MixerCfg:
    return MixerCfg(
        name,
        heads=None if name == "conv" else HEADS,
        k=k if name in ("conv", "local") else None,
        memory=16 if name == "ext" else None,
        feat_size=feat_size,
    )


def _mixer(name: str, k: int) -> nn.Module:
    """The ``name`` mixer from C_IN to C_OUT channels on an H x W map (16 memory slots for ``ext``)."""
    return MIXERS.get(name)(C_IN, C_OUT, _mixer_cfg(name, k), 1)


@pytest.mark.parametrize("name", ["conv", "rel", "ext", "local"])
@pytest.mark.parametrize("k", [3, 7])
def test_each_mixer_matches_its_analytic_formula(name: str, k: int) -> None:
    mixer = _mixer(name, k)
    assert macs_of(mixer, torch.randn(1, C_IN, H, W)) == pytest.approx(_analytic(name, k, 16), rel=0.02)


def _einsum_local_attend(
    self: LocalAttention, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """The same attention written with einsum over unfolded windows, so FlopCounterMode counts its matmuls."""
    b, heads, d, h, w = q.shape
    kk, pad = self.k, self.k // 2

    def windows(t: torch.Tensor) -> torch.Tensor:
        return F.unfold(t.reshape(b, heads * d, h, w), kk, padding=pad).view(b, heads, d, kk, kk, h * w)

    qf = q.reshape(b, heads, d, h * w) * d**-0.5
    logits = torch.einsum("bhdn,bhdyxn->bhyxn", qf, windows(k))
    logits = logits + torch.einsum("bhdn,yd->bhyn", qf[:, :, : d // 2], self.rel_row)[:, :, :, None]
    logits = logits + torch.einsum("bhdn,xd->bhxn", qf[:, :, d // 2 :], self.rel_col)[:, :, None]
    inside = F.unfold(q.new_ones(1, 1, h, w), kk, padding=pad).view(1, 1, kk, kk, h * w) > 0
    attn = logits.masked_fill(~inside, float("-inf")).flatten(2, 3).softmax(2).view_as(logits)
    return torch.einsum("bhyxn,bhdyxn->bhdn", attn, windows(v)).view(b, heads, d, h, w)


def test_local_attention_count_agrees_with_flop_counter_mode_on_a_matmul_form(monkeypatch) -> None:
    mixer, x = LocalAttention(C_IN, C_OUT, heads=HEADS, k=5), torch.randn(1, C_IN, H, W)
    fvcore_macs = macs_of(mixer, x)
    expected = mixer(x)
    monkeypatch.setattr(LocalAttention, "attend", _einsum_local_attend)
    torch.testing.assert_close(mixer(x), expected, atol=1e-5, rtol=1e-4)  # same function
    assert fvcore_macs == pytest.approx(_flop_counter_macs(mixer, x), rel=0.02)


# --- baselines ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("space", "name"), BASELINES, ids=[f"{s}:{n}" for s, n in BASELINES])
def test_baselines_are_fully_counted(space: str, name: str) -> None:
    cost = _baseline_cost(space, name, 224)  # count() raises on any uncounted op
    assert cost.macs > 0 and sum(p.macs for p in cost.parts) == cost.macs
    assert sum(p.params for p in cost.parts) == cost.params


@pytest.mark.parametrize("name", ["CoAtNet-0", "CoAtNet-1", "CoAtNet-2", "CoAtNet-3", "CoAtNet-4"])
def test_coatnet_baselines_reproduce_the_paper(name: str) -> None:
    paper = get_space("coatnet").baselines()[name].paper
    assert _baseline_cost("coatnet", name, 224).params == pytest.approx(paper.params, rel=0.02)
    for size in (224, 384):
        if paper.flops_at(size) is not None:
            assert _baseline_cost("coatnet", name, size).macs == pytest.approx(
                paper.flops_at(size), rel=0.025
            )


def test_vit_rel_is_at_coatnet0_budget() -> None:
    vit, coat = _baseline_cost("coatnet", "ViT_REL", 224), _baseline_cost("coatnet", "CoAtNet-0", 224)
    assert vit.macs == pytest.approx(coat.macs, rel=0.15)


SASA = [name for space, name in BASELINES if space == "sasa"]


@pytest.mark.parametrize("name", SASA)
def test_sasa_baselines_reproduce_the_paper(name: str) -> None:
    paper = get_space("sasa").baselines()[name].paper
    cost = _baseline_cost("sasa", name, 224)
    tolerance = (0.01, 0.01) if name.endswith(" conv") else (0.03, 0.05)
    assert cost.params == pytest.approx(paper.params, rel=tolerance[0])
    assert paper.to_paper_convention(cost.macs) == pytest.approx(paper.flops_at(224), rel=tolerance[1])


@pytest.mark.parametrize("name", ["CoAtNet-0", "ResNet-50 conv", "ViT_REL"])
def test_baseline_totals_agree_with_flop_counter_mode(name: str) -> None:
    space = "sasa" if name.startswith("ResNet") else "coatnet"
    model = build_model(get_space(space).baselines()[name].arch, img_size=224)
    x = torch.randn(1, 3, 224, 224)
    assert _baseline_cost(space, name, 224).macs == pytest.approx(_flop_counter_macs(model, x), rel=0.02)
    analysis = flop_count_analysis(model.eval(), x)
    assert _fvcore_matmul_macs(analysis) == pytest.approx(_flop_counter_macs(model, x), rel=0.005)


# --- the part-by-part count is the whole-network trace, exactly --------------------------------------

RANDOM_SEEDS = range(10)


def _exact_cases() -> list[tuple[str, str, int]]:
    """(space, baseline name or "seed<n>", image size): every baseline and 10 random archs of each space at
    64 px (the whole-network trace of CoAtNet-4 at 224 px alone takes seconds), and a few at 224 px and at a
    size that is not a multiple of the patch or of the total stride."""
    cases = []
    for space in list_spaces():
        cases += [(space, name, 64) for name in get_space(space).baselines()]
        cases += [(space, f"seed{seed}", 64) for seed in RANDOM_SEEDS]
        cases.append((space, "seed0", 224))
    cases += [
        ("coatnet", "CoAtNet-0", 224),
        ("coatnet", "ViT_REL", 100),
        ("sasa", "ResNet-26 full-attention", 224),
    ]
    return cases


def _arch(space: str, name: str):
    sp = get_space(space)
    return sp.sample_random(int(name[4:])) if name.startswith("seed") else sp.baselines()[name].arch


EXACT = _exact_cases()


@pytest.mark.parametrize(("space", "name", "img_size"), EXACT, ids=[f"{s}:{n}@{i}" for s, n, i in EXACT])
def test_count_equals_the_whole_network_trace(space: str, name: str, img_size: int) -> None:
    arch = _arch(space, name)
    assert count(arch, img_size=img_size) == count_traced(arch, img_size=img_size)  # params, MACs, parts


def test_count_is_exact_cold_and_for_other_tasks() -> None:
    """From an empty cache, with one input channel and 10 classes or none, at a proxy profile's scale."""
    for space in list_spaces():
        sp = get_space(space)
        profile = sp.profile("cpu")
        for seed, num_classes in ((100, 10), (101, 0)):
            arch = profile.apply(sp.sample_random(seed))
            clear_count_cache()
            settings = {"img_size": profile.img_size, "in_chans": 1, "num_classes": num_classes}
            assert count(arch, **settings) == count_traced(arch, **settings)


@pytest.mark.parametrize("patch", [None, 4, 8, 16])
def test_count_is_exact_at_sizes_that_are_not_multiples_of_the_patch_or_stride(patch: int | None) -> None:
    space = get_space("coatnet")
    arch = next(a for seed in range(200) if (a := space.sample_random(seed)).stem.patch == patch)
    arch = space.profile("cpu").apply(arch)  # smaller and quicker to trace whole, same stem
    for size in (70, 75):
        assert count(arch, img_size=size) == count_traced(arch, img_size=size)


def test_count_refuses_an_image_below_the_total_stride_as_the_model_does() -> None:
    arch = _arch("coatnet", "CoAtNet-0")  # total stride 32
    with pytest.raises(ValueError) as traced:
        count_traced(arch, img_size=31)
    with pytest.raises(ValueError) as fast:
        count(arch, img_size=31)
    assert str(fast.value) == str(traced.value)
    assert "at least 32 px" in str(fast.value)
    assert count(arch, img_size=32).img_size == 32


# --- the meta trace count() makes is the CPU trace, exactly --------------------------------------------

CONVENTION_NAMES = list(CONVENTIONS)


def _same_on_meta_and_cpu(build, shape: tuple[int, ...], convention: str) -> tuple[int, int]:
    """A part's (params, MACs) traced on meta (no fallback: a failed meta trace fails the test) and on the
    CPU, which must agree exactly."""
    meta = complexity._meta_part_cost(build, shape, convention)
    assert meta == complexity._cpu_part_cost(build, shape, "part", convention)
    return meta


def test_the_registries_are_what_the_meta_trace_tests_cover() -> None:
    assert set(BLOCKS.names()) == set(BLOCK_MIXERS) and set(MIXERS.names()) == set(MIXER_NAMES)
    assert set(STEMS.names()) == set(STEM_KINDS)


@pytest.mark.parametrize("convention", CONVENTION_NAMES)
@pytest.mark.parametrize("kind", STEMS.names())
def test_every_stem_counts_the_same_on_meta(kind: str, convention: str) -> None:
    for size, patch in ((32, 4), (70, 16)):  # 70: not a multiple of the patch or the stride
        build = functools.partial(STEMS.get(kind), 3, 16, patch=patch if kind == "patch" else None)
        assert _same_on_meta_and_cpu(build, (1, 3, size, size), convention)[1] > 0


@pytest.mark.parametrize("convention", CONVENTION_NAMES)
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("name", MIXERS.names())
def test_every_mixer_counts_the_same_on_meta(name: str, stride: int, convention: str) -> None:
    for size in ((H, W), (7, 9)):  # 7 x 9: odd sides, not whole local-attention blocks
        build = functools.partial(MIXERS.get(name), C_IN, C_OUT, _mixer_cfg(name, 5, size), stride)
        assert _same_on_meta_and_cpu(build, (1, C_IN, *size), convention)[1] > 0


@pytest.mark.parametrize("convention", CONVENTION_NAMES)
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize(("block", "mixer"), PAIRS, ids=[f"{b}-{m}" for b, m in PAIRS])
def test_every_block_counts_the_same_on_meta(block: str, mixer: str, stride: int, convention: str) -> None:
    for size in (8, 7):
        stage = Stage(
            block,
            mixer,
            depth=1,
            width=32,
            k=5 if mixer == "local" else None,
            heads=None if mixer == "conv" else 2,
        )
        build = functools.partial(
            BLOCKS.get(block), 16, 32, stride, mixer_cfg(stage, (size, size)), 0.0, expand=stage.expand
        )
        assert _same_on_meta_and_cpu(build, (1, 16, size, size), convention)[1] > 0


@pytest.mark.parametrize("convention", CONVENTION_NAMES)
@pytest.mark.parametrize("kind", HEAD_KINDS)
def test_every_head_counts_the_same_on_meta(kind: str, convention: str) -> None:
    head = Head(kind, width=24 if kind == "mlp" else None)
    for num_classes in (10, 0):
        build = functools.partial(complexity._HeadPart, head, 32, num_classes)
        _same_on_meta_and_cpu(build, (1, 32, 7, 5), convention)


@pytest.fixture
def meta_checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """count() with every part it traces traced on meta and on the CPU, which must agree; yields the parts."""
    checked: list[str] = []

    def both(build, shape, what, convention):
        checked.append(what)
        return _same_on_meta_and_cpu(build, shape, convention)

    monkeypatch.setattr(complexity, "_traced_part_cost", both)
    clear_count_cache()
    yield checked
    clear_count_cache()


# The micro space's networks are 32 px networks with relative attention at stride 2: the CPU trace the check
# compares with holds a 12,544-token attention map at 224 px (13 GB for a test) and a 36,864-token one at 384
# px (over 20 GB), so micro is checked at its own scale and twice it.
SIZES = {"micro": (32, 64)}
META_SIZES = [(s, size) for s in list_spaces() for size in SIZES.get(s, (224, 384))]


@pytest.mark.parametrize("convention", CONVENTION_NAMES)
@pytest.mark.parametrize(("space", "img_size"), META_SIZES)
def test_the_baselines_count_the_same_on_meta(
    space: str, img_size: int, convention: str, meta_checked: list[str]
) -> None:
    for baseline in get_space(space).baselines().values():
        count(baseline.arch, img_size=img_size, convention=convention)
    assert meta_checked


@pytest.mark.parametrize("convention", CONVENTION_NAMES)
@pytest.mark.parametrize("space", list_spaces())
def test_random_archs_count_the_same_on_meta(space: str, convention: str, meta_checked: list[str]) -> None:
    sp = get_space(space)
    for seed in range(10):
        count(sp.sample_random(1000 + seed), img_size=SIZES.get(space, (224,))[-1], convention=convention)
    profile = sp.profile("cpu")  # a search's proxy scale, one input channel and 10 classes
    count(profile.apply(sp.sample_random(2000)), profile.img_size, in_chans=1, num_classes=10)
    assert meta_checked


def test_a_part_that_cannot_run_on_meta_is_traced_on_the_cpu_and_counted() -> None:
    class DataDependent(nn.Module):  # .item() of a meta tensor has no value
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * x.abs().amax().item()

    before = complexity.CPU_FALLBACKS["block: RuntimeError"]
    cost = complexity._traced_part_cost(DataDependent, (2, 8), "block x", "fvcore")
    assert cost == complexity._cpu_part_cost(DataDependent, (2, 8), "block x", "fvcore") == (36, 64)
    assert complexity.CPU_FALLBACKS["block: RuntimeError"] == before + 1


def test_an_uncounted_op_is_still_refused() -> None:
    class Uncounted(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cumsum(x, 0)

    with pytest.raises(RuntimeError, match=r"ops without a MAC count in head x: \{'aten::cumsum': 1\}"):
        complexity._traced_part_cost(Uncounted, (2, 8), "head x", "fvcore")


# --- random samples ----------------------------------------------------------------------------------


@pytest.mark.parametrize("space", list_spaces())
def test_random_samples_build_run_and_count_at_the_proxy_size(space: str) -> None:
    sp = get_space(space)
    profile = sp.profile("cpu")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(50):
        arch = profile.apply(sp.sample(study.ask()))
        model = build_model(arch, num_classes=10, in_chans=1, img_size=profile.img_size).eval()
        x = torch.randn(1, 1, profile.img_size, profile.img_size)
        with torch.no_grad():
            assert torch.isfinite(model(x)).all()
        assert macs_of(model, x) > 0  # raises on any uncounted op


def test_latency_is_a_positive_median() -> None:
    arch = get_space("sasa").profile("cpu").apply(get_space("sasa").baselines()["ResNet-26 conv"].arch)
    assert 0 < latency_ms(build_model(arch), img_size=32, warmup=1, repeats=3) < 10_000
    assert 0 < latency_ms(build_model(arch), img_size=32, warmup=1, repeats=3, batch=4) < 10_000  # a batch


# --- the papers' counting convention ---------------------------------------------------------------------


def _extra_map_macs(name: str, k: int, memory: int) -> int:
    """What ``convention="paper"`` adds to a mixer (evaluators/complexity.py), written out from its rule: 7
    per attention-map entry (the logit from its terms 2, the softmax 5; external attention: the softmax 5 and
    the L1 renormalization 2), everything else as fvcore counts it."""
    if name == "rel":
        return 7 * HEADS * N * N
    if name == "ext":  # S x N maps per head, of which the 4x widening makes 4 x HEADS
        return 7 * 4 * HEADS * memory * N
    if name == "local":  # every query's k x k window, border positions included
        return 7 * HEADS * N * k * k
    return 0


@pytest.mark.parametrize("name", ["conv", "rel", "ext", "local"])
def test_the_paper_convention_adds_the_attention_maps_work(name: str) -> None:
    k = 5
    mixer = _mixer(name, k).eval()
    x = torch.randn(1, C_IN, H, W)
    with torch.no_grad():
        fvcore, paper = (flop_count_analysis(mixer, x, c).total() for c in ("fvcore", "paper"))
    assert paper - fvcore == _extra_map_macs(name, k, 16)


def test_the_paper_convention_counts_parts_as_the_whole_network() -> None:
    arch = get_space("sasa").baselines()["ResNet-26 full-attention"].arch  # attention stem and local blocks
    assert count(arch, 64, convention="paper") == count_traced(arch, 64, convention="paper")
    assert count(arch, 64, convention="paper").macs > count(arch, 64).macs


def _paper_rows() -> list:
    """Every row a paper prints (counted on meta: a few seconds for all of them)."""
    return [
        (space, name, size)
        for space, name in BASELINES
        for size in (224, 384, 512)
        if get_space(space).baselines()[name].paper.flops_at(size) is not None
    ]


@pytest.mark.parametrize(("space", "name", "size"), _paper_rows(), ids=str)
def test_the_paper_convention_against_the_papers_rows(space: str, name: str, size: int) -> None:
    """Within 1.5% of every row the papers print (the README's table), by a rule derived from the
    operations."""
    paper = get_space(space).baselines()[name].paper
    macs = count(get_space(space).baselines()[name].arch, size, convention="paper").macs
    assert paper.to_paper_convention(macs) == pytest.approx(paper.flops_at(size), rel=0.015)


def test_an_unknown_convention_is_one_sentence() -> None:
    from typer.testing import CliRunner

    from nas.cli.commands import app

    result = CliRunner().invoke(app, ["cost", "examples/hybrid.json", "--convention", "tf"])
    assert result.exit_code == 2
    assert "convention: unknown 'tf'; allowed: fvcore, paper" in result.output
    with pytest.raises(ValueError, match="convention"):
        count(get_space("sasa").baselines()["ResNet-26 conv"].arch, convention="tf")

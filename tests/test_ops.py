"""Every registered stem, mixer and block: builds, runs at two sizes, trains every parameter; references."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import nas.core.ops.attention_stem as attention_stem
from nas.core.arch import BLOCK_MIXERS, MIXER_NAMES, STEM_KINDS, Stage
from nas.core.model import mixer_cfg
from nas.core.ops import BLOCKS, MIXERS, STEMS, MixerCfg
from nas.core.ops.attention_stem import AttentionStem
from nas.core.ops.external_attention import ExternalAttention, double_normalize
from nas.core.ops.rel_attention import RelAttention

SIZES = [(8, 8), (7, 5)]  # the size ops are built for, and an odd size they must also handle
PAIRS = [(block, mixer) for block, mixers in BLOCK_MIXERS.items() for mixer in mixers]


def _randomize_norms(module: nn.Module) -> None:
    """Zero-initialized norm scales hide dead branches from a gradient check; give them random values."""
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.normal_(m.bias, std=0.1)


def _check_runs_and_trains(module: nn.Module, x: torch.Tensor, expected_shape: tuple[int, ...]) -> None:
    _randomize_norms(module)
    module.zero_grad()
    y = module(x)
    assert tuple(y.shape) == expected_shape
    assert torch.isfinite(y).all()
    (y * torch.randn_like(y)).sum().backward()
    for name, p in module.named_parameters():
        assert p.grad is not None, f"{name} received no gradient"
        assert torch.isfinite(p.grad).all(), f"{name} has a non-finite gradient"
        assert p.grad.abs().sum() > 0, f"{name} received an all-zero gradient"


def _ceil(size: tuple[int, int], stride: int) -> tuple[int, int]:
    return (math.ceil(size[0] / stride), math.ceil(size[1] / stride))


def test_registries_implement_the_arch_vocabulary() -> None:
    assert MIXERS.names() == sorted(MIXER_NAMES)
    assert BLOCKS.names() == sorted(BLOCK_MIXERS)
    assert STEMS.names() == sorted(STEM_KINDS)
    with pytest.raises(ValueError, match="unknown mixer 'swin'; registered: conv, ext, local, rel"):
        MIXERS.get("swin")


@pytest.mark.parametrize("kind", STEM_KINDS)
@pytest.mark.parametrize("size", [(32, 32), (21, 27)])
def test_stem(kind: str, size: tuple[int, int]) -> None:
    stride = {"conv": 2, "resnet": 4, "attn": 4, "patch": 4}[kind]
    stem = STEMS.get(kind)(3, 16, patch=4 if kind == "patch" else None)
    _check_runs_and_trains(stem, torch.randn(2, 3, *size), (2, 16, *_ceil(size, stride)))


@pytest.mark.parametrize("name", MIXER_NAMES)
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("size", SIZES)
def test_mixer(name: str, stride: int, size: tuple[int, int]) -> None:
    _check_runs_and_trains(_mixer(name, stride), torch.randn(2, 16, *size), (2, 24, *_ceil(size, stride)))


def _mixer(name: str, stride: int) -> nn.Module:
    """The mixer ``name`` from 16 to 24 channels, built for SIZES[0] (2 heads; k 3; 8 memory slots)."""
    cfg = MixerCfg(
        name,
        heads=None if name == "conv" else 2,
        k=3 if name in ("conv", "local") else None,
        memory=8 if name == "ext" else None,
        feat_size=SIZES[0],
    )
    return MIXERS.get(name)(16, 24, cfg, stride)


@pytest.mark.parametrize(("block", "mixer"), PAIRS, ids=[f"{b}-{m}" for b, m in PAIRS])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("size", SIZES)
def test_block(block: str, mixer: str, stride: int, size: tuple[int, int]) -> None:
    op = _block(block, mixer, stride)
    _check_runs_and_trains(op, torch.randn(2, 16, *size), (2, 32, *_ceil(size, stride)))


def _block(block: str, mixer: str, stride: int) -> nn.Module:
    """One ``block`` around ``mixer`` from 16 to 32 channels, built for SIZES[0] (2 heads; k 3)."""
    stage = Stage(
        block,
        mixer,
        depth=1,
        width=32,
        k=3 if mixer == "local" else None,
        heads=None if mixer == "conv" else 2,
    )
    return BLOCKS.get(block)(16, 32, stride, mixer_cfg(stage, SIZES[0]), 0.0, expand=stage.expand)


def _in_both_formats(op: nn.Module, x: torch.Tensor) -> None:
    """``op`` on ``x`` in NCHW and in channels-last (the same weights, stored in that format): the same
    values and gradients (in float64, where the formats' different summation orders leave ~1e-15), and a
    channels-last input gives a channels-last output (a network keeps one format throughout:
    nas.core.model.NasNet.use_memory_format)."""
    _randomize_norms(op)
    op, x = op.double(), x.double()
    upstream = None
    results = []
    for memory_format in (torch.contiguous_format, torch.channels_last):
        op.zero_grad()
        op.to(memory_format=memory_format)
        inp = x.clone(memory_format=memory_format).requires_grad_()
        y = op(inp)
        upstream = torch.randn_like(y) if upstream is None else upstream
        (y * upstream).sum().backward()
        results.append((y.detach(), inp.grad, [p.grad.clone() for p in op.parameters()]))
        if memory_format is torch.channels_last:
            assert y.is_contiguous(memory_format=torch.channels_last), "the output left channels-last"
    (y0, dx0, grads0), (y1, dx1, grads1) = results
    torch.testing.assert_close(y1, y0, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(dx1, dx0, atol=1e-10, rtol=1e-10)
    for g1, g0 in zip(grads1, grads0, strict=True):
        torch.testing.assert_close(g1, g0, atol=1e-10, rtol=1e-10)
    y = op.float()(x.float().clone(memory_format=torch.channels_last))  # and the kernels a training runs
    assert y.is_contiguous(memory_format=torch.channels_last), "the float32 output left channels-last"


@pytest.mark.parametrize("name", MIXER_NAMES)
@pytest.mark.parametrize("stride", [1, 2])
def test_mixer_keeps_channels_last(name: str, stride: int) -> None:
    _in_both_formats(_mixer(name, stride), torch.randn(2, 16, *SIZES[1]))


@pytest.mark.parametrize(("block", "mixer"), PAIRS, ids=[f"{b}-{m}" for b, m in PAIRS])
@pytest.mark.parametrize("stride", [1, 2])
def test_block_keeps_channels_last(block: str, mixer: str, stride: int) -> None:
    _in_both_formats(_block(block, mixer, stride), torch.randn(2, 16, *SIZES[0]))


@pytest.mark.parametrize("block", ["bottleneck", "transformer"])
def test_identity_shortcut_block_keeps_its_input_path(block: str) -> None:
    stage = Stage(block, "conv", depth=1, width=32)
    op = BLOCKS.get(block)(32, 32, 1, mixer_cfg(stage, (6, 6)), 0.0, expand=4)
    assert isinstance(op.shortcut, nn.Identity)


def test_mbconv_downsamples_as_coatnet_eq5() -> None:
    stage = Stage("mbconv", "conv", depth=1, width=32)
    op = BLOCKS.get("mbconv")(16, 32, 2, mixer_cfg(stage, (8, 8)), 0.0, expand=4)
    assert op.expand.stride == (2, 2) and op.mixer.stride == (1, 1)  # stride on the first 1x1 conv
    assert op.mixer.groups == op.mixer.in_channels == 128  # depthwise at 4x the output width
    pool, proj = op.shortcut  # Proj(Pool(x))
    assert isinstance(pool, nn.AvgPool2d) and isinstance(proj, nn.Conv2d) and proj.kernel_size == (1, 1)


def test_transformer_block_builds_its_mixer_for_the_pooled_map() -> None:
    stage = Stage("transformer", "rel", depth=1, width=32, heads=2)
    op = BLOCKS.get("transformer")(16, 32, 2, mixer_cfg(stage, (8, 8)), 0.0, expand=4)
    assert op.mixer.bias_table.shape == (2, 7, 7)  # (2H-1, 2W-1) of the 4x4 pooled map


# --- independent references -------------------------------------------------------------------------


def _conv1x1(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    y = torch.einsum("oc,bchw->bohw", conv.weight[:, :, 0, 0], x)
    return y if conv.bias is None else y + conv.bias[None, :, None, None]


def test_rel_attention_matches_explicit_softmax_with_looped_bias() -> None:
    torch.manual_seed(1)
    heads, height, width = 2, 3, 4
    mod = RelAttention(8, 8, heads=heads, feat_size=(height, width)).double()
    x = torch.randn(2, 8, height, width, dtype=torch.float64)
    q, k, v = _conv1x1(mod.qkv, x).reshape(2, 3, heads, 4, height * width).unbind(1)  # (B, h, d, N)
    positions = [(r, c) for r in range(height) for c in range(width)]
    bias = torch.empty(heads, len(positions), len(positions), dtype=torch.float64)
    for i, (ri, ci) in enumerate(positions):
        for j, (rj, cj) in enumerate(positions):
            bias[:, i, j] = mod.bias_table[:, ri - rj + height - 1, ci - cj + width - 1]
    logits = torch.einsum("bhdi,bhdj->bhij", q, k) / math.sqrt(4) + bias
    out = torch.einsum("bhij,bhdj->bhdi", logits.softmax(-1), v).reshape(2, 8, height, width)
    torch.testing.assert_close(mod(x), _conv1x1(mod.proj, out))


def test_rel_attention_resizes_its_table_for_other_sizes() -> None:
    mod = RelAttention(8, heads=2, feat_size=(4, 4))
    bias = mod.position_bias(6, 2)
    assert bias.shape == (2, 12, 12)
    resized = F.interpolate(mod.bias_table[None], size=(11, 3), mode="bilinear", align_corners=False)[0]
    assert torch.equal(bias[:, 0, 7], resized[:, 0 - 3 + 5, 0 - 1 + 1])  # query (0, 0), key (3, 1)
    assert torch.equal(mod.position_bias(4, 4)[:, 5, 0], mod.bias_table[:, 1 + 3, 1 + 3])


def test_double_normalization_axes() -> None:
    logits = torch.randn(2, 3, 5, 7, dtype=torch.float64)  # (B, heads, S slots, N tokens)
    attn = double_normalize(logits)
    torch.testing.assert_close(attn.sum(-2), torch.ones(2, 3, 7, dtype=torch.float64))  # L1 over slots
    # the softmax runs over tokens: a per-slot shift changes nothing, a per-token shift does
    torch.testing.assert_close(double_normalize(logits + torch.randn(2, 3, 5, 1, dtype=torch.float64)), attn)
    assert not torch.allclose(double_normalize(logits + torch.randn(2, 3, 1, 7, dtype=torch.float64)), attn)
    softmax_over_tokens = logits.exp() / logits.exp().sum(-1, keepdim=True)
    torch.testing.assert_close(attn, softmax_over_tokens / softmax_over_tokens.sum(-2, keepdim=True))


def test_external_attention_matches_looped_reference() -> None:
    torch.manual_seed(2)
    mod = ExternalAttention(8, 8, heads=2, memory=5, coef=2).double()
    x = torch.randn(1, 8, 3, 3, dtype=torch.float64)
    feats = _conv1x1(mod.widen, x).reshape(4, 4, 9)  # 2 heads x coef 2 = 4 inner heads of 4 channels
    out = torch.empty_like(feats)
    for h in range(4):
        e = torch.exp(mod.mem_k @ feats[h])  # (S, N)
        a = e / e.sum(1, keepdim=True)  # over tokens, per slot
        a = a / (1e-9 + a.sum(0, keepdim=True))  # over slots, per token
        out[h] = mod.mem_v @ a
    torch.testing.assert_close(mod(x), _conv1x1(mod.proj, out.reshape(1, 16, 3, 3)))


def _looped_attention_stem(stem: AttentionStem, x: torch.Tensor, running: list[torch.Tensor]) -> torch.Tensor:
    """SASA's attention stem (Eq. 4-5) pixel by pixel on one image: each pixel's heads attend over the keys of
    its 4 x 4 block that lie in the image; then the stem's BatchNorm on the map, with ``running`` (mean, var)
    for its running statistics, and a 4 x 4 max pool."""
    _, _, height, width = x.shape
    heads, d = stem.heads, stem.query.out_channels // stem.heads
    q, k, vs = _conv1x1(stem.query, x)[0], _conv1x1(stem.key, x)[0], _conv1x1(stem.value, x)[0]
    vs = vs.reshape(stem.values, -1, height, width)
    mix = stem.value_weights()
    pixels = []
    for i in range(height):
        for j in range(width):
            keys = [
                (a, b)
                for a in range(i // 4 * 4, i // 4 * 4 + 4)
                for b in range(j // 4 * 4, j // 4 * 4 + 4)
                if a < height and b < width
            ]
            per_head = []
            for h in range(heads):
                c = slice(d * h, d * h + d)
                logits = torch.stack([q[c, i, j] @ k[c, a, b] for a, b in keys]) / math.sqrt(d)
                values = torch.stack([(mix[a % 4, b % 4, :, None] * vs[:, c, a, b]).sum(0) for a, b in keys])
                per_head.append(logits.softmax(0) @ values)
            pixels.append(torch.cat(per_head))
    out = torch.stack(pixels, 1).reshape(-1, height, width)
    n = stem.norm
    out = F.batch_norm(out[None], *running, n.weight, n.bias, stem.training, n.momentum, n.eps)
    return F.max_pool2d(out, 4, 4, ceil_mode=True)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_attention_stem_matches_looped_reference_with_padding(training: bool) -> None:
    """Values, gradients and (training) BatchNorm's statistics, which count the image's pixels only."""
    torch.manual_seed(3)
    stem = AttentionStem(3, 16, heads=2).double().train(training)
    _randomize_norms(stem)
    running = [stem.norm.running_mean.clone(), stem.norm.running_var.clone()]
    x = torch.randn(1, 3, 5, 6, dtype=torch.float64, requires_grad=True)  # 2 x 2 blocks, partly padding
    got, expected = stem(x), _looped_attention_stem(stem, x, running)
    torch.testing.assert_close(got, expected)
    upstream = torch.randn_like(got)
    inputs = [x, *stem.parameters()]
    for g, e in zip(
        torch.autograd.grad((got * upstream).sum(), inputs),
        torch.autograd.grad((expected * upstream).sum(), inputs),
        strict=True,
    ):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close([stem.norm.running_mean, stem.norm.running_var], running)


@pytest.mark.parametrize("kind", STEM_KINDS)
def test_stem_keeps_channels_last(kind: str) -> None:
    """An RGB input tells its format, and the stem's output keeps it (one-channel images are in both)."""
    stem = STEMS.get(kind)(3, 16, patch=4 if kind == "patch" else None)
    assert stem(torch.randn(2, 3, 21, 27)).is_contiguous(), "an NCHW input gave an output in another format"
    _in_both_formats(stem, torch.randn(2, 3, 21, 27))


def test_attention_stem_attends_in_slices_as_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA's fused attention takes at most 65535 batch entries; the stem slices its blocks (here 5 at a time
    out of 2 images x 2 x 2 blocks, the last slice short) and must compute exactly what one call does."""
    torch.manual_seed(4)
    stem = AttentionStem(3, 16, heads=2).double()
    x = torch.randn(2, 3, 5, 6, dtype=torch.float64, requires_grad=True)  # padded: the mask is sliced too
    whole = stem(x)
    (grad_whole,) = torch.autograd.grad(whole.square().sum(), x)
    monkeypatch.setattr(attention_stem, "SDPA_MAX_BATCH", 5)
    sliced = stem(x)
    (grad_sliced,) = torch.autograd.grad(sliced.square().sum(), x)
    torch.testing.assert_close(sliced, whole, rtol=0, atol=1e-12)
    torch.testing.assert_close(grad_sliced, grad_whole, rtol=0, atol=1e-12)

"""The ``local`` mixer (SASA, blocked kernel) against its naive unfold form: values, gradients, masks."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nas.core.ops import local_attention
from nas.core.ops.local_attention import LocalAttention, _local_attention, dense_local_attention
from nas.core.ops.registry import MIXERS, MixerCfg

# (k, heads, head dim, (H, W)): odd sizes, sizes that are not whole query blocks, maps smaller than k; k up to
# 7 and from 9 take the kernel's two ways into the logits (one-hot matmul, broadcast add), head dims under
# and from 16 its two forms of a narrow product
CASES = [
    (3, 2, 4, (5, 7)),
    (3, 1, 2, (1, 6)),
    (5, 4, 2, (9, 9)),
    (5, 2, 6, (2, 3)),
    (7, 2, 8, (14, 14)),
    (7, 1, 6, (13, 17)),
    (7, 3, 4, (1, 1)),
    (7, 2, 4, (6, 4)),
    (3, 1, 16, (9, 6)),
    (9, 2, 4, (11, 10)),
    (11, 2, 2, (13, 9)),
    (11, 1, 16, (5, 12)),
]
IDS = [f"k{k}-h{heads}-d{d}-{h}x{w}" for k, heads, d, (h, w) in CASES]
# how the kernel cuts a map into query blocks: as it chooses, always in blocks of 4 (a map of 4 or less is one
# block of 4, its padded queries dropped), always one block over the whole map
BLOCK_RULES = {
    "chosen": local_attention._block_for,
    "blocks": lambda h, w, k: local_attention._BLOCK,
    "one-block": lambda h, w, k: max(h, w),
}


@pytest.fixture(params=list(BLOCK_RULES))
def block_rule(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(local_attention, "_block_for", BLOCK_RULES[request.param])
    local_attention._geometry.cache_clear()
    yield request.param
    local_attention._geometry.cache_clear()


def _mixer(k: int, heads: int, head_dim: int, stride: int = 1, dtype=torch.float32) -> LocalAttention:
    """A mixer from 6 to heads * head_dim channels, with relative embeddings large enough to matter."""
    mixer = LocalAttention(6, heads * head_dim, heads=heads, k=k, stride=stride).to(dtype)
    with torch.no_grad():
        mixer.rel_row.normal_()
        mixer.rel_col.normal_()
    return mixer


def _reference_forward(mixer: LocalAttention, x: torch.Tensor) -> torch.Tensor:
    b, _, h, w = x.shape
    q, k, v = mixer.qkv(x).view(b, 3, mixer.heads, mixer.head_dim, h, w).unbind(1)
    out = dense_local_attention(q, k, v, mixer.rel_row, mixer.rel_col, mixer.k)
    out = out.reshape(b, mixer.out_dim, h, w)
    return F.avg_pool2d(out, 2, 2, ceil_mode=True, count_include_pad=False) if mixer.stride == 2 else out


def _grads(mixer: LocalAttention, x: torch.Tensor, upstream: torch.Tensor, forward) -> list[torch.Tensor]:
    x = x.detach().requires_grad_()
    inputs = [x, mixer.qkv.weight, mixer.rel_row, mixer.rel_col]
    return list(torch.autograd.grad((forward(x) * upstream).sum(), inputs))


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize(("k", "heads", "head_dim", "size"), CASES, ids=IDS)
def test_forward_matches_reference(
    k: int, heads: int, head_dim: int, size: tuple[int, int], stride: int, block_rule: str
) -> None:
    mixer, x = _mixer(k, heads, head_dim, stride), torch.randn(2, 6, *size)
    out = mixer(x)
    assert out.shape == (2, heads * head_dim, -(-size[0] // stride), -(-size[1] // stride))
    torch.testing.assert_close(out, _reference_forward(mixer, x), atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("k", "heads", "head_dim", "size"), CASES, ids=IDS)
def test_gradients_match_reference(
    k: int, heads: int, head_dim: int, size: tuple[int, int], dtype: torch.dtype, block_rule: str
) -> None:
    mixer, x = _mixer(k, heads, head_dim, dtype=dtype), torch.randn(2, 6, *size, dtype=dtype)
    upstream = torch.randn(2, heads * head_dim, *size, dtype=dtype)
    ours = _grads(mixer, x, upstream, mixer)
    reference = _grads(mixer, x, upstream, lambda t: _reference_forward(mixer, t))
    for name, a, b in zip(["input", "qkv.weight", "rel_row", "rel_col"], ours, reference, strict=True):
        tol = 1e-5 * max(1.0, b.abs().max().item()) if dtype == torch.float32 else 1e-10
        torch.testing.assert_close(a, b, atol=tol, rtol=0, msg=lambda m, name=name: f"d {name}: {m}")


def test_stride_2_gradients_match_reference() -> None:
    mixer, x = _mixer(5, 2, 4, stride=2), torch.randn(2, 6, 7, 9)
    upstream = torch.randn(2, 8, 4, 5)
    ours = _grads(mixer, x, upstream, mixer)
    reference = _grads(mixer, x, upstream, lambda t: _reference_forward(mixer, t))
    for a, b in zip(ours, reference, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5 * max(1.0, b.abs().max().item()), rtol=0)


@pytest.mark.parametrize("images_per_chunk", [1, 4])
def test_chunking_matches_reference(
    images_per_chunk: int, monkeypatch: pytest.MonkeyPatch, block_rule: str
) -> None:
    # 2 x 3 = 6 images: one per chunk, or a full chunk of 4 and a partial one of 2
    monkeypatch.setattr(local_attention, "_images_per_chunk", lambda n, geo, x: min(n, images_per_chunk))
    mixer, x = _mixer(5, 3, 4), torch.randn(2, 6, 9, 10)
    upstream = torch.randn(2, 12, 9, 10)
    torch.testing.assert_close(mixer(x), _reference_forward(mixer, x), atol=1e-5, rtol=0)
    ours = _grads(mixer, x, upstream, mixer)
    reference = _grads(mixer, x, upstream, lambda t: _reference_forward(mixer, t))
    for a, b in zip(ours, reference, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5 * max(1.0, b.abs().max().item()), rtol=0)


def test_keys_outside_the_image_get_no_weight(block_rule: str) -> None:
    # Every in-image logit is q . k = -18 (d = 4, scale 1/2) plus small relative terms. Zero-vector keys in
    # the padding would score about 0 and take almost all the weight (values 0 there), pulling outputs to
    # ~0; excluded from the softmax, the weights over in-image keys (values 1) must sum to exactly 1.
    mixer = LocalAttention(4, heads=1, k=7)
    q = torch.full((2, 1, 4, 3, 5), 3.0)
    v = torch.ones_like(q)
    for out in (mixer.attend(q, -q, v), dense_local_attention(q, -q, v, mixer.rel_row, mixer.rel_col, 7)):
        torch.testing.assert_close(out, v, atol=1e-6, rtol=0)


@pytest.mark.parametrize("k", [3, 5])
def test_keys_outside_the_window_cannot_leak(k: int, block_rule: str) -> None:
    # The blocked kernel scores every query against its block's whole halo (or, one block, the whole map),
    # which holds in-image keys outside the query's own k x k window: a huge key and value there must not
    # change its output.
    mixer = _mixer(k, 1, 4)
    q, keys, v = (torch.randn(1, 1, 4, 12, 12) for _ in range(3))
    out = mixer.attend(q, keys, v)
    far = k // 2 + 1  # just outside the window of query (5, 5), inside the halo of its block
    keys, v = keys.clone(), v.clone()
    keys[..., 5 + far, 5] = 1e3 * q[..., 5, 5]
    v[..., 5 + far, 5] = 1e6
    changed = mixer.attend(q, keys, v)
    assert torch.equal(changed[..., 5, 5], out[..., 5, 5])
    assert not torch.equal(changed[..., 5 + far, 5], out[..., 5 + far, 5])  # the perturbation is real


@pytest.mark.parametrize("k", [7, 11])
def test_half_precision_is_finite_and_close(k: int, block_rule: str) -> None:
    mixer = _mixer(k, 2, 8)
    q, k, v = (torch.randn(2, 2, 8, 9, 11) for _ in range(3))
    expected = mixer.attend(q, k, v)
    for dtype, tol in ((torch.float16, 1e-2), (torch.bfloat16, 5e-2)):
        low = [t.to(dtype).requires_grad_() for t in (q, k, v)]
        out = mixer.attend(*low)
        out.float().sum().backward()
        assert out.dtype == dtype and all(torch.isfinite(t.grad).all() for t in low)
        torch.testing.assert_close(out.float(), expected, atol=tol, rtol=0)


@pytest.mark.parametrize("k", [7, 11])
def test_huge_logits_keep_gradients_finite_and_exact(k: int, block_rule: str) -> None:
    # Synflow runs networks on |weights| in float64, where logits reach 1e20: the backward pass must
    # recompute the forward's logits bit for bit, or a rounding difference of 1e4 overflows exp2
    mixer = _mixer(k, 2, 4, dtype=torch.float64)
    q, k_, v = (torch.rand(2, 2, 4, 9, 7, dtype=torch.float64) * 1e10 for _ in range(3))
    v.requires_grad_()
    upstream = torch.randn(2, 2, 4, 9, 7, dtype=torch.float64)
    (got,) = torch.autograd.grad((mixer.attend(q, k_, v) * upstream).sum(), [v])
    ref = dense_local_attention(q, k_, v, mixer.rel_row, mixer.rel_col, k)
    (expected,) = torch.autograd.grad((ref * upstream).sum(), [v])
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-12 * expected.abs().max().item())


def test_one_block_where_it_scores_few_enough_logits() -> None:
    choose = local_attention._block_for
    assert [choose(s, s, k) for s in (1, 2, 3, 4) for k in (3, 11)] == [1, 1, 2, 2, 3, 3, 4, 4]
    assert choose(3, 1, 5) == 3 and [choose(8, 8, k) for k in (3, 5, 11)] == [4, 8, 8]
    assert [choose(12, 12, k) for k in (3, 5, 7, 11)] == [4, 4, 12, 12]
    assert [choose(16, 16, k) for k in (3, 5, 7, 9, 11)] == [4, 4, 4, 4, 16]
    assert choose(32, 32, 11) == choose(56, 56, 7) == 4


@pytest.mark.parametrize("size", [(5, 6), (13, 14)], ids=["one-block", "blocks"])
def test_core_is_one_op_with_consistent_registrations(size: tuple[int, int]) -> None:
    q, k, v = (torch.randn(2, *size, 4, requires_grad=True) for _ in range(3))
    rel_row, rel_col = (torch.randn(3, 2, requires_grad=True) for _ in range(2))
    checks = ("test_schema", "test_autograd_registration", "test_faketensor")
    torch.library.opcheck(_local_attention, (q, k, v, rel_row, rel_col, 3), test_utils=checks)


def test_registered_builder() -> None:
    mixer = MIXERS.get("local")(16, 24, MixerCfg("local", heads=3, k=5), 2)
    assert isinstance(mixer, LocalAttention) and (mixer.heads, mixer.k, mixer.stride) == (3, 5, 2)
    assert mixer(torch.randn(1, 16, 7, 6)).shape == (1, 24, 4, 3)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"out_dim": 12, "heads": 5}, "divisible"),
        ({"out_dim": 12, "heads": 4}, "even"),
        ({"k": 4}, "odd"),
        ({"k": 1}, "odd"),
        ({"stride": 3}, "stride"),
    ],
)
def test_rejects_invalid_configurations(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LocalAttention(8, **{"heads": 2, **kwargs})


def _op_values(inputs: list[torch.Tensor], upstream: torch.Tensor) -> list[torch.Tensor]:
    """The op's output and its gradients wrt q, k, v, rel_row, rel_col (k = 5)."""
    out, _ = _local_attention(*inputs, 5)
    return [out, *torch.autograd.grad((out * upstream).sum(), inputs)]


def test_chunks_on_worker_threads_give_the_one_thread_result_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    # 6 images in chunks of one: with 2 intra-op threads the chunks run on two single-threaded workers in
    # any order; the values and the summed relative-table gradients must not depend on it
    monkeypatch.setattr(local_attention, "_images_per_chunk", lambda n, geo, x: 1)
    inputs = [torch.randn(6, 9, 10, 4, requires_grad=True) for _ in range(3)]
    inputs += [torch.randn(5, 2, requires_grad=True) for _ in range(2)]
    upstream = torch.randn(6, 9, 10, 4)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        serial = _op_values(inputs, upstream)
        torch.set_num_threads(2)
        threaded = _op_values(inputs, upstream)
    finally:
        torch.set_num_threads(before)
    for name, a, b in zip(["out", "q", "k", "v", "rel_row", "rel_col"], threaded, serial, strict=True):
        assert torch.equal(a, b), name


def test_chunks_on_worker_threads_under_inference_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_attention, "_images_per_chunk", lambda n, geo, x: 1)
    mixer, x = _mixer(3, 2, 4), torch.randn(3, 6, 8, 8)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with torch.inference_mode():
            out = mixer(x)
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(out, _reference_forward(mixer, x), atol=1e-5, rtol=0)

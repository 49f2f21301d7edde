"""SASA local self-attention: every pixel attends to its k x k neighbourhood.

Stand-Alone Self-Attention (Ramachandran et al. 2019, "Stand-Alone Self-Attention in Vision Models",
arXiv 1906.05909). For a query at (i, j) and a key at (a, b) in its window, |a - i|, |b - j| <= (k - 1) / 2,
Eq. 3 gives the logit

    scale * (q_ij . k_ab + q_ij[:d/2] . rel_row[a - i + (k-1)/2] + q_ij[d/2:] . rel_col[b - j + (k-1)/2])

with scale = d ** -0.5 (the row and column offsets each own half of the head's d channels; ``rel_row`` and
``rel_col`` are (k, d/2) parameters shared by all heads), and Eq. 2 takes the softmax over the window and sums
the values. Keys outside the image are left out of the softmax, not treated as zero vectors. q, k and v come
from one 1x1 convolution without bias; the heads are concatenated without an output projection (SASA has
none), and a stride-2 layer average-pools the result 2x2 (``ceil_mode=True, count_include_pad=False``), as
SASA does where a block downsamples.

The attention core (``nas::local_attention``, one custom op with its own backward) is computed blockwise as in
HaloNet (Vaswani et al. 2021): the queries of each non-overlapping b x b block attend to the (b + k - 1)^2
halo around the block with dense batched matmuls; a small map is one block whose keys are the map itself
(``_block_for``: on a 4 x 4 map a 4 x 4 block's halo at k = 7 holds 100 positions, 16 of them in the image, so
the late stages and the proxy profiles' small maps spent most of their logits on keys that are always masked).
A query's logit for the halo key in row l and column c is relh[l] + relw[c] + q . k, where relh[l] is its row
logit for halo row l and relw[c] its column logit, or a huge finite negative number where that key is masked
(outside the query's k x k window, or outside the image), so that exp2 of a masked logit is exactly 0. The row
and column terms enter the logits' buffer first (a matmul with the one-hot halo coordinates of each key for
small windows, a broadcast add for large ones: ``_ONEHOT_WIN``), then one ``baddbmm`` adds q . k; as extra
features of one augmented dot product they would cost 2 (b + k - 1) + 1 multiply-adds per logit, many times
the d of q . k at small head dims. Products whose output has few columns (a head's d) are computed as their
transpose (``_narrow_product``). Blocks are processed in cache-sized chunks, each worker reusing its buffers,
and the backward pass recomputes the probabilities from the saved log-sum-exp (as flash attention does): the
attention matrix of the whole map is never stored (a one-block map's is, one chunk of images at a time).

:func:`dense_local_attention` is the same attention written naively with ``F.unfold`` (every k x k window of
keys and values held at once, k^2 times the activation memory): the tests' ground truth, and what the mixer
computes while ``torch.export`` or ``torch.jit.trace`` traces it (``nas export`` to ``.pt2``, ONNX or
TorchScript), so that a standalone file holds standard ops only, which run without this package and which
ONNX can express.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import Tensor, nn

from nas.core.ops._chunk_threads import map_chunks
from nas.core.ops._layers import channels_last, pool2, standard_ops_only
from nas.core.ops.registry import MIXERS, MixerCfg

__all__ = ["LocalAttention", "dense_local_attention"]

# Logits are kept in base 2: on CPU, exp2 is many times faster than exp when most inputs underflow, as the
# masked ones do.
_LOG2E, _LN2 = 1.0 / math.log(2.0), math.log(2.0)
# Query block side. 4 was fastest on CPU for k = 3, 5 and 7 (measured against 3, 6 and 8): larger blocks
# compute more masked logits (their halo grows, a query's window does not), smaller ones make the batched
# matmuls too small to run efficiently.
_BLOCK = 4
# Bytes of one chunk's probability matrix. On CPU a few MiB was fastest (2 MiB lost to per-op overhead, 8 and
# 16 MiB gained nothing and cost memory, on a 2-core AVX-512 machine); on GPUs the chunks only bound the
# scratch memory and the number of kernel launches.
_CHUNK_BYTES = {"cpu": 4 << 20}
_CHUNK_BYTES_DEFAULT = 256 << 20
# Halo side up to which the relative terms enter the logits by a matmul with one-hot halo coordinates (and
# leave them, in the backward pass, by its transpose) rather than by a broadcast add (and two sums): on CPU
# the broadcast's inner loops run over only win values, 2.3x slower than the matmul at win 6 (k = 3), 1.2x
# at 10 (k = 7); at 14 (k = 11) the matmul's 2 win multiply-adds per logit make it 1.6x slower.
_ONEHOT_WIN = 10
# One block over a whole small map scores more logits than blocks of 4 with their halos where k is small, but
# each costs less (larger matmuls, no halo gathered or folded): forward + backward, 2 threads, batch 64-128,
# head dims 2-16, it took 0.72-0.99x the blocked time at up to 1.44 times the blocked logits, 0.80-1.12x at
# 1.78 times (8 x 8 at k = 3, 16 x 16 at k = 9: no better), 1.05-1.33x at 2.6 and 1.3-2.3x at 4 to 7 times.
_ONE_BLOCK_LOGITS = 1.5


class _Geometry(NamedTuple):
    """Mask tensors for one (H, W, kernel, block) on one device and dtype."""

    kernel: int
    block: int
    win: int  # halo side b + k - 1
    nbh: int  # query blocks along H and W
    nbw: int
    # The halo rows (columns) that hold keys: all win of them, or, when the map is one block, only the H (W)
    # inside the image, from halo row (column) first_key on; the others would only ever be masked.
    key_rows: int
    key_cols: int
    first_key: int
    mask_row: Tensor  # (nbh, b, win): 0 or the mask value for block row i, query row r, halo row l
    mask_col: Tensor  # (nbw, b, win)
    onehot: Tensor  # (key_rows * key_cols, 2 * win): [onehot(halo row), onehot(halo col)] of each key

    @property
    def keys(self) -> int:
        return self.key_rows * self.key_cols

    @property
    def cropped(self) -> bool:
        return self.nbh == self.nbw == 1


def _block_for(h: int, w: int, kernel: int) -> int:
    """The query block side for an H x W map: ``_BLOCK``, or the map's larger side, one block over the whole
    map whose keys are the map itself (no halo positions outside the image are scored, no halo is
    gathered), where that block scores fewer than ``_ONE_BLOCK_LOGITS`` times the logits of the blocks of
    ``_BLOCK`` with their halos: maps up to 4 x 4 always, 8 x 8 from k = 5, 12 x 12 from k = 7, 16 x 16 from
    k = 11 (the small maps of late stages and of proxy profiles)."""
    side = max(h, w)
    if side <= _BLOCK:
        return side
    blocked = -(-h // _BLOCK) * -(-w // _BLOCK) * _BLOCK**2 * (_BLOCK + kernel - 1) ** 2
    return side if side * side * h * w < _ONE_BLOCK_LOGITS * blocked else _BLOCK


@functools.lru_cache(maxsize=64)
def _geometry(h: int, w: int, kernel: int, device: torch.device, dtype: torch.dtype) -> _Geometry:
    # cached, so made outside inference mode even when first asked for inside it (a latency measurement):
    # a cached inference tensor would break every later training step
    with torch.inference_mode(False):
        return _make_geometry(h, w, kernel, _block_for(h, w, kernel), device, dtype)


def _make_geometry(
    h: int, w: int, kernel: int, block: int, device: torch.device, dtype: torch.dtype
) -> _Geometry:
    pad, win = (kernel - 1) // 2, block + kernel - 1
    nbh, nbw = -(-h // block), -(-w // block)
    # Finite, so that the one-hot matmul never computes 0 * inf = NaN nor subtracting a row's peak inf - inf,
    # and small enough that a row mask plus a column mask plus a logit cannot overflow; no real logit comes
    # near it.
    masked = -torch.finfo(dtype).max / 8
    halo = torch.arange(win, device=device)
    offset = halo[None, :] - torch.arange(block, device=device)[:, None]  # (b, win): key minus query
    in_window = (offset >= 0) & (offset < kernel)

    def mask(size: int, blocks: int) -> Tensor:
        coord = torch.arange(blocks, device=device)[:, None] * block + halo - pad  # image row of halo row
        valid = in_window & ((coord >= 0) & (coord < size))[:, None, :]  # (blocks, b, win)
        return torch.zeros(valid.shape, device=device, dtype=dtype).masked_fill_(~valid, masked)

    # one block: its halo's rows pad .. pad + H - 1 (columns pad .. pad + W - 1) are the image
    rows, cols, first = (h, w, pad) if nbh == nbw == 1 else (win, win, 0)
    eye = torch.eye(win, device=device, dtype=dtype)
    row_hot, col_hot = eye[first : first + rows], eye[first : first + cols]
    onehot = torch.cat(
        [row_hot[:, None, :].expand(-1, cols, -1), col_hot[None, :, :].expand(rows, -1, -1)], -1
    )
    return _Geometry(
        kernel,
        block,
        win,
        nbh,
        nbw,
        rows,
        cols,
        first,
        mask(h, nbh),
        mask(w, nbw),
        onehot.reshape(rows * cols, -1),
    )


# All maps below are channels-last, (n, H, W, c), so that gathers and scatters move runs of c contiguous
# values; blocked tensors are (m, positions, features) with m = n * nbh * nbw blocks.


def _to_blocks(x: Tensor, geo: _Geometry, out: Tensor) -> Tensor:
    """(n, H, W, c) -> out[..., :c] of out (m, b*b, F), zero-padding H and W up to whole blocks."""
    n, h, w, c = x.shape
    b = geo.block
    x = F.pad(x, (0, 0, 0, geo.nbw * b - w, 0, geo.nbh * b - h)).view(n, geo.nbh, b, geo.nbw, b, c)
    out.view(n, geo.nbh, geo.nbw, b, b, -1)[..., :c].copy_(x.transpose(2, 3))
    return out[..., :c]


def _from_blocks(x: Tensor, geo: _Geometry, h: int, w: int) -> Tensor:
    """(m, b*b, c) -> (n, H, W, c), dropping the padded positions."""
    b, c = geo.block, x.shape[-1]
    x = x.reshape(-1, geo.nbh, geo.nbw, b, b, c).transpose(2, 3)
    return x.reshape(x.shape[0], geo.nbh * b, geo.nbw * b, c)[:, :h, :w]


def _halo(x: Tensor, geo: _Geometry, out: Tensor) -> None:
    """Copies the keys of every block's halo from x (n, H, W, c) into out[..., :c], out being (m, keys, F):
    the zero-padded win x win halo, or the map itself when it is one block."""
    n, h, w, c = x.shape
    if geo.cropped:
        out.view(n, h, w, -1)[..., :c].copy_(x)
        return
    b, win, pad = geo.block, geo.win, (geo.kernel - 1) // 2
    x = F.pad(x, (0, 0, pad, geo.nbw * b - w + pad, pad, geo.nbh * b - h + pad))
    x = x.unfold(1, win, b).unfold(2, win, b)  # (n, nbh, nbw, c, win, win)
    out.view(n, geo.nbh, geo.nbw, win, win, -1)[..., :c].copy_(x.permute(0, 1, 2, 4, 5, 3))


def _fold_halo(x: Tensor, geo: _Geometry, h: int, w: int) -> Tensor:
    """Adjoint of ``_halo``: sums halo gradients (m, keys, c) back into a map (n, H, W, c).

    The halo is cut into block-sized tiles; tile (ty, tx) of block (i, j) lands on block (i + ty, j + tx) of
    the padded map, so each tile offset is one add of non-overlapping strided regions.
    """
    if geo.cropped:
        return x.reshape(-1, h, w, x.shape[-1])
    b, win, pad, c = geo.block, geo.win, (geo.kernel - 1) // 2, x.shape[-1]
    tiles = -(-win // b)
    x = x.reshape(-1, geo.nbh, geo.nbw, win, win, c)
    acc = x.new_zeros(x.shape[0], geo.nbh + tiles - 1, b, geo.nbw + tiles - 1, b, c)
    for ty in range(tiles):
        sy = min(b, win - ty * b)
        for tx in range(tiles):
            sx = min(b, win - tx * b)
            tile = x[:, :, :, ty * b : ty * b + sy, tx * b : tx * b + sx].transpose(2, 3)
            acc[:, ty : ty + geo.nbh, :sy, tx : tx + geo.nbw, :sx] += tile
    acc = acc.view(x.shape[0], (geo.nbh + tiles - 1) * b, (geo.nbw + tiles - 1) * b, c)
    return acc[:, pad : pad + h, pad : pad + w]


def _window(x: Tensor, geo: _Geometry, start: int, axis: int) -> Tensor:
    """(m, b*b, F) -> (m, b, b, k) view of features start + r + j (axis 0) or start + c + j (axis 1).

    For query (r, c) of a block these are the slots of the k halo rows (columns) in its window among
    features indexed by halo row (column): where its relative logits go, and where their gradients are.
    """
    b, (sm, sq, _) = geo.block, x.stride()
    strides = (sm, b * sq + 1, sq, 1) if axis == 0 else (sm, b * sq, sq + 1, 1)
    return x.as_strided((x.shape[0], b, b, geo.kernel), strides, x.storage_offset() + start)


class _Grads(NamedTuple):
    """A chunk's backward-pass buffers."""

    go: Tensor  # (m, b*b, d): the output's gradient, blocked
    dp: Tensor  # (m, b*b, keys): the probabilities' gradient
    ds: Tensor  # (m, b*b, keys): the logits' gradient


class _Chunk(NamedTuple):
    """Per-chunk buffers."""

    qa: Tensor  # (m, b*b, d + 2 win): [scale q, relh + masks, relw + masks]
    kh: Tensor  # (m, keys, d): the halo's keys
    vh: Tensor  # (m, keys, d): the halo's values
    logits: Tensor  # (m, b*b, keys)


def _chunk_buffers(x: Tensor, geo: _Geometry, blocks: int) -> _Chunk:
    d, win = x.shape[-1], geo.win
    return _Chunk(
        x.new_empty(blocks, geo.block**2, d + 2 * win),
        x.new_empty(blocks, geo.keys, d),
        x.new_empty(blocks, geo.keys, d),
        x.new_empty(blocks, geo.block**2, geo.keys),
    )


def _fill(buf: _Chunk, q: Tensor, k: Tensor, v: Tensor, rel: tuple[Tensor, Tensor], geo: _Geometry) -> None:
    """Fills buf (sliced to a chunk's m = n * nbh * nbw blocks) from that chunk of q, k, v (n, H, W, d)."""
    d, win, b = q.shape[-1], geo.win, geo.block
    qs = _to_blocks(q, geo, buf.qa).mul_(d**-0.5 * _LOG2E)  # base-2 logit units
    blocks = buf.qa.view(-1, geo.nbh, geo.nbw, b, b, d + 2 * win)  # (n, nbh, nbw, r, c, features)
    blocks[..., d : d + win] = geo.mask_row[:, None, :, None, :]
    blocks[..., d + win : d + 2 * win] = geo.mask_col[None, :, None, :, :]
    _window(buf.qa, geo, d, 0).add_((qs[..., : d // 2] @ rel[0].t()).view(-1, b, b, geo.kernel))
    _window(buf.qa, geo, d + win, 1).add_((qs[..., d // 2 :] @ rel[1].t()).view(-1, b, b, geo.kernel))
    _halo(k, geo, buf.kh)
    _halo(v, geo, buf.vh)


def _logits(chunk: _Chunk, geo: _Geometry, d: int) -> Tensor:
    """The chunk's base-2 logits (m, b*b, keys), in its logits buffer: relh[l] + relw[c] (masks included)
    for the halo key in row l and column c, plus q . k. The backward pass must recompute them bit for bit (so
    that no logit exceeds the forward's log-sum-exp), hence one function for both passes."""
    m, bq, win = *chunk.qa.shape[:2], geo.win
    rel = chunk.qa[..., d:]
    if win <= _ONEHOT_WIN:
        torch.matmul(rel, geo.onehot.t(), out=chunk.logits)
    else:
        rows, cols = _key_slices(geo)
        logits = chunk.logits.view(m, bq, geo.key_rows, geo.key_cols)
        torch.add(rel[..., rows, None], rel[..., None, cols], out=logits)
    return chunk.logits.baddbmm_(chunk.qa[..., :d], chunk.kh.transpose(1, 2))


def _key_slices(geo: _Geometry) -> tuple[slice, slice]:
    """Where the keys' halo rows and columns sit among the 2 win relative features."""
    first = geo.first_key
    return slice(first, first + geo.key_rows), slice(geo.win + first, geo.win + first + geo.key_cols)


def _rel_grad(ds: Tensor, geo: _Geometry) -> Tensor:
    """(m, b*b, keys) logits' gradient -> (m, b*b, 2 win): its sums over each halo row, then column (0 for
    the rows and columns outside a one-block map)."""
    if geo.win <= _ONEHOT_WIN:
        return ds @ geo.onehot
    ds = ds.view(*ds.shape[:2], geo.key_rows, geo.key_cols)
    if not geo.cropped:
        return torch.cat([ds.sum(-1), ds.sum(-2)], dim=-1)
    rows, cols = _key_slices(geo)
    out = ds.new_zeros(*ds.shape[:2], 2 * geo.win)
    out[..., rows] = ds.sum(-1)
    out[..., cols] = ds.sum(-2)
    return out


def _narrow_product(a: Tensor, b: Tensor) -> Tensor:
    """a @ b for (m, r, L) a and (m, L, c) b, c a head's d, as (b^T a^T)^T when c < 16: MKL's batched GEMM
    runs several times slower with an output of few columns than with its transpose's wide rows (d = 2: 1.1
    against 0.5 ms; d = 8: 0.23 against 0.07); from 16 on the transposed form gains nothing (5-15% slower
    from 64)."""
    if b.shape[-1] >= 16:
        return torch.bmm(a, b)
    return torch.bmm(b.transpose(1, 2), a.transpose(1, 2)).transpose(1, 2)


def _images_per_chunk(n: int, geo: _Geometry, x: Tensor) -> int:
    """How many of the n = batch * heads maps one chunk holds."""
    budget = _CHUNK_BYTES.get(x.device.type, _CHUNK_BYTES_DEFAULT)
    per_image = geo.nbh * geo.nbw * geo.block**2 * geo.keys * x.element_size()
    return max(1, min(n, budget // per_image))


def _lse_shape(h: int, w: int, kernel: int, n: int) -> tuple[int, int, int]:
    """The shape of the log-sum-exp ``nas::local_attention`` returns: one per query of each block."""
    block = _block_for(h, w, kernel)
    return n * -(-h // block) * -(-w // block), block**2, 1


@torch.library.custom_op("nas::local_attention", mutates_args=())
def _local_attention(
    q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor, kernel: int
) -> tuple[Tensor, Tensor]:
    """SASA attention of channels-last (n, H, W, d) q, k, v with (kernel, d/2) relative tables.

    Returns the output (n, H, W, d) and the base-2 log-sum-exp of every query's logits (for the backward
    pass). One opaque op, so that tracers (fvcore's MAC count) see the attention, not the blocked kernel.
    """
    n, h, w, _ = q.shape
    geo = _geometry(h, w, kernel, q.device, q.dtype)
    step, nb = _images_per_chunk(n, geo, q), geo.nbh * geo.nbw
    out = torch.empty_like(q)
    acc = torch.promote_types(q.dtype, torch.float32)  # row sums and log-sum-exp of fp16 logits
    lse = q.new_empty(n * nb, geo.block**2, 1, dtype=acc)

    def attend(s: int, buf: _Chunk) -> None:  # the images s : s + step
        m = min(step, n - s) * nb
        chunk = _Chunk(*(t[:m] for t in buf))
        _fill(chunk, q[s : s + step], k[s : s + step], v[s : s + step], (rel_row, rel_col), geo)
        logits = _logits(chunk, geo, q.shape[-1])
        peak = logits.amax(-1, keepdim=True)
        p = logits.sub_(peak).exp2_()
        total = p.sum(-1, keepdim=True, dtype=acc)
        out[s : s + step] = _from_blocks(_narrow_product(p, chunk.vh).div_(total), geo, h, w)
        torch.add(peak, total.log2_(), out=lse[s * nb : s * nb + m])

    map_chunks(attend, range(0, n, step), lambda: _chunk_buffers(q, geo, step * nb), q.device)
    return out, lse


@_local_attention.register_fake
def _(
    q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor, kernel: int
) -> tuple[Tensor, Tensor]:
    n, h, w, _ = q.shape
    acc = torch.promote_types(q.dtype, torch.float32)
    return torch.empty_like(q), q.new_empty(_lse_shape(h, w, kernel, n), dtype=acc)


@torch.library.custom_op("nas::local_attention_backward", mutates_args=())
def _local_attention_backward(
    grad: Tensor, q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor, lse: Tensor, kernel: int
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Gradients of ``nas::local_attention`` wrt q, k, v, rel_row, rel_col; recomputes the probabilities."""
    n, h, w, d = q.shape
    geo = _geometry(h, w, kernel, q.device, q.dtype)
    step, nb, bq, half = _images_per_chunk(n, geo, q), geo.nbh * geo.nbw, geo.block**2, d // 2
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    chunks = range(0, n, step)
    d_rel: list[tuple[Tensor, Tensor] | None] = [None] * len(chunks)  # each chunk's d rel_row, d rel_col

    def scratch() -> tuple[_Chunk, _Grads]:
        blocks, logits = step * nb, (step * nb, bq, geo.keys)
        grads = _Grads(q.new_empty(blocks, bq, d), q.new_empty(logits), q.new_empty(logits))
        return _chunk_buffers(q, geo, blocks), grads

    def differentiate(s: int, bufs: tuple[_Chunk, _Grads]) -> None:  # the images s : s + step
        m = min(step, n - s) * nb
        chunk, grads = (type(b)(*(t[:m] for t in b)) for b in bufs)
        _fill(chunk, q[s : s + step], k[s : s + step], v[s : s + step], (rel_row, rel_col), geo)
        qs, win = chunk.qa[..., :d], geo.win
        p = _logits(chunk, geo, d).sub_(lse[s * nb : s * nb + m]).exp2_()  # (m, b*b, keys) probabilities
        go_ = _to_blocks(grad[s : s + step], geo, grads.go)
        # the gradient wrt the base-2 logits, hence ln 2: ds = p * (dp - rowsum(p * dp)) in one fused op
        dp = torch.bmm(go_ * _LN2, chunk.vh.transpose(1, 2), out=grads.dp)
        ds = torch.ops.aten._softmax_backward_data.out(dp, p, -1, p.dtype, grad_input=grads.ds)
        dv[s : s + step] = _fold_halo(_narrow_product(p.transpose(1, 2), go_), geo, h, w)
        dk[s : s + step] = _fold_halo(_narrow_product(ds.transpose(1, 2), qs), geo, h, w)
        dqs = _narrow_product(ds, chunk.kh)
        d_rel_rc = _rel_grad(ds, geo)
        d_relh = _window(d_rel_rc, geo, 0, 0).reshape(m * bq, -1)
        d_relw = _window(d_rel_rc, geo, win, 1).reshape(m * bq, -1)
        d_rel[s // step] = (
            d_relh.t() @ qs[..., :half].reshape(m * bq, half),
            d_relw.t() @ qs[..., half:].reshape(m * bq, half),
        )
        dqs[..., :half] += (d_relh @ rel_row).view(m, bq, half)
        dqs[..., half:] += (d_relw @ rel_col).view(m, bq, half)
        dq[s : s + step] = _from_blocks(dqs, geo, h, w) * (d**-0.5 * _LOG2E)

    map_chunks(differentiate, chunks, scratch, q.device)
    # summed in chunk order, so that the result does not depend on which worker finished first
    d_rel_row, d_rel_col = (torch.stack(parts).sum(0) for parts in zip(*d_rel, strict=True))
    return dq, dk, dv, d_rel_row, d_rel_col


@_local_attention_backward.register_fake
def _(
    grad: Tensor, q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor, lse: Tensor, kernel: int
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return tuple(torch.empty_like(t) for t in (q, k, v, rel_row, rel_col))


def _setup_context(ctx, inputs: tuple, output: tuple[Tensor, Tensor]) -> None:
    q, k, v, rel_row, rel_col, kernel = inputs
    ctx.save_for_backward(q, k, v, rel_row, rel_col, output[1])
    ctx.kernel = kernel


def _backward(ctx, grad: Tensor, _grad_lse: Tensor | None) -> tuple[Tensor | None, ...]:
    return (*_local_attention_backward(grad, *ctx.saved_tensors, ctx.kernel), None)


_local_attention.register_autograd(_backward, setup_context=_setup_context)


def dense_local_attention(
    q: Tensor, k: Tensor, v: Tensor, rel_row: Tensor, rel_col: Tensor, kernel: int
) -> Tensor:
    """(B, heads, d, H, W) q, k, v and (kernel, d/2) relative tables -> (B, heads, d, H, W): Eq. 2 and 3 with
    every window unfolded; neighbours outside the image are left out of the softmax."""
    b, h, d, hh, ww = q.shape
    pad, win = (kernel - 1) // 2, kernel * kernel

    def windows(t: Tensor) -> Tensor:  # (B, h, d, H, W) -> (B, h, d, k*k, H*W), zero outside the image
        return F.unfold(t.reshape(b, h * d, hh, ww), kernel, padding=pad).view(b, h, d, win, hh * ww)

    # rel[:, r * kernel + c] = [rel_row[r], rel_col[c]], the order in which unfold lists window offsets
    rel = torch.cat(
        [rel_row[:, None].expand(-1, kernel, -1), rel_col[None].expand(kernel, -1, -1)], dim=-1
    ).reshape(win, d)
    keys = windows(k) + rel.t()[:, :, None]
    logits = (q.reshape(b, h, d, 1, hh * ww) * keys).sum(2) * d**-0.5  # (B, h, k*k, H*W)
    inside = F.unfold(q.new_ones(1, 1, hh, ww), kernel, padding=pad) > 0  # (1, k*k, H*W)
    attn = logits.masked_fill(~inside, float("-inf")).softmax(dim=2)
    return (attn[:, :, None] * windows(v)).sum(3).view(b, h, d, hh, ww)


class LocalAttention(nn.Module):
    """SASA token mixer: (B, dim, H, W) -> (B, out_dim, ceil(H / stride), ceil(W / stride))."""

    def __init__(
        self, dim: int, out_dim: int | None = None, *, heads: int = 8, k: int = 7, stride: int = 1
    ) -> None:
        super().__init__()
        out_dim = out_dim or dim
        if out_dim % heads:
            raise ValueError(f"out_dim {out_dim} is not divisible by heads {heads}")
        head_dim = out_dim // heads
        if head_dim % 2:
            raise ValueError(f"head dim {head_dim} must be even (half for rows, half for columns)")
        if k < 3 or k % 2 == 0:
            raise ValueError(f"window k must be odd and >= 3, got {k}")
        if stride not in (1, 2):
            raise ValueError(f"stride must be 1 or 2, got {stride}")
        self.out_dim, self.heads, self.head_dim, self.k, self.stride = out_dim, heads, head_dim, k, stride
        self.qkv = nn.Conv2d(dim, 3 * out_dim, 1, bias=False)
        self.rel_row = nn.Parameter(torch.empty(k, head_dim // 2))
        self.rel_col = nn.Parameter(torch.empty(k, head_dim // 2))
        trunc_normal_(self.rel_row, std=0.02)
        trunc_normal_(self.rel_col, std=0.02)
        self.pool = pool2() if stride == 2 else nn.Identity()  # SASA pools after attention to downsample

    def attend(self, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
        """(B, heads, d, H, W) q, k, v -> (B, heads, d, H, W): Eq. 2 and 3 over each k x k window."""
        if standard_ops_only():  # a standalone file holds standard ops only (module docstring)
            return dense_local_attention(q, k, v, self.rel_row, self.rel_col, self.k)
        b, heads, d, h, w = q.shape
        dtype = q.dtype  # the kernel runs in the dtype the (autocast) qkv projection produced
        q, k, v = (t.to(dtype).permute(0, 1, 3, 4, 2).reshape(b * heads, h, w, d) for t in (q, k, v))
        # autocast off around the kernel (meta tensors, on which costs are counted, have no autocast)
        with contextlib.nullcontext() if q.is_meta else torch.autocast(q.device.type, enabled=False):
            rel = (self.rel_row.to(dtype), self.rel_col.to(dtype))
            out, _ = _local_attention(q, k, v, *rel, self.k)  # (B * heads, H, W, d)
        return out.view(b, heads, h, w, d).permute(0, 1, 4, 2, 3)

    def forward(self, x: Tensor) -> Tensor:
        b, _, h, w = x.shape
        q, k, v = self.qkv(x).view(b, 3, self.heads, self.head_dim, h, w).unbind(1)  # (B, heads, d, H, W)
        out = self.attend(q, k, v)
        if channels_last(x):  # the heads' channels interleaved per pixel: the network's format kept
            out = out.permute(0, 3, 4, 1, 2).reshape(b, h, w, self.out_dim).permute(0, 3, 1, 2)
        return self.pool(out.reshape(b, self.out_dim, h, w))


@MIXERS.register("local")
def _build_local(in_dim: int, out_dim: int, cfg: MixerCfg, stride: int) -> nn.Module:
    return LocalAttention(in_dim, out_dim, heads=cfg.heads, k=cfg.k, stride=stride)

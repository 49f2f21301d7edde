"""Cost without training: parameters, MACs (fvcore) and measured latency of an architecture.

MACs are counted by fvcore's ``FlopCountAnalysis`` (one multiply-add = 1, the convention of fvcore and of
CoAtNet's "FLOPs"; SASA's "FLOPS" are 2 x MACs). fvcore skips or miscounts several ops our models emit, so
this module registers handlers for every one of them:

- ``aten::scaled_dot_product_attention`` (skipped by fvcore): ``B h Nq Nk (E + Ev)``;
- ``aten::matmul`` with broadcasting (fvcore ignores the batch dims of a broadcast operand) and
  ``aten::einsum`` with two operands (fvcore's generic path allocates both operands as float64 arrays): the
  product of all dimensions involved;
- ``nas::local_attention``, the core of the ``local`` mixer, which appears as one op when traced: its exact
  algorithmic cost ``B N k^2 C`` for logits and for the weighted sum, plus ``B N k C`` for the row and column
  relative logits (the blocked implementation does extra, masked work that is not the op's cost);
- element-wise and data-movement ops (activations, residual adds, pooling, softmax, the SE gate, ...):
  explicitly zero, so that anything left in ``unsupported_ops`` is an op whose cost nobody has accounted for.

:func:`count` does not trace the whole network. A network is its stem, its blocks and its head, each of which
sees an input whose shape :func:`nas.core.model.plan_blocks` knows, and every block after the first of a
stage is
the first's twin (same channels, stride 1, same map, same mixer). So ``count`` traces each *distinct* part
once, alone, on an input of its shape (the stem on the image; a block on ``in_dim`` channels at its input
size; the head on the last feature map, global pool included) and multiplies. MACs and parameter counts
depend only on shapes, so parts are built and traced on the meta device: no weight initialization and no
arithmetic, yet fvcore's jit trace records the same ops with the same shapes as on the CPU (where a trace ran
the part's forward pass at the target resolution: seconds for a block of global attention on a 56 x 56 map;
on meta about 20 ms a part, whatever its size). One op needs help (:class:`_ConvolutionAsOnCpu`): a 2-d
convolution, traced as the ``aten::_convolution`` the CPU kernel calls. A part whose meta trace fails (an op
without a meta kernel, data-dependent code such as ``.item()``) is traced on the CPU instead, materialized as
zeros, and counted in :data:`CPU_FALLBACKS`. Part costs are memoized per process (:func:`clear_count_cache`)
and, inside :func:`counts_kept_in`, on disk (:class:`~evaluators.part_costs.PartCosts`, keyed by everything a
part's count depends on), so a search traces each distinct part once per machine, not once per worker
process. :func:`count_traced` is the reference: the whole network built and traced on the CPU in one piece;
the two agree exactly, part by part (tested over the baselines and random architectures of every space), and
every registered stem, mixer, block and head counts the same on meta as on the CPU. Measured
(``benchmarks/``, 2 shared CPU cores): a cold count of a random coatnet architecture 0.12 s at the median
(the whole-network trace: 1.26 s); a rejected sample of a constrained search with an empty store 0.08 s at
the median, 0.15 s at worst.

Two conventions (``convention=``, ``nas cost / baselines --convention``):

- ``"fvcore"`` (the default, and every search's): the multiply-adds above, element-wise work free.
- ``"paper"``: the same, plus the arithmetic the attention papers count on their attention maps, derived
  from the operations, not fitted to their tables: every arithmetic operation on an attention-map entry
  (one query, one key, one head) is one unit, as a multiply-add is one in the MAC convention. Per entry:
  **2** form the logit from its terms (CoAtNet: the scale and the relative bias, ``s * qk + w``; SASA: the
  content logit + the row logit + the column logit) and **5** are the softmax's (max and subtract for the
  shift, ``exp``, sum and divide: the five TensorFlow's profiler counts per softmax element, and both papers
  come from TensorFlow code): **7**. External attention's S x N maps: the softmax's 5 and 2 for the L1
  renormalization over the slots (sum and divide): 7 too. Everything else stays as fvcore counts it: SASA's
  relative logits as the ``local`` kernel computes them (``q^T r`` with ``r`` the concatenation of a row and a
  column embedding is a row term plus a column term, ``B N k C`` in all, their sum per entry among the 2
  above), and element-wise work on activations free (the papers' conv baselines match fvcore to 0.5%, so
  they do not count it). How close this comes to the papers' rows: `nas baselines`.
"""

from __future__ import annotations

import collections
import functools
import itertools
import math
import statistics
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

with warnings.catch_warnings():  # fvcore's import scripts a loss function, which torch now warns about
    warnings.simplefilter("ignore", FutureWarning)
    from fvcore.nn import FlopCountAnalysis
    from fvcore.nn.jit_handles import get_shape

from evaluators.part_costs import PartCosts, part_key
from nas.core.arch import Arch, Head, Stem
from nas.core.model import (
    BlockSpec,
    NasNet,
    SkipMetaInit,
    build_model,
    check_img_size,
    check_task,
    count_params,
    head_layers,
    plan_blocks,
)
from nas.core.ops import STEMS

__all__ = [
    "CONVENTIONS",
    "Complexity",
    "StageCost",
    "check_convention",
    "clear_count_cache",
    "count",
    "count_traced",
    "counts_kept_in",
    "flop_count_analysis",
    "latency_ms",
    "macs_of",
    "pick_device",
]

# Ops with no multiply-accumulate work (MACs count only multiply-adds, as fvcore, CoAtNet and SASA do).
_ZERO_MAC_OPS = (
    "aten::add",
    "aten::add_",
    "aten::sub",
    "aten::rsub",
    "aten::mul",
    "aten::mul_",
    "aten::div",
    "aten::div_",
    "aten::gelu",
    "aten::silu",
    "aten::silu_",
    "aten::sigmoid",
    "aten::tanh",
    "aten::relu",
    "aten::relu_",
    "aten::softmax",
    "aten::sum",
    "aten::mean",
    "aten::avg_pool2d",
    "aten::max_pool2d",
    "aten::exp",
    "aten::pad",
    "aten::repeat",
    "aten::unbind",
    "aten::linspace",
    "aten::linalg_vector_norm",
    "aten::neg",
    "aten::im2col",
    "aten::unfold",
    "aten::scatter",
    "aten::where",
    "aten::fill_",  # the attention stem's mask of the keys inside the image, where it pads (a write)
    "aten::index_copy",  # the attention stem's normalized pixels put back among its padding (a copy)
    "aten::abs",
    "aten::amax",
    "aten::meshgrid",  # the relative-position index (index bookkeeping, computed once per map size)
    "aten::index_select",  # the relative-position bias gathered from its table (a copy, no arithmetic)
)


def _sdpa_macs(inputs: list[Any], outputs: list[Any]) -> int:
    q, k, v = (get_shape(inputs[i]) for i in range(3))
    batch = math.prod(q[:-2])
    return batch * q[-2] * k[-2] * (q[-1] + v[-1])


def _matmul_macs(inputs: list[Any], outputs: list[Any]) -> int:
    a, b = get_shape(inputs[0]), get_shape(inputs[1])
    a, b = ([1, *a] if len(a) == 1 else a), ([*b, 1] if len(b) == 1 else b)
    batch = torch.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
    return math.prod(batch) * a[-2] * a[-1] * b[-1]


def _einsum_macs(inputs: list[Any], outputs: list[Any]) -> int:
    equation = inputs[0].toIValue().replace(" ", "")
    shapes = [get_shape(v) for v in inputs[1].node().inputs()]
    operands = equation.split("->")[0].split(",")
    if len(operands) != 2 or "." in equation:
        raise NotImplementedError(f"einsum {equation!r}: only two explicit operands are counted")
    sizes = {}
    for letters, shape in zip(operands, shapes, strict=True):
        sizes.update(zip(letters, shape, strict=True))
    return math.prod(sizes.values())


def _local_attention_macs(inputs: list[Any], outputs: list[Any]) -> int:
    query = get_shape(inputs[0])  # every query channel of every pixel, in any layout
    kernel = get_shape(inputs[3])[0]  # rel_row: (k, d / 2)
    return math.prod(query) * (2 * kernel * kernel + kernel)


_HANDLERS: dict[str, Callable | None] = {
    "aten::scaled_dot_product_attention": _sdpa_macs,
    "aten::matmul": _matmul_macs,
    "aten::einsum": _einsum_macs,
    "nas::local_attention": _local_attention_macs,
    **dict.fromkeys(_ZERO_MAC_OPS),
}

# The "paper" convention (module docstring): one unit per arithmetic operation on each attention-map entry
# beyond the products fvcore counts, an operation being what a multiply-add is in the MAC convention: one.
_SOFTMAX_OPS = 5  # per element: max and subtract (the shift), exp, sum and divide (TensorFlow's profiler: 5)
_LOGIT_OPS = 2  # the logit from its terms: CoAtNet's scale and + relative bias; SASA's content + row + column
_L1_OPS = 2  # external attention's second normalization, over the slots: sum and divide
_MAP_ENTRY_OPS = _LOGIT_OPS + _SOFTMAX_OPS  # an entry of a dot-product attention map (global or local): 7


def _sdpa_paper_macs(inputs: list[Any], outputs: list[Any]) -> int:
    q, k = get_shape(inputs[0]), get_shape(inputs[1])
    return _sdpa_macs(inputs, outputs) + _MAP_ENTRY_OPS * math.prod(q[:-1]) * k[-2]


def _local_attention_paper_macs(inputs: list[Any], outputs: list[Any]) -> int:
    query = get_shape(inputs[0])  # (maps, H, W, d): every map's queries
    kernel = get_shape(inputs[3])[0]
    return _local_attention_macs(inputs, outputs) + _MAP_ENTRY_OPS * math.prod(query[:-1]) * kernel * kernel


def _softmax_paper_macs(inputs: list[Any], outputs: list[Any]) -> int:
    # an explicit softmax is external attention's (S, N) map, L1-renormalized over S afterwards (the attention
    # stem's few value weights, 64 numbers, are counted alike): logits as fvcore counts them, then both norms
    return (_SOFTMAX_OPS + _L1_OPS) * math.prod(get_shape(outputs[0]))


CONVENTIONS: dict[str, dict[str, Callable | None]] = {
    "fvcore": _HANDLERS,
    "paper": {
        **_HANDLERS,
        "aten::scaled_dot_product_attention": _sdpa_paper_macs,
        "nas::local_attention": _local_attention_paper_macs,
        "aten::softmax": _softmax_paper_macs,
    },
}


def check_convention(convention: str) -> str:
    if convention not in CONVENTIONS:
        raise ValueError(f"convention: unknown {convention!r}; allowed: {', '.join(CONVENTIONS)}")
    return convention


def flop_count_analysis(
    model: nn.Module, inputs: torch.Tensor | tuple[torch.Tensor, ...], convention: str = "fvcore"
) -> FlopCountAnalysis:
    """fvcore's analysis of ``model`` on ``inputs`` with this project's handlers (those of ``convention``),
    warnings off."""
    analysis = FlopCountAnalysis(model, inputs)
    analysis.set_op_handle(**CONVENTIONS[check_convention(convention)])
    analysis.unsupported_ops_warnings(False).uncalled_modules_warnings(False).tracer_warnings("none")
    return analysis


def macs_of(model: nn.Module, inputs: torch.Tensor | tuple[torch.Tensor, ...]) -> int:
    """Total MACs of one forward of ``model`` in eval mode; raises if an op that may cost is uncounted."""
    was_training = model.training
    model.eval()
    try:
        analysis = flop_count_analysis(model, inputs)
        total = analysis.total()
        uncounted = analysis.unsupported_ops()
    finally:
        model.train(was_training)
    if uncounted:
        raise RuntimeError(f"ops without a MAC count: {dict(uncounted)}; register a handler in {__name__}")
    return int(total)


@dataclass(frozen=True)
class StageCost:
    name: str
    params: int
    macs: int


@dataclass(frozen=True)
class Complexity:
    """Params and MACs of an architecture at ``img_size``, in total and per part (stem, s1.., head)."""

    params: int
    macs: int
    img_size: int
    parts: tuple[StageCost, ...]
    convention: str = "fvcore"  # how the MACs were counted (module docstring)


def count(
    arch: Arch, img_size: int = 224, in_chans: int = 3, num_classes: int = 1000, convention: str = "fvcore"
) -> Complexity:
    """Params and MACs of ``arch`` built for ``num_classes`` and one ``in_chans`` x ``img_size``^2 image,
    counted in ``convention`` (``"fvcore"`` or ``"paper"``, see the module docstring).

    Each distinct part (stem, block, head) is traced once and multiplied (see the module docstring); the
    result equals :func:`count_traced`'s, the whole network traced in one piece."""
    check_task(num_classes, in_chans)
    check_convention(convention)
    specs, feature_size = plan_blocks(arch, check_img_size(arch, img_size))
    parts = [StageCost(f"stem {arch.stem.key}", *_stem_cost(arch.stem, in_chans, img_size, convention))]
    for i, stage in enumerate(arch.stages):
        # drop-path (the one thing that differs between a stage's repeated blocks, besides their index) is
        # off, as in build_model's default
        costs = [
            _block_cost(replace(spec, stage=0, index=0, drop_path=0.0), convention)
            for spec in specs
            if spec.stage == i
        ]
        parts.append(StageCost(f"s{i + 1} {stage.key}", sum(p for p, _ in costs), sum(m for _, m in costs)))
    in_dim = arch.stages[-1].width if arch.stages else arch.stem.width
    parts.append(
        StageCost(
            f"head {arch.head.kind}", *_head_cost(arch.head, in_dim, num_classes, feature_size, convention)
        )
    )
    params, macs = sum(p.params for p in parts), sum(p.macs for p in parts)
    return Complexity(params, macs, img_size, tuple(parts), convention)


def count_traced(
    arch: Arch, img_size: int = 224, in_chans: int = 3, num_classes: int = 1000, convention: str = "fvcore"
) -> Complexity:
    """:func:`count` the slow, obvious way, its reference: the whole network built (weights initialized)
    and traced by fvcore on the CPU in one piece; the parts are fvcore's per-module totals."""
    model = build_model(arch, num_classes=num_classes, in_chans=in_chans, img_size=img_size).eval()
    with torch.no_grad():
        analysis = flop_count_analysis(model, torch.zeros(1, in_chans, img_size, img_size), convention)
        total = int(analysis.total())
        uncounted = analysis.unsupported_ops()
        if uncounted:
            raise RuntimeError(f"ops without a MAC count in {arch.key}: {dict(uncounted)}")
        by_module = analysis.by_module()
    parts = [StageCost(f"stem {arch.stem.key}", count_params(model.stem), int(by_module["stem"]))]
    for i, stage in enumerate(arch.stages):
        parts.append(
            StageCost(f"s{i + 1} {stage.key}", count_params(model.stages[i]), int(by_module[f"stages.{i}"]))
        )
    head_params = count_params(model) - sum(p.params for p in parts)
    parts.append(StageCost(f"head {arch.head.kind}", head_params, total - sum(p.macs for p in parts)))
    return Complexity(count_params(model), total, img_size, tuple(parts), convention)


class _HeadPart(nn.Module):
    """A network's layers after its last stage, run by ``NasNet.forward_head`` itself (global pool included),
    so that whatever the network does there is counted the same way."""

    def __init__(self, head: Head, in_dim: int, num_classes: int) -> None:
        super().__init__()
        self.head_norm, self.pre_logits, self.head_drop, self.fc, _ = head_layers(head, in_dim, num_classes)

    forward = NasNet.forward_head


_STORE: PartCosts | None = None  # the on-disk part costs in use (counts_kept_in), None: memory only


@contextmanager
def counts_kept_in(store: PartCosts) -> Iterator[None]:
    """Inside, :func:`count` looks its parts up in ``store`` (a search's ``<runs>/counts``, shared by every
    process counting there) before tracing them, and adds what it traces; outside, the previous store."""
    global _STORE
    before, _STORE = _STORE, store
    try:
        yield
    finally:
        _STORE = before


def _part_cost(
    build: Callable[[], nn.Module], input_shape: tuple[int, ...], key: str, convention: str
) -> tuple[int, int]:
    """(params, MACs) of the module ``build()`` makes (the part :func:`part_key` ``key`` names), on one input
    of ``input_shape``: from the on-disk store if it has them, else traced (and stored)."""
    store = _STORE
    known = store.get(convention, key) if store is not None else None
    if known is not None:
        return known
    cost = _traced_part_cost(build, input_shape, key, convention)
    if store is not None:
        store.add(convention, key, cost)
    return cost


def _traced_part_cost(
    build: Callable[[], nn.Module], input_shape: tuple[int, ...], what: str, convention: str
) -> tuple[int, int]:
    """(params, MACs) of the module ``build()`` makes, traced by fvcore on one input of ``input_shape``: on
    the meta device (shapes only, no arithmetic), or on the CPU where a meta trace fails (counted in
    :data:`CPU_FALLBACKS`)."""
    try:
        return _meta_part_cost(build, input_shape, convention)
    except _META_FAILURES as error:
        CPU_FALLBACKS[f"{what.split()[0]}: {type(error).__name__}"] += 1
    return _cpu_part_cost(build, input_shape, what, convention)


class _UncountedOnMeta(Exception):
    """A meta trace left ops uncounted: the CPU trace decides whether they are (and raises if so)."""


# What a meta trace raises where a part cannot run on meta: an op without a meta kernel
# (NotImplementedError), data-dependent code such as ``.item()`` (RuntimeError), a Python meta kernel reading
# sizes the jit tracer has made tensors (TypeError), ops left uncounted
_META_FAILURES = (NotImplementedError, RuntimeError, TypeError, _UncountedOnMeta)
# how often a part was traced on the CPU because its meta trace failed, per "part kind: error type"
CPU_FALLBACKS: collections.Counter[str] = collections.Counter()


class _ConvolutionAsOnCpu(TorchFunctionMode):
    """Traces a 2-d convolution of meta tensors as one of CPU tensors is traced: as ``aten::_convolution``.

    On the CPU, ``conv2d`` reaches ``aten::convolution``, which the jit tracer does not record, and whose
    kernel calls ``aten::_convolution``, which it does (the node fvcore counts). On meta, torch's Python
    kernel for ``aten::convolution`` computes the output's shape itself, from sizes the live tracer has made
    tensors (it raises), and never calls ``aten::_convolution``. So here ``conv2d`` of a batched meta input
    is the ``aten::_convolution`` call the CPU kernel makes, with the same arguments."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.conv2d and args and getattr(args[0], "is_meta", False) and args[0].dim() == 4:
            names = ("input", "weight", "bias", "stride", "padding", "dilation", "groups")
            bound = dict(zip(names[: len(args)], args, strict=True))
            bound = {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1, **bound, **kwargs}
            if not isinstance(bound["padding"], str):  # "same" / "valid" are another op: left as they are
                pair = torch.nn.modules.utils._pair
                cudnn = torch.backends.cudnn
                return torch._convolution(
                    bound["input"],
                    bound["weight"],
                    bound["bias"],
                    pair(bound["stride"]),
                    pair(bound["padding"]),
                    pair(bound["dilation"]),
                    False,  # transposed
                    [0, 0],  # output padding
                    bound["groups"],
                    cudnn.benchmark,
                    cudnn.deterministic or torch.are_deterministic_algorithms_enabled(),
                    cudnn.enabled,
                    cudnn.allow_tf32,
                )
        return func(*args, **kwargs)


def _meta_part_cost(
    build: Callable[[], nn.Module], input_shape: tuple[int, ...], convention: str
) -> tuple[int, int]:
    """(params, MACs) of the module ``build()`` makes, built and traced on the meta device: the jit trace
    fvcore counts holds the same ops with the same shapes as on the CPU, and no arithmetic is done."""
    with torch.device("meta"), SkipMetaInit():  # no initialization: only shapes matter
        module = build()
    module.eval()
    with torch.no_grad(), _ConvolutionAsOnCpu():
        analysis = flop_count_analysis(module, torch.empty(input_shape, device="meta"), convention)
        macs = int(analysis.total())
        if analysis.unsupported_ops():
            raise _UncountedOnMeta(dict(analysis.unsupported_ops()))
    return count_params(module), macs


def _cpu_part_cost(
    build: Callable[[], nn.Module], input_shape: tuple[int, ...], what: str, convention: str
) -> tuple[int, int]:
    """(params, MACs) of the module ``build()`` makes, traced by fvcore running its forward pass on the CPU on
    one input (zeros) of ``input_shape``."""
    with torch.device("meta"), SkipMetaInit():  # no initialization: only shapes matter
        module = build()
    module.to_empty(device="cpu").eval()
    with torch.no_grad():
        for tensor in itertools.chain(module.parameters(), module.buffers()):
            tensor.zero_()  # uninitialized memory may hold NaNs or denormals (slow); zeros are quick
        analysis = flop_count_analysis(module, torch.zeros(input_shape), convention)
        macs = int(analysis.total())
        uncounted = analysis.unsupported_ops()
    if uncounted:
        raise RuntimeError(f"ops without a MAC count in {what}: {dict(uncounted)}")
    return count_params(module), macs


@functools.lru_cache(maxsize=256)
def _stem_cost(stem: Stem, in_chans: int, img_size: int, convention: str) -> tuple[int, int]:
    return _part_cost(
        lambda: STEMS.get(stem.kind)(in_chans, stem.width, patch=stem.patch),
        (1, in_chans, img_size, img_size),
        part_key("stem", stem, in_chans=in_chans, size=f"{img_size}x{img_size}"),
        convention,
    )


@functools.lru_cache(maxsize=4096)
def _block_cost(spec: BlockSpec, convention: str) -> tuple[int, int]:
    return _part_cost(
        spec.build,
        (1, spec.in_dim, *spec.mixer.feat_size),
        part_key("block", spec, skip=("stage", "index", "drop_path")),
        convention,
    )


@functools.lru_cache(maxsize=256)
def _head_cost(
    head: Head, in_dim: int, num_classes: int, feature_size: tuple[int, int], convention: str
) -> tuple[int, int]:
    return _part_cost(
        lambda: _HeadPart(head, in_dim, num_classes),
        (1, in_dim, *feature_size),
        part_key("head", head, in_dim=in_dim, classes=num_classes, size="x".join(map(str, feature_size))),
        convention,
    )


def clear_count_cache() -> None:
    """Forget the part costs :func:`count` memoized in this process (for timing it cold); an on-disk store
    (:func:`counts_kept_in`) is kept."""
    for cached in (_stem_cost, _block_cost, _head_cost):
        cached.cache_clear()


def pick_device(device: torch.device | str | None = None) -> torch.device:
    """``device`` if given, else CUDA when present, else the CPU: the one rule every evaluator follows."""
    if device is not None:
        return torch.device(device)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def latency_ms(
    model: nn.Module,
    img_size: int = 224,
    in_chans: int = 3,
    device: torch.device | str | None = None,
    warmup: int = 5,
    repeats: int = 20,
    batch: int = 1,
) -> float:
    """Median wall time of a forward pass of ``batch`` images (eval mode, no grad) after ``warmup`` passes, on
    ``device`` (CUDA when present, else CPU); CUDA work is synchronized before each clock read."""
    device = pick_device(device)
    model = model.to(device).eval()
    x = torch.randn(batch, in_chans, img_size, img_size, device=device)
    times = []
    with torch.no_grad():
        for i in range(warmup + repeats):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            model(x)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i >= warmup:
                times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)

"""Training-free rankers of architectures: the zero-cost baselines an evaluator has to beat.

Every ranker maps an :class:`~nas.core.arch.Arch` to one float where **higher is better** (predicted more
accurate), so rank correlations with trained accuracy read the same way for all of them.

- ``params`` and ``macs``: the model's size and its multiply-adds (``evaluators.complexity.count``). Counting
  is the bar every proxy is held against (Abdelfattah et al. 2021; ``../shared/REFERENCE.md``).
- ``synflow``: Tanaka et al. 2020, "Pruning neural networks without any data by iteratively conserving
  synaptic flow": the synaptic saliency ``S(theta) = dR/dtheta * theta`` (Eq. 1) of the synaptic-flow
  objective ``R_SF = 1^T (prod_l |theta^[l]|) 1`` (Sec. 6, Eq. 2). As a NAS proxy (Abdelfattah et al. 2021,
  "Zero-Cost Proxies for Lightweight NAS", Sec. 3; their ``foresight/pruners/measures/synflow.py``) the score
  is ``sum |S(theta)|`` over the network, computed in float64 with every parameter replaced by its absolute
  value, an all-ones input of one image and ``R`` = the sum of the logits. Choices, following that reference
  where it has one:

  - normalization is switched off: the reference scores a ``bn=False`` copy of the network, because
    BatchNorm divides the flow by its own scale and so breaks the product over layers (Tanaka et al. instead
    run in eval mode, where a fresh BatchNorm is about the identity, except that ResNet's zero-initialized
    last BatchNorm of a block would then hide the whole residual branch). We bypass every BatchNorm and, for
    the same reason and because its centring would make the positive flow signed, every LayerNorm (the
    reference's NAS-Bench-201 cells have none). Their parameters get no score. The rest runs in eval mode;
  - attention probabilities are held constant: every softmax, including the ones inside
    ``F.scaled_dot_product_attention`` and the ``nas::local_attention`` op, sees detached logits. The
    objective ``R_SF`` is a sum of products of ``|theta|`` along paths; the logits ``q^T k`` are quadratic in
    the flow, so at the magnitudes an un-normalized positive flow reaches (1e50 and more in a deep
    CoAtNet) a softmax either saturates or, at near-ties, has a slope of the flow's square: the score then
    measures rounding, not flow (with live logits, CoAtNet-4's log score moved by 3 between 1 and 2 CPU
    threads). With constant weights an attention layer is a fixed token mixing, linear in its values as
    synflow assumes; query and key projections, relative-position tables and external-attention key
    memories, which only shape the weights, score 0. The reference has no attention; this is our choice;
  - ReLU, GELU, SiLU and the SE gate's sigmoid stay (a positive flow passes them almost unchanged, as it
    passes ReLU in the reference);
  - the ``mlp`` head's tanh is bypassed: at the magnitudes an un-normalized positive flow reaches it is
    exactly 1 in float64, and its zero slope would zero the gradient of everything below it;
  - the sum runs over all parameters (biases and value memories included), as Tanaka et al. score every
    parameter; the reference sums Conv2d and Linear weights only, which dominate.

  Returned as the natural log of the sum, a log-sum-exp of per-entry ``log|theta * grad|`` so the total
  cannot overflow: scores of different networks differ by many orders of magnitude and only ranks matter.
  The model is never modified: the pass runs on float64 absolute copies of the parameters through
  ``torch.func.functional_call``, so there is nothing to restore.
- ``naswot``: Mellor et al. 2021, "Neural Architecture Search without Training" (v3), Eq. 2:
  ``s = log |K_H|`` with ``K_H[i, j] = N_A - d_H(c_i, c_j)`` for the binary codes ``c_i`` (unit > 0) of every
  rectified unit of the network on image ``i`` of a minibatch, i.e. ``K_H = sum over layers of
  c c^T + (1 - c)(1 - c)^T``. Units are the outputs of every ``nn.ReLU``, ``nn.GELU`` and ``nn.SiLU`` module
  (the reference hooks ReLU only; GELU and SiLU are our rectifiers, each > 0 exactly where its input is, so
  the code is the same read before or after it). As in the reference the untrained network runs in train
  mode, so BatchNorm normalizes with the batch's own statistics; the model's running statistics are left
  untouched. A singular kernel (two images with one code: the network cannot tell them apart) scores
  ``-inf``, the exact value of Eq. 2.

Models are built under ``torch.manual_seed(seed)`` in a forked RNG, so a score depends on ``seed`` alone and
leaves the caller's random state as it was.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call
from torch.overrides import TorchFunctionMode

from evaluators.complexity import Complexity, count
from nas.core.arch import Arch
from nas.core.model import build_model

__all__ = [
    "ZERO_COST",
    "ZeroCostFn",
    "macs",
    "naswot",
    "naswot_of",
    "params",
    "score",
    "synflow",
    "synflow_of",
]

# Bypassed during synflow (see the module docstring): normalizations (timm's LayerNorm and LayerNorm2d
# subclass nn.LayerNorm) and the saturating tanh of the mlp head.
_SYNFLOW_BYPASS = (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm, nn.Tanh)
# Functions whose output is an attention weighting; synflow holds it constant (see the module docstring).
_SOFTMAXES = (torch.Tensor.softmax, torch.softmax, F.softmax)
# Units whose sign pattern forms NASWOT's binary code.
_RECTIFIERS = (nn.ReLU, nn.GELU, nn.SiLU)


class ZeroCostFn(Protocol):
    def __call__(
        self,
        arch: Arch,
        *,
        img_size: int,
        in_chans: int,
        num_classes: int,
        batch: torch.Tensor | None,
        seed: int,
    ) -> float: ...


# --- on a model ----------------------------------------------------------------------------------------


def synflow_of(model: nn.Module, input_shape: tuple[int, ...]) -> float:
    """log of the synflow score of ``model`` at its current weights, for an all-ones input of ``input_shape``
    (batch first; one image in the reference). Higher is better. ``model`` is not modified."""
    params = {n: p.detach().abs().double().requires_grad_() for n, p in model.named_parameters()}
    buffers = {n: b.detach().double() if b.is_floating_point() else b for n, b in model.named_buffers()}
    ones = torch.ones(input_shape, dtype=torch.float64)
    with _mode(model, training=False), _hooked(model, _SYNFLOW_BYPASS, _pass_input), _ConstantAttention():
        out = functional_call(model, {**params, **buffers}, (ones,))
    grads = torch.autograd.grad(out.sum(), list(params.values()), allow_unused=True)
    used = [(p, g) for p, g in zip(params.values(), grads, strict=True) if g is not None]
    if not all(torch.isfinite(g).all() for _, g in used):
        raise RuntimeError(f"synflow is not finite in float64 for {type(model).__name__}: {out.sum().item()}")
    logs = [(p * g).abs().log().flatten() for p, g in used]  # log 0 = -inf drops out of the log-sum-exp
    total = torch.logsumexp(torch.cat(logs), dim=0).item() if logs else -math.inf
    if not math.isfinite(total):  # every product is 0: no flow reaches the output
        raise RuntimeError(f"synflow of {type(model).__name__} is 0: no parameter reaches the output")
    return total


def naswot_of(model: nn.Module, batch: torch.Tensor) -> float:
    """``log |K_H|`` of ``model``'s rectifier codes on ``batch`` (B >= 2 images). Higher is better. The
    model's parameters and buffers are not modified."""
    if batch.ndim < 2 or batch.shape[0] < 2:
        raise ValueError(f"naswot needs a batch of at least 2 inputs, got shape {tuple(batch.shape)}")
    kernel = torch.zeros(batch.shape[0], batch.shape[0], dtype=torch.float64)
    units = 0

    def add_codes(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
        nonlocal units
        codes = (output.detach() > 0).flatten(1).double()  # float64: counts stay exact integers
        # c c^T + (1 - c)(1 - c)^T = 2 c c^T - |c_i| - |c_j| + n: one matmul instead of two
        active = codes.sum(1)
        kernel.add_(2 * codes @ codes.T - active[:, None] - active[None, :] + codes.shape[1])
        units += codes.shape[1]

    buffers = {n: b.clone() for n, b in model.named_buffers()}  # train-mode BN updates these copies only
    with torch.no_grad(), _mode(model, training=True), _hooked(model, _RECTIFIERS, add_codes):
        functional_call(model, buffers, (batch,))
    if not units:
        raise ValueError(
            f"naswot: {type(model).__name__} has no ReLU, GELU or SiLU module to read codes from"
        )
    sign, logdet = torch.linalg.slogdet(kernel)
    return logdet.item() if sign > 0 else -math.inf


class _ConstantAttention(TorchFunctionMode):
    """Detach every input of an attention weighting, so gradients flow through the values only."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func in _SOFTMAXES:
            args = (args[0].detach(), *args[1:])
        elif func is F.scaled_dot_product_attention or func is torch.ops.nas.local_attention.default:
            # (q, k, v, attn_mask or relative tables ...): all but the values only shape the weights
            args = tuple(a if i == 2 else _detached(a) for i, a in enumerate(args))
            kwargs = {n: a if n == "value" else _detached(a) for n, a in kwargs.items()}
        return func(*args, **kwargs)


def _detached(value: Any) -> Any:
    return value.detach() if isinstance(value, torch.Tensor) else value


def _pass_input(module: nn.Module, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> torch.Tensor:
    return inputs[0]


@contextmanager
def _hooked(
    model: nn.Module, kinds: tuple[type[nn.Module], ...], hook: Callable[..., torch.Tensor | None]
) -> Iterator[None]:
    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, kinds)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def _mode(model: nn.Module, training: bool) -> Iterator[None]:
    """Switch train/eval for the duration, then give every submodule back its own flag."""
    flags = [(m, m.training) for m in model.modules()]
    model.train(training)
    try:
        yield
    finally:
        for module, flag in flags:
            module.training = flag


# --- on an architecture -------------------------------------------------------------------------------


def _build(arch: Arch, img_size: int, in_chans: int, num_classes: int, seed: int) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build_model(arch, num_classes=num_classes, in_chans=in_chans, img_size=img_size)


@functools.lru_cache(maxsize=1024)
def _complexity(arch: Arch, img_size: int, in_chans: int, num_classes: int) -> Complexity:
    """One fvcore trace serves both ``params`` and ``macs`` of an arch (``Arch`` is frozen and hashable)."""
    return count(arch, img_size=img_size, in_chans=in_chans, num_classes=num_classes)


def params(
    arch: Arch,
    *,
    img_size: int,
    in_chans: int = 3,
    num_classes: int = 1000,
    batch: torch.Tensor | None = None,
    seed: int = 0,
) -> float:
    """Number of parameters; higher is better (bigger models tend to be more accurate)."""
    return float(_complexity(arch, img_size, in_chans, num_classes).params)


def macs(
    arch: Arch,
    *,
    img_size: int,
    in_chans: int = 3,
    num_classes: int = 1000,
    batch: torch.Tensor | None = None,
    seed: int = 0,
) -> float:
    """Multiply-adds of one ``img_size`` image; higher is better (more compute tends to be more accurate)."""
    return float(_complexity(arch, img_size, in_chans, num_classes).macs)


def synflow(
    arch: Arch,
    *,
    img_size: int,
    in_chans: int = 3,
    num_classes: int = 1000,
    batch: torch.Tensor | None = None,
    seed: int = 0,
) -> float:
    """log synflow of ``arch`` at its seeded initialization (``batch`` is not used: the input is all ones);
    higher is better."""
    model = _build(arch, img_size, in_chans, num_classes, seed)
    return synflow_of(model, (1, in_chans, img_size, img_size))


def naswot(
    arch: Arch,
    *,
    img_size: int,
    in_chans: int = 3,
    num_classes: int = 1000,
    batch: torch.Tensor | None = None,
    seed: int = 0,
) -> float:
    """NASWOT ``log |K_H|`` of ``arch`` at its seeded initialization on ``batch`` (B, in_chans, img_size,
    img_size), real images from the task; higher is better."""
    if batch is None:
        raise ValueError("naswot needs a minibatch of images: pass batch=")
    expected = (in_chans, img_size, img_size)
    if tuple(batch.shape[1:]) != expected:
        raise ValueError(
            f"naswot: batch of shape {tuple(batch.shape)}, expected (B, {', '.join(map(str, expected))})"
        )
    return naswot_of(_build(arch, img_size, in_chans, num_classes, seed), batch)


ZERO_COST: dict[str, ZeroCostFn] = {"params": params, "macs": macs, "synflow": synflow, "naswot": naswot}


def score(
    name: str,
    arch: Arch,
    *,
    img_size: int,
    in_chans: int = 3,
    num_classes: int = 1000,
    batch: torch.Tensor | None = None,
    seed: int = 0,
) -> float:
    """The zero-cost score ``name`` (a key of ``ZERO_COST``) of ``arch``; higher is better for every name."""
    if name not in ZERO_COST:
        raise ValueError(f"unknown zero-cost ranker {name!r}; allowed: {', '.join(ZERO_COST)}")
    return ZERO_COST[name](
        arch, img_size=img_size, in_chans=in_chans, num_classes=num_classes, batch=batch, seed=seed
    )

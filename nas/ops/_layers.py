"""Small shared pieces of the ops (private): the ceil-mode 2x2 average pool every strided op agrees on, and
the cache of the constant tensors (relative indices) the attention ops make per feature size."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

import torch
import torch.nn as nn

__all__ = ["out_size", "pool2", "tensor_cache"]

_F = TypeVar("_F", bound=Callable[..., torch.Tensor])


def pool2() -> nn.Module:
    """2x2/2 average pool mapping H to ceil(H / 2), like every other strided op here, so odd sizes work."""
    return nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)


def out_size(size: tuple[int, int], stride: int) -> tuple[int, int]:
    """Spatial size after an op of this stride (all strided ops here round up)."""
    return (-(-size[0] // stride), -(-size[1] // stride))


def tensor_cache(maxsize: int) -> Callable[[_F], _F]:
    """``functools.lru_cache`` for a function that makes constant tensors, bypassed while torch traces
    (``torch.export``, ``torch.onnx``, ``torch.compile``): a tensor made under tracing is the tracer's fake
    one, and once cached it would turn every later eager forward's output into a fake tensor too. Keeps
    ``cache_clear`` and ``cache_info``."""

    def wrap(fn: _F) -> _F:
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            return fn(*args, **kwargs) if torch.compiler.is_compiling() else cached(*args, **kwargs)

        call.cache_clear, call.cache_info = cached.cache_clear, cached.cache_info
        return call

    return wrap

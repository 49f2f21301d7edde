"""Small shared pieces of the ops (private): the ceil-mode 2x2 average pool every strided op agrees on, the
cache of the constant tensors (relative indices) the attention ops make per feature size, and the test for
a trace that must hold standard ops only."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import torch
import torch.nn as nn

__all__ = ["out_size", "pool2", "standalone_trace", "standard_ops_only", "tensor_cache"]

_F = TypeVar("_F", bound=Callable[..., torch.Tensor])


def pool2() -> nn.Module:
    """2x2/2 average pool mapping H to ceil(H / 2), like every other strided op here, so odd sizes work."""
    return nn.AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)


def out_size(size: tuple[int, int], stride: int) -> tuple[int, int]:
    """Spatial size after an op of this stride (all strided ops here round up)."""
    return (-(-size[0] // stride), -(-size[1] // stride))


class _Standalone(threading.local):
    tracing = False


_standalone = _Standalone()


@contextlib.contextmanager
def standalone_trace() -> Iterator[None]:
    """Mark a ``torch.jit.trace`` as the trace of a standalone file (:func:`standard_ops_only` is then
    True). Only marked: fvcore counts MACs from a jit trace too, and it must see this package's ops."""
    before, _standalone.tracing = _standalone.tracing, True
    try:
        yield
    finally:
        _standalone.tracing = before


def standard_ops_only() -> bool:
    """Whether torch is tracing the network into a standalone file (``torch.export``, which the ONNX exporter
    uses too, or a jit trace under :func:`standalone_trace`): the attention ops then compute with standard
    ops, not this package's kernel or its batch-size loop, so that the file runs without this package at any
    batch size."""
    return torch.compiler.is_exporting() or _standalone.tracing


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


def channels_last(x: torch.Tensor) -> bool:
    """Whether ``x`` (B, C, H, W) is stored channels-last and not also contiguous (as a map of 1 x 1 or
    of one channel is in both formats): an op that makes a new map keeps its input's format."""
    return x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous()

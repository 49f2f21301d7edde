"""String registries from op names to builders, one per kind of op (mixer, block, stem).

Every builder of one kind shares one signature (as timm's ``byobnet`` block registry does), so the model
builder and the supernet can create any op from the names that an :class:`nas.core.arch.Arch` carries:

- mixer builders: ``(in_dim, out_dim, cfg: MixerCfg, stride) -> nn.Module`` mapping ``(B, in_dim, H, W)`` to
  ``(B, out_dim, ceil(H / stride), ceil(W / stride))``;
- block builders: ``(in_dim, out_dim, stride, mixer_cfg: MixerCfg, drop_path, *, expand) -> nn.Module``;
- stem builders: ``(in_chans, width, *, patch) -> nn.Module``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["BLOCKS", "MIXERS", "STEMS", "MixerCfg", "Registry"]

F = TypeVar("F", bound=Callable)


@dataclass(frozen=True)
class MixerCfg:
    """What a block needs to build its token mixer.

    ``feat_size`` is the (H, W) of the op's input map at build time (a block's input; a block that pools
    before its mixer passes the pooled size on). Ops whose parameters depend on the spatial size (the
    relative bias table of ``rel``) are sized for it and adapt to other sizes at run time.
    """

    name: str
    heads: int | None = None
    k: int | None = None
    memory: int | None = None
    feat_size: tuple[int, int] = (7, 7)


class Registry(Generic[F]):
    """A name -> builder table with a decorator to fill it and a clear error for unknown names."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._builders: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        def _add(builder: F) -> F:
            if name in self._builders:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._builders[name] = builder
            return builder

        return _add

    def get(self, name: str) -> F:
        try:
            return self._builders[name]
        except KeyError:
            raise ValueError(
                f"unknown {self.kind} {name!r}; registered: {', '.join(sorted(self._builders))}"
            ) from None

    def names(self) -> list[str]:
        return sorted(self._builders)

    def __contains__(self, name: object) -> bool:
        return name in self._builders


MIXERS: Registry = Registry("mixer")
BLOCKS: Registry = Registry("block")
STEMS: Registry = Registry("stem")

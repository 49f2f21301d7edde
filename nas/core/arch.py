"""The architecture encoding: the one value that travels between spaces, builders, evaluators and reports.

An :class:`Arch` is a stem, a tuple of stages and a head, each a frozen dataclass validated on construction.
A stage is a *container* (block) around a *token mixer* (as in MetaFormer, Yu et al. 2022), which makes the
hand-designed seeds points of one family:

- SASA (Ramachandran et al. 2019): ``bottleneck`` blocks with the ``local`` mixer of extent ``k``;
- CoAtNet (Dai et al. 2021): ``mbconv`` stages (C) then ``transformer`` stages with the ``rel`` mixer (T);
- EANet (Guo et al. 2021): ``transformer`` blocks with the ``ext`` mixer and ``memory`` slots;
- ViT (Dosovitskiy et al. 2020): a ``patch`` stem followed by transformer stages.

Values are canonical: optional fields left as ``None`` are filled with their defaults on construction, so two
encodings of the same network compare equal and share one :attr:`Arch.key`. The lossless exchange format is
the flat dict of labelled primitives (``{"s1.block": "mbconv", "s3.k": 7, ...}``) used by Optuna params,
Ray configs, JSON files and report rows. This module imports nothing heavy: it is safe to use anywhere.

Every size is bounded (:mod:`nas.core.bounds`: at most 16 stages of at most 64 blocks, widths up to 8192, odd
``k``
up to 31, up to 256 heads and 4096 memory slots, patches up to 64), so a value checked here can be built
without first allocating something of its own size. JSON is read by :mod:`nas.core.userfiles` (a regular file
of
at most 1 MiB, nested at most 32 levels).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from nas.core import userfiles
from nas.core.bounds import (
    MAX_DEPTH,
    MAX_EXPAND,
    MAX_HEADS,
    MAX_K,
    MAX_MEMORY,
    MAX_PATCH,
    MAX_STAGES,
    MAX_WIDTH,
    shown,
    whole,
)

__all__ = [
    "BLOCK_MIXERS",
    "HEAD_KINDS",
    "MIXER_NAMES",
    "STEM_KINDS",
    "Arch",
    "Head",
    "Stage",
    "Stem",
]

# The vocabulary. nas.core.ops registers exactly these names (a test holds the two together).
STEM_KINDS = ("conv", "resnet", "attn", "patch")
MIXER_NAMES = ("conv", "local", "rel", "ext")
BLOCK_MIXERS: dict[str, tuple[str, ...]] = {
    "mbconv": ("conv",),  # the depthwise kxk conv of an inverted bottleneck is its token mixer
    "bottleneck": MIXER_NAMES,  # ResNet 1x1-mixer-1x1: conv (ResNet), local (SASA), rel (BoTNet), ext
    "transformer": MIXER_NAMES,  # pre-norm mixer + pre-norm FFN: rel (CoAtNet T), ext (EANet), local, conv
}
HEAD_KINDS = ("fc", "norm", "mlp")

_STEM_STRIDE = {"conv": 2, "resnet": 4, "attn": 4}
_BLOCK_LETTER = {"mbconv": "C", "bottleneck": "B", "transformer": "T"}
ATTN_STEM_HEADS = 8
_HEAD_DIM = 32  # CoAtNet's attention head size: the default head count of rel and ext is width / 32
_LOCAL_HEADS = 8  # SASA uses 8 heads throughout
_EXT_MEMORY = 64  # EANet's default number of memory slots S


def _fail(name: str, message: str) -> None:
    raise ValueError(f"{name}: {message}")


def _check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if not isinstance(value, str) or value not in allowed:
        _fail(name, f"unknown value {shown(value)}; allowed: {', '.join(allowed)}")


def _subject(label: Any) -> str:
    """A flat dict's label as the subject of an error: as it is if short and printable, else cut short."""
    text = str(label)
    return text if 0 < len(text) <= 60 and text.isprintable() else shown(label)  # an empty one quoted


@dataclass(frozen=True)
class Stem:
    """The stem (CoAtNet's S0): ``conv`` (two 3x3, first strided; stride 2), ``resnet`` (7x7/2 + 3x3/2 max
    pool; stride 4), ``attn`` (SASA spatially-aware attention stem + 4x4 max pool; stride 4) or ``patch``
    (ViT patchify, kernel = stride = ``patch``)."""

    kind: str
    width: int
    patch: int | None = None

    def __post_init__(self) -> None:
        _check_choice("stem.kind", self.kind, STEM_KINDS)
        whole("stem.width", self.width, 1, MAX_WIDTH)
        if self.kind == "patch":
            whole("stem.patch", self.patch, 1, MAX_PATCH)
        elif self.patch is not None:
            _fail(
                "stem.patch",
                f"only the 'patch' stem takes a patch size, got {shown(self.patch)} for {self.kind!r}",
            )
        if self.kind == "attn" and self.width % ATTN_STEM_HEADS:
            _fail(
                "stem.width",
                f"the attention stem has {ATTN_STEM_HEADS} heads, so width must be a "
                f"multiple of {ATTN_STEM_HEADS}, got {self.width}",
            )

    @property
    def stride(self) -> int:
        return self.patch if self.kind == "patch" else _STEM_STRIDE[self.kind]

    @property
    def key(self) -> str:
        return f"patch{self.patch}-{self.width}" if self.kind == "patch" else f"{self.kind}{self.width}"


@dataclass(frozen=True)
class Stage:
    """``depth`` blocks of one container type around one token mixer, ending at ``width`` channels.

    The first block moves from the previous width and applies ``stride``. ``expand`` is the block's expansion
    ratio (MBConv's inverted bottleneck, the ResNet bottleneck's reduction, the Transformer FFN). ``k`` is the
    kernel size of ``conv`` (default 3) and the spatial extent of ``local`` (required, odd); ``memory`` is the
    slot count of ``ext`` (default 64); ``heads`` is the attention head count (``local``: 8, ``rel``/``ext``:
    one head per 32 channels).
    """

    block: str
    mixer: str
    depth: int
    width: int
    stride: int = 2
    expand: int = 4
    k: int | None = None
    memory: int | None = None
    heads: int | None = None

    def __post_init__(self) -> None:
        _check_choice("block", self.block, tuple(BLOCK_MIXERS))
        _check_choice("mixer", self.mixer, MIXER_NAMES)
        if self.mixer not in BLOCK_MIXERS[self.block]:
            _fail(
                "mixer",
                f"{self.mixer!r} is not allowed in a {self.block!r} block; allowed: "
                f"{', '.join(BLOCK_MIXERS[self.block])}",
            )
        whole("depth", self.depth, 1, MAX_DEPTH)
        whole("width", self.width, 1, MAX_WIDTH)
        if isinstance(self.stride, bool) or not isinstance(self.stride, int) or self.stride not in (1, 2):
            _fail("stride", f"must be 1 or 2, got {shown(self.stride)}")
        whole("expand", self.expand, 1, MAX_EXPAND)
        if self.block == "bottleneck" and self.width % self.expand:
            _fail(
                "width",
                f"a bottleneck of expansion {self.expand} needs a width divisible by {self.expand}, "
                f"got {self.width}",
            )
        self._canonicalize_k()
        self._canonicalize_memory()
        self._canonicalize_heads()

    def _canonicalize_k(self) -> None:
        if self.mixer in ("conv", "local"):
            if self.k is None and self.mixer == "conv":
                object.__setattr__(self, "k", 3)
            k = self.k
            if isinstance(k, bool) or not isinstance(k, int) or not 3 <= k <= MAX_K or k % 2 == 0:
                _fail(
                    "k",
                    f"the {self.mixer!r} mixer needs an odd whole number k between 3 and {MAX_K}, "
                    f"got {shown(k)}",
                )
        elif self.k is not None:
            _fail("k", f"only the 'conv' and 'local' mixers take k, got {shown(self.k)} for {self.mixer!r}")

    def _canonicalize_memory(self) -> None:
        if self.mixer == "ext":
            if self.memory is None:
                object.__setattr__(self, "memory", _EXT_MEMORY)
            whole("memory", self.memory, 1, MAX_MEMORY)
        elif self.memory is not None:
            _fail(
                "memory",
                f"only the 'ext' mixer takes memory slots, got {shown(self.memory)} for {self.mixer!r}",
            )

    def _canonicalize_heads(self) -> None:
        if self.mixer == "conv":
            if self.heads is not None:
                _fail("heads", f"the 'conv' mixer has no heads, got {shown(self.heads)}")
            return
        if self.heads is None:
            object.__setattr__(self, "heads", self.default_heads)
        whole("heads", self.heads, 1, MAX_HEADS)
        dim = self.mixer_dim
        if dim % self.heads:
            _fail(
                "heads",
                f"the {self.mixer!r} mixer works on {dim} channels, which {self.heads} heads do not "
                f"divide; allowed: divisors of {dim}",
            )
        if not self._heads_fit(self.heads):
            _fail(
                "heads",
                f"local attention splits each head's channels into row and column halves, so "
                f"{dim} channels / {self.heads} heads must be even",
            )

    def _heads_fit(self, heads: int) -> bool:
        dim = self.mixer_dim
        return dim % heads == 0 and (self.mixer != "local" or (dim // heads) % 2 == 0)

    def max_heads(self, limit: int) -> int:
        """The largest head count <= ``limit`` that this stage's mixer width allows."""
        for heads in range(limit, 0, -1):
            if self._heads_fit(heads):
                return heads
        raise ValueError(f"heads: no head count fits the {self.mixer!r} mixer on {self.mixer_dim} channels")

    @property
    def mixer_dim(self) -> int:
        """Channels the token mixer works on inside the block."""
        if self.block == "mbconv":
            return self.width * self.expand
        if self.block == "bottleneck":
            return self.width // self.expand
        return self.width

    @property
    def default_heads(self) -> int | None:
        if self.mixer == "conv":
            return None
        if self.mixer == "local":
            return _LOCAL_HEADS
        return max(1, math.gcd(self.mixer_dim, max(1, self.mixer_dim // _HEAD_DIM)))

    @property
    def key(self) -> str:
        mixer = "" if self.block == "mbconv" else self.mixer
        parts = [f"{_BLOCK_LETTER[self.block]}{mixer}{self.depth}x{self.width}"]
        if self.mixer == "local" or (self.mixer == "conv" and self.k != 3):
            parts.append(f"k{self.k}")
        if self.mixer == "ext":
            parts.append(f"m{self.memory}")
        if self.heads != self.default_heads:
            parts.append(f"h{self.heads}")
        if self.expand != 4:
            parts.append(f"e{self.expand}")
        if self.stride != 2:
            parts.append(f"s{self.stride}")
        return "".join(parts)


@dataclass(frozen=True)
class Head:
    """The classifier head after global average pooling: ``fc`` (a linear layer; ResNet, CoAtNet paper),
    ``norm`` (LayerNorm then linear; ViT) or ``mlp`` (LayerNorm, linear to ``width``, tanh, linear; timm's
    CoAtNet pre-logits). ``width`` belongs to ``mlp`` only."""

    kind: str = "fc"
    width: int | None = None

    def __post_init__(self) -> None:
        _check_choice("head.kind", self.kind, HEAD_KINDS)
        if self.kind == "mlp":
            whole("head.width", self.width, 1, MAX_WIDTH)
        elif self.width is not None:
            _fail("head.width", f"only the 'mlp' head has a width, got {shown(self.width)} for {self.kind!r}")

    @property
    def key(self) -> str:
        return {"fc": "", "norm": "norm", "mlp": f"mlp{self.width}"}[self.kind]


_STAGE_FIELD = re.compile(r"s([1-9][0-9]{0,8})\.([a-z_]+)")
_STAGE_FIELDS = tuple(f.name for f in fields(Stage))


@dataclass(frozen=True)
class Arch:
    """A whole network: ``stem`` then ``stages`` (at least one) then ``head``."""

    stem: Stem
    stages: tuple[Stage, ...]
    head: Head = field(default_factory=Head)

    def __post_init__(self) -> None:
        if not isinstance(self.stem, Stem):
            _fail("stem", f"must be a Stem, got {type(self.stem).__name__}")
        stages = tuple(self.stages) if isinstance(self.stages, (list, tuple)) else None
        if not stages or not all(isinstance(s, Stage) for s in stages):
            _fail("stages", "must be a non-empty sequence of Stage")
        if len(stages) > MAX_STAGES:
            _fail("stages", f"must be between 1 and {MAX_STAGES} stages, got {len(stages)}")
        object.__setattr__(self, "stages", stages)
        if not isinstance(self.head, Head):
            _fail("head", f"must be a Head, got {type(self.head).__name__}")

    @property
    def stride(self) -> int:
        """Total downsampling from input pixels to the last feature map."""
        return self.stem.stride * math.prod(s.stride for s in self.stages)

    @property
    def min_img_size(self) -> int:
        """Smallest input side for which every strided op still sees at least one full window of pixels."""
        return self.stride

    @property
    def num_features(self) -> int:
        return self.stages[-1].width

    @property
    def depth(self) -> int:
        return sum(s.depth for s in self.stages)

    @property
    def key(self) -> str:
        """Short canonical identity, e.g. ``conv64|C2x96|C3x192|Trel5x384|Trel2x768``."""
        parts = [self.stem.key, *(s.key for s in self.stages), self.head.key]
        return "|".join(p for p in parts if p)

    def replace_stage(self, index: int, **changes: Any) -> Arch:
        stages = list(self.stages)
        stages[index] = replace(stages[index], **changes)
        return replace(self, stages=tuple(stages))

    # --- the flat labelled dict ------------------------------------------------------------------------

    def to_flat(self) -> dict[str, str | int]:
        """``{"stem.kind": "conv", "stem.width": 64, "s1.block": "mbconv", ..., "head.kind": "fc"}``."""
        flat: dict[str, str | int] = {"stem.kind": self.stem.kind, "stem.width": self.stem.width}
        if self.stem.patch is not None:
            flat["stem.patch"] = self.stem.patch
        for i, stage in enumerate(self.stages, start=1):
            for name in _STAGE_FIELDS:
                value = getattr(stage, name)
                if value is not None:
                    flat[f"s{i}.{name}"] = value
        flat["head.kind"] = self.head.kind
        if self.head.width is not None:
            flat["head.width"] = self.head.width
        return flat

    @classmethod
    def from_flat(cls, flat: dict[str, Any]) -> Arch:
        """Inverse of :meth:`to_flat`; missing optional fields take their defaults, ``None`` means missing."""
        if not isinstance(flat, dict):
            _fail("arch", f"expected a dict of labelled fields, got {type(flat).__name__}")
        items = {k: v for k, v in flat.items() if v is not None}
        stem = cls._section(items, "stem", Stem, required=("kind", "width"))
        head = cls._section(items, "head", Head, required=())
        per_stage: dict[int, dict[str, Any]] = {}
        for label, value in items.items():
            match = _STAGE_FIELD.fullmatch(str(label)) if isinstance(label, str) else None
            if match is None or match.group(2) not in _STAGE_FIELDS:
                _fail(
                    _subject(label),
                    "unknown field; expected stem.*, head.* or s<i>.<field> with field one of "
                    f"{', '.join(_STAGE_FIELDS)}",
                )
            if int(match.group(1)) > MAX_STAGES:
                _fail(label, f"stages are numbered s1 to s{MAX_STAGES} at most")
            per_stage.setdefault(int(match.group(1)), {})[match.group(2)] = value
        if not per_stage:
            _fail("stages", "no stage fields (s1.block, s1.mixer, ...) found")
        count = max(per_stage)
        stages = []
        for i in range(1, count + 1):
            values = per_stage.get(i)
            if values is None:
                _fail(f"s{i}", f"missing, but stage s{count} is present; stages are numbered s1..s<n>")
            for name in ("block", "mixer", "depth", "width"):
                if name not in values:
                    _fail(f"s{i}.{name}", "missing")
            try:
                stages.append(Stage(**values))
            except ValueError as err:
                raise ValueError(f"s{i}.{err}") from None
        return cls(stem=stem, stages=tuple(stages), head=head)

    @staticmethod
    def _section(items: dict[str, Any], prefix: str, kind: type, required: tuple[str, ...]) -> Any:
        names = {f.name for f in fields(kind)}
        values = {}
        for label in [k for k in items if isinstance(k, str) and k.startswith(prefix + ".")]:
            name = label[len(prefix) + 1 :]
            if name not in names:
                allowed = ", ".join(f"{prefix}.{n}" for n in sorted(names))
                _fail(_subject(label), f"unknown field; allowed: {allowed}")
            values[name] = items.pop(label)
        for name in required:
            if name not in values:
                _fail(f"{prefix}.{name}", "missing")
        return kind(**values)

    # --- JSON ------------------------------------------------------------------------------------------

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_flat(), indent=indent)

    @classmethod
    def from_json(cls, text: str) -> Arch:
        """The architecture in JSON ``text`` (the flat dict); ValueError in one sentence otherwise."""
        return cls.from_flat(userfiles.parse(text, "JSON", "arch JSON"))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Arch:
        """The architecture in the JSON file ``path`` (read by :mod:`nas.core.userfiles`); ValueError in one
        sentence naming the file otherwise."""
        data = userfiles.load(path, "arch file", "JSON")
        try:
            return cls.from_flat(data)
        except ValueError as err:
            raise ValueError(f"{userfiles.where('arch file', path)}: {err}") from None

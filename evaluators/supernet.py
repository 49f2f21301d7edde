"""A weight-sharing supernet over a search space: one set of weights, any architecture of the space as a path.

The supernet holds, for every stage slot of the space (its ``s<i>`` choices), every candidate block
(``mbconv``, ``transformer`` with each mixer, ``bottleneck`` with each mixer), each at the largest depth,
width, window and feature size the space allows, plus every stem and the head. Its weights are the union of
the networks in :meth:`~search_spaces.base.SearchSpace.supernet_cover`, shrunk by the proxy profile it is
built for. An architecture of the space runs as one path through them (single-path one-shot NAS, Guo et al.
2020), with the sharing rules of Once-for-All (Cai et al. 2020):

- **elastic depth**: a stage of depth d runs the first d blocks of its candidate;
- **elastic width**: a layer of c channels uses the first c channels of every weight, bias, norm and running
  statistic (the q, k and v parts of a fused ``qkv`` projection each keep their first c);
- **shared windows**: local attention of every extent k shares one candidate (its projections) and takes the
  centre k rows of one relative-embedding table built for the largest k; a relative-attention bias table
  built for the largest map of its slot serves smaller maps with its centre, as do conv kernels.

Every shared weight is used by some path of the space (tested), with one exception by construction: a
projection shortcut that a path skips when its widths match at stride 1 keeps a (max width)^2 corner that no
path reaches.

How a path runs: the path's standalone network (:func:`nas.core.model.build_model`, so the very same modules
and
forward code) is built once on the meta device, which allocates nothing, and its parameters and buffers are
replaced, before every forward, by slices (views) of the supernet's weights. Gradients therefore flow into
the shared weights, BatchNorm running statistics update in place, and :meth:`Supernet.extract` only has to
copy the same slices into a freshly built network for its outputs to equal the path's.
"""

from __future__ import annotations

import dataclasses
import random
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import torch
import torch.nn as nn

from nas.core.arch import Arch, Stem
from nas.core.model import NasNet, SkipMetaInit, build_model, plan_blocks
from nas.core.ops import STEMS
from nas.core.ops.local_attention import LocalAttention
from nas.core.ops.rel_attention import RelAttention

if TYPE_CHECKING:
    from search_spaces.base import ProxyProfile, SearchSpace

__all__ = ["Supernet"]

Slicer = Callable[[torch.Tensor], torch.Tensor]


def _stem_group(stem: Stem) -> str:
    return f"stem_{stem.kind}{stem.patch or ''}"


def _group_of(name: str, arch: Arch, slots: tuple[int, ...]) -> tuple[str, str]:
    """(weight group, name inside it) of a standalone network's parameter or buffer ``name``."""
    top, _, rest = name.partition(".")
    if top == "stem":
        return _stem_group(arch.stem), rest
    if top == "stages":
        stage, index, rest = rest.split(".", 2)
        st = arch.stages[int(stage)]
        return f"s{slots[int(stage)]}_{st.block}_{st.mixer}_{index}", rest
    return "head", name


def _centre(size: int, full: int) -> slice:
    if (full - size) % 2:
        raise ValueError(f"cannot centre {size} in {full}")
    start = (full - size) // 2
    return slice(start, start + size)


def _slicer(module: nn.Module, attr: str, shape: torch.Size, full: torch.Size) -> Slicer:
    """How a layer of shape ``shape`` takes its weights from the shared tensor of shape ``full``."""
    if len(shape) != len(full) or any(s > f for s, f in zip(shape, full, strict=True)):
        raise ValueError(f"a {tuple(shape)} {attr} does not fit in the supernet's {tuple(full)}")
    centred: set[int] = set()
    if isinstance(module, nn.Conv2d) and attr == "weight":
        centred = {2, 3}  # kernels
    elif isinstance(module, LocalAttention) and attr in ("rel_row", "rel_col"):
        centred = {0}  # window offsets -(k-1)/2 .. (k-1)/2
    elif isinstance(module, RelAttention) and attr == "bias_table":
        centred = {1, 2}  # relative offsets -(H-1) .. H-1, -(W-1) .. W-1
    index = tuple(
        _centre(s, f) if d in centred else slice(0, s)
        for d, (s, f) in enumerate(zip(shape, full, strict=True))
    )
    if getattr(module, "_supernet_fused3", False) and shape[0] != full[0]:  # [q; k; v] rows, each elastic
        rest = index[1:]

        def fused(t: torch.Tensor) -> torch.Tensor:
            return t.view(3, full[0] // 3, *full[1:])[(slice(None), slice(0, shape[0] // 3), *rest)].reshape(
                shape
            )

        return fused
    if all(s == f for s, f in zip(shape, full, strict=True)):
        return lambda t: t
    return lambda t: t[index]


def _mark_fused(model: nn.Module) -> None:
    """Flag the fused q/k/v projections, whose rows are three elastic blocks rather than one."""
    for name, module in model.named_modules():
        if name.rpartition(".")[2] == "qkv":
            module._supernet_fused3 = True


@dataclasses.dataclass
class _Path:
    """A path's meta-device network and, for each of its tensors, where its weights come from."""

    arch: Arch  # as the space gives it
    proxy: Arch  # as the path runs (the profile applied)
    net: NasNet
    bindings: list[tuple[str, nn.Module, str, str, str, Slicer]]  # name, module, attr, group, key, slicer


class Supernet(nn.Module):
    """Every candidate of ``space`` under ``profile`` (None = the architectures at full size) in one module.

    ``set_active(arch)`` chooses the path that ``forward`` runs; ``extract(arch)`` returns the path as a
    standalone :class:`~nas.core.model.NasNet` with the shared weights copied in. ``arch`` is always an
    architecture of the space at its own size; the supernet applies the profile.
    """

    def __init__(
        self,
        space: SearchSpace,
        profile: ProxyProfile | None = None,
        *,
        num_classes: int = 1000,
        in_chans: int = 3,
        img_size: int | None = None,
        cache_size: int = 64,
    ) -> None:
        super().__init__()
        self.space, self.profile = space, profile
        self.num_classes, self.in_chans = num_classes, in_chans
        self.img_size = img_size or (profile.img_size if profile is not None else 224)
        self.cache_size = cache_size
        # called with each path's network when it is built (data-parallel training makes its BatchNorm
        # layers normalize over the global batch, evaluators.global_batchnorm)
        self.path_hook: Callable[[nn.Module], None] | None = None
        self._paths: OrderedDict[str, _Path] = OrderedDict()
        self._active: _Path | None = None
        self.memory_format = torch.contiguous_format  # the maps' (use_memory_format)
        self.weights = nn.ModuleDict()  # group -> module holding that group's shared tensors
        shapes: dict[tuple[str, str], tuple[torch.Size, torch.dtype, bool, int]] = {}
        cover = space.supernet_cover()
        for n, arch in enumerate(cover):
            net, slots = self._meta_net(arch), space.stage_slots(arch)
            for name, tensor, is_param in _state(net):
                key = _group_of(name, self._proxy(arch), slots)
                old = shapes.get(key)
                shape = tensor.shape if old is None else torch.Size(map(max, tensor.shape, old[0]))
                # the first network that attains the full shape initializes it
                owner = old[3] if old is not None and (old[0] == shape or tensor.shape != shape) else n
                shapes[key] = (shape, tensor.dtype, is_param, owner)
        # Initialize each shared tensor as the first cover network that attains its full shape initializes
        # it (building only the block, stem or head concerned), so norms start at 1, zero-initialized
        # layers at 0, and so on.
        fresh: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
        for (group, key), (_, _, _, owner) in shapes.items():
            if (owner, group) not in fresh:
                fresh[(owner, group)] = self._fresh_group(cover[owner], group)
            real = fresh[(owner, group)]
            shape, dtype, is_param, _ = shapes[(group, key)]
            value = real.get(key)
            if value is None or value.shape != shape:  # full shape not attained by one network
                value = (
                    torch.ones(shape, dtype=dtype)
                    if key.endswith("running_var")
                    else torch.zeros(shape, dtype=dtype)
                )
                if is_param:
                    nn.init.trunc_normal_(value, std=0.02)
            if group not in self.weights:
                self.weights[group] = nn.Module()
            holder, attr = self.weights[group], key.replace(".", ":")
            if is_param:
                holder.register_parameter(attr, nn.Parameter(value.clone()))
            else:
                holder.register_buffer(attr, value.clone())

    # ------------------------------------------------------------------------------------------ paths

    def _proxy(self, arch: Arch) -> Arch:
        return self.profile.apply(arch) if self.profile is not None else arch

    def _real_net(self, arch: Arch) -> NasNet:
        return build_model(self._proxy(arch), self.num_classes, self.in_chans, self.img_size)

    def _meta_net(self, arch: Arch) -> NasNet:
        with torch.device("meta"), SkipMetaInit():
            return self._real_net(arch)

    def _fresh_group(self, arch: Arch, group: str) -> dict[str, torch.Tensor]:
        """The freshly initialized tensors of weight group ``group`` as network ``arch`` builds them."""
        proxy, slots = self._proxy(arch), self.space.stage_slots(arch)
        if group == "head":
            net = self._real_net(arch)
        elif group.startswith("stem_"):
            net = nn.Module()
            net.stem = STEMS.get(proxy.stem.kind)(self.in_chans, proxy.stem.width, patch=proxy.stem.patch)
        else:
            net = nn.Module()
            specs, _ = plan_blocks(proxy, (self.img_size, self.img_size))
            for spec in specs:
                if _group_of(f"stages.{spec.stage}.{spec.index}.", proxy, slots)[0] == group:
                    net.stages = nn.ModuleDict(
                        {str(spec.stage): nn.ModuleDict({str(spec.index): spec.build()})}
                    )
        state = {}
        for name, tensor in net.state_dict().items():
            g, key = _group_of(name, proxy, slots)
            if g == group:
                state[key] = tensor
        return state

    def shared(self, group: str, key: str) -> torch.Tensor:
        """The shared tensor ``key`` (a standalone module's parameter name) of weight group ``group``."""
        return getattr(self.weights[group], key.replace(".", ":"))

    def _path(self, arch: Arch) -> _Path:
        path = self._paths.get(arch.key)
        if path is not None:
            self._paths.move_to_end(arch.key)
            return path
        reason = self.space.why_not(arch)
        if reason is not None:
            raise ValueError(f"{arch.key} is not in the {self.space.name} space: {reason}")
        proxy, slots = self._proxy(arch), self.space.stage_slots(arch)
        net = self._meta_net(arch)
        net.memory_format = self.memory_format
        _mark_fused(net)
        if self.path_hook is not None:
            self.path_hook(net)
        bindings = []
        modules = dict(net.named_modules())
        for name, tensor, _ in list(_state(net)):
            group, key = _group_of(name, proxy, slots)
            if group not in self.weights or not hasattr(self.weights[group], key.replace(".", ":")):
                raise ValueError(f"{arch.key}: the supernet has no weights for {name} ({group}/{key})")
            owner, _, attr = name.rpartition(".")
            module = modules[owner]
            slicer = _slicer(module, attr, tensor.shape, self.shared(group, key).shape)
            module._parameters.pop(attr, None)
            module._buffers.pop(attr, None)
            bindings.append((name, module, attr, group, key, slicer))
        path = _Path(arch, proxy, net, bindings)
        self._paths[arch.key] = path
        while len(self._paths) > self.cache_size:
            self._paths.popitem(last=False)
        return path

    def use_memory_format(self, memory_format: torch.memory_format) -> Supernet:
        """Run every path's maps in ``memory_format`` (as :meth:`NasNet.use_memory_format` does), and give
        :meth:`extract`'s networks that format. The shared weights keep theirs (see :meth:`forward`)."""
        self.memory_format = memory_format
        for path in self._paths.values():
            path.net.memory_format = memory_format
        return self

    def set_active(self, arch: Arch) -> Arch:
        """Make ``arch`` the path that :meth:`forward` runs; returns the network it runs (profile applied)."""
        self._active = self._path(arch)
        return self._active.proxy

    @property
    def active(self) -> Arch | None:
        return None if self._active is None else self._active.arch

    def path_tensors(self, arch: Arch) -> dict[str, torch.Tensor]:
        """The standalone network's state for ``arch``: each tensor a slice (view) of the shared weights."""
        return {
            name: slicer(self.shared(group, key))
            for name, _, _, group, key, slicer in self._path(arch).bindings
        }

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._active is None:
            raise RuntimeError("no active path: call set_active(arch) first")
        path = self._active
        path.net.train(self.training)
        relayout = self.memory_format is not torch.contiguous_format
        for _, module, attr, group, key, slicer in path.bindings:
            weight = slicer(self.shared(group, key))
            if relayout and isinstance(module, nn.Conv2d) and attr == "weight" and weight.shape[1] == 1:
                # A convolution gives its output the format its input's or its kernel's strides suggest. An
                # image of one channel is in both formats, so the stem's first convolution follows its
                # kernel: kernels of one input channel (that one, depthwise ones; small) are restrided, as
                # NasNet.use_memory_format keeps them. Other kernels stay slices: their maps tell, and
                # copying every kernel measured slower.
                weight = weight.clone(memory_format=self.memory_format)
            module.__dict__[attr] = weight
        return path.net(x)

    @torch.no_grad()
    def extract(self, arch: Arch) -> NasNet:
        """A standalone network for ``arch`` with copies of its path's weights: same device, same memory
        format, same outputs."""
        state = {name: t.detach().clone() for name, t in self.path_tensors(arch).items()}
        shared = next(iter(self.parameters()))
        model = self._real_net(arch).to(dtype=shared.dtype)  # loading would cast the weights to its dtype
        model.load_state_dict(state, strict=True)
        return model.to(shared.device).use_memory_format(self.memory_format).train(self.training)

    def sample(self, rng: random.Random | int) -> Arch:
        """A uniformly random architecture of the space (see ``SearchSpace.sample_random``)."""
        return self.space.sample_random(rng)

    def extra_repr(self) -> str:
        return (
            f"space={self.space.name}, profile={self.profile.name if self.profile else None}, "
            f"groups={len(self.weights)}, params={sum(p.numel() for p in self.parameters())}"
        )


def _state(net: nn.Module) -> Iterator[tuple[str, torch.Tensor, bool]]:
    """(name, tensor, is_parameter) of every parameter and persistent buffer of ``net``."""
    params = dict(net.named_parameters())
    for name, tensor in net.state_dict(keep_vars=True).items():
        yield name, tensor, name in params


def _state_dict_of(
    net: NasNet, arch: Arch, slots: tuple[int, ...]
) -> Iterator[tuple[tuple[str, str], torch.Tensor]]:
    for name, tensor, _ in _state(net):
        yield _group_of(name, arch, slots), tensor.detach()

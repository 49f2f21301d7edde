"""The ``micro`` space: a hybrid space small enough to enumerate, train and tabulate whole (issue 68).

Every claim about search quality (a sampler against random, the fidelity ladder, an evaluator's rank
quality) needs ground truth over many architectures and seeds; NAS-Bench-201 / NATS-Bench, HW-NAS-Bench and
TransNAS-Bench give it for their spaces, none of which holds local attention of extent k, relative attention
or external attention beside convolution. This space is the one the project's tabular benchmark covers
(``benchmarks/build_table.py`` trains every architecture; ``evaluators.table`` reads the table and
``--evaluator table:PATH`` answers a search from it).

Layout, for 32 px images: a stem of stride 2 (CoAtNet's two 3x3 convs, ``conv``, or a ViT patchify of patch
2, ``patch``; both end at 16 x 16 maps and the first stage's width), then three stages of one block each at
widths 16, 32 and 64 and output strides 2, 4 and 8 (maps 16 x 16, 8 x 8 and 4 x 4), then a linear head
after global pooling (55 to 91 thousand parameters for 10 classes). Each stage chooses one of five ops:

- ``mbconv``: MBConv with squeeze-excitation (CoAtNet's C);
- ``local`` with ``k`` in {3, 5}: a pre-norm Transformer block around SASA's local self-attention of extent
  ``k`` (8 heads);
- ``rel``: a pre-norm Transformer block around global attention with a 2-D relative bias (CoAtNet's T);
- ``ext``: a pre-norm Transformer block around EANet's external attention (64 memory slots).

So 2 stems x 5^3 stage choices = 250 architectures, each about a minute of one CPU core to train for the
table at 32 px (the sizing is in ``benchmarks/build_table.py``'s docstring). The ``cpu`` profile trains them
as they are, on the table's schedule. :meth:`MicroSpace.architectures` lists them in one fixed order (stem,
then stage 1, 2, 3, each in the order above) and :meth:`MicroSpace.arch_id` names each with a stable id such
as ``conv-C-L3-R`` (stem, then per stage ``C`` mbconv, ``L3`` / ``L5`` local, ``R`` rel, ``E`` ext): the id is
the table's key, and it depends on nothing but the choices.

The baselines are micro analogues of the papers' networks, at this space's one width and depth per stage
(none reproduces a paper's counts, so none carries a paper figure):

- ``C-C-C``, ``C-C-T``, ``C-T-T`` (conv stem): CoAtNet's layout study (Dai et al. 2021, Sec. 3.2:
  C-C-C-C, C-C-T-T, C-T-T-T) with three stages instead of four: ``C-C-T`` is the CoAtNet-0 layout's analogue
  (convolution early, relative attention in the last stage);
- ``SASA-L5``: every stage local attention of extent 5 behind the conv stem, the analogue of SASA's
  "conv-stem + attention" ResNets (Ramachandran et al. 2019, Table 1: extent 7 at 56 x 56 maps and smaller;
  here 5, the space's largest, at 16 x 16 and smaller), in a Transformer container instead of a ResNet
  bottleneck;
- ``ViT-REL``: the patch stem and relative attention throughout, CoAtNet's ViT_REL;
- ``EANet``: the patch stem and external attention throughout, EANet's ViT with external attention in
  place of self-attention (Guo et al. 2021).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from nas.core.arch import Arch, Head, Stage, Stem
from search_spaces.base import Baseline, PaperFigure, ProxyProfile, SearchSpace

__all__ = ["MicroSpace"]

_STEMS = ("conv", "patch")
_OPS = ("mbconv", "local", "rel", "ext")
_LOCAL_K = (3, 5)
_WIDTHS = (16, 32, 64)
_STRIDES = (1, 2, 2)  # behind the stride-2 stem: output strides 2, 4, 8
_PATCH = 2
_LETTER = {"mbconv": "C", "local": "L", "rel": "R", "ext": "E"}

# the table's schedule (benchmarks/build_table.py sizes it to ~8 CPU-hours): TABLE_EPOCHS epochs of the
# same TABLE_TRAIN_IMAGES training images at batch TABLE_BATCH and learning rate TABLE_LR, validated on
# TABLE_VAL_IMAGES after every epoch, the networks as they are (no shrinking), at 32 px
TABLE_EPOCHS = 9
TABLE_TRAIN_IMAGES = 1536
TABLE_VAL_IMAGES = 1000
TABLE_BATCH = 64
TABLE_LR = 2e-3


def _stage(i: int, op: str, k: int | None = None) -> Stage:
    if op == "mbconv":
        return Stage("mbconv", "conv", 1, _WIDTHS[i], stride=_STRIDES[i])
    return Stage("transformer", op, 1, _WIDTHS[i], stride=_STRIDES[i], k=k)


def _stem(kind: str) -> Stem:
    return Stem("conv", _WIDTHS[0]) if kind == "conv" else Stem("patch", _WIDTHS[0], patch=_PATCH)


def _arch(stem: str, ops: Sequence[tuple[str, int | None]]) -> Arch:
    return Arch(_stem(stem), tuple(_stage(i, op, k) for i, (op, k) in enumerate(ops)), Head("fc"))


def _choices() -> tuple[tuple[str, int | None], ...]:
    """One stage's five choices, in the space's order: (op, k)."""
    return tuple((op, k) for op in _OPS for k in (_LOCAL_K if op == "local" else (None,)))


def _token(op: str, k: int | None) -> str:
    return f"{_LETTER[op]}{k or ''}"


class MicroSpace(SearchSpace):
    name = "micro"
    description = "3 one-block stages at 32 px; per stage MBConv or local (k 3, 5), rel or ext attention"
    profiles: ClassVar[dict[str, ProxyProfile]] = {
        "cpu": ProxyProfile(
            "cpu",
            img_size=32,
            epochs=TABLE_EPOCHS,
            batch_size=TABLE_BATCH,
            train_samples=TABLE_TRAIN_IMAGES,
            val_samples=TABLE_VAL_IMAGES,
            description=(
                f"the networks as they are at 32 px, {TABLE_EPOCHS} epochs of {TABLE_TRAIN_IMAGES} images "
                "(the table's schedule)"
            ),
        ),
    }

    # --- the space --------------------------------------------------------------------------------------

    def sample(self, trial: Any) -> Arch:
        stem = trial.suggest_categorical("stem", _STEMS)
        ops = []
        for i in range(len(_WIDTHS)):
            op = trial.suggest_categorical(f"s{i + 1}.op", _OPS)
            ops.append((op, trial.suggest_categorical(f"s{i + 1}.k", _LOCAL_K) if op == "local" else None))
        return _arch(stem, ops)

    def encode(self, arch: Arch) -> dict[str, Any]:
        if arch.stem.kind not in _STEMS:
            raise ValueError(
                f"stem: {arch.stem.kind} is not a choice of the micro space; allowed: conv, patch"
            )
        params: dict[str, Any] = {"stem": arch.stem.kind}
        if len(arch.stages) != len(_WIDTHS):
            raise ValueError(f"stages: the micro space has {len(_WIDTHS)} stages, got {len(arch.stages)}")
        for i, stage in enumerate(arch.stages, start=1):
            op = (
                "mbconv" if stage.block == "mbconv" else stage.mixer if stage.block == "transformer" else None
            )
            if op not in _OPS:
                raise ValueError(
                    f"s{i}: {stage.block}({stage.mixer}) is not a choice of the micro space; allowed: "
                    "mbconv, transformer(local), transformer(rel), transformer(ext)"
                )
            params[f"s{i}.op"] = op
            if op == "local":
                params[f"s{i}.k"] = stage.k
        return params

    def choices(self) -> dict[str, str]:
        out = {"stem": f"conv (2 x 3x3, stride 2) | patch (ViT patchify, patch {_PATCH}); width {_WIDTHS[0]}"}
        ks = ", ".join(map(str, _LOCAL_K))
        for i, width in enumerate(_WIDTHS):
            out[f"s{i + 1}"] = (
                f"mbconv | transformer(local, k in {{{ks}}}) | transformer(rel) | transformer(ext); "
                f"depth 1; width {width}; stride {_STRIDES[i]}"
            )
        return out

    def decisions(self) -> dict[str, tuple[Any, ...] | range]:
        out: dict[str, tuple[Any, ...] | range] = {"stem": _STEMS}
        for i in range(1, len(_WIDTHS) + 1):
            out[f"s{i}.op"], out[f"s{i}.k"] = _OPS, _LOCAL_K
        return out

    def count(self, domains: Mapping[str, Sequence[Any]]) -> int:
        return len(domains["stem"]) * math.prod(
            sum(len(domains[f"s{i}.k"]) if op == "local" else 1 for op in domains[f"s{i}.op"])
            for i in range(1, len(_WIDTHS) + 1)
        )

    def stage_slots(self, arch: Arch) -> tuple[int, ...]:
        self.encode(arch)  # refuses an architecture of another layout
        return tuple(range(1, len(_WIDTHS) + 1))

    def supernet_cover(self) -> list[Arch]:
        k = max(_LOCAL_K)
        return [
            _arch(stem, [(op, k if op == "local" else None)] * len(_WIDTHS)) for stem in _STEMS for op in _OPS
        ]

    # --- every architecture, in order, with its id ------------------------------------------------------

    def architectures(self) -> list[Arch]:
        """Every architecture of the space, in one fixed order: by stem, then stage 1, 2, 3, each in the
        order of :meth:`decisions` (mbconv, local 3, local 5, rel, ext). ``architectures()[i]`` is the same
        network in every release that keeps these choices."""
        return list(self._walk())

    def _walk(self) -> Iterator[Arch]:
        for stem in _STEMS:
            for ops in itertools.product(_choices(), repeat=len(_WIDTHS)):
                yield _arch(stem, ops)

    def arch_id(self, arch: Arch) -> str:
        """The stable id of ``arch`` (``conv-C-L3-R``): its stem, then each stage's op (``C``, ``L3``,
        ``L5``, ``R``, ``E``). ValueError in one sentence if ``arch`` is not in the space."""
        why = self.why_not(arch)
        if why is not None:
            raise ValueError(f"{arch.key} is not in the micro space: {why}")
        params = self.encode(arch)
        stages = (_token(params[f"s{i}.op"], params.get(f"s{i}.k")) for i in range(1, len(_WIDTHS) + 1))
        return "-".join((params["stem"], *stages))

    def from_id(self, arch_id: str) -> Arch:
        """The architecture whose :meth:`arch_id` is ``arch_id``; ValueError in one sentence otherwise."""
        tokens = {_token(op, k): (op, k) for op, k in _choices()}
        parts = str(arch_id).split("-")
        if len(parts) != 1 + len(_WIDTHS) or parts[0] not in _STEMS or not set(parts[1:]) <= set(tokens):
            raise ValueError(
                f"{arch_id!r} is not an id of the micro space; ids read STEM-S1-S2-S3 with STEM conv or "
                f"patch and each stage one of {', '.join(tokens)} (e.g. conv-C-L3-R)"
            )
        return _arch(parts[0], [tokens[p] for p in parts[1:]])

    # --- baselines --------------------------------------------------------------------------------------

    def baselines(self) -> dict[str, Baseline]:
        """Micro analogues of CoAtNet's layouts, SASA, ViT_REL and EANet (the module docstring)."""
        coatnet = "micro analogue of Dai et al. 2021, CoAtNet, Sec. 3.2 layout study"
        layouts = {
            "C-C-C": ("conv", "C-C-C", coatnet),
            "C-C-T": ("conv", "C-C-R", coatnet + " (CoAtNet-0's C-C-T-T)"),
            "C-T-T": ("conv", "C-R-R", coatnet),
            "SASA-L5": (
                "conv",
                "L5-L5-L5",
                "micro analogue of Ramachandran et al. 2019, SASA conv-stem + attention",
            ),
            "ViT-REL": ("patch", "R-R-R", "micro analogue of Dai et al. 2021, CoAtNet's ViT_REL"),
            "EANet": (
                "patch",
                "E-E-E",
                "micro analogue of Guo et al. 2021, EANet (ViT with external attention)",
            ),
        }
        return {
            name: Baseline(name, self.from_id(f"{stem}-{ops}"), PaperFigure(source, "MACs"))
            for name, (stem, ops, source) in layouts.items()
        }

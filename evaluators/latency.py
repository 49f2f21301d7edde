"""Predicted latency of an architecture on a device: a lookup table of measured part latencies.

The latency model of FBNet (Wu et al. 2019) and ProxylessNAS (Cai et al. 2019): a network's latency is the
sum of its parts' latencies, each measured once on the device and looked up from then on, so a search can
score or reject an architecture without building it. The parts are those :func:`evaluators.complexity.count`
uses: the stem on the image, every *distinct* block on an input of its shape, the head (global pool
included) on the last feature map; a stage's repeated blocks are one part counted ``depth - 1`` times.

- **Measurement.** A part is built with real (randomly initialized, fixed-seed) weights on the device, in
  eval mode, and run under ``torch.inference_mode()`` on a random input of its shape and the table's batch:
  ``warmup`` passes, then timed passes (at least ``repeats``, more until ``seconds`` of timing), the median
  kept; CUDA is synchronized before and after each timed pass. Zero weights are avoided because they can
  take fast paths real weights do not.
- **Memory format.** Each part is timed twice: contiguous (NCHW), and with module and input in
  ``torch.channels_last``. A network runs in one format throughout, so the prediction is
  ``min over formats f of (sum of the parts in f + overhead in f)``: the format that is faster *for the
  whole network*, never a per-part mix no real run could have. :func:`measured_latency_ms` applies the same
  rule to the whole network (both formats timed, the faster kept), so prediction and measurement compare
  like with like.
- **Fixed overhead.** A forward pass costs a little more (or less) than its parts timed alone: the calls
  of the network and its stage containers, and on CUDA the per-part synchronization the isolated timings
  include. It is calibrated once per (batch, image size) as the median of ``whole - sum of parts`` over
  three tiny reference networks (a conv, a bottleneck and a transformer network of width 16, where little
  else than this overhead is left), per format, and stored in the table beside the parts. It can be
  slightly negative; it is kept as measured, but never below minus the fastest reference's whole time (a
  more negative gap means the parts were timed while another process held the cores).

:class:`LatencyTable` holds one device's measurements in memory and in ``<root>/<device-id>.json``; the
device id names the device kind and model, the torch version, a hash of the ops' code (``nas/core/ops/``,
``nas/core/model.py``) and the thread count, the things a latency depends on besides the network. Several
worker processes may share one file: a table measures what it lacks without a lock, then, under
``fcntl.flock`` on ``<device-id>.json.lock``, reads the file, adds what is new (an entry already in the
file wins, so every worker predicts from the same numbers) and replaces the file atomically. A file that is
not valid JSON, is not a latency table or belongs to another device is refused with a ValueError naming it
(never silently rebuilt: it may hold hours of measurements; delete it to measure again).

The method assumes what a lookup table assumes: a part's latency does not depend on its neighbours. On the
CPU this holds to within a few percent at 224 px and less well on small images (there a block runs 10-20%
slower inside a network than alone, and a fixed overhead cannot absorb a cost per part). What breaks it:
caches (a part timed alone keeps its weights in cache; in a network the others evict them), the allocator
(glibc serves large tensors from fresh pages, and how many page faults a pass takes depends on what ran
before it: the attention stem's are 20-30% of its time), and memory formats at part boundaries (each part is
timed on an input already in its format, where in a network it may receive the other one from its
predecessor: the attention stem returns NCHW from a one-channel image, which is in both formats). The
overhead is calibrated with 3 input channels and 1000 classes whatever the network's.
``benchmarks/bench_latency.py`` measures how far predictions are from whole networks.
"""

from __future__ import annotations

import functools
import hashlib
import math
import platform
import re
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

import nas.core.model
import nas.core.ops
from evaluators.complexity import _HeadPart
from evaluators.part_costs import part_key
from nas.core import userfiles
from nas.core.arch import Arch, Head, Stage, Stem
from nas.core.atomic import merge_json
from nas.core.model import build_model, check_img_size, plan_blocks
from nas.core.ops import STEMS

__all__ = [
    "MEMORY_FORMATS",
    "LatencyEstimate",
    "LatencyTable",
    "device_name",
    "measured_latency_ms",
    "whole_network_ms",
]

MEMORY_FORMATS: dict[str, torch.memory_format] = {
    "contiguous": torch.contiguous_format,
    "channels_last": torch.channels_last,
}
_FILE_FORMAT = "nas-latency-table"
_FILE_VERSION = 1
_MAX_REPEATS = 1000  # a part of a few microseconds stops here, well before its ``seconds`` of timing
_SEED = 0  # the weights and inputs of every timed module: a table is reproducible, run to run

# Tiny networks (width 16, one stage) whose whole-network time is little more than the fixed overhead:
# one per container, so the median is not one block type's quirk. Smallest first; each runs from 2, 4, 8 px.
_REFERENCES = (
    Arch(Stem("conv", 16), (Stage("mbconv", "conv", 2, 16, stride=1),), Head("fc")),
    Arch(Stem("resnet", 16), (Stage("bottleneck", "conv", 2, 32, stride=1),), Head("mlp", 32)),
    Arch(Stem("patch", 16, patch=8), (Stage("transformer", "ext", 2, 16, stride=1),), Head("norm")),
)


# --- devices ---------------------------------------------------------------------------------------


def _device(device: torch.device | str | None) -> torch.device:
    """``device`` checked and made explicit (``cuda`` -> ``cuda:<current>``); None: CUDA when present,
    else the CPU. A ValueError in one sentence for anything that is not a present CPU or CUDA device."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device: {device!r} is not a device; use cpu, cuda or cuda:N") from None
    if dev.type == "cpu":
        return torch.device("cpu")
    if dev.type != "cuda":
        raise ValueError(f"device: latency is measured on cpu or cuda, not on {dev.type!r}")
    if not torch.cuda.is_available():
        raise ValueError(f"device: {device!r} asks for CUDA, which this machine does not have")
    index = torch.cuda.current_device() if dev.index is None else dev.index
    if index >= torch.cuda.device_count():
        raise ValueError(
            f"device: {device!r} does not exist; this machine has {torch.cuda.device_count()} GPU(s)"
        )
    return torch.device("cuda", index)


def device_name(device: torch.device | str | None = None) -> str:
    """The model of ``device``: the CPU's (``/proc/cpuinfo``, else ``platform``) or the GPU's."""
    dev = _device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    return _cpu_name()


@functools.cache
def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def _device_id(device: torch.device, threads: int) -> str:
    """A readable file name for what a latency depends on besides the network."""
    torch_version = _slug(torch.__version__)
    return (
        f"{device.type}-{_slug(device_name(device))}-torch{torch_version}-ops{_ops_code()}-{threads}threads"
    )


@functools.cache
def _ops_code() -> str:
    """8 hex digits of a hash of the code that builds and runs the timed parts (``nas/core/ops/``,
    ``nas/core/model.py``): a faster kernel makes old measurements wrong, so code that differs in any byte is
    another table (measured again, the old file left as it is)."""
    files = [*sorted(Path(nas.core.ops.__file__).parent.glob("*.py")), Path(nas.core.model.__file__)]
    digest = hashlib.sha256()
    for file in files:
        digest.update(f"{file.name}\0".encode() + file.read_bytes())
    return digest.hexdigest()[:8]


@contextmanager
def _num_threads(threads: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``threads`` inside, restored after."""
    before = torch.get_num_threads()
    if threads != before:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if threads != before:
            torch.set_num_threads(before)


# --- timing ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Timing:
    """How a module is timed: ``warmup`` passes, then at least ``repeats`` timed passes and more until
    ``seconds`` of timing (at most :data:`_MAX_REPEATS`); the median pass is the latency."""

    warmup: int
    repeats: int
    seconds: float

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.repeats < 1 or not self.seconds >= 0:
            raise ValueError(
                f"timing: needs warmup >= 0, repeats >= 1 and seconds >= 0, got warmup={self.warmup}, "
                f"repeats={self.repeats}, seconds={self.seconds}"
            )


def _median_ms(module: nn.Module, x: torch.Tensor, timing: _Timing) -> float:
    """Median wall time in ms of ``module(x)`` (see :class:`_Timing`), CUDA synchronized around each pass."""
    cuda = x.device.type == "cuda"
    times: list[float] = []
    with torch.inference_mode():
        for _ in range(timing.warmup):
            module(x)
        spent = 0.0
        while len(times) < timing.repeats or (spent < timing.seconds and len(times) < _MAX_REPEATS):
            if cuda:
                torch.cuda.synchronize(x.device)
            start = time.perf_counter()
            module(x)
            if cuda:
                torch.cuda.synchronize(x.device)
            times.append(time.perf_counter() - start)
            spent += times[-1]
    return 1000 * statistics.median(times)


def _both_formats_ms(
    build: Callable[[], nn.Module], input_shape: tuple[int, ...], device: torch.device, timing: _Timing
) -> dict[str, float]:
    """Latency in ms of the module ``build()`` makes on a random input of ``input_shape``, per memory format.

    Weights come from the module's own initialization under a fixed seed, in a forked RNG so that the
    caller's random stream (a search's) is left as it was."""
    with torch.random.fork_rng(devices=[device.index] if device.type == "cuda" else []):
        torch.manual_seed(_SEED)
        with torch.device(device):
            module = build().eval()
            x = torch.randn(input_shape)
    result = {}
    for name, memory_format in MEMORY_FORMATS.items():
        module = module.to(memory_format=memory_format)
        result[name] = _median_ms(module, x.contiguous(memory_format=memory_format), timing)
    return result


# --- the parts of a network (those of evaluators.complexity.count) ---------------------------------


@dataclass(frozen=True)
class _Part:
    """One part of a network as the table knows it: ``name`` is the :func:`~evaluators.complexity.count`
    part it belongs to (``stem conv64``, ``s2 C3x192``, ``head fc``), ``key`` what decides its latency besides
    the batch (every field of its build and its input size)."""

    name: str
    key: str
    build: Callable[[], nn.Module]
    input_shape: tuple[int, ...]  # batch 1

    def shape(self, batch: int) -> tuple[int, ...]:
        return (batch, *self.input_shape[1:])


@functools.lru_cache(maxsize=4096)
def _parts(arch: Arch, img_size: int, in_chans: int, num_classes: int) -> tuple[_Part, ...]:
    """The parts of ``arch`` in network order, a repeated block once per repetition (the decomposition of
    :func:`evaluators.complexity.count`: its ``_stem_cost``, ``_block_cost`` and ``_head_cost``)."""
    size = check_img_size(arch, img_size)
    specs, feature_size = plan_blocks(arch, size)
    stem = arch.stem
    parts = [
        _Part(
            f"stem {stem.key}",
            part_key("stem", stem, in_chans=in_chans, size=f"{size[0]}x{size[1]}"),
            functools.partial(STEMS.get(stem.kind), in_chans, stem.width, patch=stem.patch),
            (1, in_chans, *size),
        )
    ]
    for spec in specs:
        # drop-path (the one thing that differs between a stage's repeated blocks, besides their index) is
        # off, as in build_model's default: the key of count's _block_cost
        block = replace(spec, stage=0, index=0, drop_path=0.0)
        name = f"s{spec.stage + 1} {arch.stages[spec.stage].key}"
        key = part_key("block", block, skip=("stage", "index", "drop_path"))
        parts.append(_Part(name, key, block.build, (1, block.in_dim, *block.mixer.feat_size)))
    in_dim = arch.stages[-1].width if arch.stages else stem.width
    head = arch.head
    parts.append(
        _Part(
            f"head {head.kind}",
            part_key(
                "head", head, in_dim=in_dim, classes=num_classes, size=f"{feature_size[0]}x{feature_size[1]}"
            ),
            functools.partial(_HeadPart, head, in_dim, num_classes),
            (1, in_dim, *feature_size),
        )
    )
    return tuple(parts)


# --- whole networks --------------------------------------------------------------------------------


def whole_network_ms(
    arch: Arch,
    img_size: int = 224,
    batch: int = 1,
    device: torch.device | str | None = None,
    in_chans: int = 3,
    num_classes: int = 1000,
    *,
    threads: int | None = None,
    warmup: int = 2,
    repeats: int = 3,
    seconds: float = 1.0,
) -> dict[str, float]:
    """Latency in ms of the whole network of ``arch`` built and timed as the table times a part (fixed-seed
    weights, eval, inference mode, median of at least ``repeats`` passes and ``seconds`` of timing), in
    each of :data:`MEMORY_FORMATS`; on ``threads`` torch threads (default: the current count)."""
    dev, timing = _device(device), _Timing(warmup, repeats, seconds)
    check_img_size(arch, img_size)

    def build() -> nn.Module:
        return build_model(arch, num_classes=num_classes, in_chans=in_chans, img_size=img_size)

    with _num_threads(threads or torch.get_num_threads()):
        return _both_formats_ms(build, (batch, in_chans, img_size, img_size), dev, timing)


def measured_latency_ms(
    arch: Arch,
    img_size: int = 224,
    batch: int = 1,
    device: torch.device | str | None = None,
    in_chans: int = 3,
    num_classes: int = 1000,
    *,
    threads: int | None = None,
    warmup: int = 2,
    repeats: int = 3,
    seconds: float = 1.0,
) -> float:
    """The measured latency of ``arch`` in ms: the whole network timed in both memory formats, the faster
    kept, the rule :meth:`LatencyTable.predict` follows (see :func:`whole_network_ms` for the arguments)."""
    return min(
        whole_network_ms(
            arch, img_size, batch, device, in_chans, num_classes,
            threads=threads, warmup=warmup, repeats=repeats, seconds=seconds,
        ).values()
    )  # fmt: skip


# --- the table -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LatencyEstimate:
    """A predicted latency: ``ms`` in the faster ``memory_format`` for the whole network, with that format's
    ``parts`` (per :func:`~evaluators.complexity.count` part: stem, s1.., head; each stage the sum of its
    blocks) and ``overhead_ms``; ``by_format`` is the prediction in each format (``ms`` is its minimum)."""

    ms: float
    memory_format: str
    parts: tuple[tuple[str, float], ...]
    overhead_ms: float
    by_format: tuple[tuple[str, float], ...]


class LatencyTable:
    """Measured latencies of network parts on one device at one batch size, in memory and in a JSON file.

    ``predict`` measures the parts it has not seen (and, once per image size, the fixed overhead), saves
    them, and from then on is a dictionary look-up per part. Hold one table per worker process; tables of
    several processes share the file safely (see the module docstring). ``threads`` is torch's CPU thread
    count for the measurements (default: the current one), set while measuring and restored after.
    ``measurements`` counts the modules this table has timed (parts and calibration networks)."""

    def __init__(
        self,
        device: torch.device | str | None = None,
        *,
        batch: int = 1,
        root: str | Path = "runs/latency",
        threads: int | None = None,
        warmup: int = 2,
        repeats: int = 5,
        seconds: float = 0.1,
    ) -> None:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ValueError(f"batch: must be an integer >= 1, got {batch!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ValueError(f"threads: must be an integer >= 1, got {threads!r}")
        self.device = _device(device)
        self.batch = batch
        self.threads = threads or torch.get_num_threads()
        self.timing = _Timing(warmup, repeats, seconds)
        self.device_id = _device_id(self.device, self.threads)
        self.path = Path(root) / f"{self.device_id}.json"
        self.measurements = 0
        self._entries: dict[str, Any] = _read_entries(self.path, self.device_id)

    # --------------------------------------------------------------------------------------- queries

    def predict(self, arch: Arch, img_size: int = 224, in_chans: int = 3, num_classes: int = 1000) -> float:
        """Predicted latency in ms of ``arch`` built for ``num_classes`` on ``batch`` x ``in_chans`` x
        ``img_size``^2 inputs: the sum of its parts plus the overhead, in the faster memory format."""
        return self.estimate(arch, img_size, in_chans, num_classes).ms

    def parts_ms(
        self, arch: Arch, img_size: int = 224, in_chans: int = 3, num_classes: int = 1000
    ) -> list[tuple[str, float]]:
        """Predicted ms per part (named as :func:`~evaluators.complexity.count`'s) in the format
        :meth:`predict` chooses; ``predict`` is their sum plus :meth:`overhead_ms` of that format."""
        return list(self.estimate(arch, img_size, in_chans, num_classes).parts)

    def overhead_ms(self, img_size: int = 224) -> dict[str, float]:
        """The calibrated fixed overhead per memory format at ``img_size`` (measured if missing)."""
        if "overhead_ms" not in self._slot(img_size):
            self._fill((), img_size)
        return dict(self._slot(img_size)["overhead_ms"])

    def estimate(
        self, arch: Arch, img_size: int = 224, in_chans: int = 3, num_classes: int = 1000
    ) -> LatencyEstimate:
        """:meth:`predict` with its workings: the chosen format, the parts and the overhead."""
        slot = self._slot(img_size)
        parts = _parts(arch, img_size, in_chans, num_classes)
        if "overhead_ms" not in slot or any(p.key not in slot.get("parts_ms", {}) for p in parts):
            self._fill(parts, img_size)
            slot = self._slot(img_size)
        table, overhead = slot["parts_ms"], slot["overhead_ms"]
        totals = {fmt: math.fsum(table[p.key][fmt] for p in parts) + overhead[fmt] for fmt in MEMORY_FORMATS}
        best = min(totals, key=totals.__getitem__)
        by_name: dict[str, float] = {}
        for part in parts:
            by_name[part.name] = by_name.get(part.name, 0.0) + table[part.key][best]
        return LatencyEstimate(
            totals[best], best, tuple(by_name.items()), overhead[best], tuple(totals.items())
        )

    # ------------------------------------------------------------------------------------- measuring

    def _slot(self, img_size: int) -> dict[str, Any]:
        """The entries at this table's batch and ``img_size`` (made empty if new)."""
        if isinstance(img_size, bool) or not isinstance(img_size, int) or img_size < 1:
            raise ValueError(f"img_size: must be an integer >= 1, got {img_size!r}")
        size = self._entries.setdefault(f"batch{self.batch}", {})
        return size.setdefault(f"{img_size}px", {})

    def _fill(self, parts: tuple[_Part, ...], img_size: int) -> None:
        """Calibrate the overhead at ``img_size`` if it is missing, measure the missing ``parts``, save."""
        if "overhead_ms" not in self._slot(img_size):
            self._calibrate(img_size)
        self._measure(parts, img_size)
        self._save()

    def _measure(self, parts: tuple[_Part, ...], img_size: int) -> None:
        """Time each part of ``parts`` not yet in the table, once per distinct key."""
        table = self._slot(img_size).setdefault("parts_ms", {})
        with _num_threads(self.threads):
            for part in parts:
                if part.key not in table:
                    table[part.key] = _both_formats_ms(
                        part.build, part.shape(self.batch), self.device, self.timing
                    )
                    self.measurements += 1

    def _calibrate(self, img_size: int) -> None:
        """The fixed overhead at ``img_size``: per format, the median of ``whole - sum of parts`` over the
        reference networks that fit the image (the module docstring says why these)."""
        references = [arch for arch in _REFERENCES if arch.min_img_size <= img_size]
        if not references:
            raise ValueError(f"image size {img_size} is too small for any network; it must be at least 2 px")
        gaps: dict[str, list[float]] = {fmt: [] for fmt in MEMORY_FORMATS}
        wholes: dict[str, list[float]] = {fmt: [] for fmt in MEMORY_FORMATS}
        for arch in references:
            parts = _parts(arch, img_size, 3, 1000)
            self._measure(parts, img_size)
            table = self._slot(img_size)["parts_ms"]
            whole = whole_network_ms(
                arch, img_size, self.batch, self.device, threads=self.threads,
                warmup=self.timing.warmup, repeats=self.timing.repeats, seconds=self.timing.seconds,
            )  # fmt: skip
            self.measurements += 1
            for fmt in MEMORY_FORMATS:
                gaps[fmt].append(whole[fmt] - math.fsum(table[p.key][fmt] for p in parts))
                wholes[fmt].append(whole[fmt])
        # A gap below minus the fastest reference's whole time would make that network run in negative
        # time: its parts were timed while something else held the cores. Bounded there, a prediction is
        # never negative for a network at least as large as the references.
        self._slot(img_size)["overhead_ms"] = {
            fmt: max(statistics.median(gaps[fmt]), -min(wholes[fmt])) for fmt in MEMORY_FORMATS
        }

    # ------------------------------------------------------------------------------------------ file

    def _save(self) -> None:
        """Merge this table into its file under the lock (entries already in the file win) and adopt the
        result, so that concurrent writers keep each other's entries and agree on shared ones."""

        def merged() -> dict[str, Any]:
            self._entries = _merge(self._entries, _read_entries(self.path, self.device_id))
            return {
                "format": _FILE_FORMAT,
                "version": _FILE_VERSION,
                "device_id": self.device_id,
                "device": device_name(self.device),
                "kind": self.device.type,
                "torch": torch.__version__,
                "threads": self.threads,
                "entries": self._entries,
            }

        merge_json(self.path, merged)

    def __repr__(self) -> str:
        return f"LatencyTable({self.device_id!r}, batch={self.batch}, path={str(self.path)!r})"


def _merge(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """``ours`` and ``theirs`` nested dicts combined; where both hold a number, theirs wins."""
    merged = dict(ours)
    for key, value in theirs.items():
        mine = merged.get(key)
        merged[key] = _merge(mine, value) if isinstance(mine, dict) and isinstance(value, dict) else value
    return merged


def _read_entries(path: Path, device_id: str) -> dict[str, Any]:
    """The entries of the table file at ``path`` (none if there is no file), after checking it is a
    latency table of ``device_id``; a ValueError in one sentence naming the file otherwise."""
    try:
        data = userfiles.load_store(path)
    except FileNotFoundError:
        return {}
    except ValueError as err:  # not JSON, too deep or large, not a regular file (a FIFO would block)
        raise ValueError(f"latency table {path} {err}; delete it to measure again") from None
    if not isinstance(data, dict) or data.get("format") != _FILE_FORMAT:
        raise ValueError(f'{path} is not a latency table (no "format": "{_FILE_FORMAT}"); move it away')
    if data.get("version") != _FILE_VERSION:
        raise ValueError(
            f"latency table {path} has version {data.get('version')!r}, this code reads {_FILE_VERSION}; "
            "delete it to measure again"
        )
    if data.get("device_id") != device_id:
        raise ValueError(
            f"latency table {path} is the table of {data.get('device_id')!r}, not of {device_id!r}; "
            "move it away"
        )
    entries = data.get("entries")
    problem = _entries_problem(entries)
    if problem:
        raise ValueError(f"latency table {path} is damaged ({problem}); delete it to measure again")
    return entries


def _entries_problem(entries: Any) -> str | None:
    """What is wrong with the ``entries`` of a table file, or None: batch -> size -> (``overhead_ms``:
    format -> ms, ``parts_ms``: key -> format -> ms), every ms a finite number."""

    def times_problem(where: str, times: Any, positive: bool) -> str | None:
        if not isinstance(times, dict) or set(times) != set(MEMORY_FORMATS):
            return f"{where} must map {' and '.join(MEMORY_FORMATS)} to ms"
        for value in times.values():
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not ok or (positive and value <= 0):
                return f"{where} holds {value!r}, not a{' positive' if positive else ''} time in ms"
        return None

    if not isinstance(entries, dict):
        return "no entries"
    for batch_key, sizes in entries.items():
        if not re.fullmatch(r"batch[1-9][0-9]*", batch_key) or not isinstance(sizes, dict):
            return f"unexpected entry {batch_key!r}"
        for size_key, slot in sizes.items():
            where = f"{batch_key}/{size_key}"
            if not re.fullmatch(r"[1-9][0-9]*px", size_key) or not isinstance(slot, dict):
                return f"unexpected entry {where!r}"
            if set(slot) - {"overhead_ms", "parts_ms"}:
                return f"unexpected keys in {where}: {sorted(set(slot) - {'overhead_ms', 'parts_ms'})}"
            if "overhead_ms" in slot and (
                problem := times_problem(f"{where} overhead_ms", slot["overhead_ms"], False)
            ):
                return problem
            parts = slot.get("parts_ms", {})
            if not isinstance(parts, dict):
                return f"{where} parts_ms must map part keys to times"
            for key, times in parts.items():
                if problem := times_problem(f"{where} part {key!r}", times, True):
                    return problem
    return None

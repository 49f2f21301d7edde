"""Bounds of every size a user gives, checked before anything is allocated.

An architecture's fields, the image size, classes, input channels, workers, seeds and the other counts of the
command line, a config file or the Python API are each held between a lower and an upper bound; a value
outside (or of the wrong kind: a bool, a float where a whole number is meant, a string) is a ``ValueError``
of one sentence that names the setting and states the bound, such as ``depth: must be a whole number between
1 and 64, got 1000000000``. Messages show a user's value through :func:`shown`, which is short and takes
bounded time whatever the value (a YAML alias bomb included).

The bounds are generous for real networks and runs, and small enough that one value alone cannot ask for
unbounded memory or time (a depth of 10**9 once built a list of 10**9 drop-path rates; 10**20 workers
created semaphores until the system ran out). They bound each value, not their product: a network of 16
stages of 64 blocks of 8192 channels is within bounds and does not fit in any memory.
"""

from __future__ import annotations

import math
import reprlib
from typing import Any

__all__ = [
    "MAX_BATCH",
    "MAX_CLASSES",
    "MAX_CPUS_PER_TRIAL",
    "MAX_DEPTH",
    "MAX_EPOCHS",
    "MAX_ETA",
    "MAX_EXPAND",
    "MAX_GPUS_PER_TRIAL",
    "MAX_HEADS",
    "MAX_IMAGES",
    "MAX_IMG_SIZE",
    "MAX_IN_CHANS",
    "MAX_K",
    "MAX_MEMORY",
    "MAX_PATCH",
    "MAX_RUNGS",
    "MAX_SEED",
    "MAX_STAGES",
    "MAX_TRIAL_SECONDS",
    "MAX_WIDTH",
    "MAX_WORKERS",
    "number",
    "shown",
    "whole",
]

# The architecture (nas.core.arch). Published networks of the families this project searches sit well inside.
MAX_STAGES = 16  # ResNets, CoAtNet, Swin, ConvNeXt: 4 or 5 stages
MAX_DEPTH = 64  # blocks in one stage: ResNet-152's third stage has 36, ViT-22B's one stage 48
MAX_WIDTH = 8192  # channels of a stem, stage or MLP head: ViT-22B is 6144 wide, CoAtNet-7 3072
MAX_EXPAND = 16  # expansion ratio: MBConv 4 or 6, a Transformer FFN 4, a ResNet bottleneck 4
MAX_K = 31  # conv kernel / local attention extent: RepLKNet's 31x31; SASA uses 7
MAX_HEADS = 256  # attention heads: ViT-22B has 48
MAX_MEMORY = 4096  # external attention's memory slots: EANet uses 64
MAX_PATCH = 64  # a patch stem's patch side: ViT uses 14, 16 or 32
# The task a network is built for (nas.core.model, the command line).
MAX_IMG_SIZE = 4096  # pixels a side: 16x ImageNet's 224; whole-slide and satellite work tiles larger images
MAX_CLASSES = 100_000  # ImageNet-22k has 21,841 classes
MAX_IN_CHANS = 256  # hyperspectral images have up to ~224 bands (AVIRIS); RGB 3
# A search or a training run.
MAX_WORKERS = 1024  # worker processes on one machine (--workers), or Ray trials at once (--concurrency):
# above the 768 hardware threads of the largest two-socket servers; more machines join with --resume
MAX_SEED = 2**31 - 1  # numpy's generators take seeds below 2**32, and a worker's seed is seed + worker
MAX_CPUS_PER_TRIAL = 1024  # a Ray trial's bundle lives on one node
MAX_GPUS_PER_TRIAL = 64  # nodes hold 8 or 16 GPUs
MAX_TRIAL_SECONDS = 365 * 24 * 3600  # --trial-timeout: a year (threading refuses timeouts past ~292 years)
MAX_BATCH = 65_536  # images in a batch: the largest ImageNet batches published are 64k (LARS)
MAX_EPOCHS = 10_000
MAX_IMAGES = 10**10  # images trained on (a ladder's first rung, --train-samples): ~7800 ImageNet epochs
MAX_ETA = 100  # the ladder's reduction factor: ASHA and Hyperband use 2 to 4
MAX_RUNGS = 20  # the ladder's rungs: with eta 2, the top rung trains 2**19 times the first


class _Short(reprlib.Repr):
    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = 60
        self.maxlong = 40
        self.maxlevel = 3

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 3 * self.maxlong:  # Python refuses to write out ints of over 4300 digits
            return f"an integer of {x.bit_length()} bits"
        return super().repr_int(x, level)


_SHORT = _Short()


def shown(value: Any) -> str:
    """``repr(value)`` on one line and cut short (long strings, numbers and containers end in ``...``), in
    bounded time whatever the value: what an error message shows of a user's value."""
    return _SHORT.repr(value).replace("\n", "\\n")


def whole(name: str, value: Any, low: int, high: int) -> int:
    """``value`` if it is a whole number (not a bool) in ``[low, high]``; ValueError naming ``name``
    otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name}: must be a whole number between {low} and {high}, got {shown(value)}")
    return value


def number(name: str, value: Any, low: float, high: float, *, above: bool = False) -> float:
    """``value`` if it is a finite number (not a bool) in ``[low, high]`` (``(low, high]`` with ``above``);
    ValueError naming ``name`` otherwise."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (low < value if above else low <= value) or value > high:
        span = f"above {_num(low)} and at most" if above else f"between {_num(low)} and"
        raise ValueError(f"{name}: must be a number {span} {_num(high)}, got {shown(value)}")
    return value


def _num(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)

"""Which memory format trains the spaces' networks faster on the CPU: NCHW or channels-last.

For each space (``coatnet``, ``sasa``), every baseline and ``--samples`` seeded architectures
(``space.sample_random(seed)``) are shrunk by the space's cpu profile and built for Fashion-MNIST's shape (1
channel, 10 classes, the profile's image size), twice from one seed: once left in NCHW, once put into
channels-last (``NasNet.use_memory_format``, as ``evaluators.proxy.build_scaled_network`` does on the CPU).
Each runs the proxy's training step (forward, cross-entropy, backward, AdamW) on one random batch of the
profile's batch size. After a warm-up step each, the two alternate pair by pair (two steps per pair, so that
machine noise hits both alike); each one's time is the median over its pairs, and the figure is NCHW /
channels-last per architecture (above 1: channels-last is faster). It decides
``evaluators.proxy.training_memory_format``. Then the same for the one-shot supernet of each space
(``Supernet.use_memory_format``, as ``evaluators.oneshot.OneShotEvaluator`` sets it on the CPU): two
supernets from one seed, one per format, each training the path of every seeded architecture at
``OneShotConfig``'s batch size.

The thread count is pinned (``--threads``, default 2) and printed with the load average before each space.

Run from the repository root::

    .venv/bin/python benchmarks/bench_memory_format.py [--samples 12] [--repeats 5]

It prints a table per space and writes ``benchmarks/results/bench_memory_format/bench_memory_format.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluators.oneshot import OneShotConfig  # noqa: E402
from evaluators.supernet import Supernet  # noqa: E402
from nas.core.arch import Arch  # noqa: E402
from nas.core.model import build_model  # noqa: E402
from search_spaces import get_space  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "bench_memory_format" / "bench_memory_format.json"
SPACES = ("coatnet", "sasa")
IN_CHANS, NUM_CLASSES = 1, 10  # Fashion-MNIST, the data every CPU proxy trains on
FORMATS = {"nchw": torch.contiguous_format, "channels_last": torch.channels_last}


def _trainer(arch, profile, memory_format: torch.memory_format):
    """One training step of ``arch`` in ``memory_format``, as a function of no arguments."""
    torch.manual_seed(0)
    model = build_model(arch, num_classes=NUM_CLASSES, in_chans=IN_CHANS, img_size=profile.img_size)
    model.use_memory_format(memory_format)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(profile.batch_size, IN_CHANS, profile.img_size, profile.img_size)
    y = torch.randint(0, NUM_CLASSES, (profile.batch_size,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    return step


def measure(arch, profile, repeats: int) -> dict[str, float]:
    """Median milliseconds per training step in each format, the two alternating."""
    return _alternating({name: _trainer(arch, profile, fmt) for name, fmt in FORMATS.items()}, repeats)


def _alternating(steps: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median milliseconds per call of each step, after a warm-up call each, the steps alternating."""
    for step in steps.values():
        step()  # warm-up: lazy initialisation, the allocator
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            step()
            times[name].append((time.perf_counter() - start) / 2)
    return {name: 1e3 * statistics.median(values) for name, values in times.items()}


def _supernet_trainers(space, profile, batch: int) -> dict[str, Callable[[Arch], Callable[[], None]]]:
    """Per format, the one-shot supernet of ``space`` (from one seed) and, for a path, its training step."""
    trainers = {}
    for name, memory_format in FORMATS.items():
        torch.manual_seed(0)
        supernet = Supernet(space, profile, num_classes=NUM_CLASSES, in_chans=IN_CHANS)
        supernet.use_memory_format(memory_format)
        optimizer = torch.optim.AdamW(supernet.parameters(), lr=1e-3)
        x = torch.randn(batch, IN_CHANS, profile.img_size, profile.img_size)
        y = torch.randint(0, NUM_CLASSES, (batch,))

        def trainer(arch: Arch, supernet=supernet, optimizer=optimizer, x=x, y=y) -> Callable[[], None]:
            def step() -> None:
                supernet.set_active(arch)
                optimizer.zero_grad(set_to_none=True)
                F.cross_entropy(supernet(x), y).backward()
                optimizer.step()

            return step

        trainers[name] = trainer
    return trainers


def _row(label: str, key: str, ms: dict[str, float]) -> dict:
    """One network's row (printed): its milliseconds per step in each format and NCHW / channels-last."""
    ratio = ms["nchw"] / ms["channels_last"]
    print(f"{label:<28} {key:<64} {ms['nchw']:>8.0f} {ms['channels_last']:>8.0f} {ratio:>6.2f}")
    return {"network": label, "arch": key, **{f"{k}_ms": v for k, v in ms.items()}, "ratio": ratio}


def _summary(rows: list[dict]) -> dict:
    ratios = [row["ratio"] for row in rows]
    summary = {
        "median": statistics.median(ratios),
        "min": min(ratios),
        "max": max(ratios),
        "slower": sum(r < 1 for r in ratios),
        "networks": len(ratios),
    }
    print(
        f"NCHW / channels-last: median {summary['median']:.2f}x, {summary['min']:.2f}-{summary['max']:.2f}x; "
        f"channels-last slower for {summary['slower']} of {summary['networks']}"
    )
    return summary


def measure_supernet(name: str, samples: int, repeats: int) -> dict:
    """The one-shot supernet's training step (``OneShotConfig``'s batch) on each seeded path, both formats."""
    space = get_space(name)
    profile = space.profile("cpu")
    batch = OneShotConfig().batch_size
    trainers = _supernet_trainers(space, profile, batch)
    load = os.getloadavg()[0]
    print(f"\n{name} supernet, cpu profile (batch {batch}), load average {load:.2f}")
    print(f"{'path':<28} {'proxy arch':<64} {'NCHW ms':>8} {'CL ms':>8} {'ratio':>6}")
    rows = []
    for seed in range(samples):
        arch = space.sample_random(seed)
        ms = _alternating({fmt: make(arch) for fmt, make in trainers.items()}, repeats)
        rows.append(_row(f"sample {seed}", profile.apply(arch).key, ms))
    return {"load_average_before": load, "batch": batch, "rows": rows, "summary": _summary(rows)}


def measure_space(name: str, samples: int, repeats: int) -> dict:
    space = get_space(name)
    profile = space.profile("cpu")
    archs = {label: b.arch for label, b in space.baselines().items()}
    archs |= {f"sample {seed}": space.sample_random(seed) for seed in range(samples)}
    load = os.getloadavg()[0]
    print(
        f"\n{name}, cpu profile ({profile.img_size} px, batch {profile.batch_size}), load average {load:.2f}"
    )
    print(f"{'network':<28} {'proxy arch':<64} {'NCHW ms':>8} {'CL ms':>8} {'ratio':>6}")
    rows = []
    for label, arch in archs.items():
        scaled = profile.apply(arch)
        rows.append(_row(label, scaled.key, measure(scaled, profile, repeats)))
    return {"load_average_before": load, "rows": rows, "summary": _summary(rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=12, help="seeded architectures per space")
    parser.add_argument("--repeats", type=int, default=5, help="pairs of steps per format and network")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (pinned)")
    parser.add_argument("--spaces", nargs="+", default=list(SPACES), choices=SPACES)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cpu = platform.processor() or platform.machine()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu}")
    report = {
        "settings": vars(args),
        "machine": {"platform": platform.platform(), "torch": torch.__version__, "threads": args.threads},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "spaces": {name: measure_space(name, args.samples, args.repeats) for name in args.spaces},
        "supernets": {name: measure_supernet(name, args.samples, args.repeats) for name in args.spaces},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nsaved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

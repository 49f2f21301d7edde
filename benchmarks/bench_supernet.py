"""What weight sharing costs: a path through the supernet against the same network standing alone.

For each space (``coatnet``, ``sasa``) a :class:`~evaluators.supernet.Supernet` is built under the space's
CPU proxy
profile for Fashion-MNIST's shape (1 channel, 10 classes, the profile's image size), as the one-shot
evaluator builds it. For each of ``--samples`` seeded architectures of the space (``Supernet.sample(seed)``),
two networks run the same training step (forward and backward of cross-entropy on one random batch of the
profile's batch size, gradients cleared with ``set_to_none``):

- the path: ``supernet.set_active(arch)`` then ``supernet(x)``, its weights sliced out of the shared tensors
  before the forward and its gradients flowing back into them;
- the standalone network ``supernet.extract(arch)``: the same modules and weights, owning its tensors.

After warm-up the two alternate step by step (so machine noise hits both alike); each one's time is the
median of its steps, and the figure is path / standalone per architecture. Target: at most 1.10x for
every sampled architecture of each space.

Run from the repository root::

    .venv/bin/python benchmarks/bench_supernet.py [--samples 8] [--repeats 15]

It prints a table and writes ``benchmarks/results/bench_supernet/bench_supernet.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluators.supernet import Supernet  # noqa: E402
from search_spaces import get_space  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "bench_supernet" / "bench_supernet.json"
TARGET = 1.10  # path / standalone, forward + backward
SPACES = ("coatnet", "sasa")
IN_CHANS, NUM_CLASSES = 1, 10  # Fashion-MNIST, the data every CPU proxy trains on


def step_seconds(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    start = time.perf_counter()
    F.cross_entropy(model(x), y).backward()
    seconds = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    return seconds


def measure_space(name: str, samples: int, warmup: int, repeats: int, seed: int) -> dict:
    space = get_space(name)
    profile = space.profile("cpu")
    torch.manual_seed(seed)
    start = time.perf_counter()
    supernet = Supernet(space, profile, num_classes=NUM_CLASSES, in_chans=IN_CHANS, img_size=profile.img_size)
    build_seconds = time.perf_counter() - start
    supernet.train()
    x = torch.randn(profile.batch_size, IN_CHANS, profile.img_size, profile.img_size)
    y = torch.randint(0, NUM_CLASSES, (profile.batch_size,))
    rows = []
    for i in range(samples):
        arch = supernet.sample(seed + i)
        supernet.set_active(arch)
        standalone = supernet.extract(arch).train()
        models = {"path": supernet, "standalone": standalone}
        times: dict[str, list[float]] = {k: [] for k in models}
        for r in range(warmup + repeats):
            for kind, model in models.items():
                seconds = step_seconds(model, x, y)
                if r >= warmup:
                    times[kind].append(seconds)
        median = {k: statistics.median(t) for k, t in times.items()}
        ratio = median["path"] / median["standalone"]
        rows.append(
            {
                "arch": arch.key,
                "proxy_arch": profile.apply(arch).key,
                "params": sum(p.numel() for p in standalone.parameters()),
                "median_seconds": median,
                "ratio": ratio,
            }
        )
        print(
            f"{name:8s} {i}  path {median['path'] * 1e3:7.2f} ms  "
            f"standalone {median['standalone'] * 1e3:7.2f} ms  {ratio:.3f}x  {arch.key}",
            flush=True,
        )
    ratios = [r["ratio"] for r in rows]
    return {
        "space": name,
        "profile": profile.name,
        "img_size": profile.img_size,
        "batch": profile.batch_size,
        "supernet_params": sum(p.numel() for p in supernet.parameters()),
        "supernet_build_seconds": build_seconds,
        "samples": rows,
        "geomean_ratio": math.exp(statistics.fmean(math.log(r) for r in ratios)),
        "max_ratio": max(ratios),
        "target": TARGET,
        "met": max(ratios) <= TARGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spaces", default=",".join(SPACES))
    parser.add_argument("--samples", type=int, default=8, help="seeded architectures per space")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    spaces = []
    for name in args.spaces.split(","):
        result = measure_space(name, args.samples, args.warmup, args.repeats, args.seed)
        spaces.append(result)
        print(
            f"{name}: path / standalone geometric mean {result['geomean_ratio']:.3f}x, "
            f"worst {result['max_ratio']:.3f}x ({'met' if result['met'] else 'MISSED'}: <= {TARGET}x)",
            flush=True,
        )
    result = {
        "benchmark": "bench_supernet",
        "warmup": args.warmup,
        "repeats": args.repeats,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "spaces": spaces,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()

"""Data-parallel supernet training: images/s with 1 and N Ray Train workers, and the efficiency.

Trains the coatnet space's supernet (:class:`evaluators.oneshot.OneShotEvaluator`, uniform single-path
sampling, float32) on real Fashion-MNIST under a proxy profile, with the same global batch and epochs:

- ``1 process, T threads``: the evaluator in this process (``workers=1``), torch on T threads, for T = 1 (what
  each Ray worker gets: Ray sets ``OMP_NUM_THREADS`` to its CPUs) and T = ``--workers`` (all the cores the
  workers would hold);
- ``N Ray Train workers``: ``workers=N`` with ``--cpus-per-worker`` CPUs each on a local Ray (gloo on the CPU,
  nccl where the evaluator's device is a GPU).

Per row: images/s (path-images trained over the training loop's own seconds, the sum of its epochs, without
Ray's start), the wall seconds of the whole ``train()`` (Ray's start and the workers' set-up included), the
speed-up over the 1-thread process and the efficiency (speed-up / workers). The first epoch holds warm-up
(path networks built on first use), so use at least 2 epochs.

Run from the repository root::

    .venv/bin/python benchmarks/bench_oneshot_scale.py [--workers 2] [--epochs 2] [--train-samples 2048]
        [--batch-size 64] [--profile cpu] [--cpus-per-worker 1]

It prints a table and writes ``benchmarks/results/bench_oneshot_scale/oneshot_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluators.data import load_dataset  # noqa: E402
from evaluators.oneshot import OneShotConfig, OneShotEvaluator  # noqa: E402
from search_spaces import get_space  # noqa: E402


def _train(args: argparse.Namespace, data: Any, workers: int, threads: int | None) -> dict[str, Any]:
    space = get_space("coatnet")
    profile = space.profile(args.profile)
    config = OneShotConfig(epochs=args.epochs, train_samples=args.train_samples, batch_size=args.batch_size)
    saved = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        with tempfile.TemporaryDirectory() as run_dir:
            start = time.perf_counter()
            evaluator = OneShotEvaluator(
                space,
                profile,
                data,
                seed=0,
                config=config,
                run_dir=run_dir,
                device=args.device,
                workers=workers,
                cpus_per_worker=args.cpus_per_worker,
            )
            info = evaluator.train()
            wall = time.perf_counter() - start
    finally:
        torch.set_num_threads(saved)
    return {
        "workers": workers,
        "threads": threads,
        "images": info["images"],
        "train_seconds": info["train_seconds"],
        "images_per_second": info["images"] / info["train_seconds"],
        "wall_seconds": wall,
        "train_loss": info["train_loss"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--train-samples", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--cpus-per-worker", type=float, default=1.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks/results/bench_oneshot_scale/oneshot_scale.json"
    )
    args = parser.parse_args()
    import ray

    profile = get_space("coatnet").profile(args.profile)
    data = load_dataset("fashion-mnist", img_size=profile.img_size, seed=0)
    rows = [_train(args, data, 1, 1), _train(args, data, 1, args.workers)]
    ray.init(num_cpus=int(args.workers * args.cpus_per_worker), include_dashboard=False, log_to_driver=False)
    try:
        rows.append(_train(args, data, args.workers, None))
    finally:
        ray.shutdown()
    base = rows[0]["images_per_second"]
    for row in rows:
        row["speedup"] = row["images_per_second"] / base
        row["efficiency"] = row["speedup"] / row["workers"]
    print(f"{'run':<28} {'images/s':>9} {'train s':>8} {'wall s':>7} {'speed-up':>9} {'efficiency':>10}")
    for row in rows:
        name = (
            f"1 process, {row['threads']} thread(s)"
            if row["threads"]
            else f"{row['workers']} Ray Train workers x {args.cpus_per_worker:g} CPU"
        )
        print(
            f"{name:<28} {row['images_per_second']:>9.1f} {row['train_seconds']:>8.1f} "
            f"{row['wall_seconds']:>7.1f} {row['speedup']:>9.2f} {row['efficiency']:>10.2f}"
        )
    result = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "torch": torch.__version__,
            "ray": ray.__version__,
            "load_average": os.getloadavg(),
        },
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

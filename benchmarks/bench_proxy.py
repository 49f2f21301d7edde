"""Evaluator throughput: how fast proxy training runs, against what this machine's matmuls can do.

1. The machine's fp32 matmul peak: the best of several ``torch.mm`` products of square matrices (1024 to
   3072) with all threads, in MACs per second (one multiply-add = 1).
2. For ``--archs`` seeded architectures of the ``coatnet`` space (the default search) trained under its CPU
   proxy profile on Fashion-MNIST (:func:`evaluators.proxy.train_proxy`, exactly what a trial runs):

   - training images per second (``images_per_second``: the training steps' wall time, validation apart);
   - the fraction of the matmul peak this reaches: proxy MACs per image (fvcore, at the profile's 32 px and
     one channel) x 3 (forward + backward) x images per second / peak;
   - where a step's time goes: the same network's forward + backward alone on one resident batch (median of
     repeated steps, so no data loading, optimizer or schedule), scaled to the epoch's steps, against the
     measured training time; what remains is the trainer's own overhead (batch assembly, the loss sync, the
     optimizer and the schedule);
   - the trial's other costs: validation (``eval_seconds``) and counting the MACs at 224 px
     (:func:`evaluators.complexity.count`, which every trial runs).
3. The operators that take the time (``torch.profiler``, self CPU time) of one training step of each
   architecture, summed over the architectures: what to optimise next.

Run from the repository root::

    .venv/bin/python benchmarks/bench_proxy.py [--archs 6]

It prints a table and writes ``benchmarks/results/bench_proxy/bench_proxy.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluators.complexity import count, macs_of  # noqa: E402
from evaluators.data import load_dataset  # noqa: E402
from evaluators.proxy import train_proxy, training_memory_format  # noqa: E402
from nas.core.model import build_model  # noqa: E402
from search_spaces import get_space  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "bench_proxy" / "bench_proxy.json"
DATASET = "fashion-mnist"


def matmul_peak(sizes: tuple[int, ...] = (1024, 2048, 3072), repeats: int = 5) -> dict[str, float]:
    """Best fp32 MACs per second of square matrix products, per size."""
    out = {}
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b  # warm-up
        best = min(_timed(lambda a=a, b=b: a @ b) for _ in range(repeats))
        out[str(n)] = n**3 / best
    return out


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def model_step_seconds(
    net: torch.nn.Module, batch: int, img_size: int, warmup: int = 3, repeats: int = 9
) -> float:
    """Median forward + backward of ``net`` alone on one resident batch (training mode)."""
    x = torch.randn(batch, 1, img_size, img_size)
    y = torch.randint(0, 10, (batch,))
    net.train()

    def step() -> None:
        F.cross_entropy(net(x), y, label_smoothing=0.1).backward()
        net.zero_grad(set_to_none=True)

    for _ in range(warmup):
        step()
    return statistics.median(_timed(step) for _ in range(repeats))


def op_profile(net: torch.nn.Module, batch: int, img_size: int) -> Counter:
    """Self CPU microseconds per operator of one forward + backward."""
    x = torch.randn(batch, 1, img_size, img_size)
    y = torch.randint(0, 10, (batch,))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        F.cross_entropy(net(x), y).backward()
    net.zero_grad(set_to_none=True)
    return Counter({e.key: e.self_cpu_time_total for e in prof.key_averages()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", type=int, default=6, help="seeded architectures of the coatnet space")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    space = get_space("coatnet")
    profile_ = space.profile("cpu")
    data = load_dataset(DATASET, img_size=profile_.img_size, seed=0)
    peaks = matmul_peak()
    peak = max(peaks.values())
    print(f"fp32 matmul peak: {peak / 1e9:.1f} G MACs/s ({torch.get_num_threads()} threads)", flush=True)

    rows, ops = [], Counter()
    for i in range(args.archs):
        arch = space.sample_random(args.seed + i)
        proxy = profile_.apply(arch)
        net = build_model(proxy, num_classes=data.num_classes, in_chans=data.in_chans, img_size=data.img_size)
        macs = macs_of(net, torch.zeros(1, data.in_chans, data.img_size, data.img_size))
        net.use_memory_format(training_memory_format(torch.device("cpu")))  # as train_proxy trains it
        out = train_proxy(arch, profile_, data, seed=0)
        steps = profile_.train_samples // profile_.batch_size * profile_.epochs
        model_seconds = steps * model_step_seconds(net, profile_.batch_size, data.img_size)
        ops += op_profile(net, profile_.batch_size, data.img_size)
        start = time.perf_counter()
        count(arch)
        count_seconds = time.perf_counter() - start
        rate = out["images_per_second"]
        row = {
            "arch": arch.key,
            "proxy_arch": proxy.key,
            "proxy_params": out["params"],
            "proxy_macs": macs,
            "images_per_second": rate,
            "peak_fraction": 3 * macs * rate / peak,
            "train_seconds": out["train_seconds"],
            "model_seconds": model_seconds,
            "model_share": model_seconds / out["train_seconds"],
            "eval_seconds": out["eval_seconds"],
            "count_macs_seconds": count_seconds,
            "top1": out["top1"],
        }
        rows.append(row)
        print(
            f"{i}  {rate:6.0f} img/s  {row['peak_fraction']:6.1%} of peak  model {row['model_share']:6.1%} "
            f"of training  train {row['train_seconds']:5.2f} s  validate {row['eval_seconds']:5.2f} s  "
            f"count MACs {count_seconds:5.2f} s  {proxy.key}",
            flush=True,
        )
    total_ops = sum(ops.values())
    top_ops = [
        {"op": name, "share": us / total_ops, "self_cpu_ms": us / 1e3} for name, us in ops.most_common(12)
    ]
    summary = {
        "images_per_second_median": statistics.median(r["images_per_second"] for r in rows),
        "peak_fraction_median": statistics.median(r["peak_fraction"] for r in rows),
        "model_share_median": statistics.median(r["model_share"] for r in rows),
        "trial_seconds_split": {
            k: statistics.fmean(r[k] for r in rows)
            for k in ("train_seconds", "eval_seconds", "count_macs_seconds")
        },
    }
    print(
        f"median {summary['images_per_second_median']:.0f} img/s, "
        f"{summary['peak_fraction_median']:.1%} of the matmul peak; the network's own forward + backward "
        f"is {summary['model_share_median']:.1%} of training"
    )
    print("top operators (self CPU, all architectures):")
    for op in top_ops:
        print(f"  {op['op']:40s} {op['share']:6.1%}")
    result = {
        "benchmark": "bench_proxy",
        "profile": profile_.name,
        "dataset": DATASET,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "matmul_peak_macs_per_second": peaks,
        "rows": rows,
        "summary": summary,
        "top_ops": top_ops,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()

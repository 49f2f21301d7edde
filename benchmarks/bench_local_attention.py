"""Speed and memory of the ``local`` mixer's attention core against the naive unfold reference (CPU).

Both variants compute SASA attention (forward + backward) on the same q, k, v (B=8, 64 channels in 8 heads,
56 x 56, k=7) and the same relative embeddings: ``LocalAttention.attend`` (the blocked kernel) and
``dense_local_attention`` (unfold every k x k window). Each variant runs in a fresh
subprocess, so neither sees the other's allocator state:

- memory: after a small warm-up and after allocating and touching the inputs, the peak RSS is reset
  (``/proc/self/clear_refs``) and one full forward + backward runs; its peak RSS above the idle process
  (``VmHWM`` minus the ``VmRSS`` before the step) is reported;
- time: the median of several forward + backward steps after warm-up steps.

Run from the repository root: ``.venv/bin/python benchmarks/bench_local_attention.py``. Prints a table and
writes ``benchmarks/results/local_attention.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from peak_rss import reset_peak_rss, status_kib  # noqa: E402  (benchmarks/, the script's folder)

from nas.ops.local_attention import (  # noqa: E402  (needs the repository root on the path)
    LocalAttention,
    dense_local_attention,
)

BATCH, CHANNELS, SIZE, KERNEL, HEADS = 8, 64, 56, 7, 8
WARMUP, REPEATS = 2, 7
VARIANTS = ("reference", "local")
RESULTS = ROOT / "benchmarks" / "results" / "local_attention.json"
# Acceptance bars of the local mixer (README, Performance)
MIN_SPEEDUP, MAX_MEMORY_RATIO = 3.0, 0.35


def _problem(batch: int, size: int) -> tuple[LocalAttention, tuple[torch.Tensor, ...], torch.Tensor]:
    """The mixer (for its relative embeddings), q, k, v (B, heads, d, H, W) and an upstream gradient."""
    torch.manual_seed(0)
    mixer = LocalAttention(CHANNELS, heads=HEADS, k=KERNEL)
    shape = (batch, HEADS, CHANNELS // HEADS, size, size)
    qkv = tuple(torch.randn(shape, requires_grad=True) for _ in range(3))
    return mixer, qkv, torch.randn(shape)


def _attention(variant: str, mixer: LocalAttention):
    if variant == "local":
        return mixer.attend
    return lambda q, k, v: dense_local_attention(q, k, v, mixer.rel_row, mixer.rel_col, KERNEL)


def _step(attend, mixer: LocalAttention, qkv: tuple[torch.Tensor, ...], upstream: torch.Tensor) -> float:
    """One forward + backward; seconds."""
    start = time.perf_counter()
    attend(*qkv).backward(upstream)
    seconds = time.perf_counter() - start
    for t in (*qkv, mixer.rel_row, mixer.rel_col):
        t.grad = None
    return seconds


def _peak_rss_kib() -> int:
    hwm = status_kib("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _measure(variant: str) -> dict:
    """Child process: peak memory of one step, then timed steps, of one variant."""
    mixer, qkv, upstream = _problem(1, 16)
    attend = _attention(variant, mixer)
    _step(attend, mixer, qkv, upstream)  # lazy initialisation (kernels, thread pool) outside the baseline
    mixer, qkv, upstream = _problem(BATCH, SIZE)
    attend = _attention(variant, mixer)
    reset = reset_peak_rss()
    idle = status_kib("VmRSS") if reset else _peak_rss_kib()
    _step(attend, mixer, qkv, upstream)
    peak = _peak_rss_kib() - idle
    times = [_step(attend, mixer, qkv, upstream) for _ in range(WARMUP + REPEATS)][WARMUP:]
    return {
        "median_ms": 1e3 * statistics.median(times),
        "min_ms": 1e3 * min(times),
        "times_ms": [round(1e3 * t, 2) for t in times],
        "peak_mib": peak / 1024,
        "peak_measure": "VmHWM after reset - VmRSS" if reset else "ru_maxrss growth",
        "threads": torch.get_num_threads(),
    }


def _check_agreement() -> float:
    """Max abs difference of outputs and input gradients of the two variants on a small problem."""
    mixer, qkv, upstream = _problem(2, 20)
    results = []
    for variant in VARIANTS:
        out = _attention(variant, mixer)(*qkv)
        grads = torch.autograd.grad(out, (*qkv, mixer.rel_row, mixer.rel_col), upstream)
        results.append((out, *grads))
    return max((a - b).abs().max().item() for a, b in zip(*results, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_measure(args.child)))
        return

    cpu = platform.processor() or platform.machine()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu}")
    print(f"B={BATCH} C={CHANNELS} {SIZE}x{SIZE} k={KERNEL} heads={HEADS}, fp32, forward + backward")
    max_diff = _check_agreement()
    print(f"agreement (20x20, outputs and gradients): max abs diff {max_diff:.2e}")
    runs = {}
    for variant in VARIANTS:
        child = [sys.executable, str(Path(__file__).resolve()), "--child", variant]
        done = subprocess.run(child, capture_output=True, text=True, check=True, cwd=ROOT)
        runs[variant] = json.loads(done.stdout.strip().splitlines()[-1])
    ref, ours = runs["reference"], runs["local"]
    speedup = ref["median_ms"] / ours["median_ms"]
    memory_ratio = ours["peak_mib"] / ref["peak_mib"]

    print(f"{'variant':<10} {'median ms':>10} {'min ms':>10} {'peak MiB':>10}")
    for variant, run in runs.items():
        print(f"{variant:<10} {run['median_ms']:>10.1f} {run['min_ms']:>10.1f} {run['peak_mib']:>10.1f}")
    print(f"speedup (reference / local time): {speedup:.2f}x (bar >= {MIN_SPEEDUP}x)")
    print(f"memory ratio (local / reference peak): {memory_ratio:.3f} (bar <= {MAX_MEMORY_RATIO})")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "config": {
            "batch": BATCH,
            "channels": CHANNELS,
            "size": [SIZE, SIZE],
            "kernel": KERNEL,
            "heads": HEADS,
            "dtype": "float32",
            "pass": "forward + backward",
            "warmup": WARMUP,
            "repeats": REPEATS,
        },
        "environment": {
            "torch": torch.__version__,
            "threads": ours["threads"],
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "processor": cpu,
        },
        "agreement_max_abs_diff": max_diff,
        "reference": ref,
        "local": ours,
        "speedup": speedup,
        "memory_ratio": memory_ratio,
        "meets_bars": speedup >= MIN_SPEEDUP and memory_ratio <= MAX_MEMORY_RATIO,
    }
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"saved {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

"""Speed and memory of the ``local`` mixer's attention core against the naive unfold reference (CPU).

Both variants compute SASA attention (forward + backward) on the same q, k, v and the same relative
embeddings: ``LocalAttention.attend`` (the blocked kernel) and ``dense_local_attention`` (unfold every k x k
window), at one of two shapes (``--shape``):

- ``paper`` (the default, and the README's acceptance bars): B=8, 64 channels in 8 heads, 56 x 56, k=7;
- ``proxy``: what a ``coatnet`` search trains at the cpu profile, a width-64 stage of k=11 scaled to 16
  channels in 8 heads (head dim 2) on 16 x 16 maps, B=64; figures without bars;
- ``sasa``: what a ``sasa`` search trains at the cpu profile in its last stage group, 128 channels in 8
  heads (head dim 16) on 4 x 4 maps, k=7, B=128 (the kernel's one-block form); figures without bars.

Each variant runs in a fresh subprocess, so neither sees the other's allocator state:

- memory: after a small warm-up and after allocating and touching the inputs, the peak RSS is reset
  (``/proc/self/clear_refs``) and one full forward + backward runs; its peak RSS above the idle process
  (``VmHWM`` minus the ``VmRSS`` before the step) is reported;
- time: the median of several forward + backward steps after warm-up steps.

Two modes, each measuring both variants in the same run, so that their ratio is not skewed by a machine
whose load changes between runs:

- idle: nothing else started by the benchmark;
- contention: one competing process per core the benchmark may use (a pure Python busy loop, ``while
  True: pass``, at the benchmark's own priority), started before each variant's subprocess and stopped after
  it, so that the variant's threads share every core with a process that never sleeps.

Both variants run with ``--threads`` intra-op threads (default: the cores the process may use) and torch's
default OpenMP settings: the benchmark removes ``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT`` and ``KMP_BLOCKTIME``
from the variants' environment.

Run from the repository root: ``.venv/bin/python benchmarks/bench_local_attention.py [--shape proxy]``
(both modes; ``--idle`` or ``--contention`` measures one and keeps the other's saved figures). Prints a
table per mode and writes ``benchmarks/results/bench_local_attention/local_attention.json``
(``local_attention_proxy.json`` and ``local_attention_sasa.json`` for the other shapes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from peak_rss import reset_peak_rss, status_kib  # noqa: E402  (benchmarks/, the script's folder)

from nas.core.ops.local_attention import (  # noqa: E402  (needs the repository root on the path)
    LocalAttention,
    dense_local_attention,
)


class Shape(NamedTuple):
    batch: int
    channels: int
    size: int
    kernel: int
    heads: int
    results: str  # file under benchmarks/results/bench_local_attention/
    bars: bool  # the README's acceptance bars apply


SHAPES = {
    # the acceptance shape: a SASA-like layer at 56 px
    "paper": Shape(8, 64, 56, 7, 8, "local_attention.json", True),
    # what a coatnet-space search trains at the cpu profile: a width-64 stage of k = 11 scaled to 16 channels
    # in 8 heads (head dim 2) on 16 x 16 maps, batch 64 (trial 12 of the README's retraining)
    "proxy": Shape(64, 16, 16, 11, 8, "local_attention_proxy.json", False),
    # what a sasa-space search trains at the cpu profile in its last stage group: width 512 scaled to 128
    # channels in 8 heads (head dim 16) on 4 x 4 maps, k = 7, batch 128 (the kernel's one-block form)
    "sasa": Shape(128, 128, 4, 7, 8, "local_attention_sasa.json", False),
}
WARMUP, REPEATS = 2, 7
VARIANTS = ("reference", "local")
MODES = ("idle", "contention")
RESULTS = ROOT / "benchmarks" / "results" / "bench_local_attention"
# Acceptance bars of the local mixer (README, Performance): speed-up over unfold per mode, peak memory ratio
MIN_SPEEDUP = {"idle": 3.0, "contention": 2.0}
MAX_MEMORY_RATIO = 0.35
# What would change OpenMP's defaults (libgomp's wait policy and spin count, Intel OpenMP's block time)
OPENMP_SETTINGS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
BUSY_LOOP = "while True: pass"


def _problem(
    shape: Shape, batch: int, size: int
) -> tuple[LocalAttention, tuple[torch.Tensor, ...], torch.Tensor]:
    """The mixer (for its relative embeddings), q, k, v (B, heads, d, H, W) and an upstream gradient."""
    torch.manual_seed(0)
    mixer = LocalAttention(shape.channels, heads=shape.heads, k=shape.kernel)
    dims = (batch, shape.heads, shape.channels // shape.heads, size, size)
    qkv = tuple(torch.randn(dims, requires_grad=True) for _ in range(3))
    return mixer, qkv, torch.randn(dims)


def _attention(variant: str, mixer: LocalAttention):
    if variant == "local":
        return mixer.attend
    return lambda q, k, v: dense_local_attention(q, k, v, mixer.rel_row, mixer.rel_col, mixer.k)


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


def _measure(variant: str, shape: Shape) -> dict:
    """Child process: peak memory of one step, then timed steps, of one variant."""
    mixer, qkv, upstream = _problem(shape, 1, 16)
    attend = _attention(variant, mixer)
    _step(attend, mixer, qkv, upstream)  # lazy initialisation (kernels, thread pool) outside the baseline
    mixer, qkv, upstream = _problem(shape, shape.batch, shape.size)
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


def _check_agreement(shape: Shape) -> float:
    """Max abs difference of outputs and input gradients of the two variants on a small problem (maps of
    the shape's size up to 20, so that the kernel takes the shape's form: blocks or one block)."""
    mixer, qkv, upstream = _problem(shape, 2, min(shape.size, 20))
    results = []
    for variant in VARIANTS:
        out = _attention(variant, mixer)(*qkv)
        grads = torch.autograd.grad(out, (*qkv, mixer.rel_row, mixer.rel_col), upstream)
        results.append((out, *grads))
    return max((a - b).abs().max().item() for a, b in zip(*results, strict=True))


def _run_variant(variant: str, threads: int, shape: str) -> dict:
    """One variant's measurement in a fresh subprocess with default OpenMP settings."""
    env = {key: value for key, value in os.environ.items() if key not in OPENMP_SETTINGS}
    child = [sys.executable, str(Path(__file__).resolve()), "--child", variant, "--threads", str(threads)]
    child += ["--shape", shape]
    done = subprocess.run(child, capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _measure_mode(mode: str, threads: int, competitors: int, shape: str) -> dict:
    """Both variants in one mode; under contention each runs beside ``competitors`` busy loops."""
    load = os.getloadavg()
    runs = {}
    for variant in VARIANTS:
        busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(competitors)]
        try:
            runs[variant] = _run_variant(variant, threads, shape)
        finally:
            for process in busy:
                process.kill()
                process.wait()
    ref, ours = runs["reference"], runs["local"]
    speedup = ref["median_ms"] / ours["median_ms"]
    memory_ratio = ours["peak_mib"] / ref["peak_mib"]
    print(f"\n{mode}: {competitors} busy-loop processes, load average before {load[0]:.2f}")
    print(f"{'variant':<10} {'median ms':>10} {'min ms':>10} {'peak MiB':>10}")
    for variant, run in runs.items():
        print(f"{variant:<10} {run['median_ms']:>10.1f} {run['min_ms']:>10.1f} {run['peak_mib']:>10.1f}")
    bar = MIN_SPEEDUP[mode] if SHAPES[shape].bars else None
    print(f"speedup (reference / local time): {speedup:.2f}x" + (f" (bar >= {bar}x)" if bar else ""))
    print(f"memory ratio (local / reference peak): {memory_ratio:.3f}")
    return {
        "competitors": competitors,
        "competitor": BUSY_LOOP if competitors else None,
        "load_average_before": load,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "reference": ref,
        "local": ours,
        "speedup": speedup,
        "min_speedup": bar,
        "memory_ratio": memory_ratio,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    cores = len(os.sched_getaffinity(0))
    parser.add_argument("--threads", type=int, default=cores, help=f"intra-op threads (default {cores})")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--idle", action="store_true", help="measure the idle mode only")
    only.add_argument("--contention", action="store_true", help="measure the contention mode only")
    parser.add_argument(
        "--shape",
        choices=SHAPES,
        default="paper",
        help="paper: the acceptance shape; proxy, sasa: a cpu-profile layer of the coatnet, sasa space",
    )
    args = parser.parse_args()
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    torch.set_num_threads(args.threads)
    shape = SHAPES[args.shape]
    if args.child:
        print(json.dumps(_measure(args.child, shape)))
        return

    cpu = platform.processor() or platform.machine()
    print(f"torch {torch.__version__}, {args.threads} threads on {cores} cores, {cpu}")
    print(
        f"{args.shape} shape: B={shape.batch} C={shape.channels} {shape.size}x{shape.size} k={shape.kernel} "
        f"heads={shape.heads}, fp32, forward + backward"
    )
    max_diff = _check_agreement(shape)
    side = min(shape.size, 20)
    print(f"agreement ({side}x{side}, outputs and gradients): max abs diff {max_diff:.2e}")
    config = {
        "shape": args.shape,
        "batch": shape.batch,
        "channels": shape.channels,
        "size": [shape.size, shape.size],
        "kernel": shape.kernel,
        "heads": shape.heads,
        "dtype": "float32",
        "pass": "forward + backward",
        "warmup": WARMUP,
        "repeats": REPEATS,
        "threads": args.threads,
        "cores": cores,
        "openmp": f"defaults ({', '.join(OPENMP_SETTINGS)} unset)",
    }
    path = RESULTS / shape.results
    modes = ["idle"] if args.idle else ["contention"] if args.contention else list(MODES)
    saved = json.loads(path.read_text()) if path.exists() else {}
    # a one-mode run keeps the other mode's figures only if they were measured on the same problem
    kept = saved.get("modes", {}) if saved.get("config") == config and len(modes) == 1 else {}
    results = kept | {
        mode: _measure_mode(mode, args.threads, cores if mode == "contention" else 0, args.shape)
        for mode in modes
    }

    meets = None  # the bars are the acceptance shape's
    if shape.bars:
        idle = results.get("idle")
        meets = idle is not None and idle["memory_ratio"] <= MAX_MEMORY_RATIO
        meets = meets and all(results.get(m, {}).get("speedup", 0.0) >= MIN_SPEEDUP[m] for m in MODES)
    report = {
        "config": config,
        "environment": {
            "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "processor": cpu,
        },
        "agreement_max_abs_diff": max_diff,
        "max_memory_ratio": MAX_MEMORY_RATIO if shape.bars else None,
        "modes": {mode: results[mode] for mode in MODES if mode in results},
        "meets_bars": meets,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n")
    if meets is not None:
        print(f"\nall bars met (both modes): {meets}")
    print(f"saved {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

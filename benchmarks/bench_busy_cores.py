"""One search on cores that another process holds: the proxy training rate across libgomp's spin counts.

Torch's CPU kernels run on OpenMP (libgomp). At the end of every parallel region a thread that is done
spins, by default for ``GOMP_SPINCOUNT`` = 300,000 iterations, before it sleeps; on a free machine that
saves the wake-up of the next region, but when another process holds a core, the thread it waits for is
often the one the OS preempted, and the spinning burns the very time that thread needs. This benchmark
measures how much of its free rate a ``nas search`` trial keeps when the cores are busy, for each spin
count given, in three settings:

- ``free``: one process on all T threads, the machine otherwise idle;
- ``beside a hog``: the same, beside one process that holds a core with a pure-Python loop (another
  user's job; the fair share of 2 threads against 1 on 2 cores is 2/3);
- ``beside a search``: two such processes at once (two searches, each on all T threads; fair share 1/2).

Every training is :func:`evaluators.proxy.train_proxy` on the same seeded ``coatnet`` cpu-profile
architectures (real Fashion-MNIST), run by :func:`bench_workers.run_processes`. Rates are per training
process; every ratio is over ``free`` at the first spin count given (libgomp's default unless told),
measured in the same run. The spin count only changes how threads wait, not what they compute, so a
network's weights are the same at every count.

Run from the repository root::

    .venv/bin/python benchmarks/bench_busy_cores.py [--spincounts default 1000 ...] [--rounds 3]
        [--one-thread] [--settings free ...] [--archs 2] [--out PATH]

It prints a table of each cell's median over the rounds and writes every measurement to
``benchmarks/results/bench_busy_cores/bench_busy_cores.json`` (or ``--out``). The README's figures:
``--spincounts default 1000 --rounds 3 --one-thread --archs 1``; ``--settings free --spincounts default 1000
3000 --rounds 5 --archs 1`` (``-free.json``); the default sweep, one round (``-spincounts.json``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_workers import run_processes, write_results

RESULTS = Path(__file__).resolve().parent / "results" / "bench_busy_cores" / "bench_busy_cores.json"
SETTINGS = (("free", 1, 0), ("beside a hog", 1, 1), ("beside a search", 2, 0))  # trainers, hogs


def _measure(
    spin: str, threads: int, seeds: list[int], round_: int, settings: list[str]
) -> list[dict[str, Any]]:
    """The ``settings`` at one spin count ('default': unset) and thread count."""
    if spin == "default":
        os.environ.pop("GOMP_SPINCOUNT", None)
    else:
        os.environ["GOMP_SPINCOUNT"] = spin
    rows = []
    for name, trainers, hogs in [s for s in SETTINGS if s[0] in settings]:
        run = run_processes(trainers, threads, seeds, hogs=hogs)
        rate_each = run["images_per_second"] / trainers
        cell = {"round": round_, "spincount": spin, "threads": threads, "setting": name}
        rows.append({**cell, **run, "rate_each": rate_each})
        print(f"  round {round_}, {threads} thread(s), spin {spin:>7}, {name:<15}: {rate_each:.0f} images/s")
    os.environ.pop("GOMP_SPINCOUNT", None)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--spincounts",
        nargs="+",
        default=["default", "100000", "30000", "10000", "1000", "0"],
        help="GOMP_SPINCOUNT values to measure; 'default' leaves it unset (libgomp's 300,000)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="times each cell is measured, alternating")
    parser.add_argument("--one-thread", action="store_true", help="also each setting on 1 thread per process")
    parser.add_argument(
        "--settings",
        nargs="+",
        choices=[name for name, _, _ in SETTINGS],
        default=[name for name, _, _ in SETTINGS],
        help="which settings to measure",
    )
    parser.add_argument("--archs", type=int, default=2, help="seeded coatnet architectures each trains")
    parser.add_argument("--seed", type=int, default=0, help="the first architecture's seed")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="threads T per process")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    bad = [s for s in args.spincounts if s != "default" and not s.isdigit()]
    if bad or min(args.archs, args.threads, args.rounds) < 1:
        parser.error(
            f"spin counts are 'default' or whole numbers (not {bad}); --archs, --threads, --rounds >= 1"
        )
    if "free" not in args.settings:
        parser.error("--settings needs 'free': every figure is a ratio over it")
    if "OMP_WAIT_POLICY" in os.environ:
        parser.error("unset OMP_WAIT_POLICY: it would decide the spin count for the 'default' rows")

    seeds = list(range(args.seed, args.seed + args.archs))
    print(f"T = {args.threads} threads per process, {args.archs} coatnet cpu-profile archs each", flush=True)
    columns = [(spin, args.threads) for spin in args.spincounts] + (
        [("default", 1)] if args.one_thread else []
    )
    rows = [
        row
        for round_ in range(args.rounds)
        for spin, threads in columns
        for row in _measure(spin, threads, seeds, round_, args.settings)
    ]

    def median_rate(spin: str, threads: int, setting: str) -> float:
        rates = [
            r["rate_each"]
            for r in rows
            if (r["spincount"], r["threads"], r["setting"]) == (spin, threads, setting)
        ]
        return statistics.median(rates)

    first = columns[0]
    free = median_rate(*first, "free")
    for row in rows:
        row["vs_free"] = row["rate_each"] / free
    print(f"\nimages/s per training process (median of {args.rounds}), over `free` at {first} ({free:.0f})")
    print("| threads, GOMP_SPINCOUNT | " + " | ".join(args.settings) + " |")
    print("| --- |" + " --- |" * len(args.settings))
    for spin, threads in columns:
        cells = [median_rate(spin, threads, name) for name in args.settings]
        print(f"| {threads}, {spin} | " + " | ".join(f"{c:.0f} ({c / free:.2f}x)" for c in cells) + " |")
    write_results(args.out, {k: v for k, v in vars(args).items() if k != "out"}, rows)


if __name__ == "__main__":
    main()

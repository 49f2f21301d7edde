"""Several search workers on one CPU: the training rate of N worker processes, with and without sharing
the cores' threads.

``nas search --workers N`` runs N worker processes on this machine. Each trains its trial's proxy network
with torch's intra-op threads. Every process, spawned or not, starts with all the threads the machine gives
it, so N workers would run N times the cores' threads; :class:`nas.search.worker_pool.WorkerPool` gives
each worker :func:`~nas.search.worker_pool.threads_per_worker` of them instead. This benchmark trains the
same seeded ``coatnet`` architectures under the ``cpu`` proxy profile (:func:`evaluators.proxy.train_proxy`,
what a trial runs; real Fashion-MNIST) in:

- ``1 x T``: one process on all T threads (one worker);
- ``N x T``: N processes at once, each on all T threads (every worker with the threads it starts with);
- ``N x T/N``: N processes at once, each on ``threads_per_worker(N, T)`` threads (what ``WorkerPool`` sets).

Every process trains all the architectures, one after the other, after a barrier (data loading and imports
are not timed). Per configuration: the training images of all processes over the wall seconds from the
barrier to the last process's end (aggregate images/s), and that rate over ``1 x T``'s. One run measures
all three, so the ratios compare under the same load.

Run from the repository root::

    .venv/bin/python benchmarks/bench_workers.py [--workers 2] [--archs 2] [--threads T]

``--threads`` (default: the cores torch sees) is the machine's thread count T the workers share. It prints
a table and writes ``benchmarks/results/bench_workers/bench_workers.json``. Run with
``OMP_WAIT_POLICY=PASSIVE`` (and another ``--out``) it shows the cause: OpenMP's threads spinning while a
join waits for a preempted one.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nas.search.worker_pool import threads_per_worker  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "bench_workers" / "bench_workers.json"


def _train(threads: int, seeds: list[int], barrier: Any, out: Any) -> None:
    """One worker process: train the seeded architectures on ``threads`` intra-op threads, after all
    processes are ready; put (start, end, images, per-arch images/s) on ``out``."""
    torch.set_num_threads(threads)
    from evaluators.data import load_dataset
    from evaluators.proxy import train_proxy
    from search_spaces import get_space

    space = get_space("coatnet")
    profile = space.profile("cpu")
    data = load_dataset("fashion-mnist", img_size=profile.img_size, seed=0)
    archs = [space.sample_random(seed) for seed in seeds]
    barrier.wait()
    start, images, rates = time.time(), 0, []
    for arch in archs:
        result = train_proxy(arch, profile, data, seed=0)
        images += round(result["images_per_second"] * result["train_seconds"])
        rates.append(result["images_per_second"])
    out.put((start, time.time(), images, rates))


def _hog(stop: Any) -> None:
    """Hold one core, as another user's job would: a pure-Python loop (no OpenMP) until ``stop`` is set."""
    count = 0
    while not stop.is_set():
        for _ in range(100_000):
            count += 1


def run_processes(processes: int, threads: int, seeds: list[int], hogs: int = 0) -> dict[str, Any]:
    """Train ``seeds``' architectures in ``processes`` spawned processes of ``threads`` threads each, beside
    ``hogs`` processes that each hold a core for the whole time; the aggregate training rate of the
    trainers. Spawned processes read the environment (``GOMP_SPINCOUNT``, ``OMP_WAIT_POLICY``) as it is
    now."""
    context = multiprocessing.get_context("spawn")
    barrier, out, stop = context.Barrier(processes), context.Queue(), context.Event()
    hog_procs = [context.Process(target=_hog, args=(stop,)) for _ in range(hogs)]
    procs = [context.Process(target=_train, args=(threads, seeds, barrier, out)) for _ in range(processes)]
    for p in hog_procs + procs:
        p.start()
    results = [out.get() for _ in procs]
    stop.set()
    for p in procs + hog_procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a benchmark process failed (exit code {p.exitcode})")
    wall = max(r[1] for r in results) - min(r[0] for r in results)
    images = sum(r[2] for r in results)
    return {
        "processes": processes,
        "threads_each": threads,
        "hogs": hogs,
        "wall_seconds": wall,
        "images": images,
        "images_per_second": images / wall,
        "arch_images_per_second": [r[3] for r in results],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="worker processes N")
    parser.add_argument("--archs", type=int, default=2, help="seeded coatnet architectures each trains")
    parser.add_argument("--seed", type=int, default=0, help="the first architecture's seed")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="the machine's T")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.workers < 2 or args.threads < 1 or args.archs < 1:
        parser.error("needs --workers >= 2, --threads >= 1 and --archs >= 1")

    seeds = list(range(args.seed, args.seed + args.archs))
    n, t = args.workers, args.threads
    shared = threads_per_worker(n, t)
    configs = [("one", 1, t), ("every worker all threads", n, t), ("threads shared", n, shared)]
    rows = []
    print(f"{n} workers, T = {t} threads, {args.archs} coatnet cpu-profile archs each", flush=True)
    for name, processes, threads in configs:
        row = {"config": name, **run_processes(processes, threads, seeds)}
        rows.append(row)
        print(
            f"  {processes} x {threads} thread(s) ({name}): {row['images_per_second']:.0f} images/s "
            f"({row['wall_seconds']:.1f} s)",
            flush=True,
        )
    base = rows[0]["images_per_second"]
    for row in rows:
        row["vs_one"] = row["images_per_second"] / base
    print("\n| workers x threads | aggregate images/s | vs one worker | wall s |")
    print("| --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['processes']} x {row['threads_each']} ({row['config']}) "
            f"| {row['images_per_second']:.0f} | {row['vs_one']:.2f}x | {row['wall_seconds']:.1f} |"
        )
    settings = {**{k: v for k, v in vars(args).items() if k != "out"}, "threads_shared": shared}
    write_results(args.out, settings, rows)


def write_results(path: Path, settings: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Save a run's settings, machine, OpenMP waiting, load and rows as JSON at ``path``, and say where."""
    out = {
        "settings": settings,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__},
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),  # libgomp spins while it waits unless PASSIVE
        "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),  # of this process; the rows may set their own
        "load_average_after": os.getloadavg(),
        "rows": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

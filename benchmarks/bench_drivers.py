"""Driver overhead per trial: what a search costs beyond its evaluations, on each backend.

The evaluator is replaced by a no-op (``TrialRunner.evaluate`` returns two numbers derived from the arch key,
in microseconds), so what is timed is the driver itself: sampling the architecture from the space, the
sampler's suggestion, storage writes (Optuna: SQLite on disk), the budget check, the progress view and, on
Ray, scheduling a trial on a worker, reporting and checkpointing the experiment.

Each backend runs two fresh studies of ``--small`` and ``--large`` trials in one process; the overhead per
trial is the difference of their wall times over the difference of their trial counts, so start-up
(imports, ``ray.init``, opening the study) cancels out. Targets (issue 15): Optuna + SQLite under 50 ms per
trial with the default sampler (TPE), under 30 ms with NSGA-II and random; Ray under 1 s per trial.

Run from the repository root::

    .venv/bin/python benchmarks/bench_drivers.py [--small 20 --large 220] [--ray-small 4 --ray-large 24]

Beside each Optuna row it times Optuna alone on the same storage (ask, the space's ``sample``, tell; no
driver), measured the same way in the same run: what the driver adds is the difference. It prints a table
and writes ``benchmarks/results/bench_drivers/bench_drivers.json``.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from nas.api import run_search  # noqa: E402
from nas.search import ray_driver  # noqa: E402
from nas.search.trial import TrialRunner  # noqa: E402
from nas.study.settings import SearchSettings  # noqa: E402

# ms per trial (issue 15): the default sampler fits a model to past trials each time; NSGA-II and random not
TARGET_MS = {("optuna", "default"): 50.0, ("optuna", "nsga2"): 30.0, ("optuna", "random"): 30.0}
RAY_TARGET_MS = 1000.0
REAL_RAY_TRIAL = ray_driver.ray_trial  # pickled by reference: the workers import the real one


def noop_run(self: TrialRunner, arch: Any, report: Any = None) -> dict[str, Any]:
    """A no-op evaluator: two objective values from the arch key's checksum, no model built."""
    h = zlib.crc32(arch.key.encode())
    return {"params": float(h % 100_003), "macs": float(h // 100_003), "macs_img_size": 224, "host": "bench"}


def noop_ray_trial(config: dict[str, Any], settings: dict[str, Any]) -> None:
    """The real Ray trial function with the no-op evaluator patched in on the worker."""
    from nas.search import trial

    trial.TrialRunner.evaluate = noop_run
    REAL_RAY_TRIAL(config, settings)


def timed_search(root: Path, backend: str, trials: int, sampler: str | None, tag: str) -> float:
    settings = SearchSettings(
        space="coatnet",
        evaluator="complexity",
        objectives=("macs", "params"),
        budget=f"{trials}trials",
        sampler=sampler,
        backend=backend,
        baselines=False,
        runs_dir=str(root),
        study=f"{backend}-{tag}-{trials}",
    )
    quiet = Console(file=io.StringIO(), width=120)
    start = time.perf_counter()
    outcome = run_search(settings, console=quiet)
    seconds = time.perf_counter() - start
    done = int((outcome.trials["state"] == "COMPLETE").sum())
    if done != trials:
        raise RuntimeError(f"{backend} ran {done} of {trials} trials")
    return seconds


def bare_optuna(root: Path, trials: int, sampler: str | None, tag: str) -> float:
    """Optuna alone on the same storage (SQLite, write-ahead log): ask, the space's sample, tell."""
    import optuna

    from nas.search.samplers import make_sampler
    from nas.study.storage import open_storage
    from search_spaces import get_space

    settings = SearchSettings(
        space="coatnet", evaluator="complexity", objectives=("macs", "params"), runs_dir=str(root),
        study=f"bare-{tag}-{trials}",
    )  # fmt: skip
    space = get_space("coatnet")
    start = time.perf_counter()
    storage = open_storage(settings)[0]
    study = optuna.create_study(
        storage=storage, directions=["minimize"] * 2, sampler=make_sampler(sampler or "tpe", 0)
    )
    for _ in range(trials):
        trial = study.ask()
        values = noop_run(None, space.sample(trial))
        study.tell(trial, [values["macs"], values["params"]])
    return time.perf_counter() - start


def per_trial(root: Path, backend: str, small: int, large: int, sampler: str | None) -> dict[str, Any]:
    tag = sampler or "default"
    timed_search(root, backend, small, sampler, f"{tag}-warm-up")  # first imports, Ray worker processes
    t_small = timed_search(root, backend, small, sampler, tag)
    t_large = timed_search(root, backend, large, sampler, tag)
    ms = 1000 * (t_large - t_small) / (large - small)
    bare = {}
    if backend == "optuna":  # what Optuna itself costs on this storage, measured the same way in this run
        b_small, b_large = bare_optuna(root, small, sampler, tag), bare_optuna(root, large, sampler, tag)
        bare = {"bare_optuna_ms_per_trial": 1000 * (b_large - b_small) / (large - small)}
    return {
        **bare,
        "backend": backend,
        "sampler": tag,
        "trials": [small, large],
        "seconds": [t_small, t_large],
        "ms_per_trial": ms,
        "target_ms": TARGET_MS.get((backend, tag), RAY_TARGET_MS),
        "meets_target": ms < TARGET_MS.get((backend, tag), RAY_TARGET_MS),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=20, help="Optuna: trials of the short study")
    parser.add_argument("--large", type=int, default=220, help="Optuna: trials of the long study")
    parser.add_argument("--ray-small", type=int, default=4)
    parser.add_argument("--ray-large", type=int, default=24)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_drivers"))
    args = parser.parse_args(argv)

    TrialRunner.evaluate = noop_run
    ray_driver.ray_trial = noop_ray_trial  # run_ray looks it up when it builds the trainable
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for sampler in (None, "nsga2", "random"):  # None: the default, tpe
            rows.append(per_trial(root, "optuna", args.small, args.large, sampler))
            print(f"optuna/{rows[-1]['sampler']}: {rows[-1]['ms_per_trial']:.1f} ms per trial", flush=True)
        if not args.no_ray:
            import ray

            start = time.perf_counter()
            ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
            ray_start = time.perf_counter() - start
            try:
                rows.append(per_trial(root, "ray", args.ray_small, args.ray_large, None))
            finally:
                ray.shutdown()
            rows[-1]["ray_init_seconds"] = ray_start
            print(f"ray/{rows[-1]['sampler']}: {rows[-1]['ms_per_trial']:.1f} ms per trial", flush=True)

    result = {
        "what": "driver overhead per trial, no-op evaluator (coatnet space, 2 objectives, no baselines)",
        "method": "(wall of the long study - wall of the short one) / (difference in trials), one process",
        "rows": rows,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_drivers.json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"\n{'backend':<8} {'sampler':<8} {'ms/trial':>9} {'target':>8}  ok   Optuna alone, ms/trial")
    for row in rows:
        ok = "yes" if row["meets_target"] else "NO "
        name = f"{row['backend']:<8} {row['sampler']:<8}"
        bare = row.get("bare_optuna_ms_per_trial")
        alone = f"{bare:.1f}" if bare is not None else ""
        print(f"{name} {row['ms_per_trial']:>9.1f} {row['target_ms']:>8.0f}  {ok}  {alone}")
    print(f"wrote {out / 'bench_drivers.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What a rejected sample costs: issue 16's acceptance search, from an empty part-cost store and again.

Runs ``nas search --space coatnet --evaluator complexity --max-macs 4.2G --budget 40trials`` (the issue's
command) as a user does, one process per search, in a fresh ``--runs-dir``:

1. ``cold``: nothing counted yet on this machine (an empty ``<runs>/counts``);
2. ``warm``: the same search again under another study name: every part it counts was stored by ``cold``;
3. ``seed1``: another seed (other samples) after both: the store holds what the first two counted.

Each search's trials table says what each sample cost (``cost_seconds``: from before its sampling to the end
of its check, :mod:`nas.search.trial`). Reported per search: the rejected samples' count, median and worst
seconds (the target: every one under 1 s), the complete trials' median, the feasible fraction of the sampled
trials in the first and second half of the search (:func:`results.analysis.feasible_fractions`), the wall
time of the whole command and the parts in the store after it. The searches run the code on ``PYTHONPATH``
(default: this repository), so the same script measures another checkout (``PYTHONPATH=/path/to/main``) for
a before/after comparison; ``load`` is ``os.getloadavg()`` before and after.

Run from the repository root, under the bench lock when the figures are reported (about 3 minutes)::

    flock /work/bench.lock nice -n -10 .venv/bin/python benchmarks/bench_rejection_cost.py [--out DIR]

It prints a table and writes ``bench_rejection_cost.json`` under ``--out``
(``benchmarks/results/bench_rejection_cost``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
COMMAND = ["--space", "coatnet", "--evaluator", "complexity", "--max-macs", "4.2G", "--budget", "40trials"]
SEARCHES = (("cold", 0), ("warm", 0), ("seed1", 1))


def _search(runs_dir: Path, study: str, seed: int, env: dict[str, str]) -> dict[str, object]:
    args = [sys.executable, "-m", "nas", "search", *COMMAND, "--seed", str(seed)]
    args += ["--study", study, "--runs-dir", str(runs_dir)]
    start = time.perf_counter()
    # run from the runs folder: `python -m` puts the working directory before PYTHONPATH on sys.path
    subprocess.run(args, check=True, env=env, cwd=runs_dir, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    from results.analysis import feasible_fractions  # the code under test's own rule

    frame = pd.read_csv(runs_dir / study / "trials.csv")
    rejected = frame.loc[frame["state"] == "INFEASIBLE", "cost_seconds"].tolist()
    complete = frame.loc[frame["state"] == "COMPLETE", "cost_seconds"].tolist()
    stores = list((runs_dir / "counts").glob("*.json"))
    parts = sum(len(c) for c in json.loads(stores[0].read_text())["costs"].values()) if stores else 0
    return {
        "study": study,
        "seed": seed,
        "rejected": len(rejected),
        "rejected_median_s": statistics.median(rejected) if rejected else None,
        "rejected_worst_s": max(rejected) if rejected else None,
        "rejected_over_1s": sum(s >= 1.0 for s in rejected),
        "rejected_seconds": rejected,
        "complete": len(complete),
        "complete_median_s": statistics.median(complete) if complete else None,
        "feasible_fraction_halves": feasible_fractions(frame, parts=2),
        "wall_s": wall,
        "stored_parts": parts,
    }


def _commit(path: Path) -> str:
    """The checked-out commit of the code under test (and '+changes' if it has uncommitted ones)."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True).stdout.strip()

    changed = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + ("+changes" if changed else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "bench_rejection_cost")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH") or str(REPO)}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-rejection-") as runs:
        results = [_search(Path(runs), study, seed, env) for study, seed in SEARCHES]
    load_after = os.getloadavg()
    head = ("search", "rejected", "median s", "worst s", ">=1s", "feasible 1st/2nd half")
    print(f"{head[0]:8} {head[1]:>8} {head[2]:>9} {head[3]:>8} {head[4]:>5} {head[5]:>22}")
    for r in results:
        halves = "/".join(f"{f:.2f}" for f in r["feasible_fraction_halves"])
        print(
            f"{r['study']:8} {r['rejected']:>8} {r['rejected_median_s'] or 0:>9.3f} "
            f"{r['rejected_worst_s'] or 0:>8.3f} {r['rejected_over_1s']:>5} {halves:>22}"
        )
    document = {
        "command": "nas search " + " ".join(COMMAND),
        "code": env["PYTHONPATH"],
        "commit": _commit(Path(env["PYTHONPATH"].split(os.pathsep)[0])),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_before": load_before,
        "load_after": load_after,
        "searches": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_rejection_cost.json").write_text(json.dumps(document, indent=1) + "\n")


if __name__ == "__main__":
    main()

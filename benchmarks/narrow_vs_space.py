"""Searching inside CoAtNet's layout vs searching the whole ``coatnet`` space, at equal device time.

CoAtNet's paper fixed the layout C-C-T-T (MBConv in S1-S2, relative attention in S3-S4) by a small study and
then scaled depths and widths by hand. Is a search better spent inside that layout (``--narrow``: the ops
fixed, depths, widths and the conv stem's width free) or over the whole space (every op per stage, patch
stems)? Each arm runs ``nas search`` (proxy evaluator, ``cpu`` profile, Fashion-MNIST, TPE, objectives top-1
and MACs at 224 px, no baselines: the searches alone are compared) under the same ``--budget`` of device time
(5min) once per seed of ``--seeds`` (0,1,2):

- ``whole``: the coatnet space;
- ``layout``: ``--narrow stem=conv --narrow s1.op=mbconv --narrow s2.op=mbconv --narrow s3.op=rel
  --narrow s4.op=rel``.

Then :func:`results.comparison.compare` (``nas compare --by space``) over the studies: every hypervolume on
one box (the worst of the studies' reference points to the best of their ideal points), final and at equal
device time (what the study that spent least spent), with each arm's mean and sample standard deviation over
its seeds.

The studies live under ``--runs-dir`` (``runs/narrow_vs_space/``); a rerun continues an unfinished study
(``--resume``) and leaves a finished one as it is, so an interrupted run loses at most the trial it was in.
Torch uses ``--threads`` (2) threads, stated in the JSON. Writes ``narrow_vs_space.json`` (settings, each
study's row, each arm's row, the box) under ``--out`` (``benchmarks/results/narrow_vs_space``) and prints
the arms' table in Markdown (the README's). Run from the repository root (about 35 minutes on 2 CPU cores)::

    .venv/bin/python benchmarks/narrow_vs_space.py [--budget 5min] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ARMS = {
    "whole": {},
    "layout": {"stem": "conv", "s1.op": "mbconv", "s2.op": "mbconv", "s3.op": "rel", "s4.op": "rel"},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", default="5min", help="each search's device-time budget (5min)")
    parser.add_argument("--seeds", default="0,1,2", help="seeds of the searches (0,1,2)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (2)")
    parser.add_argument("--runs-dir", default=str(ROOT / "runs" / "narrow_vs_space"))
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "narrow_vs_space"), help="folder of the JSON"
    )
    return parser.parse_args(argv)


def _search(arm: str, seed: int, args: argparse.Namespace) -> Path:
    """The study of ``arm`` at ``seed``: run, or continued (a study whose budget leaves no room for another
    trial runs none)."""
    from nas.api import run_search
    from nas.study.settings import SearchSettings

    study = f"{arm}-s{seed}"
    run_dir = Path(args.runs_dir) / study
    settings = SearchSettings(
        space="coatnet",
        evaluator="proxy",
        profile="cpu",
        budget=args.budget,
        sampler="tpe",
        seed=seed,
        baselines=False,
        narrow=ARMS[arm],
        study=study,
        runs_dir=args.runs_dir,
        resume=run_dir.exists(),
    )
    outcome = run_search(settings)
    print(f"{study}: {len(outcome.trials)} trials, {outcome.idle or 'budget spent'}", flush=True)
    return run_dir


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch

    from results.comparison import compare

    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    dirs = [_search(arm, seed, args) for seed in seeds for arm in ARMS]  # arms alternate: a shared machine's
    comparison = compare(dirs, by="space")  # load falls on both alike
    studies, arms = comparison.table(), comparison.group_table()
    result = {
        "settings": {**vars(args), "arms": ARMS, "threads": torch.get_num_threads()},
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "torch": torch.__version__},
        "box": {"reference": comparison.reference, "ideal": comparison.ideal},
        "equal_spend_seconds": comparison.equal_spend,
        "studies": json.loads(studies.to_json(orient="records")),
        "arms": json.loads(arms.to_json(orient="records")),
    }
    out = Path(args.out) / "narrow_vs_space.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    at_equal = next(c for c in arms.columns if c.startswith("hypervolume at") and c.endswith(" mean"))
    print(f"\n| arm | seeds | hypervolume | {at_equal.removesuffix(' mean')} | device time |")
    print("|---|---|---|---|---|")
    for row in arms.to_dict(orient="records"):
        cells = [_spread(row["hypervolume mean"], row["hypervolume std"])]
        cells.append(_spread(row[at_equal], row[at_equal.replace(" mean", " std")]))
        print(f"| {row['space']} | {row['studies']} | {' | '.join(cells)} | {row['device time mean']} |")
    print(f"\nwritten: {out}")


def _spread(mean: float, std: float) -> str:
    return f"{mean:.4f}" + ("" if std is None or math.isnan(std) else f" +- {std:.4f}")


if __name__ == "__main__":
    main()

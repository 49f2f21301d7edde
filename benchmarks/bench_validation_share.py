"""What validating after every epoch costs a proxy trial, and that it changes nothing a trial measures.

A search's proxy validates once, after a trial's last epoch (the ``proxy`` evaluator's ``search_defaults``);
``evaluator-config: {eval_every: 1}`` validates after every epoch. For ``--archs`` seeded architectures of
``--space`` under its cpu profile on Fashion-MNIST, this trains each twice with
:func:`evaluators.proxy.train_proxy`, exactly as a trial does, once under each config (the order alternating
from one architecture to the next, so a drift in the machine's load weighs on both), and reports per
architecture the wall seconds of each, their ratio, the seconds spent validating, and whether the two runs
end at the same top-1 and loss (they must: a validation changes no state).

Run from the repository root (torch on ``--threads`` threads, 2 by default)::

    .venv/bin/python benchmarks/bench_validation_share.py [--space sasa] [--archs 3]

It prints a table and writes ``benchmarks/results/bench_validation_share/bench_validation_share.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluators.data import load_dataset  # noqa: E402
from evaluators.proxy import train_proxy  # noqa: E402
from evaluators.registry import get_evaluator  # noqa: E402
from search_spaces import get_space  # noqa: E402

CONFIGS = ("once", "every epoch")


def run(space_name: str, archs: int, seed: int) -> dict:
    space = get_space(space_name)
    profile = space.profile("cpu")
    data = load_dataset("fashion-mnist", img_size=profile.img_size, seed=0)
    proxy = get_evaluator("proxy")  # the search's config validates once; eval_every 1 after every epoch
    configs = {"once": proxy.make_config({}), "every epoch": proxy.make_config({"eval_every": 1})}
    rows = []
    for i in range(archs):
        arch = space.sample_random(seed + i)
        order = CONFIGS if i % 2 == 0 else CONFIGS[::-1]
        row: dict = {"arch": arch.key}
        for name in order:
            start = time.perf_counter()
            out = train_proxy(arch, profile, data, seed=seed, config=configs[name])
            row[name] = {
                "seconds": time.perf_counter() - start,
                "train_seconds": out["train_seconds"],
                "eval_seconds": out["eval_seconds"],
                "top1": out["top1"],
                "loss": out["loss"],
            }
        row["ratio"] = row["once"]["seconds"] / row["every epoch"]["seconds"]
        row["same_result"] = all(row["once"][k] == row["every epoch"][k] for k in ("top1", "loss"))
        rows.append(row)
        print(
            f"{arch.key}: once {row['once']['seconds']:.1f} s, "
            f"every epoch {row['every epoch']['seconds']:.1f} s "
            f"(validating {row['every epoch']['eval_seconds']:.1f} s), ratio {row['ratio']:.3f}, "
            f"top-1 {row['once']['top1']:.2f} / {row['every epoch']['top1']:.2f}",
            flush=True,
        )
    ratios = [r["ratio"] for r in rows]
    return {
        "what": __doc__.split("\n\n")[0],
        "space": space_name,
        "profile": {"epochs": profile.epochs, "train_samples": profile.train_samples},
        "threads": torch.get_num_threads(),
        "python": platform.python_version(),
        "rows": rows,
        "median_ratio": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "all_same_result": all(r["same_result"] for r in rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", default="sasa")
    parser.add_argument("--archs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument(
        "--out",
        default=str(
            ROOT / "benchmarks" / "results" / "bench_validation_share" / "bench_validation_share.json"
        ),
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = run(args.space, args.archs, args.seed)
    print(
        f"median trial time validating once / every epoch: {result['median_ratio']:.3f} "
        f"({result['ratio_range'][0]:.3f}-{result['ratio_range'][1]:.3f}, {args.threads} threads); "
        f"same top-1 and loss on every architecture: {result['all_same_result']}"
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

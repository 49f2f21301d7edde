"""How well the fidelity ladder's lower rungs rank, measured on architectures the ladder did not select.

``bench_fidelity.py`` measures the rank agreement between two rungs online, over the trials that reached both.
Those are the trials the lower rung promoted: the first ``n // eta`` of a non-dominated order on (top-1,
MACs), a sample cut by the very ranking it is meant to judge (along a front top-1 rises with MACs, and the
spread of top-1 is what the cut leaves). Its Spearman near zero can mean a rung that ranks at chance or a
range too narrow to rank in. This tells the two apart: it takes ``--sample`` architectures at random from a
ladder search's rung-0 trials (what its sampler proposed: ``--trials``, a study's ``trials.csv``) and trains
every one through every rung of the ladder, each rung continuing the one below from its checkpoint as a
promotion does (``train_proxy`` with a ``Fidelity`` per rung, seed 0, the data split of seed 0, the rungs
below the top validated on the ladder's ``val_images``; with ``--bn-recalibration N`` each validation first
recomputes BatchNorm's statistics on N training batches, the same training measured otherwise). Reported:

- Spearman of top-1 between every pair of rungs over the whole sample, with a bootstrap 90% interval;
- the same over the sampled architectures the search itself promoted past rung 0 (its rung-1 trials), which
  is the sample ``bench_fidelity.py``'s online figure sees;
- what the promotion rule buys at the top: the rule (``nas.study.fidelity.rung_order``, synchronous
  successive halving over the sample: the first ``n // eta`` at each rung go on) against promoting as many
  at random (mean and std over 2000 draws) and against every architecture of the sample trained to the top
  (the oracle's front): the normalized hypervolume of each front at the top rung (top-1 there, MACs at 224
  px, as ``bench_fidelity.py`` judges), and how many of the oracle's front members each keeps.

Trainings are cached per architecture under ``--work`` (a killed run resumes); checkpoints are deleted once an
architecture reaches the top. About 5 s an architecture on 2 threads at ``coatnet``'s default ladder::

    .venv/bin/python benchmarks/rung_agreement.py \\
        --trials runs/bench_fidelity_paired_10_r0_v500_s56_today/runs/ladder-s5/trials.csv --sample 90 \\
        --out benchmarks/results/rung_agreement/ladder-s5.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_fidelity import DIRECTIONS, SPACE, json_safe, macs_at_224, normalized_hv  # noqa: E402
from evaluators.data import load_dataset  # noqa: E402
from evaluators.proxy import Fidelity, TrainConfig, train_proxy  # noqa: E402
from evaluators.ranking import spearman  # noqa: E402
from nas.core.arch import Arch  # noqa: E402
from nas.core.atomic import replaced  # noqa: E402
from nas.study.fidelity import DEFAULT_RUNG_VAL_IMAGES, Ladder, RungResult, rung_order  # noqa: E402
from nas.study.pareto import pareto_front  # noqa: E402
from search_spaces import get_space  # noqa: E402

DRAWS = 2000  # random promotions drawn per sample
BOOTSTRAP = 2000


def sample_architectures(trials: Path, size: int, seed: int) -> list[dict[str, Any]]:
    """``size`` rung-0 architectures of a ladder search's table, drawn without replacement (all, if fewer),
    each with whether the search promoted it past rung 0."""
    table = pd.read_csv(trials)
    if not {"rung", "lineage", "arch_json", "state"} <= set(table.columns):
        raise ValueError(f"{trials} is not the trials table of a fidelity-ladder search (no rung or lineage)")
    done = table[table["state"] == "COMPLETE"]
    promoted = set(done.loc[done["rung"] == 1, "lineage"])
    rung0 = done[done["rung"] == 0].drop_duplicates("arch_json")
    rows = [
        {"arch_json": r.arch_json, "promoted_in_search": int(r.lineage) in promoted}
        for r in rung0.itertuples()
    ]
    return random.Random(seed).sample(rows, min(size, len(rows)))


class RungTrainer:
    """Trains an architecture through every rung of ``ladder`` (each from the checkpoint below), once; the
    top-1 per rung cached in ``<work>/rungs.json`` keyed by the ladder and the architecture's key."""

    def __init__(self, ladder: Ladder, work: Path, config: TrainConfig | None = None) -> None:
        self.ladder, self.work, self.config = ladder, work, config or TrainConfig()
        self.path = work / "rungs.json"
        self.cache: dict[str, list[float]] = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.profile = get_space(SPACE).profile("cpu")
        images = [ladder.images(r) for r in range(ladder.rungs)]
        recalibrated = f" bn{self.config.bn_recalibration}" if self.config.bn_recalibration else ""
        self.prefix = f"{images} {ladder.schedule} {ladder.val_images}{recalibrated}|"
        self.data = None

    def top1s(self, arch_json: str) -> list[float]:
        arch = Arch.from_json(arch_json)
        key = self.prefix + arch.key
        if key not in self.cache:
            if self.data is None:
                self.data = load_dataset("fashion-mnist", img_size=self.profile.img_size, seed=0)
            start = time.perf_counter()
            ladder, scores = self.ladder, []
            with tempfile.TemporaryDirectory(dir=self.work) as tmp:
                stem = Path(tmp) / hashlib.sha1(arch.key.encode()).hexdigest()[:16]
                for rung in range(ladder.rungs):
                    fidelity = Fidelity(
                        ladder.images(rung),
                        ladder.images(ladder.top),
                        stem.with_suffix(f".r{rung}.pt") if rung < ladder.top else None,
                        stem.with_suffix(f".r{rung - 1}.pt") if rung else None,
                        ladder.restarts,
                        ladder.validation(rung),
                    )
                    result = train_proxy(
                        arch, self.profile, self.data, seed=0, config=self.config, fidelity=fidelity
                    )
                    scores.append(float(result["top1"]))
            self.cache[key] = scores
            with replaced(self.path) as tmp_path:
                tmp_path.write_text(json.dumps(self.cache, indent=1, sort_keys=True))
            shown = ", ".join(f"{s:.1f}" for s in scores)
            print(f"  {arch.key}: top-1 per rung {shown} ({time.perf_counter() - start:.1f} s)", flush=True)
        return self.cache[key]


def _interval(x: list[float], y: list[float], rng: random.Random) -> tuple[float, float]:
    """Bootstrap 90% interval of Spearman's rho of ``x`` and ``y``."""
    n = len(x)
    rhos = []
    for _ in range(BOOTSTRAP):
        pick = [rng.randrange(n) for _ in range(n)]
        rho = spearman([x[i] for i in pick], [y[i] for i in pick])
        if rho == rho:  # a resample with a constant side has no rho
            rhos.append(rho)
    if not rhos:  # every resample had a constant side
        return math.nan, math.nan
    rhos.sort()
    return rhos[int(0.05 * len(rhos))], rhos[int(0.95 * len(rhos)) - 1]


def _promote(rows: list[dict[str, Any]], ladder: Ladder) -> list[int]:
    """Synchronous successive halving by the ladder's order: the indices of ``rows`` that reach the top."""
    alive = list(range(len(rows)))
    for rung in range(ladder.top):
        results = [RungResult(i, rung, (rows[i]["top1"][rung], rows[i]["macs"])) for i in alive]
        alive = [r.lineage for r in rung_order(results, DIRECTIONS)[: len(alive) // ladder.eta]]
    return alive


def _front(rows: list[dict[str, Any]], chosen: list[int], top: int) -> tuple[float, set[int]]:
    """The normalized hypervolume of the top rung's front among ``chosen`` and that front's members."""
    point = {i: (rows[i]["top1"][top], rows[i]["macs"]) for i in chosen}
    members = {chosen[k] for k in pareto_front(list(point.values()), DIRECTIONS)} if point else set()
    return normalized_hv([point[i] for i in members]), members


def summarize(rows: list[dict[str, Any]], ladder: Ladder, seed: int) -> dict[str, Any]:
    """Every figure of the module docstring over ``rows`` (each: top-1 per rung, MACs, promoted_in_search)."""
    rng = random.Random(seed)
    pairs = [(a, b) for a in range(ladder.rungs) for b in range(a + 1, ladder.rungs)]
    chosen = [r for r in rows if r["promoted_in_search"]]
    agreement = []
    for a, b in pairs:
        x, y = [r["top1"][a] for r in rows], [r["top1"][b] for r in rows]
        agreement.append(
            {
                "from": a,
                "to": b,
                "n": len(rows),
                "spearman": spearman(x, y),
                "interval90": _interval(x, y, rng),
                "n_promoted_in_search": len(chosen),
                "spearman_promoted_in_search": spearman(
                    [r["top1"][a] for r in chosen], [r["top1"][b] for r in chosen]
                ),
            }
        )
    top = ladder.top
    oracle_hv, oracle = _front(rows, list(range(len(rows))), top)
    rule = _promote(rows, ladder)
    rule_hv, rule_front = _front(rows, rule, top)
    draws = [_front(rows, rng.sample(range(len(rows)), len(rule)), top) for _ in range(DRAWS)]
    random_hv = [hv for hv, _ in draws]
    mean = sum(random_hv) / len(random_hv)
    return {
        "architectures": len(rows),
        "agreement": agreement,
        "spearman_top_vs_macs": spearman([r["top1"][top] for r in rows], [r["macs"] for r in rows]),
        "promotion": {
            "reach_top": len(rule),
            "rule_hv": rule_hv,
            "random_hv_mean": mean,
            "random_hv_std": (sum((h - mean) ** 2 for h in random_hv) / len(random_hv)) ** 0.5,
            "random_hv_at_or_above_rule": sum(h >= rule_hv for h in random_hv) / len(random_hv),
            "oracle_hv": oracle_hv,
            "oracle_front": len(oracle),
            "rule_keeps_of_oracle_front": len(oracle & set(rule)),
            "random_keeps_of_oracle_front": sum(len(oracle & m) for _, m in draws) / len(draws),
            "rule_front": len(rule_front),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=Path, required=True, help="a ladder search's trials.csv")
    parser.add_argument("--sample", type=int, default=90, help="architectures drawn from its rung 0")
    parser.add_argument("--seed", type=int, default=0, help="which architectures are drawn; the bootstrap")
    parser.add_argument("--eta", type=int, default=3)
    parser.add_argument("--rungs", type=int, default=3)
    parser.add_argument("--min-fidelity", type=int, default=661)
    parser.add_argument("--rung-schedule", default="top")
    parser.add_argument("--rung-val-images", type=int, default=DEFAULT_RUNG_VAL_IMAGES)
    parser.add_argument(
        "--bn-recalibration",
        type=int,
        default=0,
        metavar="N",
        help="recompute BatchNorm's statistics over N training batches before each rung's validation "
        "(TrainConfig.bn_recalibration; default 0: the running averages)",
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "rung_agreement")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "rung_agreement" / "rung_agreement.json"
    )
    args = parser.parse_args(argv)
    try:
        ladder = Ladder(args.eta, args.rungs, args.min_fidelity, args.rung_schedule, args.rung_val_images)
        config = TrainConfig(bn_recalibration=args.bn_recalibration)
        drawn = sample_architectures(args.trials, args.sample, args.seed)
        if len(drawn) < 3:
            raise ValueError(f"{len(drawn)} architectures drawn from {args.trials}: a rank needs at least 3")
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    images = [ladder.images(r) for r in range(ladder.rungs)]
    print(
        f"rung_agreement: {len(drawn)} rung-0 architectures of {args.trials}, rungs {images} images "
        f"({args.rung_schedule} schedule, {args.rung_val_images} validation images below the top, "
        f"BatchNorm recalibrated on {args.bn_recalibration} batches), "
        f"torch threads {args.threads}",
        flush=True,
    )
    trainer = RungTrainer(ladder, args.work, config)
    rows = [
        {
            "arch": Arch.from_json(d["arch_json"]).key,
            "top1": trainer.top1s(d["arch_json"]),
            "macs": macs_at_224(d["arch_json"]),
            "promoted_in_search": d["promoted_in_search"],
        }
        for d in drawn
    ]
    summary = summarize(rows, ladder, args.seed)
    for a in summary["agreement"]:
        low, high = a["interval90"]
        print(
            f"rung {a['from']} -> {a['to']}: Spearman {a['spearman']:+.2f} (90% {low:+.2f}..{high:+.2f}, "
            f"n={a['n']}); over the {a['n_promoted_in_search']} the search promoted past rung 0 "
            f"{a['spearman_promoted_in_search']:+.2f}"
        )
    p = summary["promotion"]
    print(
        f"top rung: Spearman of top-1 with MACs {summary['spearman_top_vs_macs']:+.2f}; promoting "
        f"{p['reach_top']} of {len(rows)} to the top by the rule gives HV {p['rule_hv']:.3f} "
        f"({p['rule_keeps_of_oracle_front']} of the oracle's {p['oracle_front']} front members), at random "
        f"{p['random_hv_mean']:.3f} +- {p['random_hv_std']:.3f} ({p['random_keeps_of_oracle_front']:.1f}; "
        f"{p['random_hv_at_or_above_rule']:.0%} of draws at or above the rule), all {p['oracle_hv']:.3f}"
    )
    document = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "rung_images": images,
        "machine": {"torch": torch.__version__, "threads": args.threads},
        "summary": summary,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with replaced(args.out) as tmp:
        tmp.write_text(json.dumps(json_safe(document), indent=1, allow_nan=False))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

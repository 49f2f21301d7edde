"""Single fidelity against the fidelity ladder: which finds the better front for the same device time?

What: ``nas search`` of the ``coatnet`` space (cpu proxy profile, real training on Fashion-MNIST, TPE, no
baselines, one worker, torch pinned to ``--threads``) under the same device-time budget ``--budget`` (default
``5min`` of CPU time), for ``--seeds`` (0 1 2) each:

- ``single``: every trial trains once, to one fidelity (``--single``): ``proxy``, the profile's proxy
  training (1984 images: one pass over its 2000-image pool at batch 64), or ``top``, the ladder's top rung
  (the profile with as many passes over that pool as the top rung trains: the top rung must be whole passes);
- ``ladder``: ``--fidelity ladder`` with ``--eta`` (3), ``--rungs`` (3), ``--min-fidelity`` (500 images)
  and ``--rung-schedule`` (``top``: one learning-rate schedule spanning the ladder, or ``rung``: restarted at
  every rung, so each rung is measured annealed): rungs of 500, 1500 and 4500 images at the defaults, each
  promotion continuing its checkpoint; ``--rung-val-images N`` validates the rungs below the top on N of the
  profile's 2000 validation images.

Scoring is the same for both: every architecture that is on a run's front at the end of any of its trials
(``--checkpoints 0``, the default; N: at N evenly spaced moments of its device time) is trained once more from
scratch by the judge (the ladder's top rung: ``train_proxy`` on 4500 images at the defaults, with one schedule
spanning them, seed 0, the data split of seed 0), and the run's hypervolume at that moment is the hypervolume
of its front members' judged points (top-1 at the top rung, MACs at 224 px). A single-fidelity front is picked
by the proxy's top-1, a ladder's by its top rung's: the judge then says how good the picks are. Hypervolume is
taken in (top-1 %, log10 MACs) from the reference (10 %, 1e11 MACs) and divided by the box up to (100 %, 1e8
MACs).

Reported: per method and seed the judged hypervolume over device time and at the end; the device time the
ladder needs to reach the single-fidelity run's final hypervolume of the same seed, as a fraction of the
budget and of the time single fidelity itself took to get there (target: the ladder needs <= 1/2 of single
fidelity's time; moonshot 1/3); the rank agreement between the ladder's rungs (Spearman of top-1 over the
architectures that completed both, the ones the lower rung promoted: it reads low, and
``benchmarks/rung_agreement.py`` measures it on architectures the rung did not select), the first suspect
when it misses; and per method (per rung of the ladder)
the median device seconds a trial is charged, trains and validates, and its training throughput, the second
suspect: a short rung pays validation and a slow start as a long one does. Per seed, the ladder's device
seconds per rung and two bounds on what tuning its rungs could buy (the same fronts on two other clocks:
rung 0 free, and only the lineages that reached the top paid for, as an oracle's promotions would be). A
time never reached is ``null`` in the JSON (``inf`` in the printout).

Run from the repository root on a quiet machine (about 30 minutes of searches plus 15 of judging at the
defaults on 2 CPU cores; runs, judged scores and results are cached under ``--work``
(``runs/bench_fidelity``), so a killed run resumes where it stopped)::

    .venv/bin/python benchmarks/bench_fidelity.py [--budget 5min] [--seeds 0 1 2] [--threads 2]
    .venv/bin/python benchmarks/bench_fidelity.py --budget 5min --min-fidelity 661 --rung-schedule rung \
        --single top --work runs/bench_fidelity_top5   # rungs 661, 1983, 5949 (1/3, 1, 3 passes)
    .venv/bin/python benchmarks/bench_fidelity.py --budget 5min --min-fidelity 661 --rung-schedule rung \
        --single proxy --work runs/bench_fidelity_proxy5   # the same ladder against the 1984-image proxy

``--bn-recalibration N`` gives both searches' proxies ``evaluator-config: {bn_recalibration: N}`` (each
validation, at every rung, first recomputes BatchNorm's statistics on N training batches); the judge, the
yardstick of every row, stays as it is.

``--paired`` runs each seed's two searches at the same time, in two processes of ``--threads // 2`` threads
each, so that on a machine shared with other jobs both meet the same load (run one after the other, one
method's search can meet a busier hour than the other's: training throughput varied 674-1462 images/s from
run to run here); the JSON's ``machine.search_threads`` says which way a result was measured::

    .venv/bin/python benchmarks/bench_fidelity.py --paired --budget 10min --seeds 0 1 2 3 4 \
        --min-fidelity 661 --work runs/bench_fidelity_paired \
        --out benchmarks/results/bench_fidelity/bench_fidelity_paired

It prints a table and writes ``bench_fidelity.json`` and ``bench_fidelity.png`` (judged hypervolume against
device time, both methods, every seed) under ``--out`` (``benchmarks/results/bench_fidelity``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.pool_fidelity import TARGET, pool  # noqa: E402
from evaluators.data import load_dataset  # noqa: E402
from evaluators.proxy import Fidelity, train_proxy  # noqa: E402
from evaluators.ranking import spearman  # noqa: E402
from nas.api import run_search  # noqa: E402
from nas.core.arch import Arch  # noqa: E402
from nas.core.atomic import replaced  # noqa: E402
from nas.study.fidelity import PROMOTIONS, Ladder  # noqa: E402
from nas.study.pareto import hypervolume, pareto_front  # noqa: E402
from nas.study.settings import SearchSettings  # noqa: E402
from search_spaces import get_space  # noqa: E402

SPACE = "coatnet"
DIRECTIONS = ("maximize", "minimize")
METHODS = ("single", "ladder")
REFERENCE, IDEAL = (10.0, 11.0), (100.0, 8.0)  # (top-1 %, log10 MACs)


def _search(method: str, seed: int, args: argparse.Namespace) -> pd.DataFrame:
    """The trials table of one search (run now, or read back from a finished earlier run)."""
    study = f"{method}-s{seed}"
    run_dir = args.work / "runs" / study
    done = _done(method, seed, args)
    if done.exists():
        return pd.read_csv(run_dir / "trials.csv")
    ladder = {
        "fidelity": "ladder",
        "eta": args.eta,
        "rungs": args.rungs,
        "min_fidelity": args.min_fidelity,
        "rung_schedule": args.rung_schedule,
        "rung_val_images": args.rung_val_images,
        "promotion": args.promotion,
    }
    single = {"profile": _single_profile(args)}
    recalibrated = {"bn_recalibration": args.bn_recalibration} if args.bn_recalibration is not None else {}
    settings = SearchSettings(
        space=SPACE,
        evaluator="proxy",
        evaluator_config=recalibrated,
        budget=args.budget,
        baselines=False,
        seed=seed,
        runs_dir=str(args.work / "runs"),
        study=study,
        resume=(run_dir / "study.db").exists(),
        **(ladder if method == "ladder" else single),
    )
    outcome = run_search(settings)
    done.write_text(json.dumps({"seconds": float(outcome.trials["charge"].sum())}))
    return outcome.trials


def _done(method: str, seed: int, args: argparse.Namespace) -> Path:
    """The file a finished search leaves in its run directory (its table is then read, not run again)."""
    return args.work / "runs" / f"{method}-s{seed}" / "done.json"


def _search_threads(args: argparse.Namespace) -> int:
    """Torch threads each search runs with: half of ``--threads`` each when ``--paired``."""
    return max(1, args.threads // 2) if args.paired else args.threads


def _top_images(args: argparse.Namespace) -> int:
    """Images the ladder's top rung trains on (what the judge and ``--single top`` train)."""
    ladder = Ladder(args.eta, args.rungs, args.min_fidelity, args.rung_schedule)
    return ladder.images(ladder.top)


def _top_updates(args: argparse.Namespace) -> int:
    """Updates of the cpu profile's batch the top rung's images take (the last one may be partly filled)."""
    return math.ceil(_top_images(args) / get_space(SPACE).profile("cpu").batch_size)


def _single_profile(args: argparse.Namespace) -> str:
    """The proxy profile single fidelity trains with: the space's ``cpu`` profile (``--single proxy``), or
    (``top``) that profile with as many passes over its pool as the ladder's top rung trains, registered on
    the space under ``cpu-top`` for this process (the search runs its one worker here)."""
    if args.single == "proxy":
        return "cpu"
    space = get_space(SPACE)
    cpu = space.profile("cpu")
    per_pass = (cpu.train_samples or 0) // cpu.batch_size
    top = _top_updates(args)
    if per_pass == 0 or top % per_pass:
        raise SystemExit(
            f"--single top: the top rung's {top} updates are not whole passes of {per_pass} updates over the "
            f"cpu profile's pool; pick --min-fidelity so that they are (e.g. 661 at eta 3, 3 rungs)"
        )
    passes = top // per_pass
    described = f"the cpu profile for {passes} passes over its pool: the ladder's top rung"
    space.profiles["cpu-top"] = dataclasses.replace(cpu, name="cpu-top", epochs=passes, description=described)
    return "cpu-top"


def _eligible(table: pd.DataFrame, method: str, top: int) -> pd.DataFrame:
    done = table[table["state"] == "COMPLETE"]
    return done[done["rung"] == top] if method == "ladder" else done


def _fronts(table: pd.DataFrame, method: str, args: argparse.Namespace) -> list[tuple[float, list[str]]]:
    """(device seconds spent, the front's arch keys) at each checkpoint of the run's device time and at its
    end; the front as the run saw it (its own top-1: the proxy's, or the top rung's)."""
    table = table.sort_values("number")
    spent = table["charge"].fillna(0.0).cumsum()
    total = float(spent.iloc[-1]) if len(spent) else 0.0
    if args.checkpoints:
        moments = [total * (i + 1) / args.checkpoints for i in range(args.checkpoints)]
    else:  # at every trial's end: the front as it changed
        moments = sorted({float(t) for t in spent})
    out = []
    for moment in moments:
        known = table[spent <= moment + 1e-9]
        eligible = _eligible(known, method, args.rungs - 1)
        points = [(float(r.top1), float(r.macs)) for r in eligible.itertuples()]
        keys = [eligible["arch_json"].iloc[i] for i in pareto_front(points, DIRECTIONS)] if points else []
        out.append((moment, sorted(set(keys))))
    return out


class Judge:
    """Trains an architecture at the ladder's top rung, once; scores cached in ``<work>/judged.json``, keyed
    by the judge's updates and the architecture's key (``"93 updates|<key>"``), so a work folder reused with
    another top rung judges again what it has not judged at this one."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.path = args.work / "judged.json"
        self.scores: dict[str, float] = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.images = _top_images(args)
        self.profile = get_space(SPACE).profile("cpu")
        self.prefix = f"{_top_updates(args)} updates|"
        self.data = None
        self.seconds = 0.0

    def top1(self, arch_json: str) -> float:
        arch = Arch.from_json(arch_json)
        key = self.prefix + arch.key
        if key not in self.scores:
            if self.data is None:
                self.data = load_dataset("fashion-mnist", img_size=self.profile.img_size, seed=0)
            start = time.perf_counter()
            fidelity = Fidelity(self.images, self.images, None)  # one span to the top: nothing to keep
            result = train_proxy(arch, self.profile, self.data, seed=0, fidelity=fidelity)
            self.seconds += time.perf_counter() - start
            self.scores[key] = float(result["top1"])
            with replaced(self.path) as tmp_path:
                tmp_path.write_text(json.dumps(self.scores, indent=1, sort_keys=True))
            print(f"    judged {arch.key}: top-1 {result['top1']:.2f}", flush=True)
        return self.scores[key]


def normalized_hv(points: list[tuple[float, float]]) -> float:
    """The hypervolume of (top-1 %, MACs) points as this benchmark scores a front: in (top-1, log10 MACs)
    from ``REFERENCE``, over the box up to ``IDEAL``; 0 for no points."""
    logged = [(top1, math.log10(macs)) for top1, macs in points]
    box = (IDEAL[0] - REFERENCE[0]) * (REFERENCE[1] - IDEAL[1])
    return hypervolume(logged, DIRECTIONS, REFERENCE) / box if logged else 0.0


def macs_at_224(arch_json: str) -> float:
    """An architecture's MACs at 224 px (fvcore's count), the cost axis of every front here."""
    from evaluators.complexity import count

    return float(count(Arch.from_json(arch_json), img_size=224).macs)


def _curve(fronts: list[tuple[float, list[str]]], judge: Judge) -> list[tuple[float, float]]:
    return [(t, normalized_hv([(judge.top1(k), macs_at_224(k)) for k in keys])) for t, keys in fronts]


def _time_to_reach(curve: list[tuple[float, float]], level: float) -> float:
    """The first checkpoint's device seconds at which the curve reaches ``level`` (inf: never)."""
    return next((t for t, hv in curve if hv >= level - 1e-12), math.inf)


def _retimed(
    table: pd.DataFrame, curve: list[tuple[float, float]], counted: pd.Series
) -> list[tuple[float, float]]:
    """``curve`` (device seconds, hypervolume) with each moment's seconds counting only the ``counted`` rows'
    charges: the run's own fronts, on the clock of a run that had not paid for the others."""
    table = table.sort_values("number")
    charge = table["charge"].fillna(0.0)
    spent = charge.cumsum().to_numpy()
    kept = charge.where(counted.reindex(table.index, fill_value=False), 0.0).cumsum().to_numpy()
    out = []
    for moment, hv in curve:
        i = int(np.searchsorted(spent, moment + 1e-9, side="right")) - 1
        out.append((float(kept[i]) if i >= 0 else 0.0, hv))
    return out


def _ladder_bounds(
    table: pd.DataFrame, curve: list[tuple[float, float]], level: float, top: int
) -> dict[str, Any]:
    """Where the ladder's time goes and what cheaper or better-ranked low rungs could at most buy: its device
    seconds per rung, and the seconds it needs to reach ``level`` (single fidelity's final hypervolume) on
    two clocks that keep every decision the run made (what TPE proposed, what was promoted): one on which
    rung 0 is free, and one that counts only the lineages that reached the top rung ``top`` (an oracle that
    promoted without a wasted rung). Neither is a run that happened: they bound what tuning the rungs can do
    before the sampler or the top rung's own cost must change."""
    lineages = set(table.loc[(table["rung"] == top) & (table["state"] == "COMPLETE"), "lineage"])
    return {
        "charge_by_rung": {int(r): float(c) for r, c in table.groupby("rung")["charge"].sum().items()},
        "seconds_if_rung0_free": _time_to_reach(_retimed(table, curve, table["rung"] != 0), level),
        "seconds_if_top_lineages_only": _time_to_reach(
            _retimed(table, curve, table["lineage"].isin(lineages)), level
        ),
    }


def _costs(table: pd.DataFrame, method: str) -> list[dict[str, Any]]:
    """Median device seconds per trial (charged, training, validation) and training throughput, per rung of
    a ladder (one row for single fidelity): what a rung costs beside the images it trains on."""
    done = table[(table["state"] == "COMPLETE") & (table["charge"] > 0)]  # repeats are answered free
    groups = done.groupby("rung") if method == "ladder" else [(None, done)]
    return [
        {
            "rung": None if rung is None else int(rung),
            "trials": len(rows),
            "charge": float(rows["charge"].median()),
            "train_seconds": float(rows["train_seconds"].median()),
            "eval_seconds": float(rows["eval_seconds"].median()),
            "images_per_second": float(rows["images_per_second"].median()),
        }
        for rung, rows in groups
    ]


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float as None (a time never reached, a rank agreement over < 3), so the
    file is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _rank_agreement(table: pd.DataFrame, rungs: int) -> list[dict[str, Any]]:
    done = table[table["state"] == "COMPLETE"]
    out = []
    for r in range(rungs - 1):
        low = done[done["rung"] == r].set_index("lineage")["top1"]
        high = done[done["rung"] == r + 1].set_index("lineage")["top1"]
        both = low.index.intersection(high.index)
        rho = spearman(low[both].tolist(), high[both].tolist()) if len(both) >= 3 else math.nan
        out.append({"from": r, "to": r + 1, "n": len(both), "spearman": rho})
    return out


def _paired_searches(args: argparse.Namespace) -> None:
    """Each seed's single and ladder searches run at once, in two child processes of this script with half
    the threads each: on a machine shared with other jobs both then meet the same load, instead of one
    method's run meeting a busier hour than the other's. A finished search is not run again."""
    threads = str(_search_threads(args))
    for seed in args.seeds:
        child = [sys.executable, __file__, *sys.argv[1:], "--seeds", str(seed), "--threads", threads]
        children = [
            subprocess.Popen([*child, "--method", method])
            for method in METHODS
            if not _done(method, seed, args).exists()
        ]
        failed = [c.args for c in children if c.wait() != 0]
        if failed:
            raise SystemExit(f"bench_fidelity --paired: a search failed (seed {seed}); rerun to resume it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", default="5min")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eta", type=int, default=3)
    parser.add_argument("--rungs", type=int, default=3)
    parser.add_argument("--min-fidelity", type=int, default=500)
    parser.add_argument("--rung-schedule", choices=("top", "rung"), default="top")
    parser.add_argument(
        "--rung-val-images", type=int, default=None, help="validation images below the top rung (all)"
    )
    parser.add_argument("--promotion", choices=PROMOTIONS, default="asha", help="the ladder's promotion rule")
    parser.add_argument(
        "--single", choices=("proxy", "top"), default="proxy", help="single fidelity's training"
    )
    parser.add_argument(
        "--bn-recalibration",
        type=int,
        metavar="N",
        help="both methods' proxies recompute BatchNorm's statistics on N training batches before each "
        "validation (evaluator-config bn_recalibration; default: the proxy's default); the judge does not",
    )
    parser.add_argument("--checkpoints", type=int, default=0, help="0: at every trial's end")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--paired",
        action="store_true",
        help="run each seed's two searches at the same time, in two processes of --threads // 2 threads, so "
        "that both see the same load on a shared machine",
    )
    parser.add_argument("--method", choices=METHODS, help=argparse.SUPPRESS)  # a --paired child's one search
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "bench_fidelity")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_fidelity")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    args.work.mkdir(parents=True, exist_ok=True)
    print(
        f"bench_fidelity: {SPACE}, budget {args.budget} per search, seeds {args.seeds}, torch threads "
        f"{args.threads}; ladder eta {args.eta}, {args.rungs} rungs from {args.min_fidelity} images, "
        f"{args.rung_schedule} schedule, validation on {args.rung_val_images or 'all'} images below the top, "
        f"{args.promotion} promotions; single fidelity at the {args.single}"
        + ("" if args.bn_recalibration is None else f"; BatchNorm recalibrated on {args.bn_recalibration}"),
        flush=True,
    )

    if args.method is not None:  # a --paired child: its searches only; the parent judges
        for seed in args.seeds:
            _search(args.method, seed, args)
        return
    if args.paired:
        _paired_searches(args)
    tables = {(m, s): _search(m, s, args) for s in args.seeds for m in METHODS}
    judge = Judge(args)
    runs = []
    for (method, seed), table in tables.items():
        curve = _curve(_fronts(table, method, args), judge)
        runs.append(
            {
                "method": method,
                "seed": seed,
                "trials": int((table["state"] == "COMPLETE").sum()),
                "architectures": int(table["arch"].nunique()),
                "device_seconds": float(table["charge"].fillna(0).sum()),
                "curve": curve,
                "final_hv": curve[-1][1] if curve else 0.0,
                "rank_agreement": _rank_agreement(table, args.rungs) if method == "ladder" else [],
                "costs": _costs(table, method),
            }
        )
    by = {(r["method"], r["seed"]): r for r in runs}
    pairs = []
    for seed in args.seeds:
        single, ladder = by[("single", seed)], by[("ladder", seed)]
        level = single["final_hv"]
        t_single = _time_to_reach(single["curve"], level)
        t_ladder = _time_to_reach(ladder["curve"], level)
        bounds = _ladder_bounds(tables[("ladder", seed)], ladder["curve"], level, args.rungs - 1)
        pairs.append(
            {
                "seed": seed,
                "single_final_hv": level,
                "ladder_final_hv": ladder["final_hv"],
                "single_seconds_to_its_final": t_single,
                "ladder_seconds_to_single_final": t_ladder,
                "ratio_to_single_time": t_ladder / t_single if t_single > 0 else math.nan,
                "ratio_to_budget": t_ladder / single["device_seconds"],
                "ladder_bounds": bounds,
                **{
                    f"ratio_if_{name}": bounds[f"seconds_if_{name}"] / t_single if t_single > 0 else math.nan
                    for name in ("rung0_free", "top_lineages_only")
                },
            }
        )
    # the figures over this run's seeds, computed as pool_fidelity.py pools several runs' seeds
    pooled = pool({"this run": {"settings": vars(args), "pairs": pairs}})
    summary = {
        **{
            f"{method}_final_hv_{figure}": pooled[f"{method}_final_hv_{figure}"]
            for method in METHODS
            for figure in ("mean", "std")
        },
        "ratio_median": pooled["ratio_median"],
        "ratios": [p["ratio_to_single_time"] for p in pairs],
        "reached": f"{pooled['reached']} of {pooled['seeds']} seeds",
        "target": TARGET,
        "met": pooled["meet_target"] == pooled["seeds"],
        "judge_seconds_this_run": judge.seconds,
    }
    print(f"\n{'seed':>4} {'single HV':>10} {'ladder HV':>10} {'single t':>9} {'ladder t':>9} {'ratio':>6}")
    for p in pairs:
        print(f"{p['seed']:>4} {p['single_final_hv']:>10.4f} {p['ladder_final_hv']:>10.4f} "
              f"{p['single_seconds_to_its_final']:>8.0f}s {p['ladder_seconds_to_single_final']:>8.0f}s "
              f"{p['ratio_to_single_time']:>6.2f}")  # fmt: skip
    for p in pairs:
        spent = ", ".join(f"rung {r} {s:.0f} s" for r, s in p["ladder_bounds"]["charge_by_rung"].items())
        print(
            f"  ladder seed {p['seed']}: {spent}; ratio if rung 0 were free {p['ratio_if_rung0_free']:.2f}, "
            f"if only the lineages that reached the top were paid for {p['ratio_if_top_lineages_only']:.2f}"
        )
    for r in runs:
        if r["method"] == "ladder":
            agreement = ", ".join(
                f"{a['from']}->{a['to']}: {a['spearman']:+.2f} (n={a['n']})" for a in r["rank_agreement"]
            )
            print(
                f"  ladder seed {r['seed']}: {r['trials']} trials, {r['architectures']} architectures; "
                f"rank agreement {agreement}"
            )
        else:
            print(f"  single seed {r['seed']}: {r['trials']} trials")
        for c in r["costs"]:
            where = "per trial" if c["rung"] is None else f"rung {c['rung']}"
            print(
                f"    {where}: median {c['charge']:.2f} s charged ({c['train_seconds']:.2f} training, "
                f"{c['eval_seconds']:.2f} validating), {c['images_per_second']:.0f} images/s "
                f"({c['trials']} trials)"
            )
    print(
        f"final HV single {summary['single_final_hv_mean']:.4f} +- {summary['single_final_hv_std']:.4f}, "
        f"ladder {summary['ladder_final_hv_mean']:.4f} +- {summary['ladder_final_hv_std']:.4f}; the ladder's "
        f"time to single's final HV over single's own: median {summary['ratio_median']:.2f} "
        f"(target <= {TARGET}): {'MET' if summary['met'] else 'MISSED'}"
    )

    args.out.mkdir(parents=True, exist_ok=True)
    document = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": {
            "platform": platform.platform(),
            "torch": torch.__version__,
            "threads": args.threads,
            "search_threads": _search_threads(args),
        },
        "runs": runs,
        "pairs": pairs,
        "summary": summary,
    }
    with replaced(args.out / "bench_fidelity.json") as tmp:
        tmp.write_text(json.dumps(json_safe(document), indent=1, default=float, allow_nan=False))
    _plot(runs, args.out / "bench_fidelity.png")
    print(f"wrote {args.out / 'bench_fidelity.json'} and bench_fidelity.png")


def _plot(runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = {"single": "#1f77b4", "ladder": "#d62728"}
    for run in runs:
        xs = [t / 60 for t, _ in run["curve"]]
        ys = [hv for _, hv in run["curve"]]
        ax.plot(xs, ys, "o-", ms=3, color=colors[run["method"]], alpha=0.8,
                label=f"{run['method']} (seed {run['seed']})")  # fmt: skip
    ax.set_xlabel("device time (CPU minutes)")
    ax.set_ylabel("judged hypervolume (normalized)")
    ax.set_title("front judged at the top rung, single fidelity vs ladder")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    with replaced(path) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()

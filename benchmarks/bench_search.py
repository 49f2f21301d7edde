"""Search efficiency: does the default multi-objective sampler find a better front than random search?

Each sampler runs ``--trials`` (100) trials of an in-memory Optuna study per seed (``--seeds`` 5: seeds 0..4)
on the same two objectives as the default ``nas search``: top-1 (maximized) and MACs at 224 px (minimized)
over the ``coatnet`` space, architectures drawn by ``space.sample(trial)`` (the search's own define-by-run
function) through ``study.ask`` / ``study.tell``, nothing enqueued (no baselines), so every sampler starts
equal. The samplers are ``--samplers`` (default ``random,nsga2,tpe``): a name of ``nas search --sampler``
(``nsga2``, ``tpe``, ``random``, ``gp``) is built by the search's own ``nas.search.samplers.make_sampler``
with that seed, so it is exactly what a user gets (``tpe``, the default: multivariate, grouped, constant liar;
``nsga2``: ``NSGAIISampler`` with its default population of 50);
``nsga2-popP`` mirrors that ``nsga2`` line with ``population_size=P``. A sampler and random search with the
same seed draw the same first trials (NSGA-II's first generation and TPE's start-up trials are its
``RandomSampler(seed)``), so the curves share their start: common random numbers.

The objective is cheap but real, and the same table for every sampler and seed: top-1 is the one-shot
evaluator's (:class:`evaluators.oneshot.OneShotEvaluator`), a supernet of the space under the ``cpu`` proxy
profile (32 px, 1/4 width, 1/5 depth) trained once with seed 0 on Fashion-MNIST for ``--supernet-epochs``
(4) epochs of ``--supernet-samples`` (10000) images (OneShotConfig's defaults), then each architecture scored
after BatchNorm recalibration on ``--bn-batches`` (4, default 8) batches, on the first ``--val-samples``
(1000, the profile's 2000) held-out images; MACs are :func:`evaluators.complexity.count` of the architecture
itself at 224 px, 3 channels, 1000 classes, as ``nas search`` records them. Every value is cached in
``--cache-dir`` (``runs/bench_search/table.json``): top-1 by the key of the proxy network (what the supernet
scores: architectures the profile shrinks to the same network score the same), under an id of the
supernet's and scoring's settings; MACs by the architecture's key. A repeated architecture, another seed, a
re-run or a killed run's resume costs nothing; the supernet checkpoints every epoch and resumes.

Hypervolume (:func:`nas.study.pareto.hypervolume_history`, exact) is taken in (top-1 %, log10 MACs) with one
fixed reference point for every run: top-1 10% (chance on 10 classes) and the largest MACs any architecture
of the space has; it is divided by the box from that point to (100%, the smallest MACs of the space), so 1 is
an unreachable ideal. The space's MACs range is exact and computed once: a stage's MACs depend only on its own
choices, the previous stage's width and the stem, so for each stem the extremes are the sums over stages of
each stage's extreme over ops, with every width, depth and k at its largest (or smallest).

Reported per sampler: mean and std over seeds of the normalized hypervolume after N/4, N/2 and N trials; the
trials random search needs to reach the sampler's final hypervolume (on the mean curves, and per seed against
random search of the same seed, median); and the headline: the first trial at which the sampler's mean curve
reaches random search's final mean, and its ratio to N. Target (the search-efficiency issue): the default
sampler reaches it in at most half the trials (ratio <= 0.5).

Run from the repository root (from an empty cache about 45 minutes on 2 CPU cores: the supernet about 5,
the space's MACs range 1.5, then about 1100 new architectures at about 2 s each to score and count, the
samplers' own time is negligible; from a full cache a few seconds)::

    .venv/bin/python benchmarks/bench_search.py [--trials 100] [--seeds 5] [--samplers random,nsga2,tpe]

It prints a table and writes ``bench_search.json`` (settings, bounds, per-run curves, summary) and
``bench_search.png`` (mean hypervolume against trials per sampler with a +-1 std band; the fronts found) under
``--out`` (``benchmarks/results/bench_search``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Imported after the repository root is on the path.
from evaluators.complexity import count  # noqa: E402
from evaluators.data import load_dataset  # noqa: E402
from nas.core.arch import Arch  # noqa: E402
from nas.core.atomic import replaced  # noqa: E402
from nas.search.samplers import make_sampler as search_sampler  # noqa: E402
from nas.study.pareto import hypervolume_history, pareto_front  # noqa: E402
from nas.study.settings import SAMPLERS, SearchSettings  # noqa: E402
from search_spaces import get_space  # noqa: E402
from search_spaces.base import SearchSpace  # noqa: E402

SPACE, PROFILE, DATASET = "coatnet", "cpu", "fashion-mnist"
OBJECTIVES = ("top1:max", "macs:min")  # the default of nas search
DIRECTIONS = ("maximize", "minimize")
MACS_IMG_SIZE = 224  # as TrialRunner counts them: the space's target resolution, 3 channels, 1000 classes
TOP1_REF = 10.0  # the reference point's top-1: chance on 10 classes
TARGET_RATIO = 0.5
DEFAULT_SAMPLERS = "random,nsga2,tpe"
LINE_STYLES = ("-", "--", "-.", ":")


# --- samplers --------------------------------------------------------------------------------------------


def default_sampler() -> str:
    """The sampler ``nas search`` picks for the default objectives."""
    return SearchSettings(space=SPACE, objectives=OBJECTIVES).sampler_name


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    """``name`` as ``nas search --sampler name --seed seed`` builds it; ``nsga2-popP``: that NSGA-II line of
    ``nas.search.samplers.make_sampler`` (``NSGAIISampler(seed=seed)``) with ``population_size=P``."""
    base, sep, pop = name.partition("-pop")
    if sep:
        if base != "nsga2" or not pop.isdigit() or int(pop) < 2:
            raise ValueError(f"sampler {name!r}: the population form is nsga2-popP with P >= 2")
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=int(pop))
    if name not in SAMPLERS:
        raise ValueError(f"sampler {name!r}: allowed {', '.join(SAMPLERS)} or nsga2-popP")
    return search_sampler(name, seed)


# --- the cached table ------------------------------------------------------------------------------------


def settings_id(settings: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]


class Table:
    """Every value computed so far, in one JSON file rewritten atomically after each new one.

    ``top1[sid][proxy key]`` is ``{"top1": x, "seconds": s}`` or ``{"error": why}`` under the settings
    ``objective[sid]``; ``macs[arch key]`` is ``{"macs": n, "seconds": s}`` or ``{"error": why}``;
    ``bounds[name]`` the space's MACs range; ``supernet[sid]`` the supernet's training info.
    """

    SECTIONS = ("objective", "supernet", "top1", "macs", "bounds")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {name: {} for name in self.SECTIONS}
        if path.exists():
            self.data.update(json.loads(path.read_text()))

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with replaced(self.path) as tmp:  # an interrupted write never corrupts the table
            tmp.write_text(json.dumps(self.data, indent=0))


# --- the objective ---------------------------------------------------------------------------------------


class Objective:
    """(top-1, MACs) of an architecture: from the table, or computed now and added to it."""

    def __init__(self, args: argparse.Namespace, space: SearchSpace, table: Table) -> None:
        from evaluators.oneshot import OneShotConfig

        self.space, self.table = space, table
        base = space.profile(PROFILE)
        self.profile = dataclasses.replace(base, val_samples=args.val_samples)
        self.config = OneShotConfig(
            epochs=args.supernet_epochs, train_samples=args.supernet_samples, bn_batches=args.bn_batches
        )
        self.data = load_dataset(DATASET, img_size=self.profile.img_size, seed=args.supernet_seed)
        self.seed = args.supernet_seed
        self.settings = {
            "evaluator": "oneshot",
            "space": SPACE,
            "profile": dataclasses.asdict(self.profile),
            "config": dataclasses.asdict(self.config),
            "seed": self.seed,
            "data": self.data.describe(),
        }
        self.sid = settings_id(self.settings)
        self.run_dir = Path(args.cache_dir) / f"supernet-{self.sid}"
        table.data["objective"][self.sid] = self.settings
        table.data["top1"].setdefault(self.sid, {})
        self.evaluator: Any = None
        self.spent = {"top1": 0.0, "macs": 0.0, "new_top1": 0, "new_macs": 0}

    def supernet(self) -> Any:
        """The trained one-shot evaluator (trained, resumed or loaded from its checkpoint on first use)."""
        if self.evaluator is None:
            from evaluators.oneshot import OneShotEvaluator

            self.evaluator = OneShotEvaluator(
                self.space, self.profile, self.data, seed=self.seed, config=self.config, run_dir=self.run_dir
            )
            print(f"training the supernet (checkpoints in {self.run_dir}) ...", flush=True)
            info = self.evaluator.train()
            info = {k: v for k, v in info.items() if isinstance(v, (int, float, str))}
            self.table.data["supernet"][self.sid] = info
            self.table.save()
            print(
                f"supernet: {info['train_seconds']:.0f} s of training, loss {info['train_loss']:.3f}",
                flush=True,
            )
        return self.evaluator

    def proxy_key(self, arch: Arch) -> str:
        return self.profile.apply(arch).key

    def top1(self, arch: Arch) -> float | None:
        entries = self.table.data["top1"][self.sid]
        key = self.proxy_key(arch)
        if key not in entries:
            evaluator = self.supernet()
            start = time.perf_counter()
            try:
                entry = {"top1": float(evaluator.evaluate(arch)["top1"])}
            except Exception as err:  # one arch that cannot be scored fails its trial, as in a search
                entry = {"error": f"{type(err).__name__}: {err}"}
            entry["seconds"] = time.perf_counter() - start
            self.spent["top1"] += entry["seconds"]
            self.spent["new_top1"] += 1
            entries[key] = entry
            self.table.save()
        return entries[key].get("top1")

    def macs(self, arch: Arch) -> float | None:
        entries = self.table.data["macs"]
        if arch.key not in entries:
            start = time.perf_counter()
            try:
                entry = {
                    "macs": float(count(arch, img_size=MACS_IMG_SIZE, in_chans=3, num_classes=1000).macs)
                }
            except Exception as err:
                entry = {"error": f"{type(err).__name__}: {err}"}
            entry["seconds"] = time.perf_counter() - start
            self.spent["macs"] += entry["seconds"]
            self.spent["new_macs"] += 1
            entries[arch.key] = entry
            self.table.save()
        return entries[arch.key].get("macs")


# --- the space's MACs range ------------------------------------------------------------------------------


class _PickTrial:
    """Answers the space's questions: the stem and op given, every other choice at its largest or smallest.
    ``seen`` records each question's choices."""

    def __init__(self, stem: str | None, patch: Any, op: str | None, largest: bool) -> None:
        self.stem, self.patch, self.op, self.largest = stem, patch, op, largest
        self.seen: dict[str, tuple[Any, ...]] = {}

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        choices = tuple(choices)
        self.seen[name] = choices
        if name == "stem":
            return self.stem if self.stem is not None else choices[0]
        if name == "stem.patch":
            return self.patch if self.patch is not None else choices[0]
        if name.endswith(".op"):
            return self.op if self.op is not None else choices[0]
        return max(choices) if self.largest else min(choices)

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        return high - (high - low) % step if self.largest else low


def macs_bounds(space: SearchSpace, table: Table) -> dict[str, Any]:
    """The smallest and largest MACs (at 224 px) of any architecture of ``space``, exactly.

    A stage's MACs depend only on its own choices, its input width (the previous stage's) and resolution (set
    by the stem), so with the stem fixed and every width, depth, k at its largest (smallest), the largest
    (smallest) architecture takes each stage's most (least) costly op: per stem, per-stage extremes over the
    uniform-op architectures, summed."""
    name = f"{space.name}@{MACS_IMG_SIZE}"
    if name in table.data["bounds"]:
        return table.data["bounds"][name]
    print("computing the space's MACs range (once) ...", flush=True)
    start = time.perf_counter()
    probe = _PickTrial(None, None, None, True)
    space.sample(probe)
    probe_patch = _PickTrial("patch", None, None, True)
    space.sample(probe_patch)
    stems = [(kind, None) for kind in probe.seen["stem"] if kind != "patch"]
    stems += [("patch", p) for p in probe_patch.seen.get("stem.patch", ())]
    ops = probe.seen[next(n for n in reversed(probe.seen) if n.endswith(".op"))]
    out: dict[str, Any] = {"per_stem": {}}
    for largest in (True, False):
        extreme = max if largest else min
        totals = {}
        for stem, patch in stems:
            parts = []
            for op in ops:
                arch = space.sample(_PickTrial(stem, patch, op, largest))
                parts.append([p.macs for p in count(arch, img_size=MACS_IMG_SIZE).parts])
            label = stem if patch is None else f"patch{patch}"
            totals[label] = sum(extreme(column) for column in zip(*parts, strict=True))
        out["per_stem"]["max" if largest else "min"] = totals
        out["macs_max" if largest else "macs_min"] = extreme(totals.values())
    out["seconds"] = time.perf_counter() - start
    table.data["bounds"][name] = out
    table.save()
    return out


# --- one run ---------------------------------------------------------------------------------------------


def run_one(name: str, seed: int, trials: int, space: SearchSpace, objective: Objective) -> dict[str, Any]:
    """``trials`` trials of sampler ``name`` with ``seed``: per trial (top-1, MACs) or None (failed)."""
    study = optuna.create_study(directions=list(DIRECTIONS), sampler=make_sampler(name, seed))
    points: list[list[float] | None] = []
    keys: list[str] = []
    proxies: set[str] = set()
    sampler_seconds = 0.0
    for _ in range(trials):
        start = time.perf_counter()
        trial = study.ask()
        arch = space.sample(trial)
        asked = time.perf_counter()
        top1 = objective.top1(arch)
        macs = objective.macs(arch) if top1 is not None else None
        scored = time.perf_counter()
        if top1 is None or macs is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            points.append(None)
        else:
            study.tell(trial, [top1, macs])
            points.append([top1, macs])
        keys.append(arch.key)
        proxies.add(objective.proxy_key(arch))
        sampler_seconds += (asked - start) + (time.perf_counter() - scored)
    return {
        "sampler": name,
        "seed": seed,
        "keys": keys,
        "points": points,
        "repeats": len(keys) - len(set(keys)),
        "distinct_proxy_nets": len(proxies),
        "failed": sum(p is None for p in points),
        "sampler_seconds": sampler_seconds,
    }


# --- hypervolume and the summary -------------------------------------------------------------------------


def hv_curve(points: list[list[float] | None], bounds: dict[str, Any]) -> list[float]:
    """Normalized hypervolume after each trial, in (top-1, log10 MACs)."""
    lo, hi = math.log10(bounds["macs_min"]), math.log10(bounds["macs_max"])
    box = (100.0 - TOP1_REF) * (hi - lo)
    logged = [None if p is None else [p[0], math.log10(p[1])] for p in points]
    return [v / box for v in hypervolume_history(logged, DIRECTIONS, [TOP1_REF, hi])]


def first_reach(curve: list[float], level: float) -> int | None:
    """The first trial count (1-based) at which ``curve`` reaches ``level``; None: never within the run."""
    for i, value in enumerate(curve):
        if value >= level - 1e-12:
            return i + 1
    return None


def mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def summarize(curves: dict[str, list[list[float]]], trials: int) -> dict[str, Any]:
    marks = sorted({max(1, trials // 4), max(1, trials // 2), trials})
    means = {name: [statistics.fmean(c[t] for c in cs) for t in range(trials)] for name, cs in curves.items()}
    random_mean = means.get("random")
    out: dict[str, Any] = {}
    for name, cs in curves.items():
        row: dict[str, Any] = {
            "hv": {
                str(m): dict(zip(("mean", "std"), mean_std([c[m - 1] for c in cs]), strict=True))
                for m in marks
            },
            "final_per_seed": [c[-1] for c in cs],
        }
        if random_mean is not None:
            reach = first_reach(means[name], random_mean[-1])
            row["trials_to_random_final"] = reach  # on the mean curves
            row["ratio_to_n"] = None if reach is None else reach / trials
            row["random_trials_to_this_final"] = first_reach(random_mean, means[name][-1])
            per_seed = [first_reach(c, r[-1]) for c, r in zip(cs, curves["random"], strict=True)]
            row["per_seed_trials_to_random_final"] = per_seed
            row["per_seed_random_trials_to_this_final"] = [
                first_reach(r, c[-1]) for c, r in zip(cs, curves["random"], strict=True)
            ]
            row["per_seed_median_trials_to_random_final"] = _median_or_never(per_seed, trials)
        out[name] = row
    return {"marks": marks, "mean_curves": means, "samplers": out}


def _median_or_never(values: list[int | None], trials: int) -> float | None:
    """Median with 'never' ranked after every count; None when the median itself is 'never'."""
    ranked = sorted(trials + 1 if v is None else v for v in values)
    median = statistics.median(ranked)
    return None if median > trials else median


# --- output ----------------------------------------------------------------------------------------------


def _fmt_reach(row: dict[str, Any], field: str) -> str:
    """A trial count, 'never' (not within N) or 'n/a' (random search was not run)."""
    if field not in row:
        return "n/a"
    return "never" if row[field] is None else f"{row[field]:g}"


def table_text(result: dict[str, Any]) -> str:
    st, summary = result["settings"], result["summary"]
    marks, n = summary["marks"], st["trials"]
    head = (
        f"{'sampler':<14}"
        + "".join(f"{'HV@' + str(m):>16}" for m in marks)
        + f"{'reach rnd final':>17}{'/N':>6}{'rnd to reach':>14}{'per-seed med':>14}{'s/trial':>9}"
    )
    lines = [head, "-" * len(head)]
    for name, row in summary["samplers"].items():
        hv = "".join(f"{row['hv'][str(m)]['mean']:>9.4f}+-{row['hv'][str(m)]['std']:<5.4f}" for m in marks)
        ratio = "" if row.get("ratio_to_n") is None else f"{row['ratio_to_n']:.2f}"
        label = name + (" *" if name == st["default_sampler"] else "")
        lines.append(
            f"{label:<14}{hv}{_fmt_reach(row, 'trials_to_random_final'):>17}{ratio:>6}"
            f"{_fmt_reach(row, 'random_trials_to_this_final'):>14}"
            f"{_fmt_reach(row, 'per_seed_median_trials_to_random_final'):>14}"
            f"{result['overhead'][name]:>9.3f}"
        )
    lines += [
        f"* the default sampler of nas search for {', '.join(OBJECTIVES)}",
        f"HV@t: normalized hypervolume after t trials, mean+-std over {len(st['seeds'])} seeds",
        "reach rnd final: first trial at which the mean curve reaches random search's final mean "
        f"(target: <= {TARGET_RATIO:.0%} of N={n}); /N: that trial over N",
        "rnd to reach: trials random search's mean curve needs to reach this sampler's final mean",
        "per-seed med: median over seeds of the trials to reach random search's final HV of the same seed",
        "s/trial: sampler time per trial (ask, sample, tell), not scoring",
    ]
    return "\n".join(lines)


def plot(result: dict[str, Any], runs: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    st, summary = result["settings"], result["summary"]
    n = st["trials"]
    fig, (ax, fx) = plt.subplots(1, 2, figsize=(13, 5))
    xs = list(range(1, n + 1))
    styles = {}  # line style and width differ too: a sampler that equals random search stays visible
    for i, (name, row) in enumerate(summary["samplers"].items()):
        curves = result["curves"][name]
        mean = summary["mean_curves"][name]
        std = [statistics.stdev(c[t] for c in curves) if len(curves) > 1 else 0.0 for t in range(n)]
        label = name + (" (default)" if name == st["default_sampler"] else "")
        (line,) = ax.plot(xs, mean, label=label, ls=LINE_STYLES[i % 4], lw=2.6 - 0.4 * (i % 4))
        styles[name] = {"color": line.get_color(), "ls": line.get_linestyle(), "lw": line.get_linewidth()}
        ax.fill_between(
            xs,
            [m - s for m, s in zip(mean, std, strict=True)],
            [m + s for m, s in zip(mean, std, strict=True)],
            color=line.get_color(),
            alpha=0.15,
        )
        reach = row.get("trials_to_random_final")
        if reach is not None and name != "random":
            ax.plot([reach], [mean[reach - 1]], "o", color=line.get_color(), ms=5)
    if "random" in summary["mean_curves"]:
        final = summary["mean_curves"]["random"][-1]
        ax.axhline(final, color="grey", ls="--", lw=1, label="random's final mean")
        ax.axvline(n * TARGET_RATIO, color="grey", ls=":", lw=1, label=f"target: {TARGET_RATIO:.0%} of N")
    ax.set_xlabel("trials")
    ax.set_ylabel("normalized hypervolume (top-1, log10 MACs)")
    ax.set_title(
        f"mean +- 1 std over {len(st['seeds'])} seeds; dots: where random's final mean is reached",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")

    seen = {}
    for run in runs:
        for key, p in zip(run["keys"], run["points"], strict=True):
            if p is not None:
                seen[key] = p
    fx.scatter(
        [p[1] for p in seen.values()],
        [p[0] for p in seen.values()],
        s=6,
        color="lightgrey",
        label=f"every architecture evaluated ({len(seen)})",
    )
    for name in summary["samplers"]:
        pooled = [p for run in runs if run["sampler"] == name for p in run["points"] if p is not None]
        front = sorted((pooled[i] for i in pareto_front(pooled, DIRECTIONS)), key=lambda p: p[1])
        fx.step(
            [p[1] for p in front],
            [p[0] for p in front],
            where="post",
            **styles[name],
            label=f"{name}: front over all seeds",
        )
    fx.set_xscale("log")
    fx.set_xlabel(f"MACs at {MACS_IMG_SIZE} px")
    fx.set_ylabel("one-shot top-1 (%)")
    fx.set_title("objective space", fontsize=10)
    fx.grid(alpha=0.3)
    fx.legend(fontsize=8, loc="best")
    fig.suptitle(
        f"{st['space']}: {', '.join(OBJECTIVES)}, one-shot on {DATASET}, {n} trials per run", fontsize=11
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- main ------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--samplers",
        default=DEFAULT_SAMPLERS,
        help=f"comma-separated: {', '.join(SAMPLERS)} or nsga2-popP (default {DEFAULT_SAMPLERS})",
    )
    parser.add_argument("--trials", type=int, default=100, help="trials per run (N, default 100)")
    parser.add_argument(
        "--seeds", type=int, default=5, help="runs per sampler, seeds first-seed.. (default 5)"
    )
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--out", default=str(ROOT / "benchmarks" / "results" / "bench_search"), help="JSON and PNG folder"
    )
    parser.add_argument("--cache-dir", default=str(ROOT / "runs" / "bench_search"))
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    obj = parser.add_argument_group("objective (one-shot top-1)")
    obj.add_argument("--supernet-epochs", type=int, default=4)
    obj.add_argument("--supernet-samples", type=int, default=10000, help="training images per epoch")
    obj.add_argument("--supernet-seed", type=int, default=0, help="supernet, data split and scoring seed")
    obj.add_argument("--bn-batches", type=int, default=4, help="BatchNorm recalibration batches (of 64)")
    obj.add_argument("--val-samples", type=int, default=1000, help="validation images per score")
    args = parser.parse_args(argv)
    args.sampler_list = [s.strip() for s in args.samplers.split(",") if s.strip()]
    if len(set(args.sampler_list)) != len(args.sampler_list):
        parser.error("--samplers: a sampler is named twice")
    for name in args.sampler_list:
        try:
            make_sampler(name, 0)
        except ValueError as err:
            parser.error(str(err))
    if args.trials < 1 or args.seeds < 1:
        parser.error("--trials and --seeds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wall_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    space = get_space(SPACE)
    table = Table(Path(args.cache_dir) / "table.json")
    bounds = macs_bounds(space, table)
    objective = Objective(args, space, table)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))

    runs = []
    for seed in seeds:  # seed-major: a partial run already compares every sampler
        for name in args.sampler_list:
            before = dict(objective.spent)
            start = time.perf_counter()
            run = run_one(name, seed, args.trials, space, objective)
            run["seconds"] = time.perf_counter() - start
            run["new_top1"] = objective.spent["new_top1"] - before["new_top1"]
            run["hv"] = hv_curve(run["points"], bounds)
            runs.append(run)
            print(
                f"seed {seed} {name:<12} HV {run['hv'][-1]:.4f}  new scores {run['new_top1']:>3}  "
                f"repeats {run['repeats']:>3}  failed {run['failed']}  {run['seconds']:.0f} s",
                flush=True,
            )

    curves = {name: [r["hv"] for r in runs if r["sampler"] == name] for name in args.sampler_list}
    summary = summarize(curves, args.trials)
    overhead = {
        name: statistics.fmean(r["sampler_seconds"] / args.trials for r in runs if r["sampler"] == name)
        for name in args.sampler_list
    }
    default = default_sampler()
    entries = table.data["top1"][objective.sid].values()
    scored = [e["top1"] for e in entries if "top1" in e]
    result = {
        "what": "search efficiency: samplers against random search at equal trials, one-shot top-1 and MACs",
        "settings": {
            "space": SPACE,
            "objectives": list(OBJECTIVES),
            "samplers": args.sampler_list,
            "default_sampler": default,
            "sampler_construction": (
                "names of nas search --sampler: nas.search.samplers.make_sampler(name, seed); "
                "nsga2-popP: optuna.samplers.NSGAIISampler(seed=seed, "
                "population_size=P)"
            ),
            "trials": args.trials,
            "seeds": seeds,
            "objective": objective.settings,
            "objective_id": objective.sid,
            "supernet": table.data["supernet"].get(objective.sid),
            "macs": f"evaluators.complexity.count(arch) at {MACS_IMG_SIZE} px, 3 channels, 1000 classes",
            "top1_cache_key": "the proxy network's key (profile.apply(arch).key): what the supernet scores",
            "torch_threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(),
            "torch": torch.__version__,
            "optuna": optuna.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
        },
        "hypervolume": {
            "space": "(top-1 %, log10 MACs); top-1 maximized, MACs minimized",
            "reference": [TOP1_REF, bounds["macs_max"]],
            "normalized_by": (
                f"the box from the reference to (100%, {bounds['macs_min']:.4g} MACs): "
                f"{100 - TOP1_REF} x {math.log10(bounds['macs_max']) - math.log10(bounds['macs_min']):.4f}"
            ),
            "bounds": bounds,
        },
        "target": {
            "what": f"the default sampler's mean curve reaches random search's final mean within "
            f"{TARGET_RATIO:.0%} of the trials",
            "default_sampler": default,
            "ratio": summary["samplers"].get(default, {}).get("ratio_to_n"),
            "met": (summary["samplers"].get(default, {}).get("ratio_to_n") or math.inf) <= TARGET_RATIO,
        },
        "summary": summary,
        "overhead": overhead,
        "curves": curves,
        "runs": [{k: v for k, v in r.items() if k != "hv"} for r in runs],
        "table": {
            "scored_proxy_nets": len(scored),
            "failed": sum("error" in e for e in entries),
            "top1_range": [min(scored), max(scored)] if scored else None,
            "macs_outside_bounds": sum(  # 0 unless the bounds are wrong
                not bounds["macs_min"] <= e["macs"] <= bounds["macs_max"]
                for e in table.data["macs"].values()
                if "macs" in e
            ),
            "new_this_call": objective.spent,
        },
        "wall_seconds": time.perf_counter() - wall_start,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_search.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, runs, out / "bench_search.png")
    print()
    print(table_text(result))
    print(f"target met by the default sampler ({default}): {result['target']['met']}")
    print(
        f"wall time {result['wall_seconds']:.0f} s (new: {objective.spent['new_top1']} scores in "
        f"{objective.spent['top1']:.0f} s, {objective.spent['new_macs']} MAC counts in "
        f"{objective.spent['macs']:.0f} s); wrote {out / 'bench_search.json'} and .png"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

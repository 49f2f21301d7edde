"""Search vs the papers' networks: does a proxy search find a network that beats a paper's at equal MACs?

For each space (``coatnet``, ``sasa``) the study runs one ``nas search`` (proxy evaluator, ``cpu`` profile,
``--budget`` trials, ``--search-seed``, the space's baselines enqueued first as ``nas search`` does), then for
each paper network of :data:`PAIRS` (CoAtNet-0, CoAtNet-1; SASA's ResNet-26 and ResNet-50 full-attention)
takes the found network: the completed, feasible trial that is not a baseline with the best proxy top-1
among those whose MACs at 224 px (fvcore, as the search counts them) are at most the baseline's (ties: fewer
MACs, then the earlier trial). Whether it also beat the baselines at the proxy is recorded, not assumed.

Found and baseline are then retrained identically with ``nas train --profile cpu`` (the profile's shrunk
network at 32 px) for ``--epochs`` epochs of the whole Fashion-MNIST training split (54,000 images after the
validation hold-out), 2 by default; ``--epochs coatnet=4,sasa=11`` sets them per space (>= 50x each space's
proxy: coatnet's trains 3,968 images, sasa's 11,776), batch 64, once per seed of ``--seeds``
(0,1,2; the seed also draws the validation split, so a found/baseline pair of one seed sees the same split),
and validated on the whole held-out split. The trainings run on ``--device`` (``cpu``; ``cuda`` trains in
bf16, its results cached apart from the CPU's) and the searches always on the CPU. CIFAR-10 is trained the
same way when ``evaluators.data`` finds a copy; otherwise the JSON says why it was skipped. The trainings
run in an order that completes whole pairs early: every pair's first seed before any second seed.

Per pair it reports MACs and params (224 px, 3 channels, 1000 classes) of both, top-1 mean +- std over the
finished seeds, and the paired difference found - baseline (the same seeds) with a two-sided paired t-test:
its 95% interval and p-value; n is the number of seeds with both runs finished. A pair is ``partial`` until
every seed has finished.

The cache (``--cache-dir``, ``benchmarks/results/search_vs_baselines/cache/``) holds small JSON only, so it
can be committed and a later session continues: ``search-<space>-<id>.json`` (the finished search's trials and
front) and ``train/<arch>-seed<N>-<id>.json`` (one finished training's metrics and history); each id names
the settings the result depends on. The searches' studies
(``runs/search_vs_baselines-<space>-s<seed>/``) and the trainings' checkpoints
(``runs/search_vs_baselines/train/``) live under ``--runs-dir`` (``runs``): a rerun resumes an interrupted
search (``nas search --resume``) and an interrupted training (``nas train --resume``) and skips every
finished one.

Run from the repository root (niced: the searches take about an hour each on 2 shared cores, each training
a few minutes)::

    nice -n 19 .venv/bin/python benchmarks/search_vs_baselines.py [--budget 60trials] [--seeds 0,1,2]
    .venv/bin/python benchmarks/search_vs_baselines.py --status

``--proxy-epochs sasa=2`` searches with the proxy's epochs where not the cpu profile's (``nas search
--proxy-epochs``); a search is keyed and its study named by the epochs it trains, so results searched before
a profile's epochs changed are reached by naming those epochs.

``--pairs``, ``--sides`` and ``--train-seeds`` choose which of the trainings this process runs (e.g. the
one that fits the time left, or one per machine: a training another process holds is skipped); the JSON
and ``--status`` still report every pair and seed of ``--seeds``::

    nice -n 19 .venv/bin/python benchmarks/search_vs_baselines.py --spaces sasa \
        --pairs 'ResNet-26 full-attention' --sides baseline --train-seeds 2

It writes ``search_vs_baselines.json`` (settings, searches, pairs with their statistics, runs) and
``search_vs_baselines.png`` (top-1 against MACs for each pair, +-1 std error bars) under ``--out``
(``benchmarks/results/search_vs_baselines``), and prints the pairs' table in Markdown (the README's).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# Imported after the repository root is on the path.
from evaluator_quality import finite, settings_id, trained_images  # noqa: E402

from evaluators.complexity import count  # noqa: E402
from evaluators.data import load_dataset  # noqa: E402
from nas.core.arch import Arch  # noqa: E402
from nas.study.pareto import pareto_front  # noqa: E402
from nas.study.trials_table import feasible_rows  # noqa: E402
from results.stats import LEVEL, paired  # noqa: E402
from search_spaces import ProxyProfile, get_space  # noqa: E402

PROFILE, EVALUATOR = "cpu", "proxy"
DEFAULT_EPOCHS = 2  # a space --epochs does not name
# The profile fields that make its proxy schedule, not its network: a training does not depend on them.
PROXY_SCHEDULE = ("name", "description", "epochs", "batch_size", "train_samples", "val_samples")
PAIRS = {
    "coatnet": ("CoAtNet-0", "CoAtNet-1"),
    "sasa": ("ResNet-26 full-attention", "ResNet-50 full-attention"),
}
SIDES = ("found", "baseline")  # of a pair, trained in this order
DATASETS = ("fashion-mnist", "cifar10")  # cifar10 only where evaluators.data finds a copy

Runner = Callable[[list[str]], int]


def _run(command: list[str]) -> int:
    """Run a ``nas`` command in this repository (its output goes to ours); its exit status."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


@contextlib.contextmanager
def _on_device(device: str) -> Iterator[None]:
    """The ``nas`` commands started inside run on ``device``: on ``cpu`` no GPU is visible to them (they
    would pick one if they saw it), on ``cuda`` the environment's GPUs."""
    if device != "cpu":
        yield
        return
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    try:
        yield
    finally:
        if saved is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved


def _nas(*args: str) -> list[str]:
    return [sys.executable, "-m", "nas", *args]


def _write_json(path: Path, data: Any) -> None:
    """Write ``data`` atomically (an interrupted write never leaves a broken cache file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(finite(data), indent=1) + "\n")
    os.replace(tmp, path)


# --- the searches ----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SearchPlan:
    space: str
    budget: str
    seed: int
    runs_dir: Path
    cache_dir: Path
    proxy_epochs: int | None = None  # the proxy's epochs where not the profile's (nas search --proxy-epochs)

    @property
    def profile(self) -> ProxyProfile:
        """The proxy profile the search trains its trials with."""
        profile = get_space(self.space).profile(PROFILE)
        return (
            profile if self.proxy_epochs is None else dataclasses.replace(profile, epochs=self.proxy_epochs)
        )

    @property
    def settings(self) -> dict[str, Any]:
        return {
            "space": self.space,
            "evaluator": EVALUATOR,
            "profile": dataclasses.asdict(self.profile),
            "dataset": "fashion-mnist",
            "budget": self.budget,
            "seed": self.seed,
            "baselines_enqueued": True,
        }

    @property
    def study(self) -> str:
        """Named by its proxy's epochs too: a study resumes only with the epochs it was searched with."""
        return f"search_vs_baselines-{self.space}-s{self.seed}-e{self.profile.epochs}"

    @property
    def cache_file(self) -> Path:
        return self.cache_dir / f"search-{self.space}-{settings_id(self.settings)}.json"

    @property
    def command(self) -> list[str]:
        resume = ["--resume"] if (self.runs_dir / self.study / "study.db").exists() else []
        return _nas(
            "search", "--space", self.space, "--evaluator", EVALUATOR, "--profile", PROFILE,
            "--budget", self.budget, "--seed", str(self.seed), "--study", self.study,
            "--proxy-epochs", str(self.profile.epochs), "--runs-dir", str(self.runs_dir), *resume,
        )  # fmt: skip


def budget_trials(budget: str) -> int:
    """The trial count of a ``<N>trials`` budget (a study's budget must not depend on the machine's load)."""
    if not budget.endswith("trials") or not budget.removesuffix("trials").isdigit():
        raise ValueError(f"budget: a number of trials such as 60trials, not {budget!r}")
    return int(budget.removesuffix("trials"))


def search_record(plan: SearchPlan, frame: pd.DataFrame, manifest: dict[str, Any]) -> dict[str, Any]:
    """What the study keeps of a finished search: its completed feasible trials and their front."""
    done = frame[(frame["state"] == "COMPLETE") & pd.Series(feasible_rows(frame), index=frame.index)]
    rows = [
        {
            "number": int(row.number),
            "arch": row.arch,
            "baseline": row.baseline if isinstance(row.baseline, str) else "",
            "top1": float(row.top1),
            "macs": int(row.macs),
            "params": int(row.params),
            "arch_json": row.arch_json,
        }
        for row in done.itertuples()
    ]
    front = pareto_front([(r["top1"], r["macs"]) for r in rows], ("maximize", "minimize"))
    ended = int(frame["state"].isin(["COMPLETE", "FAIL", "INFEASIBLE", "REPEAT", "PRUNED"]).sum())
    return {
        "settings": plan.settings,
        "study": plan.study,
        "trials_ended": ended,
        "manifest": manifest,
        "front": sorted(rows[i]["number"] for i in front),
        "rows": rows,
    }


def run_search(plan: SearchPlan, runner: Runner = _run) -> dict[str, Any]:
    """The finished search's record, from the cache, or by running (or resuming) ``nas search`` now."""
    if plan.cache_file.exists():
        return json.loads(plan.cache_file.read_text())
    print(f"search {plan.space}: {' '.join(plan.command[2:])}", flush=True)
    code = runner(plan.command)
    run_dir = plan.runs_dir / plan.study
    if code != 0:
        raise RuntimeError(f"nas search for {plan.space} exited with {code}; rerun this script to resume it")
    frame = pd.read_csv(run_dir / "trials.csv")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    record = search_record(plan, frame, manifest)
    if record["trials_ended"] < budget_trials(plan.budget):
        raise RuntimeError(
            f"the {plan.space} search ended {record['trials_ended']} of {plan.budget}; rerun to resume it"
        )
    _write_json(plan.cache_file, record)
    return record


# --- the pairs -------------------------------------------------------------------------------------------


def pick_found(rows: Sequence[dict[str, Any]], max_macs: int) -> dict[str, Any] | None:
    """The searched (not enqueued) trial with the best proxy top-1 among those with MACs <= ``max_macs``
    (ties: fewer MACs, then the earlier trial); None if there is none."""
    eligible = [r for r in rows if not r["baseline"] and r["macs"] <= max_macs]
    if not eligible:
        return None
    return min(eligible, key=lambda r: (-r["top1"], r["macs"], r["number"]))


def make_pair(space: str, name: str, search: dict[str, Any]) -> dict[str, Any]:
    """A baseline, the found network at its cost, and how they compared at the proxy."""
    base = get_space(space).baselines()[name].arch
    cost = count(base)
    found = pick_found(search["rows"], cost.macs)
    at_proxy = {r["baseline"]: r["top1"] for r in search["rows"] if r["baseline"]}
    pair: dict[str, Any] = {
        "space": space,
        "baseline": {"name": name, "key": base.key, "arch_json": base.to_json(), "macs": cost.macs,
                     "params": cost.params, "proxy_top1": at_proxy.get(name)},
        "found": None,
    }  # fmt: skip
    if found is None:
        pair["skipped"] = f"no searched trial has MACs <= {name}'s {cost.macs / 1e9:.2f}G"
        return pair
    cheaper_baselines = [
        b for b in search["rows"] if b["baseline"] and b["macs"] <= cost.macs and b["top1"] >= found["top1"]
    ]
    pair["found"] = {
        "key": found["arch"],
        "arch_json": found["arch_json"],
        "trial": found["number"],
        "macs": found["macs"],
        "params": found["params"],
        "proxy_top1": found["top1"],
        "on_front": found["number"] in search["front"],
        "baselines_at_least_as_good_at_proxy": [b["baseline"] for b in cheaper_baselines],
    }
    return pair


# --- the trainings ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Training:
    """One ``nas train`` run: an architecture of a space, a seed, a dataset and a schedule."""

    space: str
    arch_json: str
    seed: int
    dataset: str
    epochs: int
    batch_size: int
    lr: float
    train_samples: int | None
    runs_dir: Path
    cache_dir: Path
    device: str = "cpu"  # where nas train runs: results of another device are cached apart

    @property
    def arch(self) -> Arch:
        return Arch.from_json(self.arch_json)

    @property
    def settings(self) -> dict[str, Any]:
        """What the result depends on besides the architecture and the seed: of the profile, only the
        network's shape (``nas train`` takes its schedule from the options, not the profile's proxy one)."""
        profile = dataclasses.asdict(get_space(self.space).profile(PROFILE))
        settings = {
            "space": self.space,
            "profile": {k: v for k, v in profile.items() if k not in PROXY_SCHEDULE},
            "dataset": self.dataset,
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "train_samples": self.train_samples,
        }
        # the CPU's results keep the keys they had before a device was named; a GPU trains in bf16
        return settings if self.device == "cpu" else {**settings, "device": self.device}

    @property
    def name(self) -> str:
        arch = hashlib.sha1(self.arch.key.encode()).hexdigest()[:10]
        return f"{arch}-seed{self.seed}-{settings_id(self.settings)}"

    @property
    def cache_file(self) -> Path:
        return self.cache_dir / "train" / f"{self.name}.json"

    @property
    def out(self) -> Path:
        return self.runs_dir / "search_vs_baselines" / "train" / self.name

    @property
    def arch_file(self) -> Path:
        return self.out.with_name(f"{self.name}.arch.json")

    @property
    def started(self) -> bool:
        return (self.out / "checkpoint.pt").exists()

    @property
    def command(self) -> list[str]:
        extra = [] if self.train_samples is None else ["--train-samples", str(self.train_samples)]
        return _nas(
            "train", str(self.arch_file), "--space", self.space, "--profile", PROFILE,
            "--dataset", self.dataset, "--epochs", str(self.epochs), "--batch-size", str(self.batch_size),
            "--lr", str(self.lr), "--seed", str(self.seed), "--out", str(self.out), *extra,
            *(["--resume"] if self.started else []),
        )  # fmt: skip


class Busy(RuntimeError):
    """Another process of this study holds the training (its run folder's lock)."""


@contextlib.contextmanager
def _held(path: Path) -> Iterator[None]:
    """An exclusive, non-blocking ``flock`` on ``path`` (released by the OS if the process dies): two
    processes of this study never train, nor resume, the same run at once. :class:`Busy` if it is held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"{path.stem} is being trained by another process") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def run_training(job: Training, runner: Runner = _run) -> tuple[dict[str, Any], bool]:
    """(the finished training's result, True if it came from the cache); trains now, or resumes the
    interrupted run, otherwise. RuntimeError if ``nas train`` fails, :class:`Busy` if another process of
    this study is training it."""
    if job.cache_file.exists():
        return json.loads(job.cache_file.read_text()), True
    with _held(job.out.with_name(f"{job.name}.lock")):
        if job.cache_file.exists():  # finished by another process while this one waited for its turn
            return json.loads(job.cache_file.read_text()), True
        job.arch.save(job.arch_file)
        start = time.perf_counter()
        code = runner(job.command)
        if code != 0:
            raise RuntimeError(f"nas train of {job.arch.key} seed {job.seed} exited with {code}")
        done = json.loads((job.out / "history.json").read_text())
        history = done["history"]
        result = {
            "arch": job.arch.key,
            "arch_json": job.arch_json,
            "seed": job.seed,
            "settings": job.settings,
            "train_settings": done["settings"],
            "top1": history[-1]["top1"],
            "loss": history[-1]["loss"],
            "train_seconds": sum(h["train_seconds"] for h in history),
            "seconds_this_call": time.perf_counter() - start,
            "history": history,
        }
        _write_json(job.cache_file, result)
    return result, False


def schedule(
    pairs: Sequence[dict[str, Any]],
    seeds: Sequence[int],
    make: Callable[..., Training],
    sides: Sequence[str] = SIDES,
) -> list[Training]:
    """The trainings of ``sides`` of ``pairs``, in the order that finishes whole pairs first: seed by seed,
    pair by pair, found then baseline; an architecture shared by two pairs is trained once."""
    jobs: list[Training] = []
    for seed in seeds:
        for pair in pairs:
            if pair["found"] is None:
                continue
            for side in (side for side in SIDES if side in sides):
                job = make(pair["space"], pair[side]["arch_json"], seed)
                if job not in jobs:
                    jobs.append(job)
    return jobs


# --- the study -------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", default="60trials", help="each search's budget, in trials (60trials)")
    parser.add_argument("--search-seed", type=int, default=0, help="seed of the searches (0)")
    parser.add_argument("--seeds", default="0,1,2", help="training seeds (0,1,2)")
    parser.add_argument(
        "--epochs",
        default="2",
        help="training epochs: N for every space, or per space, e.g. coatnet=4,sasa=11 (a space not named: "
        f"{DEFAULT_EPOCHS})",
    )
    parser.add_argument(
        "--proxy-epochs",
        default="",
        help="the searches' proxy epochs where not the cpu profile's, per space, e.g. sasa=2 (the README's "
        "sasa results: the profile's 2 epochs before it trained 10); passed to nas search --proxy-epochs",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--train-samples", type=int, help="training images per epoch (default: all)")
    parser.add_argument(
        "--spaces",
        default=",".join(PAIRS),
        help="the spaces whose searches and trainings this process runs (the JSON reports all)",
    )
    parser.add_argument(
        "--runs-dir",
        default=str(ROOT / "runs"),
        help="the searches' studies (<dir>/search_vs_baselines-<space>-s<seed>/) and the trainings' "
        "checkpoints (<dir>/search_vs_baselines/train/)",
    )
    parser.add_argument(
        "--cache-dir", default=str(ROOT / "benchmarks" / "results" / "search_vs_baselines" / "cache")
    )
    parser.add_argument(
        "--out",
        default=str(ROOT / "benchmarks" / "results" / "search_vs_baselines"),
        help="JSON and PNG folder",
    )
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where the trainings run (cpu; cuda trains in bf16 and caches apart); searches run on the CPU",
    )
    parser.add_argument(
        "--status", action="store_true", help="print what is done and what is left; run nothing"
    )
    only = parser.add_argument_group(
        "which trainings this process runs (the JSON and --status still report every pair and seed)"
    )
    only.add_argument("--pairs", help="comma-separated baseline names, e.g. 'ResNet-50 full-attention' (all)")
    only.add_argument("--sides", default=",".join(SIDES), help="found, baseline or both (found,baseline)")
    only.add_argument("--train-seeds", help="comma-separated seeds among --seeds (all of --seeds)")
    args = parser.parse_args(argv)
    for option, default in (("epochs", DEFAULT_EPOCHS), ("proxy_epochs", None)):
        try:
            setattr(args, option, parse_epochs(getattr(args, option), default))
        except ValueError as err:
            parser.error(f"--{option.replace('_', '-')}: {err}")
    if args.device == "cuda" and not args.status:
        import torch

        if not torch.cuda.is_available():
            parser.error("--device: 'cuda' is not available here")
    try:
        args.seeds = [int(s) for s in args.seeds.split(",")]
        args.train_seeds = None if args.train_seeds is None else [int(s) for s in args.train_seeds.split(",")]
    except ValueError as err:
        parser.error(f"seeds are whole numbers separated by commas: {err}")
    args.spaces = args.spaces.split(",")
    unknown = [s for s in args.spaces if s not in PAIRS]
    if unknown:
        parser.error(f"--spaces: unknown {', '.join(unknown)}; known: {', '.join(PAIRS)}")
    names = [name for space in args.spaces for name in PAIRS[space]]
    args.pairs = None if args.pairs is None else args.pairs.split(",")
    args.sides = args.sides.split(",")
    for option, given, known in (
        ("--pairs", args.pairs or [], names),
        ("--sides", args.sides, SIDES),
        ("--train-seeds", args.train_seeds or [], args.seeds),
    ):
        unknown = [str(value) for value in given if value not in known]
        if unknown:
            parser.error(f"{option}: unknown {', '.join(unknown)}; known: {', '.join(map(str, known))}")
    try:
        budget_trials(args.budget)
    except ValueError as err:
        parser.error(str(err))
    return args


def parse_epochs(text: str, default: int | None = DEFAULT_EPOCHS) -> dict[str, int | None]:
    """``N`` (every space) or ``space=N,...`` as {space: epochs} for every space of :data:`PAIRS`, a space
    not named at ``default``; ``""`` names none."""
    if text.isdigit():
        epochs = dict.fromkeys(PAIRS, int(text))
    else:
        epochs = dict.fromkeys(PAIRS, default)
        for part in filter(None, text.split(",")):
            space, _, value = part.partition("=")
            if space not in PAIRS or not value.isdigit():
                raise ValueError(f"{part!r} is not N or space=N with a space of {', '.join(PAIRS)}")
            epochs[space] = int(value)
    if any(n is not None and n < 1 for n in epochs.values()):
        raise ValueError(f"{text!r}: a training needs at least 1 epoch")
    return epochs


def datasets() -> tuple[list[str], dict[str, str]]:
    """(the datasets to train on, why each other one is skipped)."""
    found, skipped = [], {}
    for name in DATASETS:
        try:
            load_dataset(name, img_size=get_space("coatnet").profile(PROFILE).img_size, seed=0)
        except ValueError as err:
            skipped[name] = str(err)
            continue
        found.append(name)
    return found, skipped


class Study:
    """The searches, pairs and trainings of one configuration (``args``)."""

    def __init__(self, args: argparse.Namespace, runner: Runner = _run) -> None:
        self.args, self.runner = args, runner
        self.runs_dir, self.cache_dir = Path(args.runs_dir), Path(args.cache_dir)
        self.plans = {  # every space, for the report; args.spaces are those this process runs
            s: SearchPlan(
                s, args.budget, args.search_seed, self.runs_dir, self.cache_dir, args.proxy_epochs[s]
            )
            for s in PAIRS
        }
        self.datasets, self.skipped = datasets()

    def training(self, dataset: str) -> Callable[[str, str, int], Training]:
        a = self.args
        return lambda space, arch_json, seed: Training(
            space, arch_json, seed, dataset, a.epochs[space], a.batch_size, a.lr, a.train_samples,
            self.runs_dir, self.cache_dir, a.device,
        )  # fmt: skip

    def searches(self) -> dict[str, dict[str, Any] | None]:
        """Each space's finished search from the cache, None where it is not finished."""
        return {
            space: json.loads(plan.cache_file.read_text()) if plan.cache_file.exists() else None
            for space, plan in self.plans.items()
        }

    def pairs(self, searches: dict[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
        return [make_pair(space, name, s) for space, s in searches.items() if s for name in PAIRS[space]]

    def run(self) -> list[str]:
        """Run or resume the searches of ``--spaces`` (on the CPU: they are the cpu profile's proxy searches
        and are cached as such), then their trainings (on ``--device``); what failed (each left for the next
        run, which retries it), in one line each. The JSON reports every space's cached results, so
        processes running different spaces write the same study."""
        failed = []
        for space in self.args.spaces:  # every search before any training
            try:
                with _on_device("cpu"):
                    run_search(self.plans[space], self.runner)
            except RuntimeError as err:  # the other space's search and pairs go on
                failed.append(str(err))
                print(err, flush=True)
                continue
            self.write()  # the found networks are kept as soon as known
        pairs = [pair for pair in self.pairs(self.searches()) if pair["space"] in self.args.spaces]
        with _on_device(self.args.device):
            for dataset in self.datasets:
                failed += self.train(dataset, pairs)
        return failed

    def train(self, dataset: str, pairs: list[dict[str, Any]]) -> list[str]:
        """Train (or take from the cache) every run of ``pairs`` on ``dataset``; what failed."""
        failed = []
        a = self.args
        chosen = [pair for pair in pairs if a.pairs is None or pair["baseline"]["name"] in a.pairs]
        jobs = schedule(chosen, a.train_seeds or a.seeds, self.training(dataset), a.sides)
        for i, job in enumerate(jobs, start=1):
            resuming = " (resuming)" if job.started and not job.cache_file.exists() else ""
            print(
                f"[{dataset} {i}/{len(jobs)}] {job.space} {job.arch.key} seed {job.seed} on {job.device}"
                f"{resuming}",
                flush=True,
            )
            try:
                result, hit = run_training(job, self.runner)
            except Busy as err:  # another process of this study trains it: its result lands in the cache
                print(f"    skipped: {err}", flush=True)
                continue
            except RuntimeError as err:  # a diverged or crashed training does not stop the others
                failed.append(str(err))
                print(f"    {err}", flush=True)
                continue
            print(f"    top-1 {result['top1']:.2f}%{' [cached]' if hit else ''}", flush=True)
            self.write()  # the JSON, PNG and table follow every finished training
        return failed

    def results(self, searches: dict[str, Any], pairs: list[dict[str, Any]]) -> dict[str, Any]:
        """The whole study from the cache: finished results only."""
        rows = []
        for dataset in self.datasets:
            make = self.training(dataset)
            for pair in pairs:
                row = {"dataset": dataset, **pair}
                if pair["found"] is not None:
                    top1 = {}
                    for side in SIDES:
                        top1[side] = {}
                        for seed in self.args.seeds:
                            job = make(pair["space"], pair[side]["arch_json"], seed)
                            if job.cache_file.exists():
                                top1[side][seed] = json.loads(job.cache_file.read_text())["top1"]
                    row["top1"] = {side: {str(s): v for s, v in t.items()} for side, t in top1.items()}
                    row["stats"] = paired(top1["found"], top1["baseline"])
                    row["partial"] = row["stats"]["n"] < len(self.args.seeds)
                rows.append(row)
        return {
            "what": __doc__.split("\n\n")[0],
            "settings": self.settings,
            "searches": {
                space: None
                if s is None
                else {k: v for k, v in s.items() if k != "rows"} | {"completed": len(s["rows"])}
                for space, s in searches.items()
            },
            "pairs": rows,
        }

    @functools.cached_property
    def settings(self) -> dict[str, Any]:
        a = self.args
        images = {}
        for space in PAIRS:
            profile = self.plans[space].profile
            data = load_dataset("fashion-mnist", img_size=profile.img_size, seed=0)
            schedule_profile = dataclasses.replace(
                profile, epochs=a.epochs[space], batch_size=a.batch_size, train_samples=a.train_samples
            )
            images[space] = {
                "proxy": trained_images(profile, data),
                "training": trained_images(schedule_profile, data),
            }
        return {
            "budget": a.budget,
            "search_seed": a.search_seed,
            "search": {"evaluator": EVALUATOR, "profile": PROFILE, "objectives": "top1:max,macs:min",
                       "baselines_enqueued": True,
                       "proxy_epochs": {space: plan.profile.epochs for space, plan in self.plans.items()}},
            "training": {"command": "nas train --profile cpu", "epochs": a.epochs, "batch_size": a.batch_size,
                         "lr": a.lr, "train_samples": a.train_samples, "seeds": a.seeds, "device": a.device},
            "trained_images": images,
            "training_to_proxy_images": {s: i["training"] / i["proxy"] for s, i in images.items()},
            "datasets": self.datasets,
            "skipped_datasets": self.skipped,
            "macs": "fvcore multiply-adds at 224 px, 3 channels, 1000 classes (evaluators.complexity.count)",
            "test": f"two-sided paired t-test over seeds, {LEVEL:.0%} interval of found - baseline top-1",
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
        }  # fmt: skip

    def write(self) -> dict[str, Any]:
        """The JSON and PNG of everything in the cache now; the result."""
        searches = self.searches()
        result = self.results(searches, self.pairs(searches))
        out = Path(self.args.out)
        _write_json(out / "search_vs_baselines.json", result)
        plot(result, out / "search_vs_baselines.png")
        return result

    def status(self) -> str:
        searches = self.searches()
        lines = []
        for space, s in searches.items():
            plan = self.plans[space]
            state = f"done ({len(s['rows'])} completed trials)" if s else "not finished"
            epochs = f"{plan.profile.epochs}-epoch proxy"
            lines.append(f"search {space} ({plan.budget}, seed {plan.seed}, {epochs}): {state}")
        pairs = self.pairs(searches)
        for dataset in self.datasets:
            jobs = schedule(pairs, self.args.seeds, self.training(dataset))
            done = [j for j in jobs if j.cache_file.exists()]
            going = [j for j in jobs if j.started and not j.cache_file.exists()]
            lines.append(f"{dataset}: {len(done)} of {len(jobs)} trainings finished, {len(going)} started")
            for job in jobs:
                state = "finished" if job in done else "started" if job in going else "left"
                lines.append(f"  {state:<8} {job.space} {job.arch.key} seed {job.seed}")
        lines += [f"{name}: skipped: {why}" for name, why in self.skipped.items()]
        if not all(searches.values()):
            lines.append("the trainings of an unfinished search's pairs are not listed yet")
        if pairs:
            lines += ["", markdown(self.results(searches, pairs))]
        return "\n".join(lines)


# --- output ----------------------------------------------------------------------------------------------


def _pm(stats: dict[str, Any]) -> str:
    if stats["mean"] is None:
        return "-"
    std = "" if stats["std"] is None else f" +- {stats['std']:.2f}"
    return f"{stats['mean']:.2f}{std} (n={stats['n']})"


def markdown(result: dict[str, Any]) -> str:
    """The pairs as a Markdown table (the README's)."""
    head = (
        "| dataset | baseline | MACs / params | found (trial) | MACs / params | proxy top-1 baseline / found "
        "| baseline top-1 | found top-1 | found - baseline [95% CI], p | verdict |"
    )
    lines = [head, "|" + "---|" * head.count(" | ") + "---|"]
    for row in result["pairs"]:
        b, f = row["baseline"], row["found"]
        cost_b = f"{b['macs'] / 1e9:.2f}G / {b['params'] / 1e6:.1f}M"
        if f is None:
            lines.append(
                f"| {row['dataset']} | {b['name']} | {cost_b} | none: {row['skipped']} | | | | | | |"
            )
            continue
        s, d = row["stats"], row["stats"]["difference"]
        diff = "-" if d["mean"] is None else f"{d['mean']:+.2f}"
        if "ci" in d:
            diff += f" [{d['ci'][0]:+.2f}, {d['ci'][1]:+.2f}]" + (f", p={d['p']:.3f}" if "p" in d else "")
        partial = " (partial)" if row["partial"] else ""
        key = f["key"].replace("|", "\\|")  # a pipe inside a table cell, code span or not, must be escaped
        proxy = "-" if b["proxy_top1"] is None else f"{b['proxy_top1']:.1f}"
        lines.append(
            f"| {row['dataset']} | {b['name']} | {cost_b} | `{key}` ({f['trial']}) | "
            f"{f['macs'] / 1e9:.2f}G / {f['params'] / 1e6:.1f}M | {proxy} / {f['proxy_top1']:.1f} | "
            f"{_pm(s['baseline'])} | {_pm(s['found'])} | "
            f"{diff} (n={s['n']}){partial} | {s['verdict']} |"
        )
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [
        row
        for row in result["pairs"]
        if row["found"] is not None and (row["stats"]["found"]["n"] or row["stats"]["baseline"]["n"])
    ]
    if not rows:  # nothing trained yet
        return
    fig, axes = plt.subplots(1, len(rows), figsize=(3.6 * len(rows), 3.4), squeeze=False)
    for ax, row in zip(axes.flat, rows, strict=True):
        for side, color in (("baseline", "tab:gray"), ("found", "tab:blue")):
            stats = row["stats"][side]
            if stats["mean"] is None:
                continue
            label = (
                row["baseline"]["name"] if side == "baseline" else f"found (trial {row['found']['trial']})"
            )
            ax.errorbar(
                row[side]["macs"] / 1e9, stats["mean"], yerr=stats["std"] or 0.0, fmt="o", capsize=4,
                color=color, label=f"{label}, n={stats['n']}",
            )  # fmt: skip
        ax.set_title(f"{row['baseline']['name']} ({row['dataset']})", fontsize=9)
        ax.set_xlabel("MACs at 224 px (G)")
        ax.set_ylabel("top-1 (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    st = result["settings"]
    schedule = ", ".join(
        f"{space} {st['training']['epochs'][space]} epochs ({st['training_to_proxy_images'][space]:.3g}x its "
        "proxy's images)"
        for space in dict.fromkeys(row["space"] for row in rows)
    )
    fig.suptitle(
        f"found vs baseline on {st['training']['device']}: {schedule}, mean +- std over seeds", fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM (kill, a job scheduler) exits through Python, so subprocess.run kills the `nas train` it waits
    # on: by default this process would die alone and leave its training running, a second writer of the
    # checkpoint the next run resumes
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    study = Study(args)
    if args.status:
        print(study.status())
        return 0
    failed = study.run()
    result = study.write()
    print()
    print(markdown(result))
    if failed:
        print(f"{len(failed)} failed (a rerun retries them):\n" + "\n".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How well each evaluator ranks architectures, against a reference trained with 10x the proxy's compute.

The study samples ``--n`` distinct architectures of the ``coatnet`` space (seeded: ``sample_random(seed * 1000
+ i)``, deduplicated by the key of the network the CPU proxy profile shrinks them to, since that network is
what every evaluator here sees) and scores each with:

- ``reference``: the shrunk network (``profile.apply(arch)`` at the profile's 32 px) trained from the same
  seed for ``--ref-epochs`` (2) epochs of ``--ref-samples`` (10000) Fashion-MNIST images at batch
  ``--ref-batch`` (128), validated once at the end on the whole 6000-image held-out split. Its compute, in
  trained images, is computed against the proxy's and written to the JSON (10x by default);
- ``proxy``: :func:`evaluators.proxy.train_proxy` under the space's ``cpu`` profile as it is (1 epoch of 2000
  images, batch 64, validated on 2000 images), or a variant (``--proxy-epochs``, ``--proxy-samples``,
  ``--proxy-batch``, ``--proxy-lr``);
- ``oneshot``: :class:`evaluators.oneshot.OneShotEvaluator` with its default config, trained once (its
  seconds are reported in total and amortised over the N architectures), then scoring every architecture;
  skipped, and the JSON says why, with ``--no-oneshot`` or when ``evaluators.oneshot`` does not import;
- the training-free rankers of :mod:`evaluators.zero_cost` on the same shrunk network (1 input channel,
  10 classes, 32 px): ``params``, ``macs``, ``synflow`` and ``naswot`` (on the first training minibatch of
  the proxy's batch size). Higher is better for every score, as that module defines them.

For each evaluator it reports Spearman's rho, Kendall's tau-b, tau-b within the reference's top 10% (at least
5 architectures; :func:`evaluators.ranking.kendall_top`), precision@5 and the cost in seconds per
architecture. Results of every part are cached per architecture in ``--cache-dir`` (``runs/evaluator_quality/
cache.json``), keyed by the arch key and that part's settings, so an interrupted run resumes and a variant
recomputes only the part whose settings changed.

Run from the repository root (the default run fits in about an hour on 2 CPU cores; the references take most
of it)::

    .venv/bin/python benchmarks/evaluator_quality.py [--no-oneshot] [--n 20] [--seed 0]

It writes ``evaluator_quality.json`` (settings, per-architecture rows, per-evaluator summary, timings) and
``evaluator_quality.png`` (reference top-1 against each evaluator's score) under ``--out``
(``benchmarks/results``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Imported after the repository root is on the path.
from evaluators import zero_cost  # noqa: E402
from evaluators.data import DataSplit, load_dataset, loaders  # noqa: E402
from evaluators.proxy import TrainConfig, TrainingDiverged, train_proxy  # noqa: E402
from evaluators.ranking import kendall_tau, kendall_top, precision_at_k, spearman  # noqa: E402
from nas.arch import Arch  # noqa: E402
from nas.model import build_model, count_params  # noqa: E402
from search_spaces import get_space  # noqa: E402
from search_spaces.base import ProxyProfile, SearchSpace  # noqa: E402

SPACE, PROFILE, DATASET = "coatnet", "cpu", "fashion-mnist"
ZERO_COST = ("params", "macs", "synflow", "naswot")
EVALUATORS = ("proxy", "oneshot", *ZERO_COST)
TOP_FRAC, TOP_MIN, PRECISION_K = 0.1, 5, 5
MIN_PROXY_SPEARMAN = 0.8  # acceptance: the proxy ranks like the reference, and better than counting


# --- the cache -------------------------------------------------------------------------------------------


def settings_id(settings: dict[str, Any]) -> str:
    """A short stable name for a part's settings (what its cached results depend on)."""
    blob = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


class Cache:
    """Per-architecture results of each part, in one JSON file, written after every new result.

    An entry is keyed by ``part/settings_id/arch key``; the settings themselves are stored once under their
    id so the file says what each result was computed with.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"settings": {}, "results": {}}
        if path.exists():
            self.data = json.loads(path.read_text())

    def get(self, part: str, settings: dict[str, Any], key: str) -> dict[str, Any] | None:
        return self.data["results"].get(f"{part}/{settings_id(settings)}/{key}")

    def put(self, part: str, settings: dict[str, Any], key: str, result: dict[str, Any]) -> None:
        sid = settings_id(settings)
        self.data["settings"][sid] = {"part": part, **settings}
        self.data["results"][f"{part}/{sid}/{key}"] = result
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))  # -inf is written as -Infinity: Python reads it back
        os.replace(tmp, self.path)  # atomic: an interrupted write never corrupts the cache

    def cached(
        self, part: str, settings: dict[str, Any], key: str, compute: Callable[[], dict[str, Any]]
    ) -> tuple[dict[str, Any], bool]:
        """(result, True if it came from the cache)."""
        hit = self.get(part, settings, key)
        if hit is not None:
            return hit, True
        result = compute()
        self.put(part, settings, key, result)
        return result, False


# --- the parts -------------------------------------------------------------------------------------------


def sample_archs(space: SearchSpace, profile: ProxyProfile, n: int, seed: int) -> list[tuple[int, Arch]]:
    """``n`` (sample seed, arch) with distinct shrunk networks, drawn with seeds ``seed * 1000 + i``."""
    out: list[tuple[int, Arch]] = []
    seen: set[str] = set()
    for i in range(1000):
        arch = space.sample_random(seed * 1000 + i)
        key = profile.apply(arch).key
        if key not in seen:
            seen.add(key)
            out.append((seed * 1000 + i, arch))
            if len(out) == n:
                return out
    raise RuntimeError(f"found only {len(out)} distinct architectures in 1000 samples")


def trained_images(profile: ProxyProfile, data: DataSplit) -> int:
    """Images a training run under ``profile`` passes forward and backward (the last partial batch of an
    epoch is dropped)."""
    samples = min(profile.train_samples or len(data.train), len(data.train))
    return profile.epochs * (samples // profile.batch_size) * profile.batch_size


def train_part(
    arch: Arch, profile: ProxyProfile, data: DataSplit, seed: int, config: TrainConfig
) -> dict[str, Any]:
    """Top-1 after training ``profile.apply(arch)`` from ``seed``; ``seconds`` is the whole call's wall time
    (build, training, validation). A diverged run scores None (ranked last)."""
    start = time.perf_counter()
    try:
        out = train_proxy(arch, profile, data, seed=seed, config=config)
    except TrainingDiverged as err:
        return {"top1": None, "diverged": str(err), "seconds": time.perf_counter() - start}
    return {
        "top1": out["top1"],
        "loss": out["loss"],
        "train_loss": out["train_loss"],
        "train_seconds": out["train_seconds"],
        "eval_seconds": out["eval_seconds"],
        "seconds": time.perf_counter() - start,
        "proxy_params": out["params"],
    }


def zero_cost_part(net: Arch, data: DataSplit, batch: torch.Tensor, seed: int) -> dict[str, Any]:
    """Every zero-cost score of the shrunk network ``net`` and its seconds. ``params`` and ``macs`` share
    one fvcore trace (cached in :mod:`evaluators.zero_cost`): the trace is charged to ``params``."""
    out: dict[str, Any] = {}
    task = {"img_size": data.img_size, "in_chans": data.in_chans, "num_classes": data.num_classes}
    for name in ZERO_COST:
        start = time.perf_counter()
        out[name] = zero_cost.score(name, net, batch=batch, seed=seed, **task)
        out[f"{name}_seconds"] = time.perf_counter() - start
    return out


def full_params(arch: Arch) -> int:
    """Parameters of the unshrunk architecture (ImageNet task: 3 channels, 1000 classes), built on the meta
    device: for the rows only, not a ranker."""
    with torch.device("meta"):
        return count_params(build_model(arch, num_classes=1000, in_chans=3, img_size=224))


def first_batch(data: DataSplit, batch_size: int, seed: int) -> torch.Tensor:
    """The first shuffled training minibatch: NASWOT's input."""
    train, _ = loaders(data, batch_size, seed=seed, train_samples=batch_size * 4, device="cpu")
    return next(iter(train))[0]


class OneShot:
    """The one-shot evaluator, trained lazily once (skipped if every score is cached), or why it is absent."""

    def __init__(self, args: argparse.Namespace, space: SearchSpace, profile: ProxyProfile, data: DataSplit):
        self.skipped: str | None = None
        self.settings: dict[str, Any] = {}
        self.evaluator: Any = None
        self.train_info: dict[str, Any] | None = None
        if args.no_oneshot:
            self.skipped = "--no-oneshot"
            return
        try:
            from evaluators.oneshot import OneShotConfig, OneShotEvaluator
        except ImportError as err:
            self.skipped = f"evaluators.oneshot does not import: {err}"
            return
        overrides = {"epochs": args.oneshot_epochs, "train_samples": args.oneshot_samples}
        config = OneShotConfig(**{k: v for k, v in overrides.items() if v is not None})
        self.settings = {
            "profile": dataclasses.asdict(profile),
            "config": dataclasses.asdict(config),
            "seed": args.seed,
            "data": data.describe(),
        }
        self._make = lambda run_dir: OneShotEvaluator(
            space, profile, data, seed=args.seed, config=config, run_dir=run_dir
        )
        self.run_dir = Path(args.cache_dir) / f"oneshot-{settings_id(self.settings)}"

    def trained(self, cache: Cache) -> dict[str, Any]:
        """The supernet's training info (from the cache, or by training / resuming it now)."""
        if self.train_info is None:
            self.train_info = cache.get("oneshot-train", self.settings, "supernet")
        if self.train_info is None:
            self._ensure()
            print(f"training the one-shot supernet (checkpoints in {self.run_dir}) ...", flush=True)
            info = self.evaluator.train()
            self.train_info = {k: v for k, v in info.items() if isinstance(v, (int, float, str))}
            cache.put("oneshot-train", self.settings, "supernet", self.train_info)
            print(f"supernet trained: {self.train_info.get('train_seconds', math.nan):.0f} s", flush=True)
        return self.train_info

    def _ensure(self) -> None:
        if self.evaluator is None:
            self.evaluator = self._make(self.run_dir)

    def evaluate(self, arch: Arch) -> dict[str, Any]:
        self._ensure()
        start = time.perf_counter()
        out = self.evaluator.evaluate(arch)
        return {
            "top1": out["top1"],
            "eval_seconds": out["eval_seconds"],
            "seconds": time.perf_counter() - start,
        }


# --- the study -------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="number of architectures (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="sampling, split and training seed")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="JSON and PNG folder")
    parser.add_argument("--cache-dir", default=str(ROOT / "runs" / "evaluator_quality"))
    parser.add_argument("--no-oneshot", action="store_true", help="skip the one-shot evaluator")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    variant = parser.add_argument_group("proxy variant (default: the cpu profile as it is)")
    variant.add_argument("--proxy-epochs", type=int)
    variant.add_argument("--proxy-samples", type=int, help="training images per epoch")
    variant.add_argument("--proxy-batch", type=int)
    variant.add_argument("--proxy-lr", type=float, help="AdamW learning rate (TrainConfig default 1e-3)")
    ref = parser.add_argument_group("reference")
    ref.add_argument("--ref-epochs", type=int, default=2)
    ref.add_argument("--ref-samples", type=int, default=10000, help="training images per epoch")
    ref.add_argument("--ref-batch", type=int, default=128)
    ref.add_argument("--ref-val", type=int, default=None, help="validation images (default: all 6000)")
    oneshot = parser.add_argument_group("one-shot (default: OneShotConfig())")
    oneshot.add_argument("--oneshot-epochs", type=int)
    oneshot.add_argument("--oneshot-samples", type=int)
    return parser.parse_args(argv)


def profiles(args: argparse.Namespace, base: ProxyProfile) -> tuple[ProxyProfile, ProxyProfile]:
    """(proxy, reference) profiles: the same shrunk network, trained shorter or longer."""
    changes = {
        "epochs": args.proxy_epochs,
        "train_samples": args.proxy_samples,
        "batch_size": args.proxy_batch,
    }
    changes = {k: v for k, v in changes.items() if v is not None}
    proxy = dataclasses.replace(base, **changes)
    if proxy != base:
        proxy = dataclasses.replace(proxy, name=f"{base.name}-variant", description=_describe(proxy))
    reference = dataclasses.replace(
        base,
        name=f"{base.name}-reference",
        epochs=args.ref_epochs,
        train_samples=args.ref_samples,
        val_samples=args.ref_val,
        batch_size=args.ref_batch,
    )
    return proxy, dataclasses.replace(reference, description=_describe(reference))


def _describe(profile: ProxyProfile) -> str:
    val = "all" if profile.val_samples is None else profile.val_samples
    return (
        f"the {PROFILE} profile's network trained {profile.epochs} epoch(s) of {profile.train_samples} "
        f"images at batch {profile.batch_size}, validated on {val} images"
    )


def run_study(args: argparse.Namespace) -> dict[str, Any]:
    wall_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    space = get_space(SPACE)
    base = space.profile(PROFILE)
    proxy_profile, ref_profile = profiles(args, base)
    proxy_config = TrainConfig() if args.proxy_lr is None else TrainConfig(lr=args.proxy_lr)
    ref_config = TrainConfig(eval_every=1000)  # validate once, after the last epoch
    data = load_dataset(DATASET, img_size=base.img_size, seed=args.seed)
    cache = Cache(Path(args.cache_dir) / "cache.json")
    oneshot = OneShot(args, space, base, data)

    shape = {f: getattr(base, f) for f in ("img_size", "width_mult", "depth_mult", "relax_strides")}
    part_settings = {
        "proxy": {
            "profile": dataclasses.asdict(proxy_profile),
            "config": dataclasses.asdict(proxy_config),
            "seed": args.seed,
            "data": data.describe(),
        },
        "reference": {
            "profile": dataclasses.asdict(ref_profile),
            "config": dataclasses.asdict(ref_config),
            "seed": args.seed,
            "data": data.describe(),
        },
        "zero_cost": {
            "shape": shape,
            "naswot_batch": proxy_profile.batch_size,
            "seed": args.seed,
            "data": data.describe(),
        },
    }
    naswot_batch = first_batch(data, proxy_profile.batch_size, args.seed)
    archs = sample_archs(space, base, args.n, args.seed)

    oneshot_info = None
    if oneshot.skipped is None:
        oneshot_info = oneshot.trained(cache)

    rows = []
    for i, (sample_seed, arch) in enumerate(archs, start=1):
        net = base.apply(arch)
        print(f"[{i}/{len(archs)}] {arch.key}  (proxy network {net.key})", flush=True)
        row: dict[str, Any] = {"key": arch.key, "proxy_key": net.key, "sample_seed": sample_seed}
        row["params_full"] = full_params(arch)
        zc, hit = cache.cached(
            "zero_cost",
            part_settings["zero_cost"],
            net.key,
            lambda net=net: zero_cost_part(net, data, naswot_batch, args.seed),
        )
        row.update(zc)
        print(
            "    "
            + ", ".join(f"{n} {zc[n]:.4g} ({zc[f'{n}_seconds']:.1f} s)" for n in ZERO_COST)
            + (" [cached]" if hit else ""),
            flush=True,
        )
        for part, profile, config in (
            ("proxy", proxy_profile, proxy_config),
            ("reference", ref_profile, ref_config),
        ):
            result, hit = cache.cached(
                part,
                part_settings[part],
                net.key,
                lambda arch=arch, profile=profile, config=config: train_part(
                    arch, profile, data, args.seed, config
                ),
            )
            row[part] = result
            print(f"    {part}: {_fmt_top1(result)} ({result['seconds']:.1f} s)" + _cached(hit), flush=True)
        if oneshot.skipped is None:
            result, hit = cache.cached(
                "oneshot", oneshot.settings, net.key, lambda arch=arch: oneshot.evaluate(arch)
            )
            row["oneshot"] = result
            print(f"    oneshot: {_fmt_top1(result)} ({result['seconds']:.1f} s)" + _cached(hit), flush=True)
        rows.append(row)

    proxy_images, ref_images = trained_images(proxy_profile, data), trained_images(ref_profile, data)
    settings = {
        "space": SPACE,
        "n": len(archs),
        "seed": args.seed,
        "sample_seeds": [seed for seed, _ in archs],
        "dataset": data.describe(),
        "proxy_profile": dataclasses.asdict(proxy_profile),
        "proxy_config": dataclasses.asdict(proxy_config),
        "proxy_is_cpu_profile": proxy_profile == base and proxy_config == TrainConfig(),
        "reference_profile": dataclasses.asdict(ref_profile),
        "reference_config": dataclasses.asdict(ref_config),
        "trained_images": {"proxy": proxy_images, "reference": ref_images},
        "reference_to_proxy_compute": ref_images / proxy_images,
        "zero_cost_network": (
            f"the proxy network profile.apply(arch) at {base.img_size} px, {data.in_chans} channel(s), "
            f"{data.num_classes} classes; naswot on the first training minibatch of "
            f"{proxy_profile.batch_size}"
        ),
        "oneshot": {"skipped": oneshot.skipped} if oneshot.skipped else {"skipped": None, **oneshot.settings},
        "cost_note": (
            "seconds per arch are wall seconds of each call (proxy and reference: build, training and "
            "validation); params and macs share one fvcore trace, charged to params; the one-shot "
            "supernet's training is amortised over the n architectures"
        ),
        "ranking": {"top_frac": TOP_FRAC, "top_min": TOP_MIN, "precision_k": PRECISION_K},
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "device": "cpu" if not torch.cuda.is_available() else torch.cuda.get_device_name(),
    }
    summary = summarize(rows, oneshot_info, len(archs))
    return {
        "settings": settings,
        "summary": summary,
        "acceptance": acceptance(summary),
        "costs": costs(rows, oneshot_info),
        "rows": rows,
        "wall_seconds": time.perf_counter() - wall_start,
    }


def _fmt_top1(result: dict[str, Any]) -> str:
    return "diverged" if result["top1"] is None else f"{result['top1']:.2f}%"


def _cached(hit: bool) -> str:
    return " [cached]" if hit else ""


def _score(value: float | None) -> float:
    """A score for ranking: None (diverged) and -inf are the worst possible."""
    return -math.inf if value is None else float(value)


def scores(rows: list[dict[str, Any]], name: str) -> list[float] | None:
    """Each row's score under evaluator ``name`` (higher is better), None when it was not run."""
    if name in ("proxy", "oneshot", "reference"):
        if name not in rows[0]:
            return None
        return [_score(row[name]["top1"]) for row in rows]
    return [_score(row[name]) for row in rows]


def summarize(rows: list[dict[str, Any]], oneshot_info: dict[str, Any] | None, n: int) -> dict[str, Any]:
    """Rank agreement of every evaluator with the reference, over the rows whose reference did not diverge."""
    valid = [row for row in rows if row["reference"]["top1"] is not None]
    ref = scores(valid, "reference")
    out: dict[str, Any] = {}
    for name in EVALUATORS:
        pred = scores(valid, name)
        if pred is None:
            out[name] = None
            continue
        top = kendall_top(ref, pred, frac=TOP_FRAC, min_items=TOP_MIN)
        out[name] = {
            "spearman": spearman(ref, pred),
            "kendall": kendall_tau(ref, pred),
            "kendall_top10": top.tau,
            "kendall_top10_count": top.count,
            "precision_at_5": precision_at_k(ref, pred, k=PRECISION_K),
            "seconds_per_arch": seconds_per_arch(rows, name, oneshot_info, n),
        }
        if name == "oneshot" and oneshot_info is not None:
            out[name]["train_seconds_total"] = oneshot_info["train_seconds"]
            out[name]["train_seconds_amortised"] = oneshot_info["train_seconds"] / n
    out["reference"] = {"seconds_per_arch": seconds_per_arch(rows, "reference", None, n), "n": len(valid)}
    return out


def seconds_per_arch(
    rows: list[dict[str, Any]], name: str, oneshot_info: dict[str, Any] | None, n: int
) -> float:
    if name in ("proxy", "reference", "oneshot"):
        mean = sum(row[name]["seconds"] for row in rows) / len(rows)
        if name == "oneshot" and oneshot_info is not None:
            mean += oneshot_info["train_seconds"] / n  # the supernet's training, amortised
        return mean
    return sum(row[f"{name}_seconds"] for row in rows) / len(rows)


def costs(rows: list[dict[str, Any]], oneshot_info: dict[str, Any] | None) -> dict[str, Any]:
    """Total seconds of every part (cached results count with the seconds they took when computed)."""
    out: dict[str, Any] = {
        part: sum(row[part]["seconds"] for row in rows)
        for part in ("proxy", "reference", "oneshot")
        if part in rows[0]
    }
    out["zero_cost"] = {name: sum(row[f"{name}_seconds"] for row in rows) for name in ZERO_COST}
    if oneshot_info is not None:
        out["oneshot_train"] = oneshot_info["train_seconds"]
        out["oneshot_eval"] = out.pop("oneshot")
    out["reference_to_proxy_seconds"] = out["reference"] / out["proxy"]
    return out


def acceptance(summary: dict[str, Any]) -> dict[str, Any]:
    proxy = summary["proxy"]["spearman"]
    return {
        f"proxy_spearman_at_least_{MIN_PROXY_SPEARMAN}": proxy >= MIN_PROXY_SPEARMAN,
        "proxy_beats_params": proxy > summary["params"]["spearman"],
        "proxy_beats_macs": proxy > summary["macs"]["spearman"],
    }


# --- output ----------------------------------------------------------------------------------------------


def finite(value: Any) -> Any:
    """The JSON value with every non-finite float as None (strict JSON has no NaN or infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def table(summary: dict[str, Any]) -> str:
    head = f"{'evaluator':<10} {'spearman':>9} {'kendall':>8} {'tau top':>10} {'prec@5':>7} {'s/arch':>8}"
    lines = [head, "-" * len(head)]
    for name in EVALUATORS:
        s = summary[name]
        if s is None:
            lines.append(f"{name:<10} {'skipped':>9}")
            continue
        top = f"{s['kendall_top10']:.3f} ({s['kendall_top10_count']})"
        lines.append(
            f"{name:<10} {s['spearman']:>9.3f} {s['kendall']:>8.3f} {top:>10} {s['precision_at_5']:>7.2f} "
            f"{s['seconds_per_arch']:>8.2f}"
        )
    lines.append(
        f"{'reference':<10} {'':>9} {'':>8} {'':>10} {'':>7} {summary['reference']['seconds_per_arch']:>8.2f}"
    )
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    rows = [row for row in result["rows"] if row["reference"]["top1"] is not None]
    names = [name for name in EVALUATORS if result["summary"][name] is not None]
    cols = 3
    fig, axes = plt.subplots(
        math.ceil(len(names) / cols),
        cols,
        figsize=(4.2 * cols, 3.6 * math.ceil(len(names) / cols)),
        squeeze=False,
    )
    ref = scores(rows, "reference")
    for ax, name in zip(axes.flat, names, strict=False):
        pred = scores(rows, name)
        points = [(p, r) for p, r in zip(pred, ref, strict=True) if math.isfinite(p)]
        ax.scatter([p for p, _ in points], [r for _, r in points], s=18)
        if name in ("params", "macs"):
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # the minor labels of a short decade overlap
        dropped = len(pred) - len(points)
        s = result["summary"][name]
        ax.set_title(
            f"{name}: rho {s['spearman']:.2f}, tau {s['kendall']:.2f}"
            + (f" ({dropped} at -inf)" if dropped else ""),
            fontsize=10,
        )
        label = {
            "proxy": "proxy top-1 (%)",
            "oneshot": "one-shot top-1 (%)",
            "params": "params (proxy net)",
            "macs": "MACs (proxy net)",
        }
        ax.set_xlabel(label.get(name, f"{name} score"))
        ax.set_ylabel("reference top-1 (%)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    st = result["settings"]
    fig.suptitle(
        f"{st['space']} x {st['dataset']['dataset']}: {st['n']} archs, reference = "
        f"{st['reference_to_proxy_compute']:.1f}x the proxy's trained images",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run_study(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluator_quality.json").write_text(json.dumps(finite(result), indent=1) + "\n")
    plot(result, out / "evaluator_quality.png")
    print()
    print(table(result["summary"]))
    print(f"part totals (s): {json.dumps(finite(result['costs']), default=str)}")
    print(f"acceptance: {result['acceptance']}")
    print(f"wall time {result['wall_seconds']:.0f} s; wrote {out / 'evaluator_quality.json'} and .png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

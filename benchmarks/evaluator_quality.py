"""How well each evaluator ranks architectures, against a reference trained with >= 50x the proxy's images.

One study is a (space, seed) pair: ``--space coatnet sasa`` and ``--seed 1 2`` (the defaults) are four. A
study samples ``--n`` (20) distinct architectures of the space (``sample_random(seed * 1000 + i)``,
deduplicated by the key of the network the space's CPU proxy profile shrinks them to, since that network is
what every evaluator here sees) and scores each with:

- ``reference``: the shrunk network (``profile.apply(arch)`` at the profile's 32 px) trained from the study's
  seed for ``--ref-epochs`` epochs of ``--ref-samples`` Fashion-MNIST images at batch ``--ref-batch`` (per
  space, :data:`REFERENCES`: coatnet 4 x 50000, sasa 11 x all 54000, both at batch 128: about 50x the cpu
  profile's trained images), validated once at the end on the whole 6000-image held-out split. The JSON
  states the multiple;
- ``reference:repeat`` (``--ref-repeats K``, default none): the first K architectures' references trained
  again from the study's seed + 1000, same data and schedule. The reference is one training run, so it has
  noise of its own: the repeats estimate it, and from it the Spearman that a perfect evaluator (one that
  knew each architecture's expected reference top-1) would reach against this one reference
  (:func:`reference_noise`), the ceiling the targets are read against;
- ``proxy``: :func:`evaluators.proxy.train_proxy` under each variant of ``--variants`` (default: the space's
  :data:`VARIANTS`). A variant is named by what it changes in the space's ``cpu`` profile: ``cpu`` is the
  profile as it is, ``e2-n4000-b128-v6000-lr3e-3`` trains 2 epochs (``e``) of 4000 images (``n``) at batch
  128 (``b``), validates on 6000 images (``v``) with AdamW's learning rate 3e-3 (``lr``); a field a name does
  not give is the profile's. Every variant must train at most a tenth of the reference's images;
- ``oneshot``: :class:`evaluators.oneshot.OneShotEvaluator` under each one-shot variant of
  ``--oneshot-variants`` (default: the space's :data:`ONESHOT_VARIANTS`): ``default`` is ``OneShotConfig()``
  (reported as ``oneshot``), ``e8-bn32`` trains the supernet 8 epochs (``e``) and recalibrates BatchNorm on
  32 batches (``bn``) before scoring (also ``n`` images per epoch, ``lr``, ``p`` random paths per step,
  ``sw`` the sandwich rule, ``ft`` fine-tuning steps; reported as ``oneshot:e8-bn32``). Each supernet is
  trained once (its seconds are reported in total and amortised over the N architectures; variants that
  differ only in how they score share one), then scores every architecture; skipped, and the JSON says
  why, with ``--no-oneshot`` or when ``evaluators.oneshot`` does not import;
- the training-free rankers of :mod:`evaluators.zero_cost` on the same shrunk network (1 input channel,
  10 classes, 32 px): ``params``, ``macs``, ``synflow`` and ``naswot`` (on the first training minibatch of
  the cpu profile's batch size). Higher is better for every score, as that module defines them.

For each evaluator it reports Spearman's rho, Kendall's tau-b, tau-b within the reference's top 10% (at least
5 architectures; :func:`evaluators.ranking.kendall_top`), precision@5 and the cost in wall seconds per
architecture (and in this process's CPU seconds, which a shared machine's other load does not lengthen), and
which proxy variant ranks best and whether it beats the ``cpu`` profile's own proxy. Each rank metric comes
with its 95% percentile bootstrap interval over the study's architectures (``"spearman_ci": [lo, hi]`` in
the JSON, ``0.921 [0.76, 0.97]`` in the tables): ``--resamples`` (2000) resamples with replacement, seeded
per study, every evaluator of a study resampled alike; a resample with fewer than 3 distinct architectures,
or one where a metric is undefined (a constant vector), is skipped (``ci_resamples`` counts the rest). The
statistic is :mod:`evaluators.ranking`'s, as for the figure. With 20 architectures the intervals are wide
(a Spearman of 0.83 reads [0.54, 0.94]), and the top-10% tau's, over 5, spans [-1, 1].

In sample and out of sample. Today's defaults, the space's ``cpu`` profile and ``OneShotConfig()``, were
chosen on the studies of seeds 1 and 2 (:data:`IN_SAMPLE_SEEDS`; notes/lab-notebook.md, "Evaluator
quality"), so their figures there are in sample. Any other seed is out of sample: its sample seeds
``seed * 1000 + i`` (i < 1000) are disjoint from theirs by construction, and a draw whose shrunk network one
of the in-sample studies has (what every evaluator here sees) is skipped (``excluded_sample_seeds``; sasa
seed 3's draw 3004, one of seed 1's networks). ``--frozen`` runs only the frozen defaults' evaluators
(:data:`FROZEN`: proxy ``cpu``, ``oneshot``, the zero-cost scores) besides the reference, so a fresh study
(``--seed 3 4``) spends nothing on variants; ``--out-of-sample`` prints, per space, those evaluators' Spearman
and Kendall per seed, in sample (1, 2) beside out of sample (the other seeds of ``--seed``, else 3 and 4),
each with its interval, and each group's mean with the interval of the mean ("not measured yet" where a
study's cache lacks them), from the caches without training anything.

The cheap parts run first (zero-cost scores, the one-shot supernet and its scores, every proxy variant), then
the references one architecture at a time. Every result is cached as it is computed, in one small JSON file
per study, ``--cache-dir``/``<space>-s<seed>.json`` (``benchmarks/results/evaluator_quality/cache/``,
committed: no weights), keyed by the shrunk network's key and that part's settings (and ``--device``'s
type, except the CPU's), so a run stopped anywhere (Ctrl-C, a
kill, ``--stop-after``) resumes in a later session and computes only what is missing. The one-shot
supernet's checkpoints stay under ``--supernet-dir`` (``runs/evaluator_quality/``, not committed); once its
scores are cached it is not needed again. Each training keeps its epochs there too until its result is
cached, so a reference killed mid-run continues from its last finished epoch (its cost columns count the
earlier processes' epochs; ``resumed_epochs`` says how many). ``--status`` prints what is done, in progress
and left per part, and ``--markdown`` the README's tables, both from the cache without training anything.

Run from the repository root::

    .venv/bin/python benchmarks/evaluator_quality.py --space coatnet --seed 1   # one study; resumable
    .venv/bin/python benchmarks/evaluator_quality.py --status                   # all four studies
    .venv/bin/python benchmarks/evaluator_quality.py --markdown
    .venv/bin/python benchmarks/evaluator_quality.py --space sasa --seed 1 --device cuda  # on a GPU, in bf16
    .venv/bin/python benchmarks/evaluator_quality.py --space coatnet --seed 3 4 --frozen  # out of sample
    .venv/bin/python benchmarks/evaluator_quality.py --out-of-sample              # in beside out of sample

``--device cuda`` trains the proxies, the references and the one-shot supernet on the GPU (the zero-cost
scores stay on the CPU); its results are cached apart from the CPU's and written as ``<space>-s<seed>-cuda``.

Each study writes ``evaluator_quality-<space>-s<seed>.json`` (settings, per-architecture rows, per-evaluator
summary, timings; ``"partial": true`` while references are missing) and ``.png`` (reference top-1 against each
evaluator's score) under ``--out`` (``benchmarks/results/evaluator_quality``). The earlier 10x study
(coatnet, seed 0, one proxy, ``benchmarks/results/evaluator_quality/archive/evaluator_quality.json``) is
``--space coatnet --seed 0 --variants cpu --ref-samples 10000``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import math
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Imported after the repository root is on the path.
from evaluators import zero_cost  # noqa: E402
from evaluators.batches import loaders  # noqa: E402
from evaluators.checkpoint import load_checkpoint  # noqa: E402
from evaluators.data import DataSplit, load_dataset  # noqa: E402
from evaluators.proxy import (  # noqa: E402
    ADDED_FIELDS,
    TrainConfig,
    TrainingDiverged,
    TrainingStopped,
    train_proxy,
)
from evaluators.ranking import kendall_tau, kendall_top, precision_at_k, spearman  # noqa: E402
from nas.core.arch import Arch  # noqa: E402
from nas.core.atomic import locked, merge_json, replaced  # noqa: E402
from nas.core.model import build_model, count_params  # noqa: E402
from nas.system.processes import process_alive, this_process  # noqa: E402
from search_spaces import get_space  # noqa: E402
from search_spaces.base import ProxyProfile, SearchSpace  # noqa: E402

PROFILE, DATASET = "cpu", "fashion-mnist"
SPACES = ("coatnet", "sasa")
# The seeds the defaults a search uses were chosen on, so their figures are in sample: the cpu profiles
# (coatnet's 4000-image proxy, picked against these seeds' 25x references and kept against the 50x ones;
# sasa's 10 epochs, picked on both seeds' figures) and OneShotConfig(), kept after its variants were
# measured against it on these seeds, ten in coatnet (notes/lab-notebook.md, "Evaluator quality"). Any
# other seed samples fresh architectures (sample seeds seed * 1000 + i, i < 1000: disjoint from these by
# construction, and the in-sample studies' shrunk networks are skipped, :meth:`Study.__init__`) and is out
# of sample.
IN_SAMPLE_SEEDS = (1, 2)
OUT_OF_SAMPLE_SEEDS = (3, 4)  # the first fresh seeds: what --out-of-sample shows unless --seed names others
STUDY_SEEDS = IN_SAMPLE_SEEDS  # the study's default seeds; seed 0 was the earlier 10x study's
DEFAULT_N = 20  # architectures per study (--n), as the in-sample studies sampled them
ZERO_COST = ("params", "macs", "synflow", "naswot")
TOP_FRAC, TOP_MIN, PRECISION_K = 0.1, 5, 5
STEM_MIN = 3  # references a stem needs before :func:`by_stem` compares it with another
MIN_PROXY_SPEARMAN = 0.8  # targets of issue 18: the proxy ranks like the reference, and better than counting;
MIN_ONESHOT_KENDALL = 0.6  # the one-shot supernet well enough to search with
MAX_VARIANT_SHARE = 0.1  # a proxy variant trains at most this share of the reference's images
DEFAULT_VARIANT = "cpu"  # the space's cpu profile as it is: the proxy a search uses
DEFAULT_ONESHOT = "default"  # OneShotConfig() as it is: the one-shot evaluator a search uses
# The rank metrics each evaluator is reported with, each with a percentile bootstrap interval over the
# study's architectures (:func:`bootstrap_rank_metrics`): BOOTSTRAP_RESAMPLES resamples (``--resamples``)
# drawn with numpy's generator seeded (BOOTSTRAP_SEED, study seed); a resample with fewer than
# BOOTSTRAP_MIN_DISTINCT distinct architectures is skipped, and so is a metric undefined on it (a constant
# vector).
METRICS = ("spearman", "kendall", "kendall_top10", "precision_at_5")
BOOTSTRAP_RESAMPLES, BOOTSTRAP_LEVEL, BOOTSTRAP_SEED, BOOTSTRAP_MIN_DISTINCT = 2000, 0.95, 0, 3
# The evaluators of today's defaults, frozen: the space's cpu profile's proxy, OneShotConfig()'s supernet and
# the training-free rankers (``--frozen`` runs these only; ``--out-of-sample`` compares them across seeds).
FROZEN = (f"proxy:{DEFAULT_VARIANT}", "oneshot", *ZERO_COST)
# Profile fields the one-shot evaluator does not read (it trains on OneShotConfig's schedule), left out of
# its results' cache key so a change of the proxy's schedule does not retrain the supernet.
ONESHOT_IGNORES = ("name", "description", "epochs", "train_samples", "batch_size")
# ``--ref-repeats K`` trains the first K architectures' references again from the study's seed plus this (the
# same data split and schedule; only the initialisation and the batches' order change): the part
# ``REPEAT``, which measures the reference's own noise (:func:`reference_noise`).
REPEAT, REPEAT_SEED_OFFSET = "reference:repeat", 1000

# The reference schedule per space, at least 50x the trained images of the space's cpu profile when its
# study began: coatnet's proxy trains 1 x 3968 images (since the first, 2-epoch reference, 25.2x it, ranked
# that variant best on both seeds; it trained 1 x 1984 then, n2000 below), 4 x 49920 is 50.3x; sasa's
# trained 2 x 5888 (e2 below), and 11 x 53888 (all 54000) is 50.3x that. Since these references ranked
# sasa's e10 best on both seeds, its cpu profile trains 10 x 5888, 10.07x below the reference: the longest
# schedule within MAX_VARIANT_SHARE, which a reference 50x it (55 epochs of the split) would lift again.
REFERENCES: dict[str, dict[str, int | None]] = {
    "coatnet": {"epochs": 4, "train_samples": 50000, "batch_size": 128},
    "sasa": {"epochs": 11, "train_samples": None, "batch_size": 128},
}
# Proxy variants per space (see parse_variant), each at most a tenth of the reference's images: longer,
# larger, larger-batch, higher-learning-rate and more-validated versions of the cpu profile's schedule, and
# bn8: the same training validated after recomputing BatchNorm's statistics on 8 training batches.
# sasa's cpu (10 x 5888 = 58880 images, e10 before it became the profile) is the longest at the
# tenth-of-the-reference limit (59277), and bn8 (e10-bn8 then) it validated after recalibrating BatchNorm; e2,
# e2-n12000, e2-lr3e-3 and e2-bn8 are the 2-epoch profile before it and its variants (cpu, n12000, lr3e-3 and
# bn8 then).
# coatnet's n2000, e2-n2000 and lr3e-3-n2000 are the cpu profile's 2000-image schedule before it changed
# and its e2 and lr3e-3 variants (a result is cached by its schedule, not its name).
VARIANTS: dict[str, tuple[str, ...]] = {
    "coatnet": ("cpu", "n2000", "e2-n2000", "n5000-b128", "lr3e-3-n2000", "n4000-v6000", "bn8"),
    "sasa": ("cpu", "e2", "e1", "e4", "e2-n12000", "e2-lr3e-3", "e2-bn8", "e1-bn8", "bn8"),
}
# One-shot variants per space (see parse_oneshot_variant): a longer-trained supernet, three paths per step
# (``p3``: random, or ``sw``: the sandwich rule's largest, smallest and a random one, at the same compute),
# and more careful scoring (more BatchNorm recalibration batches, fine-tuning steps of the extracted network).
ONESHOT_VARIANTS: dict[str, tuple[str, ...]] = {
    "coatnet": (
        DEFAULT_ONESHOT, "bn32", "ft20", "ft50", "e8-bn32", "e8-ft20", "e8-ft50", "e16-bn32", "e16-ft50",
        "p3-bn32", "sw-bn32",
    ),
    "sasa": (DEFAULT_ONESHOT, "e16-ft50"),  # coatnet's best on both seeds, to be measured here too
}  # fmt: skip
# A variant name's letters: the field each changes and its type (bool: a flag, the letters alone).
_PROXY_FIELDS: dict[str, tuple[str, type]] = {
    "e": ("epochs", int), "n": ("train_samples", int), "b": ("batch_size", int), "v": ("val_samples", int),
    "lr": ("lr", float), "bn": ("bn_recalibration", int),
}  # fmt: skip
_CONFIG_FIELDS = ("lr", "bn_recalibration")  # the variant fields of TrainConfig, not of the profile
_ONESHOT_FIELDS: dict[str, tuple[str, type]] = {
    "e": ("epochs", int), "n": ("train_samples", int), "lr": ("lr", float), "bn": ("bn_batches", int),
    "ft": ("finetune_steps", int), "p": ("random_paths", int), "sw": ("sandwich", bool),
}  # fmt: skip


# --- the cache -------------------------------------------------------------------------------------------


def settings_id(settings: dict[str, Any]) -> str:
    """A short stable name for a part's settings (what its cached results depend on)."""
    blob = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


class Cache:
    """Per-architecture results of each part, in one JSON file, written after every new result.

    An entry is keyed by ``part/settings_id/arch key``; the settings themselves are stored once under their
    id so the file says what each result was computed with. Several processes (``--shard``) share one file:
    a write holds an exclusive lock on ``<file>.lock``, reads the file again and adds its entry, so no
    process's result is lost to another's write.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = {"settings": {}, "results": {}}
        self.reload()

    def reload(self) -> None:
        """Read the file again: what other shards wrote since."""
        if self.path.exists():
            self.data = json.loads(self.path.read_text())

    def get(self, part: str, settings: dict[str, Any], key: str) -> dict[str, Any] | None:
        return self.data["results"].get(f"{part}/{settings_id(settings)}/{key}")

    def put(self, part: str, settings: dict[str, Any], key: str, result: dict[str, Any]) -> None:
        sid = settings_id(settings)

        def merged() -> dict[str, Any]:
            self.reload()  # what other shards wrote meanwhile, read under the lock
            self.data["settings"][sid] = {"part": part, **settings}
            self.data["results"][f"{part}/{sid}/{key}"] = result
            return self.data

        merge_json(self.path, merged)  # replaced atomically: an interrupted write never corrupts the cache


class Claims:
    """Which results the processes sharing a study are computing now, in one JSON file beside the supernets'
    checkpoints (not committed), so that no two processes compute one result: a shard takes the claim before
    it starts and gives it back once the result is cached. A claim names its process
    (:func:`nas.system.processes.this_process`); one whose process has ended on this machine (killed, or a
    session
    that ended) is void. A claim from another machine, or where that cannot be told, holds."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.me = this_process()

    def _read(self) -> dict[str, Any]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def _write(self, claims: dict[str, Any]) -> None:
        with replaced(self.path) as tmp:
            tmp.write_text(json.dumps(claims, indent=1, sort_keys=True) + "\n")

    def take(self, key: str) -> dict[str, Any] | None:
        """Claim ``key`` for this process: None if taken, else the live process that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with locked(self.path):
            claims = self._read()
            holder = claims.get(key)
            if holder is not None and holder != self.me and process_alive(holder) is not False:
                return holder
            claims[key] = self.me
            self._write(claims)
        return None

    def give_back(self, key: str) -> None:
        with locked(self.path):
            claims = self._read()
            if claims.get(key) == self.me:
                del claims[key]
                self._write(claims)


# --- the parts -------------------------------------------------------------------------------------------


def parse_fields(name: str, fields: dict[str, tuple[str, type]], what: str, example: str) -> dict[str, Any]:
    """The ``-``-joined tokens of variant ``name`` as {field: value}: each token is a field's letters and a
    positive value (``e2``, ``lr3e-3``), or a flag's letters alone (``sw``). ``what`` and ``example`` word
    the one-sentence refusal of anything else."""
    letters = "|".join(sorted(fields, key=len, reverse=True))  # longest first: bn before b
    token = re.compile(rf"({letters})([0-9][0-9.]*(?:e-?[0-9]+)?)?(-|$)")
    legend = ", ".join(f"{letter} {field}" for letter, (field, _) in fields.items())
    changes: dict[str, Any] = {}
    pos = 0
    while pos < len(name):
        match = token.match(name, pos)
        if match is None or (match.group(3) == "-" and match.end() == len(name)):
            raise ValueError(f"{what} {name!r}: not fields like {example} ({legend})")
        letter, value = match.group(1), match.group(2)
        field, kind = fields[letter]
        if field in changes:
            raise ValueError(f"{what} {name!r}: {letter} is given twice")
        if kind is bool:
            if value is not None:
                raise ValueError(f"{what} {name!r}: {letter} is a flag and takes no value, got {value!r}")
            changes[field] = True
        else:
            try:
                number = kind(value)
            except (TypeError, ValueError):
                number = -1
            if not number > 0:
                raise ValueError(
                    f"{what} {name!r}: {letter} must be a positive "
                    f"{'number' if kind is float else 'integer'}, got {value!r}"
                )
            changes[field] = number
        pos = match.end()
    return changes


def parse_variant(name: str, base: ProxyProfile) -> tuple[ProxyProfile, TrainConfig]:
    """The (profile, config) a proxy variant's name describes: ``cpu`` is ``base`` and the default
    config; otherwise ``-``-joined fields ``e<epochs>``, ``n<train images>``, ``b<batch>``, ``v<validation
    images>``, ``lr<AdamW learning rate>``, ``bn<BatchNorm calibration batches before validating>``, each
    changing that field of ``base`` (or of ``TrainConfig()``)."""
    if name == DEFAULT_VARIANT:
        return base, TrainConfig()
    changes = parse_fields(name, _PROXY_FIELDS, "proxy variant", "'cpu' or e2-n4000-b128-v6000-lr3e-3-bn8")
    config = {k: changes.pop(k) for k in _CONFIG_FIELDS if k in changes}
    profile = dataclasses.replace(base, name=f"{base.name}-{name}", **changes)
    profile = dataclasses.replace(profile, description=describe(profile))
    return profile, TrainConfig(**config)


def parse_oneshot_variant(name: str) -> Any:
    """The ``OneShotConfig`` a one-shot variant's name describes: ``default`` is ``OneShotConfig()``;
    otherwise ``-``-joined fields (``e8``, ``n20000``, ``lr1e-3``, ``bn32``, ``ft20``, ``p2``, ``sw``), each
    changing that field of the default."""
    from evaluators.oneshot import OneShotConfig

    if name == DEFAULT_ONESHOT:
        return OneShotConfig()
    return OneShotConfig(**parse_fields(name, _ONESHOT_FIELDS, "one-shot variant", "'default' or e8-bn32-sw"))


def oneshot_name(variant: str) -> str:
    """The evaluator's name in the results: ``oneshot`` for the default, ``oneshot:<variant>`` otherwise."""
    return "oneshot" if variant == DEFAULT_ONESHOT else f"oneshot:{variant}"


def describe(profile: ProxyProfile) -> str:
    val = "all" if profile.val_samples is None else profile.val_samples
    samples = "all" if profile.train_samples is None else profile.train_samples
    return (
        f"the {PROFILE} profile's network trained {profile.epochs} epoch(s) of {samples} images at batch "
        f"{profile.batch_size}, validated on {val} images"
    )


def sample_archs(
    space: SearchSpace, profile: ProxyProfile, n: int, seed: int, exclude: frozenset[str] = frozenset()
) -> list[tuple[int, Arch]]:
    """``n`` (sample seed, arch) with distinct shrunk networks, drawn with seeds ``seed * 1000 + i``,
    skipping any whose shrunk network is in ``exclude``."""
    out: list[tuple[int, Arch]] = []
    seen: set[str] = set(exclude)
    for i in range(1000):
        arch = space.sample_random(seed * 1000 + i)
        key = profile.apply(arch).key
        if key not in seen:
            seen.add(key)
            out.append((seed * 1000 + i, arch))
            if len(out) == n:
                return out
    raise ValueError(f"n: found only {len(out)} distinct architectures in 1000 samples of {space.name}")


@functools.cache
def in_sample_networks(space: str, n: int = DEFAULT_N) -> frozenset[str]:
    """The shrunk networks (keys) of ``space``'s in-sample studies (:data:`IN_SAMPLE_SEEDS`, ``n`` each):
    what an out-of-sample study does not sample again."""
    sp = get_space(space)
    base = sp.profile(PROFILE)
    return frozenset(
        base.apply(arch).key for seed in IN_SAMPLE_SEEDS for _, arch in sample_archs(sp, base, n, seed)
    )


def trained_images(profile: ProxyProfile, data: DataSplit) -> int:
    """Images a training run under ``profile`` passes forward and backward (the last partial batch of an
    epoch is dropped)."""
    samples = min(profile.train_samples or len(data.train), len(data.train))
    return profile.epochs * (samples // profile.batch_size) * profile.batch_size


def train_part(
    arch: Arch,
    profile: ProxyProfile,
    data: DataSplit,
    seed: int,
    config: TrainConfig,
    device: torch.device,
    checkpoint: Path | None = None,
    stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Top-1 after training ``profile.apply(arch)`` from ``seed`` on ``device``; ``seconds`` is the whole
    call's wall time (build, training, validation), ``cpu_seconds`` this process's CPU time over it (all
    threads), ``threads`` torch's intra-op thread count it trained with (shards of one study may differ;
    the count changes a result's last bits, as any summation order does). A diverged run scores None
    (ranked last). With ``checkpoint`` the training keeps its state there after every epoch and continues
    from it: a run killed mid-training loses at most an epoch, and its ``seconds`` and ``cpu_seconds`` count
    the earlier processes' epochs too (``resumed_epochs`` says how many they trained); ``stop``, asked after
    each epoch, ends it there (``TrainingStopped``, its checkpoint kept)."""
    start, cpu, threads = time.perf_counter(), time.process_time(), torch.get_num_threads()
    try:
        out = train_proxy(
            arch, profile, data, seed=seed, config=config, device=device, checkpoint=checkpoint, stop=stop
        )
    except TrainingDiverged as err:
        return {"top1": None, "diverged": str(err), **_elapsed(start, cpu), "threads": threads}
    spent = _elapsed(start, cpu)
    resumed = {}
    if out.get("resumed_epochs"):
        spent = {key: value + out[f"prior_{key}"] for key, value in spent.items()}
        resumed = {"resumed_epochs": out["resumed_epochs"]}
    return {
        "top1": out["top1"],
        "loss": out["loss"],
        "train_loss": out["train_loss"],
        "train_seconds": out["train_seconds"],
        "eval_seconds": out["eval_seconds"],
        **spent,
        **resumed,
        "threads": threads,
        "proxy_params": out["params"],
        "device": out["device"],
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "amp": out["amp"],
    }


def zero_cost_part(net: Arch, data: DataSplit, batch: torch.Tensor, seed: int) -> dict[str, Any]:
    """Every zero-cost score of the shrunk network ``net`` and its seconds. ``params`` and ``macs`` share
    one fvcore trace (cached in :mod:`evaluators.zero_cost`): the trace is charged to ``params``."""
    out: dict[str, Any] = {}
    task = {"img_size": data.img_size, "in_chans": data.in_chans, "num_classes": data.num_classes}
    for name in ZERO_COST:
        start, cpu = time.perf_counter(), time.process_time()
        out[name] = zero_cost.score(name, net, batch=batch, seed=seed, **task)
        out |= {f"{name}_{key}": value for key, value in _elapsed(start, cpu).items()}
    for key in ("seconds", "cpu_seconds"):
        out[key] = sum(out[f"{name}_{key}"] for name in ZERO_COST)
    return out


def _elapsed(start: float, cpu: float) -> dict[str, float]:
    """Wall and CPU seconds since ``time.perf_counter()`` was ``start`` and ``time.process_time()`` was
    ``cpu``. On a shared machine the wall time also counts the time other processes held the cores (and any
    pause of this one); the CPU time is what this process computed, on all its threads."""
    return {"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu}


@functools.cache
def full_params(arch: Arch) -> int:
    """Parameters of the unshrunk architecture (ImageNet task: 3 channels, 1000 classes), built on the meta
    device (memoized: --status and --markdown ask again): for the rows only, not a ranker."""
    with torch.device("meta"):
        return count_params(build_model(arch, num_classes=1000, in_chans=3, img_size=224))


def first_batch(data: DataSplit, batch_size: int, seed: int) -> torch.Tensor:
    """The first shuffled training minibatch: NASWOT's input."""
    train, _ = loaders(data, batch_size, seed=seed, train_samples=batch_size * 4, device="cpu")
    return next(iter(train))[0]


def training_settings(
    profile: ProxyProfile, config: TrainConfig, seed: int, data: DataSplit, device: torch.device
) -> dict:
    """What a trained part's result depends on (the profile's name and description do not count)."""
    schedule = {k: v for k, v in dataclasses.asdict(profile).items() if k not in ("name", "description")}
    settings = dataclasses.asdict(config)
    for name, before in ADDED_FIELDS.items():  # results cached before a field was added keep their keys
        if settings[name] == before:
            del settings[name]
    out = {"profile": schedule, "config": settings, "seed": seed, "data": data.describe()}
    return with_device(out, device)


def with_device(settings: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """``settings`` keyed by the device type too, except the CPU's (so the caches computed before results
    could come from a GPU keep their keys): a GPU trains in bf16 with other kernels, so its results never
    stand in for the CPU's, nor the CPU's for its."""
    return settings if device.type == "cpu" else {**settings, "device": device.type}


def oneshot_evaluator(
    space: SearchSpace,
    profile: ProxyProfile,
    data: DataSplit,
    seed: int,
    config: Any,
    run_dir: Path,
    device: torch.device,
) -> Any:
    """The one-shot evaluator of a variant (a function of its own, so the fast tests can replace it)."""
    from evaluators.oneshot import OneShotEvaluator

    return OneShotEvaluator(space, profile, data, seed=seed, config=config, run_dir=run_dir, device=device)


class OneShot:
    """One one-shot variant's evaluator, its supernet trained lazily once (not at all if every score is
    cached), or why it is absent."""

    def __init__(
        self,
        args: argparse.Namespace,
        variant: str,
        space: SearchSpace,
        profile: ProxyProfile,
        data: DataSplit,
        seed: int,
        device: torch.device,
    ) -> None:
        self.variant, self.name = variant, oneshot_name(variant)
        self.space_name, self.cache_dir = space.name, Path(args.cache_dir)
        self.skipped: str | None = None
        self.settings: dict[str, Any] = {}
        self.evaluator: Any = None
        if args.no_oneshot:
            self.skipped = "--no-oneshot"
            return
        try:
            from evaluators.oneshot import SCORING_FIELDS
        except ImportError as err:
            self.skipped = f"evaluators.oneshot does not import: {err}"
            return
        config = parse_oneshot_variant(variant)
        self.config = config
        # the profile's shape and validation, not its proxy schedule: the supernet trains OneShotConfig's
        used = {k: v for k, v in dataclasses.asdict(profile).items() if k not in ONESHOT_IGNORES}
        self.settings = with_device(
            {
                "profile": used,
                "config": dataclasses.asdict(config),
                "seed": seed,
                "data": data.describe(),
            },
            device,
        )
        # variants that differ only in how they score share one supernet (its checkpoint does not name them)
        training = {k: v for k, v in self.settings["config"].items() if k not in SCORING_FIELDS}
        trained = {**self.settings, "config": training}
        run_dir = Path(args.supernet_dir) / f"{space.name}-s{seed}-{settings_id(trained)}"
        self._make = lambda: oneshot_evaluator(space, profile, data, seed, config, run_dir, device)
        self.run_dir = run_dir

    def trained_images(self, data: DataSplit) -> int:
        """Path-images the supernet trains: every step trains ``random_paths`` paths (and, with the
        sandwich rule, the largest and the smallest too) on one batch."""
        cfg = self.config
        samples = min(cfg.train_samples or len(data.train), len(data.train))
        paths = cfg.random_paths + 2 * cfg.sandwich
        return cfg.epochs * (samples // cfg.batch_size) * cfg.batch_size * paths

    def train_info(self, cache: Cache) -> dict[str, Any] | None:
        return cache.get("oneshot-train", self.settings, "supernet")

    def training_estimate(self, own: Cache) -> float | None:
        """Wall seconds the supernet still needs before this process can score with it: none once it holds
        it trained, or where its training is cached and its checkpoint kept (loading is quick); the cached
        seconds where the checkpoint is gone; else the median over the space's other seeds' studies of what
        a supernet of the same settings took there (the seed changes which paths train, not how long; a
        checkpoint part-way counts as nothing done, an upper bound). None where no study says."""
        if self.evaluator is not None:
            return 0.0
        info = self.train_info(own)
        if info is not None:
            return 0.0 if (self.run_dir / "supernet.pt").exists() else float(info["train_seconds"])

        def alike(settings: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in settings.items() if k not in ("seed", "data", "part")}

        seconds = []
        for path in sorted(self.cache_dir.glob(f"{self.space_name}-s*.json")):
            if path == own.path:
                continue
            other = Cache(path)
            for key, result in other.data["results"].items():
                part, sid, _ = key.split("/", 2)
                if part == "oneshot-train" and alike(other.data["settings"][sid]) == alike(self.settings):
                    seconds.append(float(result["train_seconds"]))
        return statistics.median(seconds) if seconds else None

    def evaluate(self, arch: Arch, cache: Cache, stop: Callable[[], bool] = lambda: False) -> dict[str, Any]:
        """``arch``'s one-shot top-1, training (or resuming) the supernet first if this run has not; that
        training ends after the first epoch at which ``stop()`` says so (``TrainingStopped``, its checkpoint
        kept for the next run)."""
        if self.evaluator is None:
            evaluator = self._make()
            print(f"{self.name}: training the supernet (checkpoints in {self.run_dir}) ...", flush=True)
            epochs = self.config.epochs

            def stop_at(epoch: int, metrics: dict[str, Any]) -> None:
                if epoch < epochs and stop():
                    raise TrainingStopped(epoch, epochs, self.run_dir / "supernet.pt")

            cpu = time.process_time()
            info = evaluator.train(report=stop_at)
            self.evaluator = evaluator  # trained: an evaluator stopped part-way is built again next time
            if self.train_info(cache) is None:
                kept = {k: v for k, v in info.items() if isinstance(v, (int, float, str))}
                if info["train_seconds_this_call"] == info["train_seconds"] and info["workers"] == 1:
                    kept["train_cpu_seconds"] = time.process_time() - cpu  # all of it ran in this process
                cache.put("oneshot-train", self.settings, "supernet", kept)
            print(f"{self.name}: supernet trained: {info['train_seconds']:.0f} s", flush=True)
        start, cpu = time.perf_counter(), time.process_time()
        out = self.evaluator.evaluate(arch)
        return {
            "top1": out["top1"],
            "eval_seconds": out["eval_seconds"],
            **_elapsed(start, cpu),
            "threads": torch.get_num_threads(),
        }

    def release(self) -> None:
        """Drop the supernet once this variant's scores are all computed."""
        self.evaluator = None


@dataclasses.dataclass(frozen=True)
class Part:
    """One cached, per-architecture computation of a study: ``name`` (``proxy:<variant>``, ``reference``,
    ``oneshot``, ``zero_cost``) under ``settings``, computed by ``compute(arch, net)``. The cache keys it by
    ``kind`` (``proxy`` for every variant) and the settings, so two names of one schedule share results."""

    name: str
    kind: str
    settings: dict[str, Any]
    compute: Callable[[Arch, Arch], dict[str, Any]]
    trained_images: int | None = None
    first: int | None = None  # computed for the first this many architectures only (None: all)

    def count(self, n: int) -> int:
        """How many of a study's ``n`` architectures this part computes."""
        return n if self.first is None else min(self.first, n)

    @property
    def keeps_epochs(self) -> bool:
        """Whether its trainings keep an epoch checkpoint (:meth:`Study.checkpoint`) until cached."""
        return self.kind in ("proxy", "reference")


class Study:
    """One (space, seed) study: its architectures, its parts in the order they run, and its cache."""

    def __init__(self, space: str, seed: int, args: argparse.Namespace) -> None:
        self.space, self.seed = get_space(space), seed
        self.shard, self.shards = args.shard
        self.device = torch.device(args.device)
        self.base = self.space.profile(PROFILE)
        self.data = load_dataset(DATASET, img_size=self.base.img_size, seed=seed)
        self.cache = Cache(Path(args.cache_dir) / f"{space}-s{seed}.json")
        self.run_dir = Path(args.supernet_dir)
        self.claims = Claims(self.run_dir / f"{self.label}-claims.json")
        schedule = {**REFERENCES[space], "val_samples": args.ref_val}
        schedule.update(
            {
                k: v
                for k, v in (
                    ("epochs", args.ref_epochs),
                    ("train_samples", args.ref_samples),
                    ("batch_size", args.ref_batch),
                )
                if v is not None
            }
        )
        reference = dataclasses.replace(self.base, name=f"{self.base.name}-reference", **schedule)
        self.reference = dataclasses.replace(reference, description=describe(reference))
        self.ref_images = trained_images(self.reference, self.data)
        self.ref_config = TrainConfig(eval_every=1000)  # validate once, after the last epoch
        self.variants = {name: parse_variant(name, self.base) for name in args.variants or VARIANTS[space]}
        for name, (profile, _) in self.variants.items():
            images = trained_images(profile, self.data)
            if images == 0:
                raise ValueError(f"proxy variant {name!r}: trains no full batch")
            if images > MAX_VARIANT_SHARE * self.ref_images:
                raise ValueError(
                    f"proxy variant {name!r}: trains {images} images, more than a tenth of the reference's "
                    f"{self.ref_images} ({space})"
                )
        self.in_sample = seed in IN_SAMPLE_SEEDS
        # out of sample: the sample seeds differ by construction; the in-sample studies' shrunk networks
        # (what the evaluators see) are skipped too (sasa seed 3's draw 3004 is one of seed 1's)
        exclude = frozenset() if self.in_sample else in_sample_networks(space)
        self.archs = sample_archs(self.space, self.base, args.n, seed, exclude)
        chosen = {s for s, _ in self.archs}
        self.excluded = [
            s
            for s in range(seed * 1000, self.archs[-1][0])
            if s not in chosen and self.base.apply(self.space.sample_random(s)).key in exclude
        ]
        self.repeats = args.ref_repeats
        self.resamples = args.resamples
        variants = args.oneshot_variants or ONESHOT_VARIANTS[space]
        oneshots = [OneShot(args, v, self.space, self.base, self.data, seed, self.device) for v in variants]
        self.oneshots = {o.name: o for o in oneshots}
        self.oneshot_skipped = oneshots[0].skipped if oneshots else "no one-shot variants"
        self._naswot_batch: torch.Tensor | None = None
        self.deadline = math.inf  # compute's: no training is started, nor continued past an epoch, after it
        self.parts = self._parts()

    @property
    def label(self) -> str:
        gpu = "" if self.device.type == "cpu" else f"-{self.device.type}"
        return f"{self.space.name}-s{self.seed}{gpu}"

    def _parts(self) -> list[Part]:
        """Cheap parts first, so a study stopped during its references has every other column complete."""
        shape = {f: getattr(self.base, f) for f in ("img_size", "width_mult", "depth_mult", "relax_strides")}
        zc_settings = {
            "shape": shape,
            "naswot_batch": self.base.batch_size,
            "seed": self.seed,
            "data": self.data.describe(),
        }
        parts = [
            Part(
                "zero_cost",
                "zero_cost",
                zc_settings,
                lambda arch, net: zero_cost_part(net, self.data, self.naswot_batch(), self.seed),
            )
        ]
        if self.oneshot_skipped is None:
            for oneshot in self.oneshots.values():
                parts.append(
                    Part(
                        oneshot.name,
                        "oneshot",
                        oneshot.settings,
                        functools.partial(
                            lambda o, arch, net: o.evaluate(arch, self.cache, self.past_deadline), oneshot
                        ),
                        oneshot.trained_images(self.data),
                    )
                )
        for name, (profile, config) in self.variants.items():
            parts.append(self._training_part(f"proxy:{name}", profile, config))
        parts.append(self._training_part("reference", self.reference, self.ref_config))
        if self.repeats:
            repeat_seed = self.seed + REPEAT_SEED_OFFSET
            parts.append(
                self._training_part(REPEAT, self.reference, self.ref_config, repeat_seed, self.repeats)
            )
        return parts

    def _training_part(
        self,
        name: str,
        profile: ProxyProfile,
        config: TrainConfig,
        seed: int | None = None,
        first: int | None = None,
    ) -> Part:
        """A training part: ``profile`` and ``config`` from ``seed`` (default: the study's), on the study's
        data split, for the ``first`` architectures (default: all)."""
        seed = self.seed if seed is None else seed
        settings = training_settings(profile, config, seed, self.data, self.device)
        return Part(
            name,
            name.split(":")[0],
            settings,
            lambda arch, net: train_part(
                arch,
                profile,
                self.data,
                seed,
                config,
                self.device,
                self.checkpoint(settings, net),
                self.past_deadline,
            ),
            trained_images(profile, self.data),
            first,
        )

    def checkpoint(self, settings: dict[str, Any], net: Arch) -> Path:
        """Where a training of ``net`` under ``settings`` keeps its epochs until its result is cached (shards
        train disjoint networks, so no two processes write one file)."""
        name = hashlib.sha1(net.key.encode()).hexdigest()[:16]
        return self.run_dir / f"{self.label}-train" / settings_id(settings) / f"{name}.pt"

    def naswot_batch(self) -> torch.Tensor:
        if self._naswot_batch is None:
            self._naswot_batch = first_batch(self.data, self.base.batch_size, self.seed)
        return self._naswot_batch

    def cached(self, part: Part) -> list[dict[str, Any] | None]:
        """``part``'s cached result for each architecture (None: not computed yet)."""
        return [self.cache.get(part.kind, part.settings, self.base.apply(arch).key) for _, arch in self.archs]

    def past_deadline(self) -> bool:
        """Whether ``--stop-after`` has passed: asked by a training after each epoch it has saved."""
        return time.perf_counter() > self.deadline

    def compute(self, deadline: float) -> bool:
        """Compute every missing result this process may compute (:meth:`order`), part by part, starting none
        after ``deadline`` (perf_counter) nor any training that :meth:`estimate` says would end past it (left
        for a later run, and a shorter one looked for), and stopping a training at its first epoch past it
        (its checkpoint continues it in the next run); True if nothing was left. Each result is claimed
        before it is started (:class:`Claims`), so processes sharing the study never compute one twice."""
        self.deadline = deadline
        complete = True
        for part in self.parts:
            for i, arch in self.order(part):
                net = self.base.apply(arch)
                where = f"{self.label} [{i + 1}/{len(self.archs)}] {part.name} {net.key}"
                if self.cache.get(part.kind, part.settings, net.key) is not None:
                    continue
                if time.perf_counter() > deadline:
                    print(f"{self.label}: --stop-after reached; the rest is left for a later run", flush=True)
                    return False
                expected = self.estimate(part, net)
                if expected is not None and time.perf_counter() + expected > deadline:
                    print(
                        f"{where}: left for a later run (about {expected / 60:.0f} min, past --stop-after)",
                        flush=True,
                    )
                    complete = False
                    continue
                key = f"{part.kind}/{settings_id(part.settings)}/{net.key}"
                if self.claims.take(key) is not None:
                    complete = False  # another process computes it
                    continue
                try:
                    self.cache.reload()  # claimed after the holder before us cached its result: seen now
                    if self.cache.get(part.kind, part.settings, net.key) is not None:
                        continue
                    result = part.compute(arch, net)
                except TrainingStopped as stopped:
                    print(f"{where}: {stopped}", flush=True)
                    print(f"{self.label}: --stop-after reached; the rest is left for a later run", flush=True)
                    return False
                else:
                    self.cache.put(part.kind, part.settings, net.key, result)
                finally:
                    self.claims.give_back(key)
                if part.keeps_epochs:  # its epochs are kept no more
                    self.checkpoint(part.settings, net).unlink(missing_ok=True)
                print(f"{where}: {_fmt(result)}", flush=True)
            if part.kind == "oneshot":
                self.oneshots[part.name].release()
        return complete

    def order(self, part: Part) -> list[tuple[int, Arch]]:
        """The (index, architecture) pairs this process computes ``part`` for, in order: under ``--shard I/N``
        those whose index is I modulo N, then the other shards' (a shard that ends its own share early helps
        the others instead of idling; claims keep them apart); the one-shot part (one supernet) on shard 0
        only; a part for the first K architectures (the reference's repeats) for those only."""
        indexed = [(i, arch) for i, (_, arch) in enumerate(self.archs)][: part.count(len(self.archs))]
        if part.kind == "oneshot":
            return indexed if self.shard == 0 else []
        return sorted(indexed, key=lambda pair: (pair[0] % self.shards - self.shard) % self.shards)

    def estimate(self, part: Part, net: Arch) -> float | None:
        """The wall seconds a training ``part`` should take on ``net``, or None where nothing cached says: for
        each proxy variant, ``net``'s cached seconds under it times the median ratio of ``part``'s seconds to
        the variant's over the study's networks that have both (the study's own device, threads and load, not
        a guess); the median of those estimates, since one variant's run may have met a paused or starved
        process (a ``sasa`` reference's ranged 13-139 min by one variant, 31-76 by the median); a reference's
        repeat also by the reference's own seconds (the ratio 1 until a repeat is measured). A one-shot
        score: the supernet's training still to come (:meth:`OneShot.training_estimate`) and the median of
        the part's cached scores' seconds."""
        if part.kind == "oneshot":
            supernet = self.oneshots[part.name].training_estimate(self.cache)
            scores = [r["seconds"] for r in self.cached(part) if r and r.get("seconds")]
            return None if supernet is None else supernet + (statistics.median(scores) if scores else 0.0)
        if part.trained_images is None:
            return None
        estimates = []
        for basis in self.parts:
            own = self.cache.get(basis.kind, basis.settings, net.key)
            if basis.kind not in ("proxy", "reference") or basis is part or not (own and own.get("seconds")):
                continue
            ratios = [
                mine["seconds"] / theirs["seconds"]
                for mine, theirs in zip(self.cached(part), self.cached(basis), strict=True)
                if mine and theirs and mine.get("seconds") and theirs.get("seconds")
            ]
            if not ratios and basis.kind == part.kind == "reference":
                ratios = [1.0]  # the same schedule from another seed: as long, until measured
            if ratios:
                estimates.append(own["seconds"] * statistics.median(ratios))
        return statistics.median(estimates) if estimates else None

    def rows(self) -> list[dict[str, Any]]:
        """One row per architecture with every cached result (a part not computed yet is absent)."""
        rows = []
        for sample_seed, arch in self.archs:
            net = self.base.apply(arch)
            rows.append(
                {
                    "key": arch.key,
                    "stem": arch.stem.kind,
                    "proxy_key": net.key,
                    "sample_seed": sample_seed,
                    "params_full": full_params(arch),
                }
            )
        for part in self.parts:
            for row, result in zip(rows, self.cached(part), strict=True):
                if result is not None:
                    row[part.name] = result
        return rows

    def status(self) -> str:
        multiple = self.ref_images / trained_images(self.base, self.data)
        lines = [
            f"{self.label}: {len(self.archs)} architectures, reference {multiple:.1f}x the cpu proxy's "
            f"images; cache {self.cache.path}"
        ]
        for part in self.parts:
            results = [r for r in self.cached(part) if r is not None]
            total = part.count(len(self.archs))
            left = total - len(results)
            images = "" if part.trained_images is None else f"{part.trained_images} images"
            line = f"  {part.name:<20} {images:>14} {len(results):>3}/{total} done"
            if left and results:
                mean = sum(r["seconds"] for r in results) / len(results)
                line += f"; {left} left, about {left * mean / 3600:.2f} h at {mean:.0f} s each so far"
            elif left:
                line += f"; {left} left"
            if part.keeps_epochs:
                line += self._in_progress(part)
            lines.append(line)
        if any(info is None for info in self.oneshot_infos().values()):
            lines.append("  (a one-shot supernet is trained before its first score)")
        return "\n".join(lines)

    def _in_progress(self, part: Part) -> str:
        """``; in progress: epoch E/N, ...`` for the trainings of ``part`` that left an epoch checkpoint and
        no result yet (any shard's), or nothing."""
        epochs = []
        for (_, arch), result in zip(self.archs, self.cached(part), strict=True):
            path = self.checkpoint(part.settings, self.base.apply(arch))
            if result is None and path.exists():
                try:
                    epochs.append(int(load_checkpoint(path, ("epoch",))["epoch"]))
                except ValueError:  # replaced by its shard meanwhile, or not a checkpoint: its training says
                    epochs.append(None)
        total = part.settings["profile"]["epochs"]
        shown = ", ".join(f"epoch {'?' if e is None else e}/{total}" for e in epochs)
        return f"; in progress: {shown}" if epochs else ""

    def oneshot_infos(self) -> dict[str, Any]:
        """Each one-shot variant's supernet training info from the cache, by name (None while not trained;
        none at all if the one-shot evaluator is skipped)."""
        if self.oneshot_skipped is not None:
            return {}
        return {name: o.train_info(self.cache) for name, o in self.oneshots.items()}

    def evaluators(self) -> list[str]:
        """The ranked evaluators, in table order: proxy variants, one-shot variants, zero-cost scores."""
        names = [part.name for part in self.parts if part.kind in ("proxy", "oneshot")]
        return names + list(ZERO_COST)

    def result(self, distributions: dict[str, dict[str, list[float]]] | None = None) -> dict[str, Any]:
        """The study's JSON: settings, summary over the architectures whose reference is done, rows
        (``distributions``, where given, receives each evaluator's bootstrap distributions:
        :func:`summarize`)."""
        rows = self.rows()
        oneshot_info = self.oneshot_infos()
        images = {part.name: part.trained_images for part in self.parts if part.trained_images is not None}
        proxy_images = trained_images(self.base, self.data)  # the cpu profile's: the default variant's
        missing = {
            part.name: sum(part.name not in row for row in rows[: part.count(len(rows))])
            for part in self.parts
        }
        settings = {
            "space": self.space.name,
            "n": len(self.archs),
            "seed": self.seed,
            "sample_seeds": [seed for seed, _ in self.archs],
            "in_sample": self.in_sample,
            "in_sample_seeds": list(IN_SAMPLE_SEEDS),
            "excluded_sample_seeds": self.excluded,  # drew a shrunk network of an in-sample study
            "dataset": self.data.describe(),
            "cpu_profile": dataclasses.asdict(self.base),
            "variants": {
                name: {"profile": dataclasses.asdict(profile), "config": dataclasses.asdict(config)}
                for name, (profile, config) in self.variants.items()
            },
            "default_variant": DEFAULT_VARIANT,
            "reference_profile": dataclasses.asdict(self.reference),
            "reference_repeats": {"n": self.repeats, "seed": self.seed + REPEAT_SEED_OFFSET},
            "reference_config": dataclasses.asdict(self.ref_config),
            "trained_images": images,
            "reference_to_proxy_compute": self.ref_images / proxy_images,
            "max_variant_share": MAX_VARIANT_SHARE,
            "zero_cost_network": (
                f"the proxy network profile.apply(arch) at {self.base.img_size} px, {self.data.in_chans} "
                f"channel(s), {self.data.num_classes} classes; naswot on the first training minibatch of "
                f"{self.base.batch_size}"
            ),
            "oneshot": {"skipped": self.oneshot_skipped}
            if self.oneshot_skipped
            else {"skipped": None, "default": DEFAULT_ONESHOT}
            | {name: o.settings for name, o in self.oneshots.items()},
            "cost_note": (
                "seconds per arch are wall seconds of each call (proxy and reference: build, training and "
                "validation); params and macs share one fvcore trace, charged to params; the one-shot "
                "supernet's training is amortised over the n architectures. cpu seconds per arch are the "
                "process's CPU seconds over the same calls (all threads: about threads x wall when the "
                "cores are free; unlike wall seconds, not lengthened by other processes or pauses), None "
                "where a cached result predates them"
            ),
            "ranking": {"top_frac": TOP_FRAC, "top_min": TOP_MIN, "precision_k": PRECISION_K},
            "bootstrap": {
                "resamples": self.resamples,
                "level": BOOTSTRAP_LEVEL,
                "seed": [BOOTSTRAP_SEED, self.seed],
                "min_distinct": BOOTSTRAP_MIN_DISTINCT,
                "method": "percentile, architectures resampled with replacement",
            },
            "torch_threads": torch.get_num_threads(),  # this process's; each trained result says its own
            "cpu_count": os.cpu_count(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "device": self.device.type,
        }
        evaluators = self.evaluators()
        summary = summarize(rows, evaluators, oneshot_info, self.resamples, self.seed, distributions)
        summary["reference_noise"] = reference_noise(rows)
        summary["by_stem"] = by_stem(rows, evaluators)
        return {
            "partial": any(missing.values()),
            "missing": missing,
            "settings": settings,
            "summary": summary,
            "acceptance": acceptance(summary),
            "costs": costs(rows, [part.name for part in self.parts], oneshot_info),
            "rows": rows,
        }


def _fmt(result: dict[str, Any]) -> str:
    if "top1" not in result:
        return ", ".join(f"{n} {result[n]:.4g}" for n in ZERO_COST) + f" ({result['seconds']:.1f} s)"
    top1 = "diverged" if result["top1"] is None else f"{result['top1']:.2f}%"
    return f"{top1} ({result['seconds']:.1f} s)"


# --- the summary -----------------------------------------------------------------------------------------


def _score(value: float | None) -> float:
    """A score for ranking: None (diverged) and -inf are the worst possible."""
    return -math.inf if value is None else float(value)


def score(row: dict[str, Any], name: str) -> float | None:
    """``row``'s score under evaluator ``name`` (higher is better); None when that part is not done."""
    if name in ZERO_COST:
        return _score(row["zero_cost"][name]) if "zero_cost" in row else None
    return _score(row[name]["top1"]) if name in row else None


def seconds(row: dict[str, Any], name: str, key: str = "seconds") -> float | None:
    """``name``'s wall seconds in ``row`` (``key="cpu_seconds"``: its CPU seconds, None if not recorded:
    results cached before 2026-12-01 have wall seconds only)."""
    return row["zero_cost"].get(f"{name}_{key}") if name in ZERO_COST else row[name].get(key)


def _mean(values: list[float | None]) -> float | None:
    """The mean, or None if any value is missing (a mean over some of the rows would mislead)."""
    return None if not values or None in values else sum(values) / len(values)


_METRICS: dict[str, Callable[[list[float], list[float]], float]] = {
    "spearman": spearman,
    "kendall": kendall_tau,
    "kendall_top10": lambda ref, pred: kendall_top(ref, pred, frac=TOP_FRAC, min_items=TOP_MIN).tau,
    "precision_at_5": lambda ref, pred: precision_at_k(ref, pred, k=PRECISION_K),
}


def rank_metrics(ref: list[float], pred: list[float]) -> dict[str, Any]:
    """Every rank metric of ``pred`` against ``ref`` (:data:`METRICS`, higher is better in both), and how
    many architectures the top-10% tau is over."""
    top = kendall_top(ref, pred, frac=TOP_FRAC, min_items=TOP_MIN)
    return {
        "spearman": spearman(ref, pred),
        "kendall": kendall_tau(ref, pred),
        "kendall_top10": top.tau,
        "kendall_top10_count": top.count,
        "precision_at_5": precision_at_k(ref, pred, k=PRECISION_K),
    }


def bootstrap_rank_metrics(
    ref: list[float],
    pred: list[float],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    metrics: tuple[str, ...] = METRICS,
) -> dict[str, list[float]]:
    """Each of ``metrics`` on ``resamples`` resamples of the architectures drawn with replacement, in draw
    order (the statistic is :mod:`evaluators.ranking`'s, as for the figure itself): resample b takes the
    architectures of row b of ``numpy.random.default_rng((BOOTSTRAP_SEED, seed)).integers(0, n, (resamples,
    n))``, so every evaluator of a study (``seed``: the study's) with its n architectures is resampled alike
    and different studies independently. A resample is nan where skipped: fewer than
    :data:`BOOTSTRAP_MIN_DISTINCT` distinct architectures, or the metric undefined on it (a constant
    vector, nan by :mod:`evaluators.ranking`)."""
    n = len(ref)
    if len(pred) != n:
        raise ValueError(f"scores of different lengths: {n} and {len(pred)}")
    draws = np.random.default_rng((BOOTSTRAP_SEED, seed)).integers(0, n, size=(resamples, n)).tolist()
    out: dict[str, list[float]] = {metric: [] for metric in metrics}
    for picks in draws:
        skip = len(set(picks)) < BOOTSTRAP_MIN_DISTINCT
        ref_b, pred_b = [ref[i] for i in picks], [pred[i] for i in picks]
        for metric in metrics:
            out[metric].append(math.nan if skip else _METRICS[metric](ref_b, pred_b))
    return out


def percentile_interval(values: list[float], level: float = BOOTSTRAP_LEVEL) -> list[float] | None:
    """The percentile interval of a bootstrap distribution (its nan entries, skipped resamples, left out):
    the (1 - level) / 2 and (1 + level) / 2 quantiles, each the smallest value whose share of the
    distribution at or below it reaches the quantile (numpy's ``inverted_cdf``, as
    :func:`results.stats.bootstrap_interval` takes them); None where no resample counts."""
    kept = sorted(v for v in values if not math.isnan(v))
    if not kept:
        return None

    def quantile(q: float) -> float:
        return kept[max(0, math.ceil(q * len(kept) - 1e-9) - 1)]

    return [quantile((1 - level) / 2), quantile((1 + level) / 2)]


def mean_interval(distributions: list[list[float]], level: float = BOOTSTRAP_LEVEL) -> list[float] | None:
    """The percentile interval of the mean of several studies' figures: each study's bootstrap distribution
    (:func:`bootstrap_rank_metrics`, independent draws, equally many) averaged draw by draw, a draw that any
    study skipped left out."""
    means = [
        statistics.fmean(draw)
        for draw in zip(*distributions, strict=True)
        if not any(math.isnan(v) for v in draw)
    ]
    return percentile_interval(means, level)


def summarize(
    rows: list[dict[str, Any]],
    evaluators: list[str],
    oneshot_info: dict[str, dict[str, Any] | None],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    distributions: dict[str, dict[str, list[float]]] | None = None,
) -> dict[str, Any]:
    """Rank agreement of every evaluator with the reference, over the rows where both are done and the
    reference did not diverge; the best proxy variant by Spearman and the best one-shot variant by Kendall
    (the targets' measures), and whether each beats its default. ``oneshot_info``: each one-shot variant's
    supernet training (None while not trained), amortised over the rows. Beside each metric ``<metric>_ci``,
    its percentile bootstrap interval over those rows (``resamples`` resamples of the study with seed
    ``seed``, :func:`bootstrap_rank_metrics`; none with ``resamples`` 0 or under
    :data:`BOOTSTRAP_MIN_DISTINCT` rows), and ``ci_resamples``, how many resamples each interval counts;
    ``distributions``, where given, receives each evaluator's bootstrap distributions by name."""
    done = [row for row in rows if "reference" in row and row["reference"]["top1"] is not None]
    out: dict[str, Any] = {"evaluators": {}}
    for name in evaluators:
        both = [row for row in done if score(row, name) is not None]
        ran = [row for row in rows if score(row, name) is not None]
        if not ran:
            out["evaluators"][name] = None
            continue
        entry: dict[str, Any] = {
            "n": len(both),
            "seconds_per_arch": _mean([seconds(r, name) for r in ran]),
            "cpu_seconds_per_arch": _mean([seconds(r, name, "cpu_seconds") for r in ran]),
        }
        info = oneshot_info.get(name)
        if info is not None:
            entry["train_seconds_total"] = info["train_seconds"]
            entry["train_seconds_amortised"] = info["train_seconds"] / len(rows)
            entry["seconds_per_arch"] += entry["train_seconds_amortised"]
            cpu, train_cpu = entry["cpu_seconds_per_arch"], info.get("train_cpu_seconds")
            if cpu is not None:
                entry["cpu_seconds_per_arch"] = None if train_cpu is None else cpu + train_cpu / len(rows)
        if len(both) >= 2:
            ref, pred = [score(r, "reference") for r in both], [score(r, name) for r in both]
            dists = None
            if resamples and len(both) >= BOOTSTRAP_MIN_DISTINCT:
                dists = bootstrap_rank_metrics(ref, pred, resamples, seed)
            for key, value in rank_metrics(ref, pred).items():
                entry[key] = value
                if dists is not None and key in dists:
                    entry[f"{key}_ci"] = percentile_interval(dists[key])
            if dists is not None:
                entry["ci_resamples"] = {m: sum(not math.isnan(v) for v in d) for m, d in dists.items()}
                if distributions is not None:
                    distributions[name] = dists
        out["evaluators"][name] = entry
    ran = [row for row in rows if "reference" in row]
    out["reference"] = {
        "n": len(done),
        "diverged": len(ran) - len(done),
        "seconds_per_arch": _mean([r["reference"]["seconds"] for r in ran]),
        "cpu_seconds_per_arch": _mean([r["reference"].get("cpu_seconds") for r in ran]),
    }
    proxies = {name.removeprefix("proxy:"): name for name in evaluators if name.startswith("proxy:")}
    out["best_proxy"] = best(out["evaluators"], proxies, DEFAULT_VARIANT, "spearman")
    oneshots = {name.removeprefix("oneshot:"): name for name in evaluators if name.startswith("oneshot:")}
    if "oneshot" in evaluators:
        oneshots[DEFAULT_ONESHOT] = "oneshot"
    out["best_oneshot"] = best(out["evaluators"], oneshots, DEFAULT_ONESHOT, "kendall")
    return out


def reference_noise(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """How much the reference varies with its training seed, and what that leaves an evaluator: None until
    an architecture has both its reference and its repeat (:data:`REPEAT`).

    A reference is r = t + e: the architecture's expected top-1 over training seeds, t, and one run's
    deviation from it, e, independent between runs with variance s^2. Two runs of one architecture differ
    by e1 - e2, of variance 2 s^2, so s^2 is half the sample variance of the repeats' differences (about
    their mean: a shift shared by every architecture, as a change of seed can bring, reorders nothing).
    Over the study's references var(r) = var(t) + s^2, so a perfect evaluator, one that ranks by t itself,
    correlates with r at sqrt(1 - s^2 / var(r)) (Pearson; ``reliability`` is its square), and for
    normally distributed values Spearman's rho is (6 / pi) asin(rho_Pearson / 2): ``spearman_ceiling``, what
    the best possible evaluator is expected to reach against this one reference (a finite sample's figure
    scatters about it). ``spearman_repeat`` is the two references' own Spearman over the repeated
    architectures (at least 3)."""

    def top1(row: dict[str, Any], name: str) -> float | None:
        return row[name]["top1"] if name in row else None

    refs = [v for v in (top1(row, "reference") for row in rows) if v is not None]
    pairs = [
        (a, b)
        for a, b in ((top1(row, "reference"), top1(row, REPEAT)) for row in rows)
        if a is not None and b is not None
    ]
    if not pairs:
        return None
    diffs = [a - b for a, b in pairs]
    noise = statistics.variance(diffs) / 2 if len(diffs) >= 2 else diffs[0] ** 2 / 2
    spread = statistics.variance(refs) if len(refs) >= 2 else None
    reliability = None if not spread else min(1.0, max(0.0, 1 - noise / spread))
    return {
        "n": len(pairs),
        "n_references": len(refs),
        "mean_difference": statistics.fmean(diffs),
        "mean_abs_difference": statistics.fmean(abs(d) for d in diffs),
        "run_std": math.sqrt(noise),
        "reference_std": None if spread is None else math.sqrt(spread),
        "reliability": reliability,
        "spearman_ceiling": None
        if reliability is None
        else 6 / math.pi * math.asin(math.sqrt(reliability) / 2),
        "spearman_repeat": spearman([a for a, _ in pairs], [b for _, b in pairs])
        if len(pairs) >= 3
        else None,
    }


def by_stem(rows: list[dict[str, Any]], evaluators: list[str]) -> dict[str, Any] | None:
    """How the trained evaluators (top-1 scores) place and rank the networks of each stem: None unless at
    least two stems have :data:`STEM_MIN` references done each.

    A space's stems set a network's early learning speed more than its final top-1 (in ``sasa`` seed 1 the
    attention stem's networks trailed the ResNet stem's by 13.6 points of top-1 on average after the 2-epoch
    proxy's 11,776 images and by 0.19 after the reference's 592,768), so an evaluator can order each stem's
    networks well and still rank all of them poorly, by setting one stem's block above the other's. Per
    stem: the networks, the reference's mean and std, and per evaluator its mean score and its Spearman with
    the reference within the stem; ``within`` pools those Spearmans (weighted by the stem's networks), the
    ranking an evaluator would reach if the stems' offset were removed."""
    done = [row for row in rows if "reference" in row and row["reference"]["top1"] is not None]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in done:
        groups.setdefault(row["stem"], []).append(row)
    groups = {stem: members for stem, members in sorted(groups.items()) if len(members) >= STEM_MIN}
    if len(groups) < 2:
        return None
    out: dict[str, Any] = {
        "stems": {
            stem: {
                "n": len(members),
                "reference_mean": statistics.fmean(r["reference"]["top1"] for r in members),
                "reference_std": statistics.stdev(r["reference"]["top1"] for r in members),
            }
            for stem, members in groups.items()
        },
        "evaluators": {},
    }
    for name in evaluators:
        if name in ZERO_COST:
            continue  # not a top-1: a mean of params or synflow across stems says nothing here
        entry: dict[str, Any] = {"mean": {}, "spearman": {}}
        for stem, members in groups.items():
            both = [r for r in members if score(r, name) is not None]
            values = [score(r, name) for r in both]
            if len(both) < STEM_MIN or not all(math.isfinite(v) for v in values):  # type: ignore[arg-type]
                break
            entry["mean"][stem] = statistics.fmean(values)  # type: ignore[arg-type]
            entry["spearman"][stem] = spearman([score(r, "reference") for r in both], values)
        else:
            n = {stem: out["stems"][stem]["n"] for stem in groups}
            entry["within"] = sum(entry["spearman"][stem] * n[stem] for stem in n) / sum(n.values())
            out["evaluators"][name] = entry
    return out


def best(evaluators: dict[str, Any], variants: dict[str, str], default: str, measure: str) -> dict[str, Any]:
    """The variant (of ``variants``: variant -> evaluator name) that ranks best by ``measure``, and
    whether it beats the ``default`` variant."""
    ranked = {}
    for variant, name in variants.items():
        value = (evaluators.get(name) or {}).get(measure, math.nan)
        if value is not None and math.isfinite(value):
            ranked[variant] = value
    top = max(ranked, key=ranked.get) if ranked else None
    return {
        "variant": top,
        measure: ranked.get(top),
        "default": default,
        f"default_{measure}": ranked.get(default),
        "beats_default": None if top is None or default not in ranked else ranked[top] > ranked[default],
    }


def acceptance(summary: dict[str, Any]) -> dict[str, Any]:
    """Issue 18's targets, None where the figure is not measured yet."""
    s = summary["evaluators"]

    def stat(name: str, key: str) -> float | None:
        value = (s.get(name) or {}).get(key)
        return value if value is not None and math.isfinite(value) else None

    default = stat(f"proxy:{DEFAULT_VARIANT}", "spearman")
    best = summary["best_proxy"]["spearman"]
    oneshot = stat("oneshot", "kendall")
    best_oneshot = summary["best_oneshot"]["kendall"]

    def at_least(value: float | None, bar: float) -> bool | None:
        return None if value is None else value >= bar

    def beats(name: str) -> bool | None:
        other = stat(name, "spearman")
        return None if default is None or other is None else default > other

    return {
        f"default_proxy_spearman_at_least_{MIN_PROXY_SPEARMAN}": at_least(default, MIN_PROXY_SPEARMAN),
        f"best_proxy_spearman_at_least_{MIN_PROXY_SPEARMAN}": at_least(best, MIN_PROXY_SPEARMAN),
        f"oneshot_kendall_at_least_{MIN_ONESHOT_KENDALL}": at_least(oneshot, MIN_ONESHOT_KENDALL),
        f"best_oneshot_kendall_at_least_{MIN_ONESHOT_KENDALL}": at_least(best_oneshot, MIN_ONESHOT_KENDALL),
        "default_proxy_beats_params": beats("params"),
        "default_proxy_beats_macs": beats("macs"),
    }


def costs(
    rows: list[dict[str, Any]], parts: list[str], oneshot_info: dict[str, dict[str, Any] | None]
) -> dict[str, Any]:
    """Total seconds of every part so far (cached results count with the seconds they took when computed),
    and each one-shot variant's supernet training (``<name>_train``; variants sharing one supernet each
    name it)."""
    out: dict[str, Any] = {part: sum(row[part]["seconds"] for row in rows if part in row) for part in parts}
    for name, info in oneshot_info.items():
        if info is not None:
            out[f"{name}_train"] = info["train_seconds"]
    return out


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


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None or not math.isfinite(value) else format(value, fmt)


_LABELS = {
    "oneshot": "one-shot supernet",
    "params": "params",
    "macs": "MACs",
    "synflow": "synflow",
    "naswot": "NASWOT",
}


def _label(name: str) -> str:
    """An evaluator's name as the tables show it."""
    return _LABELS.get(name, name.replace("proxy:", "proxy ").replace("oneshot:", "one-shot "))


def _cell(entry: dict[str, Any], metric: str, fmt: str) -> str:
    """A metric as the tables show it: ``0.921 [0.80, 0.97]``, its bootstrap interval beside it where the
    summary has one."""
    text = _num(entry.get(metric), fmt)
    interval = entry.get(f"{metric}_ci")
    return text if text == "-" or interval is None else f"{text} [{interval[0]:.2f}, {interval[1]:.2f}]"


def markdown(result: dict[str, Any]) -> str:
    """The README's table of one study (marked partial while results are missing)."""
    st, summary = result["settings"], result["summary"]
    n, done = st["n"], summary["reference"]["n"]
    ref = st["reference_profile"]
    title = f"#### `{st['space']}`, seed {st['seed']}" + ("" if st["in_sample"] else " (out of sample)")
    if result["partial"]:
        left = ", ".join(f"{name} {count}" for name, count in result["missing"].items() if count)
        title += f" (partial: {done} of {n} references; missing per part: {left})"
    lines = [
        title,
        "",
        f"Reference: {ref['epochs']} epoch(s) of {ref['train_samples'] or 'all'} images at batch "
        f"{ref['batch_size']} ({st['trained_images']['reference']} images, "
        f"{st['reference_to_proxy_compute']:.1f}x the cpu profile's), validated on "
        f"{ref['val_samples'] or 'all ' + str(st['dataset']['val'])} images.",
        "",
        *_bootstrap_note(st),
        "| evaluator | trained images | archs | Spearman | Kendall | Kendall in ref. top 10% | precision@5 "
        "| s / arch |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in summary["evaluators"].items():
        label = _label(name)
        if name in (f"proxy:{DEFAULT_VARIANT}", "oneshot"):
            label += " (default)"
        if s is None:
            lines.append(f"| {label} | | 0 | | | | | |")
            continue
        images = st["trained_images"].get(name, "")
        top = s.get("kendall_top10")
        top_text = "-" if top is None else f"{_cell(s, 'kendall_top10', '.2f')} ({s['kendall_top10_count']})"
        lines.append(
            f"| {label} | {images} | {s['n']} | {_cell(s, 'spearman', '.3f')} | "
            f"{_cell(s, 'kendall', '.3f')} | {top_text} | {_cell(s, 'precision_at_5', '.2f')} | "
            f"{_num(s['seconds_per_arch'], '.2f')} |"
        )
    lines.append(
        f"| reference | {st['trained_images']['reference']} | {done} | | | | | "
        f"{_num(summary['reference']['seconds_per_arch'], '.1f')} |"
    )
    noise = summary.get("reference_noise")
    if noise is not None:
        ceiling, repeat = noise["spearman_ceiling"], noise["spearman_repeat"]
        lines += [
            "",
            f"Reference noise: {noise['n']} of the references trained again from seed "
            f"{st['reference_repeats']['seed']} differ by {noise['mean_abs_difference']:.2f} points of top-1 "
            f"on average (one run's std {noise['run_std']:.2f}; the {noise['n_references']} references' "
            f"spread {_num(noise['reference_std'], '.2f')})"
            + ("" if repeat is None else f"; the two runs' Spearman {repeat:.3f}")
            + (
                "."
                if ceiling is None
                else f"; a perfect evaluator's expected Spearman against one reference: {ceiling:.3f}."
            ),
        ]
    lines += _by_stem_lines(summary.get("by_stem"))
    for what, key, measure in (("proxy", "best_proxy", "spearman"), ("one-shot", "best_oneshot", "kendall")):
        top = summary.get(key) or {}
        if top.get("variant") is None:
            continue
        named = "" if top["default"] == DEFAULT_ONESHOT else f" `{top['default']}`"
        if top["variant"] == top["default"]:
            verdict = "it is the default"
        else:
            verdict = {True: "it beats", False: "it does not beat", None: "it is not compared with"}[
                top["beats_default"]
            ] + f" the default{named} ({_num(top[f'default_{measure}'], '.3f')})"
        score = f"{measure.capitalize()} {top[measure]:.3f}"
        lines += ["", f"Best {what} variant: `{top['variant']}` ({score}); {verdict}."]
    return "\n".join(lines)


def _bootstrap_note(st: dict[str, Any]) -> list[str]:
    """The sentences that say whether the study is in sample and what the tables' brackets are."""
    seeds = " and ".join(str(seed) for seed in st["in_sample_seeds"])
    if st["in_sample"]:
        sample = f"In sample: today's defaults were chosen on seeds {seeds}."
    else:
        skipped = st["excluded_sample_seeds"]
        sample = f"Out of sample: fresh architectures, none of seeds {seeds}'s" + (
            f" (sample seed(s) {', '.join(map(str, skipped))} drew one of theirs and were skipped)."
            if skipped
            else "."
        )
    boot = st["bootstrap"]
    if boot["resamples"]:
        sample += (
            f" In brackets: {100 * boot['level']:.0f}% percentile bootstrap intervals over the architectures "
            f"({boot['resamples']} resamples with replacement)."
        )
    return [sample, ""]


def _by_stem_lines(stems: dict[str, Any] | None) -> list[str]:
    """:func:`by_stem`'s table: each evaluator's mean top-1 and Spearman within each stem."""
    if not stems:
        return []
    names = list(stems["stems"])
    means = " | ".join(f"mean top-1 `{s}`" for s in names)
    within = " | ".join(f"Spearman within `{s}` ({stems['stems'][s]['n']})" for s in names)
    lines = [
        "",
        "By stem (each trained evaluator's mean top-1 per stem beside the reference's, and its Spearman "
        "with the reference within each stem):",
        "",
        f"| evaluator | {means} | {within} | pooled within |",
        "|" + " --- |" * (2 * len(names) + 2),
    ]
    ref = stems["stems"]
    lines.append(
        "| reference | "
        + " | ".join(f"{ref[s]['reference_mean']:.2f} (std {ref[s]['reference_std']:.2f})" for s in names)
        + " |"
        + " |" * len(names)
        + " |"
    )
    for name, entry in stems["evaluators"].items():
        lines.append(
            f"| {_label(name)} | "
            + " | ".join(f"{entry['mean'][s]:.2f}" for s in names)
            + " | "
            + " | ".join(_num(entry["spearman"][s], ".3f") for s in names)
            + f" | {_num(entry['within'], '.3f')} |"
        )
    return lines


OOS_METRICS = ("spearman", "kendall")  # what the out-of-sample tables compare


def out_of_sample(
    space: str, results: dict[int, dict[str, Any]], distributions: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    """The frozen defaults' evaluators (:data:`FROZEN`) in sample and out of sample for one space: per seed of
    ``results`` (each its study's :meth:`Study.result`; ``distributions`` its bootstrap distributions by
    evaluator), each of :data:`OOS_METRICS` with its interval, over ``n`` of the study's ``of``
    architectures (None: not measured yet); and per group (``in_sample``: the seeds of
    :data:`IN_SAMPLE_SEEDS`, ``out_of_sample``: the others) the mean of its seeds' figures with the
    interval of that mean (:func:`mean_interval`), None unless every seed of the group has the figure over
    all its architectures."""
    groups = {
        "in_sample": [seed for seed in results if seed in IN_SAMPLE_SEEDS],
        "out_of_sample": [seed for seed in results if seed not in IN_SAMPLE_SEEDS],
    }
    out: dict[str, Any] = {"space": space, "seeds": groups, "evaluators": {}}
    for name in FROZEN:
        entry: dict[str, Any] = {}
        for metric in OOS_METRICS:
            cells: dict[int, dict[str, Any] | None] = {}
            for seed, result in results.items():
                s = result["summary"]["evaluators"].get(name) or {}
                value = s.get(metric)
                cells[seed] = (
                    None
                    if value is None or not math.isfinite(value)
                    else {
                        "value": value,
                        "ci": s.get(f"{metric}_ci"),
                        "n": s["n"],
                        "of": result["settings"]["n"],
                    }
                )
            entry[metric] = {"seeds": cells}
            for group, seeds in groups.items():
                chosen = [cells[seed] for seed in seeds]
                if not seeds or any(c is None or c["n"] < c["of"] for c in chosen):
                    entry[metric][group] = None
                    continue
                dists = [distributions[seed].get(name, {}).get(metric) for seed in seeds]
                entry[metric][group] = {
                    "value": statistics.fmean(c["value"] for c in chosen),  # type: ignore[index]
                    "ci": None if None in dists else mean_interval(dists),  # type: ignore[arg-type]
                }
        out["evaluators"][name] = entry
    return out


def out_of_sample_markdown(oos: dict[str, Any], results: dict[int, dict[str, Any]]) -> str:
    """:func:`out_of_sample`'s tables, one per metric, for the README (``results``: the studies it read)."""
    inside, outside = oos["seeds"]["in_sample"], oos["seeds"]["out_of_sample"]

    def seeds_text(seeds: list[int]) -> str:
        return ", ".join(str(seed) for seed in seeds)

    def drawn(seed: int) -> str:
        samples = results[seed]["settings"]["sample_seeds"]
        return f"{min(samples)}-{max(samples)}"

    def cell(c: dict[str, Any] | None, partial: bool = True) -> str:
        if c is None:
            return "not measured yet"
        text = f"{c['value']:.3f}" + ("" if c["ci"] is None else f" [{c['ci'][0]:.2f}, {c['ci'][1]:.2f}]")
        return text + (f" ({c['n']} of {c['of']})" if partial and c.get("n", 0) < c.get("of", 0) else "")

    boot = next(iter(results.values()))["settings"]["bootstrap"]
    lines = [
        f"#### `{oos['space']}`: today's defaults in and out of sample",
        "",
        f"In sample: seeds {seeds_text(inside)} (today's defaults were chosen on these studies: the cpu "
        f"profile's schedule and `OneShotConfig()`, `IN_SAMPLE_SEEDS`); out of sample: seeds "
        f"{seeds_text(outside)}, fresh architectures (sample seeds "
        + ", ".join(drawn(seed) for seed in outside)
        + " against "
        + ", ".join(drawn(seed) for seed in inside)
        + ", and none of the in-sample studies' shrunk networks), the defaults frozen. Each figure is "
        f"over its study's architectures against that study's own reference, per seed, with its "
        f"{100 * boot['level']:.0f}% percentile bootstrap interval over the architectures "
        f"({boot['resamples']} resamples); a mean is the seeds' figures averaged, its interval from their "
        "resamples averaged draw by draw.",
    ]
    heads = [f"seed {seed}" for seed in inside] + [f"mean {seeds_text(inside)} (in sample)"]
    heads += [f"seed {seed}" for seed in outside] + [f"mean {seeds_text(outside)} (out of sample)"]
    for metric in OOS_METRICS:
        lines += [
            "",
            f"{'Spearman' if metric == 'spearman' else 'Kendall tau-b'}:",
            "",
            "| evaluator | " + " | ".join(heads) + " |",
            "|" + " --- |" * (len(heads) + 1),
        ]
        for name, entry in oos["evaluators"].items():
            m = entry[metric]
            label = _label(name) + (" (default)" if name in (f"proxy:{DEFAULT_VARIANT}", "oneshot") else "")
            cells = [cell(m["seeds"][seed]) for seed in inside] + [cell(m["in_sample"], False)]
            cells += [cell(m["seeds"][seed]) for seed in outside] + [cell(m["out_of_sample"], False)]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(result: dict[str, Any], path: Path) -> bool:
    """Reference top-1 against each evaluator's score; False (nothing written) under 2 references."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    summary = result["summary"]
    names = [name for name, s in summary["evaluators"].items() if s is not None and "spearman" in s]
    if not names:
        return False
    rows = [row for row in result["rows"] if "reference" in row and row["reference"]["top1"] is not None]
    cols = 4
    height = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(height, cols, figsize=(4.0 * cols, 3.4 * height), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        points = [(score(r, name), score(r, "reference")) for r in rows if score(r, name) is not None]
        shown = [(p, r) for p, r in points if math.isfinite(p)]
        ax.scatter([p for p, _ in shown], [r for _, r in shown], s=18)
        if name in ("params", "macs"):
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())  # the minor labels of a short decade overlap
        s = summary["evaluators"][name]
        dropped = len(points) - len(shown)
        ax.set_title(
            f"{name}: rho {_num(s['spearman'], '.2f')}, tau {_num(s['kendall'], '.2f')}"
            + (f" ({dropped} at -inf)" if dropped else ""),
            fontsize=9,
        )
        ax.set_xlabel(
            f"{name} top-1 (%)" if name.startswith(("proxy:", "oneshot")) else f"{name} (proxy net)"
        )
        ax.set_ylabel("reference top-1 (%)")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    st = result["settings"]
    fig.suptitle(
        f"{st['space']} x {st['dataset']['dataset']}, seed {st['seed']}: {summary['reference']['n']} of "
        f"{st['n']} archs, reference = {st['reference_to_proxy_compute']:.1f}x the cpu proxy's trained images"
        + (" (partial)" if result["partial"] else ""),
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


# --- the command line ------------------------------------------------------------------------------------


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` as (I, N), 0 <= I < N."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N with 0 <= I < N, e.g. 0/4")
    return int(index), int(count)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--space", nargs="+", choices=SPACES, default=list(SPACES), help="default: both")
    parser.add_argument("--seed", nargs="+", type=int, default=list(STUDY_SEEDS), help="default: 1 2")
    parser.add_argument(
        "--n", type=int, default=DEFAULT_N, help=f"architectures per study (default {DEFAULT_N})"
    )
    parser.add_argument(
        "--variants", nargs="+", help="proxy variants (default: the space's VARIANTS), e.g. cpu e2 n4000-b128"
    )
    parser.add_argument("--status", action="store_true", help="print what is done and left; train nothing")
    parser.add_argument("--markdown", action="store_true", help="print the README tables; train nothing")
    parser.add_argument(
        "--frozen",
        action="store_true",
        help=f"today's defaults only: the proxy variant {DEFAULT_VARIANT!r} and the one-shot variant "
        f"{DEFAULT_ONESHOT!r} (and the zero-cost scores, the reference), for an out-of-sample study, e.g. "
        "--seed 3 4 (a training run of an in-sample seed is refused: its studies measure every variant)",
    )
    parser.add_argument(
        "--out-of-sample",
        action="store_true",
        help="print, per space, today's defaults (--frozen's evaluators) in sample (seeds "
        f"{' '.join(map(str, IN_SAMPLE_SEEDS))}) beside out of sample (the other seeds of --seed, else "
        f"{' '.join(map(str, OUT_OF_SAMPLE_SEEDS))}) from the caches; train nothing",
    )
    parser.add_argument(
        "--resamples",
        type=int,
        default=BOOTSTRAP_RESAMPLES,
        help=f"bootstrap resamples per interval (default {BOOTSTRAP_RESAMPLES}; 0: no intervals)",
    )
    parser.add_argument(
        "--stop-after",
        type=float,
        help="minutes after which no new result is started (nor a training estimated to end past them) and a "
        "training stops at its next epoch, its checkpoint kept for the next run (outputs are partial)",
    )
    parser.add_argument(
        "--out",
        default=str(ROOT / "benchmarks" / "results" / "evaluator_quality"),
        help="JSON and PNG folder",
    )
    parser.add_argument(
        "--cache-dir", default=str(ROOT / "benchmarks" / "results" / "evaluator_quality" / "cache")
    )
    parser.add_argument(
        "--supernet-dir",
        default=str(ROOT / "runs" / "evaluator_quality"),
        help="checkpoints: the one-shot supernets', and each training's epochs until its result is cached",
    )
    parser.add_argument("--no-oneshot", action="store_true", help="skip the one-shot evaluator")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument(
        "--shard",
        default="0/1",
        type=parse_shard,
        help="I/N: compute the architectures whose index is I modulo N first (the one-shot part: 0/N only), "
        "then the other shards' unclaimed ones, so N processes, e.g. on one GPU, share a study and its cache "
        "file (default 0/1: all)",
    )
    parser.add_argument(
        "--device",
        default="cpu",
        help="where proxies, references and the one-shot supernet train (default cpu; cuda trains in bf16 "
        "and caches apart); zero-cost scores stay on the CPU",
    )
    ref = parser.add_argument_group("reference (default per space: REFERENCES)")
    ref.add_argument("--ref-epochs", type=int)
    ref.add_argument("--ref-samples", type=int, help="training images per epoch")
    ref.add_argument("--ref-batch", type=int)
    ref.add_argument("--ref-val", type=int, default=None, help="validation images (default: all 6000)")
    ref.add_argument(
        "--ref-repeats",
        type=int,
        default=0,
        metavar="K",
        help="train the first K architectures' references again from another seed (the study's + 1000): "
        "the reference's own noise, and the Spearman a perfect evaluator could reach against it (default 0)",
    )
    parser.add_argument(
        "--oneshot-variants",
        nargs="+",
        help="one-shot variants (default: the space's ONESHOT_VARIANTS), e.g. default e8 bn32-ft20",
    )
    args = parser.parse_args(argv)
    if args.n < 2:
        parser.error("--n: at least 2 architectures are needed to rank")
    if not 0 <= args.ref_repeats <= args.n:
        parser.error(f"--ref-repeats: from 0 to --n ({args.n}) architectures, not {args.ref_repeats}")
    if args.resamples < 0:
        parser.error(f"--resamples: 0 or more, not {args.resamples}")
    reading = args.status or args.markdown or args.out_of_sample  # nothing trained
    if args.out_of_sample:
        args.frozen = True
    if args.frozen:
        given = [
            flag
            for flag, value in (("--variants", args.variants), ("--oneshot-variants", args.oneshot_variants))
            if value
        ]
        if given:
            parser.error(
                f"--frozen (and --out-of-sample) runs today's defaults only: not with {' or '.join(given)}"
            )
        in_sample = sorted(set(args.seed) & set(IN_SAMPLE_SEEDS))
        if in_sample and not reading:
            parser.error(
                f"--frozen: seed(s) {' '.join(map(str, in_sample))} are in sample (their studies measure "
                "every variant, and their JSON would be written again with the frozen evaluators only); name "
                f"out-of-sample seeds, e.g. --seed {' '.join(map(str, OUT_OF_SAMPLE_SEEDS))}"
            )
        args.variants, args.oneshot_variants = [DEFAULT_VARIANT], [DEFAULT_ONESHOT]
    try:
        device = torch.device(args.device)
    except RuntimeError:
        parser.error(f"--device: {args.device!r} is not a torch device (cpu, cuda, cuda:1)")
    if device.type not in ("cpu", "cuda") or (
        device.type == "cuda" and not reading and not torch.cuda.is_available()
    ):
        here = "cpu, cuda" if torch.cuda.is_available() else "cpu"
        parser.error(f"--device: {args.device!r} is not available here ({here})")
    return args


def out_of_sample_seeds(args: argparse.Namespace) -> list[int]:
    """The seeds ``--out-of-sample`` reads: :data:`IN_SAMPLE_SEEDS`, then ``--seed``'s others (else
    :data:`OUT_OF_SAMPLE_SEEDS`)."""
    outside = [seed for seed in dict.fromkeys(args.seed) if seed not in IN_SAMPLE_SEEDS]
    return [*IN_SAMPLE_SEEDS, *(outside or OUT_OF_SAMPLE_SEEDS)]


def print_out_of_sample(args: argparse.Namespace) -> int:
    """``--out-of-sample``: each space's table of :func:`out_of_sample_markdown`, from the caches."""
    blocks = []
    for space in args.space:
        results: dict[int, dict[str, Any]] = {}
        distributions: dict[int, dict[str, Any]] = {}
        for seed in out_of_sample_seeds(args):
            try:
                study = Study(space, seed, args)
            except ValueError as err:
                print(f"evaluator_quality: {err}", file=sys.stderr)
                return 2
            distributions[seed] = {}
            results[seed] = study.result(distributions[seed])
        blocks.append(out_of_sample_markdown(out_of_sample(space, results, distributions), results))
    print("\n\n".join(blocks))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.out_of_sample:
        return print_out_of_sample(args)
    try:
        studies = [Study(space, seed, args) for space in args.space for seed in args.seed]
    except ValueError as err:
        print(f"evaluator_quality: {err}", file=sys.stderr)
        return 2
    if args.status:
        print("\n".join(study.status() for study in studies))
        return 0
    if args.markdown:
        print("\n\n".join(markdown(study.result()) for study in studies))
        return 0
    start = time.perf_counter()
    deadline = math.inf if args.stop_after is None else start + 60 * args.stop_after
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for study in studies:
        study.compute(deadline)
        study.cache.reload()
        result = study.result()
        path = out / f"evaluator_quality-{study.label}.json"
        path.write_text(json.dumps(finite(result), indent=1) + "\n")
        plotted = plot(result, path.with_suffix(".png"))
        print()
        print(markdown(result))
        print(f"acceptance: {result['acceptance']}")
        print(
            f"wrote {path}" + (" and .png" if plotted else " (no plot: fewer than 2 references)"), flush=True
        )
    print(f"wall time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

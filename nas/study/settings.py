"""Everything a search is run with, validated in one place: CLI flags, a YAML/TOML config file, or Python.

:class:`SearchSettings` is what both drivers take and what ``manifest.json`` records. A config file holds the
same keys as the CLI's long options (``budget``, ``space``, ``evaluator``, ``objectives``, ...; dashes or
underscores); flags given on the command line override it. Every bad value is a ``ValueError`` of one
sentence, raised before a study is opened or created, so bad input never touches a study: counts and sizes
are held within :mod:`nas.core.bounds` (workers, seed, image size, the ladder, ...), text settings to 4096
characters, and the config file is read by :mod:`nas.core.userfiles` (a regular file of at most 1 MiB, nested
at
most 32 levels, at most 10,000 values with YAML's aliases expanded).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluators.registry import EVALUATORS, EvaluatorSpec, get_evaluator
from nas.core import userfiles
from nas.core.arch import Arch
from nas.core.bounds import (
    MAX_BATCH,
    MAX_CPUS_PER_TRIAL,
    MAX_EPOCHS,
    MAX_GPUS_PER_TRIAL,
    MAX_IMG_SIZE,
    MAX_SEED,
    MAX_TRIAL_SECONDS,
    MAX_WORKERS,
    number,
    shown,
    whole,
)
from nas.core.declare import declare
from nas.core.option_names import option, setting
from nas.study.budget import Budget
from nas.study.constraints import Limits, parse_count, parse_ms, resolve_limits
from nas.study.fidelity import DEFAULT_RUNG_VAL_IMAGES, FIDELITIES, Ladder
from nas.study.objectives import KNOWN_DIRECTIONS, Objective, parse_objectives
from search_spaces import get_space
from search_spaces.narrowed import describe, narrowing, parse_items

__all__ = [
    "BACKENDS",
    "MAX_SEED",
    "SAMPLERS",
    "TARGET_IMG_SIZE",
    "SearchSettings",
    "check_study_name",
    "in_memory_sqlite",
    "load_config",
    "space_min_img_size",
]

BACKENDS = ("optuna", "ray")
TARGET_IMG_SIZE = 224  # MACs and params are counted at it unless --macs-img-size says otherwise (the papers')
SAMPLERS = ("nsga2", "tpe", "gp", "random")
_DEVICE = re.compile(r"cpu|cuda(:[0-9]+)?")
_STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
# a Ray cluster: auto (the one `ray start` or $RAY_ADDRESS names), local, ray://HOST:PORT or HOST:PORT (GCS)
_RAY_ADDRESS = re.compile(r"auto|local|(?:ray://)?(?:[^\s:/\[\]]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")


NARROW_HELP = (
    "Keep a decision of the space to some of its values: NAME=V1,V2 or NAME=LO..HI, e.g. s3.op=rel,ext "
    "(repeatable; `nas spaces` lists the decisions)."
)


def in_memory_sqlite(url: str) -> bool:
    """Whether the storage ``url`` names an SQLite database in memory, as SQLAlchemy reads it: no database
    (``sqlite://``, ``sqlite:///``), ``:memory:``, or an SQLite URI in ``mode=memory``, by any driver."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+", 1)[0].strip().lower() != "sqlite":
        return False
    database, _, query = rest.removeprefix("/").partition("?")
    if database.strip() in ("", ":memory:"):
        return True
    uri = database.lower().startswith("file:")  # an SQLite URI: file::memory: or file:NAME?mode=memory
    return uri and (database.lower().startswith("file::memory:") or "mode=memory" in query.lower())


def check_study_name(name: str) -> None:
    """ValueError in one sentence unless ``name`` is a safe folder name (no path characters)."""
    if not _STUDY_NAME.fullmatch(name):
        raise ValueError(
            f"study: {name!r} is not a valid name; use letters, digits, '_', '-' and '.', "
            "starting with a letter or digit (it names a folder under runs/)"
        )


def _derived() -> Any:
    """A field of the plan: computed on construction, not given; the choices alone define the search."""
    return field(init=False, compare=False, repr=False)


@dataclass(frozen=True)
class SearchSettings:
    """One search. Defaults are the embedded demo: a few CPU minutes of proxy training on Fashion-MNIST."""

    # Each option is declared here once (name, type, default, help): the `nas search` options
    # (nas.cli.options), the config file's keys (load_config) and the reference page (docs/reference.md,
    # `nas search --help`) are generated from these fields. A field without help is Python-only.
    space: str = declare("coatnet", "Search space (see `nas spaces`).")
    budget: str = declare("5min", "e.g. 8gpu-days, 12gpu-hours, 6cpu-hours, 45min, 2h, 200trials.")
    evaluator: str = declare(
        "proxy", "complexity | proxy | oneshot | table:PATH (a table of trained networks)."
    )
    dataset: str = declare("fashion-mnist", "fashion-mnist | cifar10 | cifar100 | imagefolder:PATH.")
    data_dir: str | None = declare(None, "Where the dataset lives (else $NAS_DATA, system copies).")
    profile: str = declare("cpu", "Proxy profile of the space: cpu | gpu | full.")
    proxy_epochs: int | None = declare(  # None: the profile's own
        None, "Epochs of the proxy's training (a ladder's rungs scale with it).", shown="the profile's"
    )
    objectives: tuple[str, ...] | None = declare(  # None: the evaluator's default
        None, "Comma-separated metric[:max|min].", shown="top1:max,macs:min; complexity: macs,params"
    )
    sampler: str | None = declare(None, "tpe | nsga2 | gp | random.", shown="tpe")
    study: str | None = declare(None, "Study name; outputs go to runs/<study>/.", shown="<space>-<evaluator>")
    storage: str | None = declare(  # may hold a password: never shown
        None, "Optuna storage: an RDB URL or journal:PATH.", shown="runs/<study>/study.db", repr=False
    )
    backend: str = declare("optuna", "optuna | ray.")
    seed: int = declare(0, "Seed of the sampler, data split and training.")
    workers: int = declare(1, "Optuna worker processes on this machine; they share its CPU threads equally.")
    resume: bool = declare(False, "Continue an existing study.")
    download: bool = declare(False, "Download the dataset with torchvision if no copy is found.")
    repair: bool = declare(False, "With --resume: set aside a manifest.json that is not JSON and rebuild it.")
    baselines: bool = declare(True, "Do not enqueue the space's baselines first.", flag="--no-baselines")
    # the user's architectures evaluated first, by name (a flat architecture dict each); given as files
    # (--enqueue FILE, a path or a list of them), it holds their contents, named by the files
    enqueue: dict[str, Any] = declare(
        dict,
        "An architecture JSON file to evaluate first, labelled by its file name as the baselines are "
        "(repeatable).",
        cli=list[Path],
    )
    # the space narrowed to some values of its decisions (search_spaces.narrowed): {decision: [values]},
    # given as such or as NAME=VALUES items (--narrow s3.op=rel,ext, repeatable); held in canonical form
    narrow: dict[str, Any] = declare(dict, NARROW_HELP, cli=list[str])
    runs_dir: str = declare("runs", "Folder of the run directories.")
    address: str | None = declare(None, "Ray cluster to join: auto or ray://host:port (--backend ray).")
    gpus_per_trial: float | None = declare(
        None, "GPUs each trial holds (Ray; 0 keeps trials on the CPU).", shown="1 with CUDA, else 0"
    )
    cpus_per_trial: float = declare(1.0, "CPUs each trial holds (Ray).")
    concurrency: int = declare(1, "Trials at once (Ray).")
    supernet_workers: int = declare(1, "Ray Train workers that train the one-shot supernet data-parallel.")
    cpus_per_worker: float = declare(1.0, "CPUs each supernet worker holds (Ray).")
    trial_timeout: float | None = declare(None, "Seconds after which a trial fails.")
    macs_img_size: int | None = declare(None, "Image size of the MACs/params objectives.", shown="224")
    # hard limits (nas.study.constraints): "4.2G", "25M", "12ms"
    max_macs: str | float | None = declare(
        None, "Hard limit on MACs, e.g. 4.2G; samples over it are never trained.", cli=str
    )
    max_params: str | float | None = declare(None, "Hard limit on parameters, e.g. 25M.", cli=str)
    max_latency: str | float | None = declare(
        None, "Hard limit on latency on --latency-device, e.g. 12ms.", cli=str
    )
    at_cost_of: str | None = declare(None, "A baseline (e.g. CoAtNet-0): its MACs and params are the limits.")
    latency_device: str | None = declare(
        None, "cpu | cuda | cuda:N: where latency_ms is measured.", shown="search's"
    )
    latency_batch: int = declare(1, "Batch size of latency_ms.")
    # nas.study.fidelity's asynchronous successive halving
    fidelity: str = declare("single", "single | ladder (1 in --eta trials trains on).")
    eta: int = declare(3, "The ladder's reduction factor.")
    rungs: int = declare(3, "The ladder's rungs.")
    min_fidelity: int | None = declare(
        None, "Images trained on at the bottom rung.", shown="the proxy's / (2 eta): rung 1 half"
    )
    rung_schedule: str = declare(
        "top", "top | rung: one learning-rate schedule to the top rung, or one per rung."
    )
    # a count, or "all" (None): the profile's validation images
    rung_val_images: int | str | None = declare(
        DEFAULT_RUNG_VAL_IMAGES, "N or all: validation images of the rungs below the top.", cli=str
    )
    promotion: str = declare(
        "asha", "asha | quota: promote a rung's top 1/eta as it stands, or at most 1/eta of it in all."
    )
    evaluator_config: dict[str, Any] = field(default_factory=dict)  # overrides of the evaluator's config
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    # The plan: every value derived from the choices above, computed once on construction (the settings are
    # frozen, so they stay true). The engine reads these as it reads the choices, and never calls back.
    study_name: str = _derived()  # --study, else <space>-<evaluator>
    run_dir: Path = _derived()  # runs_dir / study_name
    search_space: Any = _derived()  # the space narrowed by narrow (the space itself where nothing is)
    space_words: str = _derived()  # "coatnet", or "coatnet narrowed to s3.op=rel,ext"
    parsed_objectives: tuple[Objective, ...] = _derived()
    parsed_budget: Budget = _derived()
    sampler_name: str = _derived()  # sampler, else TPE
    evaluator_spec: EvaluatorSpec = _derived()
    # the evaluator's config instance: its defaults with evaluator_config on top (the trials run with it and
    # the manifest records it)
    evaluator_config_used: Any = _derived()
    # the proxy profile the trials train under: the space's profile with proxy_epochs epochs where given
    proxy_profile: Any = _derived()
    limits: Limits = _derived()  # max_* and at_cost_of resolved (a baseline's cost counted once)
    # the fidelity ladder (None for a single fidelity); where min_fidelity is not given rung 0's images depend
    # on the data, and this ladder's are 1 until the trial runner resolves them (TrialRunner.ladder)
    ladder: Ladder | None = _derived()
    ladder_shape: tuple[int, int] | None = _derived()  # (eta, rungs) of the ladder; what budgets project
    top_rung: int | None = _derived()  # whose results alone make the front; None for a single fidelity
    measures_latency: bool = _derived()  # an objective or a limit asks for latency_ms
    trial_gpus: float = _derived()  # GPUs a Ray trial asks for: gpus_per_trial, else 1 with CUDA here
    # where this machine's trials train: a trial that holds no GPU (gpus_per_trial 0) on the CPU though it may
    # see the machine's GPUs (Ray leaves a num_gpus=0 task's CUDA_VISIBLE_DEVICES alone since 2.x: it would
    # train on cuda:0 unreserved); else CUDA where there is one
    trial_device: str = _derived()
    # where latency is measured: latency_device, else where the trials run (under Ray, on the GPU a trial
    # holds, which Ray numbers cuda:0), so that a study measured on a GPU does not resume measuring on a CPU
    latency_device_used: str = _derived()
    # the architectures evaluated before sampling, by name: the space's baselines (one name per network; none
    # with baselines off), then the enqueued ones (a network already among them runs once, first name)
    first_points: dict[str, Arch] = _derived()
    # each named network's key and name (baselines, whether run first or sampled, and enqueued architectures):
    # a trial of one of them is labelled by it
    point_names: dict[str, str] = _derived()

    def __post_init__(self) -> None:
        self._check_types()
        self._check_rung_val_images()
        self._check_sizes()
        whole = get_space(self.space)  # ValueError names the known spaces
        whole.profile(self.profile)
        if self.narrow:
            object.__setattr__(self, "narrow", narrowing(whole, self.narrow))
        space = get_space(self.space, self.narrow)
        evaluator = get_evaluator(self.evaluator)  # ValueError names the registered evaluators
        if self.backend not in BACKENDS:
            raise ValueError(f"backend: unknown {shown(self.backend)}; allowed: {', '.join(BACKENDS)}")
        if self.sampler is not None and self.sampler not in SAMPLERS:
            raise ValueError(f"sampler: unknown {shown(self.sampler)}; allowed: {', '.join(SAMPLERS)}")
        objectives = parse_objectives(self.objectives)
        budget = Budget.parse(self.budget)
        missing = [o.name for o in objectives if o.name not in evaluator.objectives]
        if missing:
            others = [e.usage for e in EVALUATORS.values() if set(missing) <= e.objectives]
            hint = f" or --evaluator {' / '.join(others)}" if others else ""
            usable = sorted(evaluator.objectives & KNOWN_DIRECTIONS.keys())
            raise ValueError(
                f"objectives: the {evaluator.name} evaluator {evaluator.does}, so it produces no "
                f"{', '.join(missing)}; use objectives among {', '.join(usable)}{hint}"
            )
        config = evaluator.make_config(self.evaluator_config)  # its defaults where none is given
        if self.proxy_epochs is not None and not evaluator.schedule:
            trains = [e.usage for e in EVALUATORS.values() if e.schedule]
            raise ValueError(
                f"proxy-epochs: the {evaluator.name} evaluator {evaluator.does}, so it trains no proxy "
                f"schedule; use --evaluator {' / '.join(trains)} or drop --proxy-epochs"
            )
        study_name = self.study or f"{self.space}-{evaluator.name}"
        check_study_name(study_name)
        if self.repair and not self.resume:
            raise ValueError(
                f"repair: only with {option('resume')} (it rebuilds the manifest of an existing study)"
            )
        if self.macs_img_size is not None:
            smallest = space_min_img_size(self.space)
            if self.macs_img_size < smallest:
                raise ValueError(
                    f"macs-img-size: {self.macs_img_size} px is too small for the {self.space} space, whose "
                    f"networks downsample {smallest}x; use at least {smallest} (default 224)"
                )
        limits = self._check_limits(space)
        ladder = self._check_fidelity(evaluator, budget)
        self._check_enqueue(space)
        self._check_cluster(evaluator)
        self._check_simulated(evaluator, budget)
        self._check_storage()
        self._resolve(study_name, space, objectives, budget, evaluator, config, limits, ladder)

    def _check_storage(self) -> None:
        """An in-memory SQLite database lives only in the process that opens it: the search's worker
        processes would each see an empty one of their own, and the study would be gone when the search ends,
        with nothing to resume, report or export from (the URL is not echoed: it may hold a password)."""
        if self.storage is not None and in_memory_sqlite(self.storage):
            raise ValueError(
                "storage: an in-memory SQLite database (sqlite://, :memory:) lives only in the process that "
                "opens it, so worker processes cannot share it and the study would be gone when the search "
                f"ends; name a file (sqlite:///PATH/study.db), or drop {option('storage')} to keep the study "
                "in runs/<study>/study.db"
            )

    def _check_simulated(self, evaluator: EvaluatorSpec, budget: Budget) -> None:
        """An evaluator on a simulated clock (a table) charges CPU seconds it records, not time that passes:
        no wall budget, and no GPU a trial would hold."""
        if not evaluator.simulated:
            return
        if budget.kind == "wall-seconds":
            raise ValueError(
                f"budget: the {evaluator.name} evaluator {evaluator.does} on a simulated clock, so no wall "
                "time passes; give the time it records as a budget such as 2h or 6cpu-hours, or trials"
            )
        if self.gpus_per_trial:
            raise ValueError(
                f"gpus-per-trial: the {evaluator.name} evaluator {evaluator.does}, whose seconds are CPU "
                "seconds; drop --gpus-per-trial"
            )

    def _check_cluster(self, evaluator: EvaluatorSpec) -> None:
        if self.address is not None and self.backend != "ray":
            raise ValueError("address: --address joins a Ray cluster, so it needs --backend ray")
        if self.address is not None:
            match = _RAY_ADDRESS.fullmatch(self.address)
            if not match or not 0 < int(match["port"] or 1) < 65536:
                raise ValueError(
                    f"address: {self.address!r} is not a Ray cluster's address; use auto, "
                    "ray://HOST:PORT (Ray Client) or HOST:PORT (the head's GCS port)"
                )
        if self.supernet_workers > 1 and not evaluator.data_parallel:
            parallel = [e.usage for e in EVALUATORS.values() if e.data_parallel]
            raise ValueError(
                f"supernet-workers: the {evaluator.name} evaluator trains no supernet; use --evaluator "
                f"{' / '.join(parallel)} or drop --supernet-workers"
            )
        if self.supernet_workers > 1 and self.backend != "ray":
            raise ValueError(
                "supernet-workers: the supernet trains in Ray Train workers, so it needs --backend ray"
            )
        if self.backend == "ray" and self.storage is not None:  # not echoed: it may hold a password
            raise ValueError(
                "storage: a Ray search keeps its study in the run folder (ray/ and ray_ledger.jsonl), not in "
                "an Optuna storage; drop --storage, or use --backend optuna to keep the study there"
            )
        if self.backend == "ray" and self.workers != 1:
            raise ValueError("workers: with --backend ray, parallelism is --concurrency (trials at once)")
        if self.backend != "ray" and self.concurrency != 1:
            raise ValueError(
                f"concurrency: {self.concurrency} is Ray's trials-at-once setting and needs --backend ray; "
                f"with the optuna backend, run parallel trials with --workers {self.concurrency}"
            )

    def _resolve(
        self,
        study_name: str,
        space: Any,
        objectives: tuple[Objective, ...],
        budget: Budget,
        evaluator: EvaluatorSpec,
        config: Any,
        limits: tuple[float | None, float | None, float | None],
        ladder: Ladder | None,
    ) -> None:
        """Set the derived fields (the plan), once, from the values the checks parsed; the settings are valid
        by now."""
        profile = space.profile(self.profile)
        if self.proxy_epochs is not None:
            profile = dataclasses.replace(profile, epochs=self.proxy_epochs)
        laddered = self.fidelity == "ladder"
        trial_gpus = self.gpus_per_trial if self.gpus_per_trial is not None else _cuda_here()
        trial_device = _pick_device("cpu" if self.gpus_per_trial == 0 else None)
        if evaluator.simulated:  # a table's trials run nothing: they hold a CPU, whose seconds it records
            trial_gpus, trial_device = 0.0, "cpu"
        if self.latency_device is not None:
            latency_device = self.latency_device
        elif self.backend == "ray":
            latency_device = "cuda:0" if trial_gpus else "cpu"
        else:
            latency_device = trial_device
        first = self._first_points(space)
        names = space.baseline_names()
        for name, arch in first.items():
            names.setdefault(arch.key, name)
        plan = {
            "study_name": study_name,
            "run_dir": Path(self.runs_dir) / study_name,
            "search_space": space,
            "space_words": self.space + _narrowed(self.narrow),
            "parsed_objectives": objectives,
            "parsed_budget": budget,
            "sampler_name": self.sampler or "tpe",
            "evaluator_spec": evaluator,
            "evaluator_config_used": config,
            "proxy_profile": profile,
            "limits": resolve_limits(
                self.space,
                max_macs=limits[0],
                max_params=limits[1],
                max_latency=limits[2],
                at_cost_of=self.at_cost_of,
                img_size=self.macs_img_size or TARGET_IMG_SIZE,
            ),
            "ladder": ladder,
            "ladder_shape": (self.eta, self.rungs) if laddered else None,
            "top_rung": self.rungs - 1 if laddered else None,
            "measures_latency": self.max_latency is not None
            or any(o.name == "latency_ms" for o in objectives),
            "trial_gpus": trial_gpus,
            "trial_device": trial_device,
            "latency_device_used": "cuda:0" if latency_device == "cuda" else latency_device,
            "first_points": first,
            "point_names": names,
        }
        for name, value in plan.items():
            object.__setattr__(self, name, value)

    def _first_points(self, space: Any) -> dict[str, Arch]:
        baselines = space.baselines()
        points = (
            {name: baselines[name].arch for name in space.baseline_names().values()} if self.baselines else {}
        )
        keys = {arch.key for arch in points.values()}
        for name, flat in self.enqueue.items():
            arch = Arch.from_flat(flat)
            if arch.key not in keys:
                points[name] = arch
                keys.add(arch.key)
        return points

    def _ladder(self) -> Ladder:
        """The ladder the settings give (rung 0 on ``min_fidelity`` images, 1 until the data says)."""
        images = 1 if self.min_fidelity is None else self.min_fidelity
        return Ladder(self.eta, self.rungs, images, self.rung_schedule, self.rung_val_images, self.promotion)

    def _check_enqueue(self, space: Any) -> None:
        """Each enqueued architecture: a safe name that is no baseline's, valid, and in the space."""
        if len(self.enqueue) > MAX_ENQUEUED:
            raise ValueError(f"enqueue: at most {MAX_ENQUEUED} architectures, got {len(self.enqueue):,}")
        baselines = get_space(self.space).baselines()  # the whole space's names, once
        for name, flat in self.enqueue.items():
            if name in baselines:
                raise ValueError(f"enqueue: {name} is the name of a {self.space} baseline; rename its file")
            if not (isinstance(name, str) and _STUDY_NAME.fullmatch(name)):
                raise ValueError(
                    f"enqueue: {shown(name)} is not a valid name; use letters, digits, '_', '-' and '.', "
                    "starting with a letter or digit (it labels the architecture in the report)"
                )
            if not isinstance(flat, dict):
                raise ValueError(f"enqueue: {name} must be an architecture (a mapping), got {shown(flat)}")
            try:
                why = space.why_not(Arch.from_flat(flat))
            except ValueError as err:
                raise ValueError(f"enqueue: {name}: {err}") from None
            if why is not None:
                raise ValueError(
                    f"enqueue: {name} is not in the {self.space} space{_narrowed(self.narrow)}: {why}"
                )

    def _check_types(self) -> None:
        """One sentence for a value of the wrong type (from a config file or Python), before it is used."""
        files = [self.enqueue] if isinstance(self.enqueue, (str, os.PathLike)) else self.enqueue
        if isinstance(files, (list, tuple)):  # architecture files (the CLI's, a config's): read here, once
            object.__setattr__(self, "enqueue", read_enqueued(files))
        if isinstance(self.narrow, str) or (
            isinstance(self.narrow, (list, tuple)) and all(isinstance(item, str) for item in self.narrow)
        ):  # NAME=VALUES items, as the CLI (and a config, if it likes) writes them
            items = [self.narrow] if isinstance(self.narrow, str) else self.narrow
            object.__setattr__(self, "narrow", parse_items(items))
        for name, kinds in _field_kinds().items():
            value = getattr(self, name)
            if name in ("data_dir", "runs_dir") and isinstance(value, os.PathLike):
                object.__setattr__(self, name, value := os.fspath(value))
            if value is None and _OPTIONAL in kinds:
                continue
            ok = any(_is_kind(value, kind) for kind in kinds if kind is not _OPTIONAL)
            if not ok:
                wanted = " or ".join(_KIND_NAMES[kind] for kind in kinds)
                raise ValueError(f"{name.replace('_', '-')}: must be {wanted}, got {shown(value)}")
            if isinstance(value, str) and len(value) > _MAX_TEXT:
                raise ValueError(
                    f"{name.replace('_', '-')}: must be at most {_MAX_TEXT} characters, got {len(value):,}"
                )
        if self.objectives is None:
            spec = EVALUATORS.get(self.evaluator) if isinstance(self.evaluator, str) else None
            object.__setattr__(
                self, "objectives", spec.default_objectives if spec else ("top1:max", "macs:min")
            )
        if isinstance(self.objectives, str):  # "top1,macs" as the CLI and config files write it
            parts = tuple(p.strip() for p in self.objectives.split(",") if p.strip())
            object.__setattr__(self, "objectives", parts)
        elif isinstance(self.objectives, (list, tuple)) and all(isinstance(o, str) for o in self.objectives):
            object.__setattr__(self, "objectives", tuple(self.objectives))
        else:
            raise ValueError(
                f"objectives: must be a list of metric[:max|min] names such as top1:max,macs:min, "
                f"got {shown(self.objectives)}"
            )

    def _check_rung_val_images(self) -> None:
        """``rung_val_images`` as a count, or None for "all" (as the CLI and config files may write it)."""
        value = self.rung_val_images
        if isinstance(value, str):
            text = value.strip().lower()
            if text != "all" and not text.isdecimal():
                raise ValueError(f"rung-val-images: must be a whole number or all, got {shown(value)}")
            object.__setattr__(self, "rung_val_images", None if text == "all" else int(text))

    def _check_sizes(self) -> None:
        """Every count and size within its bound (:mod:`nas.core.bounds`), before anything is made of it."""
        whole("seed", self.seed, 0, MAX_SEED)
        whole("workers", self.workers, 1, MAX_WORKERS)
        whole("concurrency", self.concurrency, 1, MAX_WORKERS)
        whole("latency-batch", self.latency_batch, 1, MAX_BATCH)
        number("cpus-per-trial", self.cpus_per_trial, 0, MAX_CPUS_PER_TRIAL, above=True)
        whole("supernet-workers", self.supernet_workers, 1, MAX_WORKERS)
        number("cpus-per-worker", self.cpus_per_worker, 0, MAX_CPUS_PER_TRIAL, above=True)
        if self.gpus_per_trial is not None:
            number("gpus-per-trial", self.gpus_per_trial, 0, MAX_GPUS_PER_TRIAL)
        if self.trial_timeout is not None:
            number("trial-timeout", self.trial_timeout, 0, MAX_TRIAL_SECONDS, above=True)
        if self.macs_img_size is not None:
            whole("macs-img-size", self.macs_img_size, 1, MAX_IMG_SIZE)
        if self.proxy_epochs is not None:
            whole("proxy-epochs", self.proxy_epochs, 1, MAX_EPOCHS)

    def _check_limits(self, space: Any) -> tuple[float | None, float | None, float | None]:
        """The limits given, parsed and checked: MACs, params, latency in ms (a baseline's cost is counted
        once every check has passed, by :meth:`_resolve`)."""
        max_macs = None if self.max_macs is None else parse_count(self.max_macs, "max-macs")
        max_params = None if self.max_params is None else parse_count(self.max_params, "max-params")
        max_latency = None if self.max_latency is None else parse_ms(self.max_latency)
        if self.at_cost_of is not None and self.at_cost_of not in space.baselines():
            raise ValueError(
                f"at-cost-of: the {self.space} space has no baseline {shown(self.at_cost_of)}; "
                f"allowed: {', '.join(space.baselines())}"
            )
        if self.latency_device is not None and not _DEVICE.fullmatch(self.latency_device):
            raise ValueError(
                f"latency-device: {shown(self.latency_device)} is not a device; use cpu, cuda or cuda:N"
            )
        return max_macs, max_params, max_latency

    def _check_fidelity(self, evaluator: EvaluatorSpec, budget: Budget) -> Ladder | None:
        """The ladder climbed (None for a single fidelity), its values checked either way."""
        if self.fidelity not in FIDELITIES:
            raise ValueError(f"fidelity: unknown {shown(self.fidelity)}; allowed: {', '.join(FIDELITIES)}")
        ladder = self._ladder()
        if self.fidelity != "ladder":
            return None
        if not evaluator.ladder:
            trains = [e.usage for e in EVALUATORS.values() if e.ladder]
            raise ValueError(
                f"fidelity: the {evaluator.name} evaluator {evaluator.does}, so it has no rungs to climb; "
                f"a ladder needs --evaluator {' / '.join(trains)}"
            )
        soonest, latest = ladder.trials_to_top
        if budget.kind == "trials" and budget.amount < soonest:
            when = (
                f"after {latest} trials"
                if soonest == latest
                else f"after {soonest} trials at the soonest, {latest} if the first results stay the best"
            )
            raise ValueError(
                f"budget: {budget.amount:g} trials end before any architecture can reach the top rung of "
                f"this ladder ({ladder.rungs} rungs, eta {ladder.eta}), whose results alone make the front: "
                f"the first gets there {when}; give a budget of at least {latest} trials, fewer rungs, a "
                f"smaller eta, or {setting('fidelity', 'single')}"
            )
        return ladder

    @classmethod
    def choice_names(cls) -> tuple[str, ...]:
        """The settings one gives (every field but ``extra`` and the plan's): a config file's keys."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.init and f.name != "extra")

    def choices(self) -> dict[str, Any]:
        """The settings as given, a copy: ``SearchSettings(**choices)`` builds them again, on this machine or
        a worker's."""
        return {name: copy.deepcopy(getattr(self, name)) for name in self.choice_names()}

    def to_dict(self) -> dict[str, Any]:
        """What ``manifest.json`` records: the choices, with the objectives, study and sampler resolved."""
        out = self.choices()
        out["objectives"] = [str(o) for o in self.parsed_objectives]
        out["study"], out["sampler"] = self.study_name, self.sampler_name
        return out

    @classmethod
    def from_sources(cls, config: str | Path | None = None, **overrides: Any) -> SearchSettings:
        """Settings from a config file (if any) with ``overrides`` (the flags the user gave) on top."""
        values = load_config(config) if config is not None else {}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # "top1,macs" and lists of objectives are normalized on construction


_MAX_TEXT = 4096  # characters of a text setting (a path, a URL, a name): Linux's PATH_MAX
_OPTIONAL = "optional"
_NUMBER = "number"
_KIND_NAMES = {
    str: "a string",
    int: "a whole number",
    bool: "true or false",
    dict: "a mapping of settings",
    _NUMBER: "a number",
    _OPTIONAL: "unset",
}
_ANNOTATED_KINDS = {"str": str, "int": int, "bool": bool, "float": _NUMBER, "None": _OPTIONAL}


@functools.cache
def _field_kinds() -> dict[str, tuple[Any, ...]]:
    """The kinds each setting takes, read from its annotation (``str | float | None``: a string, a number or
    unset), so that a new field is checked as it is declared; ``objectives`` is normalized on its own."""
    return {
        f.name: tuple(
            dict if kind.startswith("dict") else _ANNOTATED_KINDS[kind] for kind in f.type.split(" | ")
        )
        for f in dataclasses.fields(SearchSettings)
        if f.init and f.name not in ("objectives", "extra")
    }


MAX_ENQUEUED = 1000  # architectures a search may be given to evaluate first


def _is_kind(value: Any, kind: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):  # True is an int to Python, not a count or a size to a user
        return False
    if kind is _NUMBER:
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, kind)


def _narrowed(narrow: dict[str, Any]) -> str:
    """`` narrowed to s3.op=rel,ext``, or nothing for a whole space."""
    return f" narrowed to {describe(narrow)}" if narrow else ""


def _cuda_here() -> int:
    """1 where this machine has CUDA, else 0."""
    return 1 if _pick_device(None) == "cuda" else 0


def _pick_device(device: str | None) -> str:
    from evaluators.complexity import pick_device  # heavy: torch, only when a device is asked for

    return str(pick_device(device))


@functools.cache
def space_min_img_size(name: str) -> int:
    """The smallest image side every network of space ``name`` can take: its largest total downsampling
    (the stem's stride times the stages'), over the space's supernet cover (every stem and op at its
    largest) and its baselines."""
    space = get_space(name)
    archs = [b.arch for b in space.baselines().values()]
    with contextlib.suppress(NotImplementedError):  # a space without a supernet: its baselines
        archs += space.supernet_cover()
    return max(arch.min_img_size for arch in archs)


def read_enqueued(paths: Any) -> dict[str, Any]:
    """Architecture files to evaluate first, as the settings hold them: each file's contents (read by
    :mod:`nas.core.userfiles`, checked as an architecture on construction) by its name without ``.json``."""
    out: dict[str, Any] = {}
    for path in paths:
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"enqueue: must be architecture files, got {shown(path)}")
        name = Path(path).name.removesuffix(".json")
        if name in out:
            raise ValueError(
                f"enqueue: two files are named {name}; each names its architecture in the report"
            )
        out[name] = userfiles.load(path, "arch file", "JSON")
    return out


def load_config(path: str | Path) -> dict[str, Any]:
    """The keys of a YAML (``.yaml``, ``.yml``) or TOML (``.toml``) search config, at the top level or in a
    ``search`` section; dashes read as ``_``. The file is read by :mod:`nas.core.userfiles` (a regular file
    of at
    most 1 MiB, nested at most 32 levels, at most 10,000 values with YAML's aliases expanded)."""
    label = userfiles.where("config", path)
    if Path(path).suffix.lower() not in (".toml", ".yaml", ".yml"):
        raise ValueError(f"{label}: must end in .yaml, .yml or .toml")
    data = userfiles.load(path, "config")
    if data is None:  # an empty YAML document
        data = {}
    if not isinstance(data, dict):
        raise ValueError(f"{label}: must hold a mapping of settings, got {_kind_of(data)}")
    if "search" in data:  # a [search] table / search: section
        section, others = data["search"], sorted(str(k) for k in data if k != "search")
        if not isinstance(section, dict):
            raise ValueError(
                f"{label}: the search section must be a mapping of settings, got {_kind_of(section)}"
            )
        if others:
            raise ValueError(
                f"{label}: settings both in the search section and at the top level "
                f"({_names(others)}); put them in one place"
            )
        data = section
    known = set(SearchSettings.choice_names())
    out = {str(k).replace("-", "_"): v for k, v in data.items()}
    unknown = sorted(set(out) - known)
    if unknown:
        raise ValueError(
            f"{label}: unknown setting(s) {_names(unknown)}; allowed: {', '.join(sorted(known))}"
        )
    return out


def _kind_of(value: Any) -> str:
    """What a value is, in a config's words (YAML's and TOML's, not Python's)."""
    for kind, name in ((bool, "true or false"), (dict, "a mapping"), (list, "a list"), (str, "text")):
        if isinstance(value, kind):
            return f"{name} ({shown(value)})"
    return shown(value)


def _names(names: list[str], most: int = 10) -> str:
    """Setting names for a message: each cut short, at most ``most`` of them."""
    listed = ", ".join(n if len(n) <= 40 and n.isprintable() else shown(n) for n in names[:most])
    return listed + (f" and {len(names) - most} more" if len(names) > most else "")

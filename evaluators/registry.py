"""Evaluators by name, each declaring what it produces: what ``nas search --evaluator`` chooses from.

An entry names an evaluator, its config dataclass (the settings a user may override, e.g. from a search
config file's ``evaluator-config`` section), the metrics its ``evaluate(arch, report=...)`` reports, and
whether it does set-up work before its first trial (training a one-shot supernet), which a search charges to
its budget as overhead, and a check of the run folder's files that set-up would refuse. A search validates
its objectives against the entry, and runs the check, before any study is created, so an objective no
evaluator produces, or a supernet.pt it cannot resume, is refused in one sentence instead of later.

Besides what the evaluator reports, every trial carries :data:`TRIAL_METRICS` (``params`` and ``macs`` of the
architecture at the target resolution, counted by fvcore), whichever evaluator scored it, and
:data:`ON_REQUEST` (``latency_ms``, predicted from the device's latency table, :mod:`evaluators.latency`)
when the search asks for it as an objective or a limit.

This module imports no torch: the config types and builders are resolved when first used.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from nas.core.bounds import MAX_BATCH, MAX_EPOCHS, MAX_IMAGES, shown, whole

__all__ = ["EVALUATORS", "ON_REQUEST", "TRIAL_METRICS", "Evaluator", "EvaluatorSpec", "get_evaluator"]

TRIAL_METRICS = frozenset({"params", "macs"})
ON_REQUEST = frozenset({"latency_ms"})


class Evaluator(Protocol):
    def evaluate(self, arch: Any, report: Any = None) -> dict[str, Any]: ...


def _resolve(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class EvaluatorSpec:
    """One registered evaluator: its name, what it does (a clause: "trains nothing"), the metrics it
    reports, its config type and builder (``module:name``, imported on first use) and whether it has set-up
    work that a search charges as overhead."""

    name: str
    does: str
    produces: frozenset[str]
    config: str | None = None
    builder: str | None = None
    needs_setup: bool = False
    default_objectives: tuple[str, ...] = ("top1:max", "macs:min")  # a search's when it names none
    ladder: bool = False  # trains in spans continued from checkpoints (evaluate(..., fidelity=...))
    schedule: bool = False  # trains on the proxy profile's schedule (its epochs: a search's --proxy-epochs)
    checker: str | None = None  # ``module:name``: refuses a split too small or files it would read at set-up
    data_parallel: bool = False  # its set-up trains in --supernet-workers Ray Train workers
    # (field, value) pairs a search's config takes where the config type's own default suits other uses
    search_defaults: tuple[tuple[str, Any], ...] = ()
    reads_data: bool = True  # reads the dataset (False: answers from a file of its own, as the table)
    # answers from records instead of running: each trial reports ``simulated_seconds``, which the search
    # charges instead of the trial's wall time (a simulated clock; evaluators.table)
    simulated: bool = False

    @property
    def usage(self) -> str:
        """How ``--evaluator`` names it: ``table:PATH`` for the table (its file), else its name."""
        return f"{self.name}:PATH" if self.name == "table" else self.name

    @property
    def objectives(self) -> frozenset[str]:
        """Metric names a search with this evaluator may optimize."""
        return self.produces | TRIAL_METRICS | ON_REQUEST

    @property
    def counts_only(self) -> bool:
        """Whether it only counts (no builder): it reads no data and builds no evaluator."""
        return self.builder is None

    def config_type(self) -> type | None:
        return _resolve(self.config) if self.config else None

    def make_config(self, overrides: Mapping[str, Any] | None = None) -> Any:
        """The config instance a search runs with: the type's defaults, then ``search_defaults``, with
        ``overrides`` on top; ValueError in one sentence for an unknown key or a value of the wrong kind."""
        overrides = dict(overrides or {})
        kind = self.config_type()
        if kind is None:
            if overrides:
                raise ValueError(f"evaluator-config: the {self.name} evaluator has no settings to override")
            return None
        fields = {f.name: f for f in dataclasses.fields(kind)}
        unknown = sorted(set(overrides) - set(fields))
        if unknown:
            raise ValueError(
                f"evaluator-config: unknown {self.name} setting(s) {', '.join(unknown)}; "
                f"allowed: {', '.join(fields)}"
            )
        defaults = dataclasses.replace(kind(), **dict(self.search_defaults))
        for key, value in overrides.items():
            _check_kind(key, value, getattr(defaults, key))
        try:
            return dataclasses.replace(defaults, **overrides)
        except ValueError as error:  # the config type's own check of a value (an optimizer timm lacks)
            raise ValueError(f"evaluator-config: {error}") from None

    def build(self, config: Any, **context: Any) -> Evaluator | None:
        """The evaluator for one worker (None for one that only counts). ``context`` holds ``space``,
        ``profile``, ``data`` (a thunk: called only by evaluators that train), ``seed``, ``device``,
        ``run_dir``, ``weights_dir``, and for a data-parallel set-up ``workers``, ``cpus_per_worker`` and
        ``use_gpu`` (whether each worker holds a GPU)."""
        return None if self.counts_only else _resolve(self.builder)(config, **context)

    def check(self, config: Any, **context: Any) -> None:
        """Refuse in one sentence what the set-up would refuse later (a checkpoint in the run folder that is
        not this evaluator's), without doing the set-up: a search checks before it writes. ``context`` is
        :meth:`build`'s, with ``data`` the split itself."""
        if self.checker:
            _resolve(self.checker)(config, **context)


# The bounds of evaluators' whole-number settings, by name (nas.core.bounds): the sizes the command line's own
# options share, and for any other count (steps, batches, paths, every n epochs) at least 0 and at most
# MAX_IMAGES, so that no setting can ask for an allocation or a loop of any size.
_SIZES = {
    "epochs": (1, MAX_EPOCHS),
    "eval_every": (1, MAX_EPOCHS),
    "batch_size": (1, MAX_BATCH),
    "train_samples": (1, MAX_IMAGES),
}
_COUNT = (0, MAX_IMAGES)


def _check_kind(key: str, value: Any, default: Any) -> None:
    if default is None:
        return  # optional setting: any value its owner accepts
    if isinstance(default, bool):
        ok, wanted = isinstance(value, bool), "true or false"
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        ok = ok and (isinstance(default, float) or isinstance(value, int))
        wanted = "a number" if isinstance(default, float) else "a whole number"
    else:
        ok, wanted = isinstance(value, type(default)), f"a {type(default).__name__}"
    if not ok:
        raise ValueError(f"evaluator-config: {key} must be {wanted}, got {shown(value)}")
    if isinstance(default, int) and not isinstance(default, bool):
        whole(f"evaluator-config: {key}", value, *_SIZES.get(key, _COUNT))


def build_proxy(config: Any, *, profile: Any, data: Any, seed: int, device: Any, weights_dir: Path, **_: Any):
    from evaluators.proxy import ProxyEvaluator  # heavy: torch

    return ProxyEvaluator(profile, data(), seed=seed, config=config, device=device, weights_dir=weights_dir)


def build_oneshot(
    config: Any,
    *,
    space: Any,
    profile: Any,
    data: Any,
    seed: int,
    device: Any,
    run_dir: Path,
    weights_dir: Path,
    workers: int = 1,
    cpus_per_worker: float = 1.0,
    use_gpu: bool | None = None,
) -> Any:
    """The one-shot evaluator with its supernet trained (in ``workers`` Ray Train workers when more than 1)
    or loaded from ``run_dir``'s checkpoint."""
    from evaluators.oneshot import OneShotEvaluator  # heavy: torch

    evaluator = OneShotEvaluator(
        space,
        profile,
        data(),
        seed=seed,
        config=config,
        run_dir=run_dir,
        device=device,
        weights_dir=weights_dir,
        workers=workers,
        cpus_per_worker=cpus_per_worker,
        use_gpu=use_gpu,
    )
    evaluator.train()
    return evaluator


def build_table(config: Any, *, profile: Any, seed: int, **_: Any) -> Any:
    from evaluators.table import build_table_evaluator  # heavy: pyarrow, when a table is read

    return build_table_evaluator(config, profile=profile, seed=seed)


_TRAINED = frozenset({"top1", "loss"})

EVALUATORS: dict[str, EvaluatorSpec] = {
    spec.name: spec
    for spec in (
        EvaluatorSpec(
            "complexity", "trains nothing", frozenset(), default_objectives=("macs:min", "params:min")
        ),
        EvaluatorSpec(
            "proxy",
            "trains each network briefly",
            _TRAINED | {"train_loss", "train_seconds", "eval_seconds", "images_per_second", "epochs"},
            config="evaluators.proxy:TrainConfig",
            builder="evaluators.registry:build_proxy",
            ladder=True,
            schedule=True,
            checker="evaluators.proxy:check_split",
            # a search reads a trial's last validation only: validating every epoch cost a quarter of a
            # proxy trial (evaluators.proxy.UNMEASURED: a study resumes under either)
            search_defaults=(("eval_every", MAX_EPOCHS),),
        ),
        EvaluatorSpec(
            "oneshot",
            "scores each network with a trained supernet's weights",
            _TRAINED | {"eval_seconds"},
            config="evaluators.oneshot:OneShotConfig",
            builder="evaluators.registry:build_oneshot",
            needs_setup=True,
            checker="evaluators.oneshot:check_setup",
            data_parallel=True,
        ),
        EvaluatorSpec(
            "table",
            "answers from a table of trained networks",
            _TRAINED | {"train_loss", "train_seconds", "eval_seconds", "simulated_seconds", "epochs"},
            config="evaluators.table:TableConfig",
            builder="evaluators.registry:build_table",
            ladder=True,
            schedule=True,
            checker="evaluators.table:check_table",
            reads_data=False,
            simulated=True,
        ),
    )
}

TABLE = "table"  # --evaluator table:PATH: the table evaluator answering from the file PATH


def get_evaluator(name: str) -> EvaluatorSpec:
    """The evaluator ``name``: a registered name, or ``table:PATH`` (the table evaluator on the file PATH,
    which its config's ``path`` then holds); ValueError in one sentence otherwise."""
    kind, sep, path = str(name).partition(":")
    if kind == TABLE and sep:
        if not path.strip():
            raise ValueError("evaluator: table: needs the table's file, e.g. table:runs/tables/micro.parquet")
        spec = EVALUATORS[TABLE]
        return dataclasses.replace(spec, search_defaults=(*spec.search_defaults, ("path", path)))
    try:
        if kind == TABLE:
            raise KeyError(name)
        return EVALUATORS[name]
    except KeyError:
        allowed = ", ".join(f"{n}:PATH" if n == TABLE else n for n in EVALUATORS)
        raise ValueError(f"evaluator: unknown {name!r}; allowed: {allowed}") from None

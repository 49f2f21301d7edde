"""One trial, whichever engine runs it: the only place an architecture is evaluated and charged.

:func:`run_trial` samples an architecture (the engine supplies the sampling: an Optuna trial, or Ray's
suggested parameters replayed through ``FixedTrial``), evaluates it under the per-trial deadline, and returns
a :class:`TrialRecord`: the architecture, every metric, what it cost and, if it failed, why. The Optuna and
Ray drivers only adapt that record to their engine (``study.tell`` / ``tune.report``); neither evaluates,
times or charges anything itself.

:class:`TrialRunner` owns one worker process's reusable state (the data split, the evaluator, a trained
supernet), one per worker process on both engines. :meth:`TrialRunner.prepare` builds it before the first
trial's clock starts and returns the cost of the set-up work an evaluator declares (a one-shot supernet's
training, :mod:`evaluators.registry`), which the driver charges once as overhead.

Limits (:mod:`nas.study.constraints`): after sampling, the architecture's MACs, params and (when asked for)
latency are measured before anything is built; a sample over a limit is *rejected*: not evaluated, charged
its check's seconds as overhead, recorded with its constraint values. Baselines are evaluated whatever their
cost (they are the study's references), and recorded as infeasible when over a limit.

Fidelity ladder (:mod:`nas.study.fidelity`): a trial is one rung of one *lineage* (an architecture's training
across rungs, named by the number of its rung-0 trial). Rung 0 trains from scratch; a promotion continues the
lineage's checkpoint of the rung below (``<run_dir>/ladder/<lineage>/rung<r>.pt``), so a trial's cost is that
rung's training only. A checkpoint is kept only while a promotion may still continue it: the top rung saves
none, and a promotion that trained its rung, or failed it other than by an interrupt, deletes the one it
continued (a lineage is promoted from a rung once, and never after a failure there). So the disk holds one
checkpoint per lineage that stopped below the top and none per lineage that reached it (a 4-minute ``coatnet``
ladder kept 45, 745 MB, for its 140 trained trials). A promotion killed after that deletion and before its
engine recorded it is re-run, fails in one sentence (its checkpoint is gone) and is recorded so; the window is
the engine's write of one trial.

Repeats: an architecture the study has already evaluated (a COMPLETE trial of the same key, at the same
rung on a ladder) is not evaluated again. The engine passes ``known``, its look-up of earlier results; a
repeat is answered with the earlier trial's metrics and constraint values (so the sampler is told what that
architecture scored), records ``repeat_of``, and is charged its seconds as overhead, like a rejected sample:
it trained nothing, so it is no trial of a ``trials`` budget.

Cost: wall seconds times the devices held (:meth:`TrialRunner.cost`, the one charge formula). A trial's
seconds run from before its sampling (the sampler's suggestions are part of what a trial costs) to the end
of its evaluation, failed or not. An evaluator on a simulated clock (``EvaluatorSpec.simulated``: the table,
:mod:`evaluators.table`) reports the seconds its answer stands for as ``simulated_seconds``; a trial it
answered is charged those on the CPU, and every other record (a rejected sample, a repeat, a failure) 0 s,
so a study's clock is the sum of the seconds its table records for the trials it ran. An interrupted trial
(Ctrl-C, SIGTERM) is charged as overhead: it spends a time budget but is no trial of a ``trials`` budget,
and the driver queues it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import evaluators.data
from evaluators.complexity import count, counts_kept_in, pick_device
from evaluators.latency import LatencyTable
from evaluators.part_costs import PartCosts
from evaluators.proxy import Fidelity
from nas.core.arch import Arch
from nas.study.budget import TrialCost
from nas.study.fidelity import default_min_images
from nas.study.settings import TARGET_IMG_SIZE, SearchSettings
from nas.system import stopping
from nas.system.failures import TrialTimeout, deadline, failure_reason, release_memory

__all__ = [
    "Earlier",
    "TrialRecord",
    "TrialRunner",
    "earlier_results",
    "forget_worker_runner",
    "run_trial",
    "worker_runner",
]

Report = Callable[[int, dict[str, float]], None]


@dataclass(frozen=True)
class TrialRecord:
    """What one trial produced: its architecture (None if it failed before one was sampled), its metrics
    (plain JSON values only), its cost, the failure reason (None if it completed) and the baseline it is
    (the space's name for that network, or '')."""

    arch: Arch | None
    metrics: dict[str, Any]
    cost: TrialCost
    reason: str | None = None
    baseline: str = ""
    objectives: tuple[str, ...] = field(default=(), repr=False)
    directions: tuple[str, ...] = field(default=(), repr=False)
    constraints: dict[str, float] = field(default_factory=dict)  # limit -> value / limit - 1 (<= 0: met)
    rejected: bool = False  # over a limit, so never evaluated
    rung: int | None = None  # on a fidelity ladder: the rung this trial trained to, and its lineage
    lineage: int | None = None
    repeat_of: int | None = None  # the earlier trial of the same architecture that answered this one

    @property
    def feasible(self) -> bool:
        return all(v <= 0 for v in self.constraints.values())

    @property
    def ok(self) -> bool:
        return self.reason is None

    @property
    def interrupted(self) -> bool:
        return self.reason is not None and self.reason.startswith("interrupted:")

    @property
    def values(self) -> list[float] | None:
        """The objective values in declared order (None for a failed trial). A rejected sample's values are
        those it has (its cost) and the worst possible for the rest (no accuracy was measured): what the
        engines are told, with the constraint values that mark it infeasible to the sampler."""
        if not self.ok:
            return None
        worst = {"maximize": -math.inf, "minimize": math.inf}
        return [
            float(self.metrics[n]) if n in self.metrics else worst[d]
            for n, d in zip(
                self.objectives, self.directions or ("minimize",) * len(self.objectives), strict=True
            )
        ]

    def attrs(self) -> dict[str, Any]:
        """The records both engines store with a trial, and the trials table reads."""
        return {
            "arch": self.arch.key if self.arch else "",
            "arch_json": self.arch.to_json() if self.arch else "",
            "baseline": self.baseline,
            "metrics": self.metrics,
            "cost": self.cost.to_dict(),
            "fail_reason": self.reason or "",
            "constraints": self.constraints,
            "feasible": self.feasible,
            "rejected": self.rejected,
            **({"rung": self.rung, "lineage": self.lineage} if self.rung is not None else {}),
            **({"repeat_of": self.repeat_of} if self.repeat_of is not None else {}),
        }


@dataclass(frozen=True)
class Earlier:
    """An earlier trial's result of an architecture, as an engine's ``known`` look-up returns it."""

    number: int
    metrics: dict[str, Any]
    constraints: dict[str, float]

    @classmethod
    def from_attrs(cls, number: int, attrs: dict[str, Any]) -> Earlier:
        """From the attributes a trial was recorded with (:meth:`TrialRecord.attrs`)."""
        return cls(number, dict(attrs.get("metrics") or {}), dict(attrs.get("constraints") or {}))


Known = Callable[[Arch], "Earlier | None"]


def earlier_results(recorded: Iterable[tuple[int, Mapping[str, Any], bool]]) -> Known:
    """An engine's ``known`` look-up over its recorded trials, each ``(number, attrs, completed)``: an
    architecture's first completed evaluation of its own (not a rejected sample, not a repeat, at rung 0 on a
    ladder), the one rule of both engines."""
    done: dict[str, Earlier] = {}
    for number, attrs, completed in recorded:
        own = not attrs.get("rejected") and attrs.get("repeat_of") is None and not attrs.get("rung")
        if completed and attrs.get("arch") and own:
            done.setdefault(attrs["arch"], Earlier.from_attrs(number, attrs))
    return lambda arch: done.get(arch.key)


def _ray_node() -> str:
    ray = sys.modules.get("ray")  # never imported here for an Optuna search
    if ray is None or not ray.is_initialized():
        return ""
    return ray.get_runtime_context().get_node_id()


def _jsonable(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float, str, bool)) or v is None}


class TrialRunner:
    """Evaluates architectures for one worker under ``settings`` (built lazily, reused across trials)."""

    def __init__(self, settings: SearchSettings, device: str | None = None) -> None:
        self.settings = settings
        self.space = settings.search_space
        self.profile = settings.proxy_profile
        self.spec = settings.evaluator_spec
        self.config = settings.evaluator_config_used
        self.objectives = tuple(o.name for o in settings.parsed_objectives)
        self.directions = tuple(o.direction for o in settings.parsed_objectives)
        self.limits = settings.limits
        self._latency: Any = None
        self._part_costs: Any = None
        self._measured: tuple[str, dict[str, Any]] = ("", {})  # the last architecture measured
        self.baselines = settings.point_names  # the named networks: baselines and enqueued architectures
        self.id = uuid.uuid4().hex[:8]  # trials record which runner (so which worker's state) scored them
        self._device = settings.trial_device if device is None else device  # resolved once, by the settings
        self._data = None
        self._evaluator: Any = None
        self._prepared = False
        self._ladder: Any = None

    @property
    def weights_dir(self):
        """Where the evaluated networks are kept (``runs/<study>/weights/``; only the front's survive)."""
        return self.settings.run_dir / "weights"

    @property
    def device(self):
        return pick_device(self._device)

    @property
    def gpus(self) -> int:
        """GPUs a trial holds: 0 on the CPU and for an evaluator on a simulated clock (a table's seconds are
        CPU seconds); on a GPU ``--gpus-per-trial`` (a fraction charged as a whole GPU), else 1."""
        if self.spec.simulated or self.device.type != "cuda":
            return 0
        return max(1, math.ceil(self.settings.gpus_per_trial or 1))

    @property
    def device_kind(self) -> str:
        return "gpu" if self.gpus else "cpu"

    @property
    def supernet_workers(self) -> int:
        """Ray Train workers that train the evaluator's set-up data-parallel (1: this process does)."""
        return self.settings.supernet_workers if self.spec.data_parallel else 1

    @property
    def supernet_gpus(self) -> bool:
        """Whether each supernet worker holds a GPU: ``--gpus-per-trial`` > 0 as the driver resolved it, else
        whether this process has CUDA."""
        if self.settings.gpus_per_trial is not None:
            return self.settings.gpus_per_trial > 0
        return self.device.type == "cuda"

    def cost(
        self,
        seconds: float,
        label: str = "trial",
        overhead: bool = False,
        rung: int | None = None,
        workers: int = 1,
    ) -> TrialCost:
        """What ``seconds`` of this worker's time (or of ``workers`` data-parallel processes, each on a GPU
        when trials are) cost: the one charge formula of both engines."""
        gpus = self.gpus if workers == 1 else int(self.supernet_gpus)
        return TrialCost.of(seconds, gpus=gpus, label=label, overhead=overhead, rung=rung, workers=workers)

    @property
    def ladder(self) -> Any:
        """The search's :class:`~nas.study.fidelity.Ladder` (None for a single fidelity): rung 0 trains on
        ``--min-fidelity`` images, by default :func:`~nas.study.fidelity.default_min_images` of what the
        profile's proxy trains on (its epochs of whole batches of its pool)."""
        ladder = self.settings.ladder
        if ladder is None or self.settings.min_fidelity is not None:
            return ladder
        if self._ladder is None and self.spec.simulated:  # a table: the top rung at its curves' last epoch
            self.prepare()  # no set-up cost to lose: a simulated evaluator has none
            images = self._evaluator.ladder_min_images(ladder.eta, ladder.rungs)
            self._ladder = dataclasses.replace(ladder, min_images=images)
        if self._ladder is None:
            batch = self.profile.batch_size
            pool = self.profile.train_samples or len(self.data().train)
            images = default_min_images(self.profile.epochs * (pool // batch) * batch, ladder.eta, batch)
            self._ladder = dataclasses.replace(ladder, min_images=images)
        return self._ladder

    def checkpoint(self, lineage: int, rung: int) -> Path:
        """Where ``lineage``'s training state after ``rung`` is kept."""
        return self.settings.run_dir / "ladder" / str(lineage) / f"rung{rung}.pt"

    def release(self, lineage: int, rung: int) -> None:
        """``lineage`` trained ``rung`` (> 0): the checkpoint it continued will not be continued again, so it
        is deleted, with the lineage's folder once that holds nothing."""
        below = self.checkpoint(lineage, rung - 1)
        below.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # another checkpoint of the lineage is still there
            below.parent.rmdir()

    def data(self):
        if self._data is None:
            self._data = evaluators.data.load_dataset(
                self.settings.dataset,
                img_size=self.profile.img_size,
                data_dir=self.settings.data_dir,
                seed=self.settings.seed,
                download=self.settings.download,
            )
        return self._data

    def prepare(self) -> TrialCost | None:
        """Build what every trial shares (data, the evaluator, a one-shot supernet) before the
        first trial's clock and timeout start. The first call returns the cost of the evaluator's declared
        set-up work (None when it has none, and on later calls): the driver charges it as overhead."""
        if self._prepared:
            return None

        start = time.perf_counter()
        self._evaluator = self.spec.build(
            self.config,
            space=self.space,
            profile=self.profile,
            data=self.data,
            seed=self.settings.seed,
            device=self._device,
            run_dir=self.settings.run_dir,
            weights_dir=self.weights_dir,
            workers=self.supernet_workers,
            cpus_per_worker=self.settings.cpus_per_worker,
            use_gpu=self.supernet_gpus,
        )
        self._prepared = True
        if not self.spec.needs_setup:
            return None
        workers = self.supernet_workers
        label = f"{self.spec.name} set-up" + (f" ({workers} workers)" if workers > 1 else "")
        # waiting for another session that trains the same supernet is that session's cost, not this one's
        seconds = time.perf_counter() - start - getattr(self._evaluator, "waited_seconds", 0.0)
        return self.cost(seconds, label=label, overhead=True, workers=workers)

    @property
    def latency_table(self) -> Any:
        """The latency table of ``--latency-device`` (default: this worker's device), at ``--latency-batch``,
        kept under ``<runs>/latency/`` and shared by every search that measures on that device."""
        if self._latency is None:
            self._latency = LatencyTable(
                self.settings.latency_device or self.device,
                batch=self.settings.latency_batch,
                root=Path(self.settings.runs_dir) / "latency",
            )
        return self._latency

    def read_stores(self, latency: bool = True) -> None:
        """Read the files every trial's :meth:`measure` reads afresh: the part-cost store under
        ``<runs>/counts/`` and, with ``latency`` where the search measures it, the latency table. A damaged
        one is a ValueError in one sentence naming it: the preflight's check, so that a search refuses it
        before it starts instead of failing every trial on it."""
        self._part_costs = PartCosts(Path(self.settings.runs_dir) / "counts")
        if latency and self.settings.measures_latency:
            self._latency = None
            _ = self.latency_table

    def measure(self, arch: Arch) -> dict[str, Any]:
        """What ``arch`` costs, before anything is built: ``params`` and ``macs`` at the target resolution
        (their part costs kept in ``<runs>/counts/``, beside the latency tables) and, when the search asks
        for it, ``latency_ms`` there, on the latency device."""
        if self._part_costs is None:  # traced part costs, shared by every search under --runs-dir
            self._part_costs = PartCosts(Path(self.settings.runs_dir) / "counts")
        img_size = self.settings.macs_img_size or TARGET_IMG_SIZE
        with counts_kept_in(self._part_costs):
            cost = count(arch, img_size=img_size, in_chans=3, num_classes=1000)
        metrics: dict[str, Any] = {"params": cost.params, "macs": cost.macs, "macs_img_size": img_size}
        if self.settings.measures_latency:
            table = self.latency_table
            metrics["latency_ms"] = table.predict(arch, img_size=img_size, in_chans=3, num_classes=1000)
            metrics["latency_device"] = table.device_id
            metrics["latency_batch"] = self.settings.latency_batch
        self._measured = (arch.key, metrics)
        return metrics

    def evaluate(
        self, arch: Arch, report: Report | None = None, step: tuple[int, int] | None = None
    ) -> dict[str, Any]:
        """Every metric of ``arch``: what :meth:`measure` gives (taken once: the check before it measured
        it) and the evaluator's own; exceptions (a diverged run, a bad architecture) propagate. On a ladder
        ``step`` is (lineage, rung): the evaluator trains that rung, from the rung below's checkpoint."""
        self.prepare()
        extra: dict[str, Any] = {}
        if self.ladder is not None:
            if step is None:
                raise ValueError("a laddered search evaluates a (lineage, rung), not a bare architecture")
            lineage, rung = step
            ladder = self.ladder
            extra["fidelity"] = Fidelity(
                ladder.images(rung),
                ladder.images(ladder.top),
                self.checkpoint(lineage, rung) if rung < ladder.top else None,  # nothing continues the top
                self.checkpoint(lineage, rung - 1) if rung else None,
                ladder.restarts,
                ladder.validation(rung),
                ladder.images(rung - 1) if rung else 0,
            )
        key, measured = self._measured
        metrics: dict[str, Any] = {
            **(measured if key == arch.key else self.measure(arch)),
            "host": socket.gethostname(),  # where it ran
            "node": _ray_node(),  # and on which node of a Ray cluster ('' outside Ray)
            "pid": os.getpid(),  # in which worker process
            "runner": self.id,  # by which TrialRunner: one per worker process, on both engines
        }
        if self._evaluator is not None:
            # the evaluator's own counts are of the network it scored (proxy-scaled): kept apart, so that
            # params and macs stay the architecture's at the target resolution in every trial
            scored = self._evaluator.evaluate(arch, report=report, **extra)
            metrics.update({f"scored_{k}" if k in ("params", "macs") else k: v for k, v in scored.items()})
        return metrics


_RUNNERS: dict[str, TrialRunner] = {}  # this process's runner, by the settings' choices


def worker_runner(settings: SearchSettings | Mapping[str, Any]) -> TrialRunner:
    """This worker process's :class:`TrialRunner` for ``settings`` (or their choices, as a Ray worker gets
    them), the one place a runner is built: made on first use and kept for everything the process does for
    the search (the preflight's checks, the evaluator's set-up, every trial), so the data, the evaluator and
    a trained supernet are loaded once. A process that turns to other settings (a reused Ray worker of another
    search) builds anew."""
    choices = settings.choices() if isinstance(settings, SearchSettings) else dict(settings)
    key = json.dumps(choices, sort_keys=True, default=str)
    if key not in _RUNNERS:
        _RUNNERS.clear()
        _RUNNERS[key] = TrialRunner(
            settings if isinstance(settings, SearchSettings) else SearchSettings(**choices)
        )
    return _RUNNERS[key]


def forget_worker_runner() -> None:
    """Drop this process's runner (a search ended: the next one in this process starts afresh)."""
    _RUNNERS.clear()


def run_trial(
    runner: TrialRunner,
    sample: Callable[[], Arch],
    *,
    number: int,
    on_arch: Callable[[Arch], None] | None = None,
    report: Report | None = None,
    step: tuple[int, int] | None = None,
    known: Known | None = None,
) -> TrialRecord:
    """Sample an architecture with ``sample``, evaluate it under the trial deadline, and return its record.

    ``on_arch`` is called with the architecture as soon as it is known (the Optuna driver stores it then, so
    that a worker killed mid-trial leaves enough to re-run it). Any exception fails the trial with its reason
    (:func:`~nas.system.failures.failure_reason`); Ctrl-C / SIGTERM fails it as ``interrupted:``, charged as
    overhead, and the driver stops the search after recording it. On a ladder ``step`` is the (lineage,
    rung) to train (None: a new lineage at rung 0, named ``number``). ``known(arch)`` is the engine's
    earlier result of ``arch`` (the module docstring's repeats), or None.
    """
    if runner.ladder is not None and step is None:
        step = (number, 0)
    start = time.perf_counter()
    arch: Arch | None = None
    metrics: dict[str, Any] = {}
    constraints: dict[str, float] = {}
    rejected = False
    reason = None
    earlier: Earlier | None = None
    try:
        arch = sample()
        if on_arch is not None:
            on_arch(arch)
        earlier = known(arch) if known is not None else None
        if earlier is not None:
            metrics, constraints = dict(earlier.metrics), dict(earlier.constraints)
        else:
            with stopping.stoppable():  # Ctrl-C / SIGTERM stop the evaluation at once, nothing else
                metrics, constraints, rejected = _evaluate(runner, arch, report, step)
    except KeyboardInterrupt as err:
        reason = failure_reason(err)
    except Exception as err:  # the search goes on; the reason is kept in the trials table
        reason = failure_reason(err)
    if reason is not None:
        release_memory()  # after the except block: the exception no longer holds the trial's frames
    interrupted = reason is not None and reason.startswith("interrupted:")
    if step is not None and step[1] > 0 and earlier is None and not rejected and not interrupted:
        # the promotion trained its rung (or failed it for good): the rung below is spent
        runner.release(*step)
    rejected = rejected and reason is None
    repeat = earlier is not None and reason is None
    kind = "interrupted " if interrupted else "rejected " if rejected else "repeated " if repeat else ""
    seconds = time.perf_counter() - start
    if runner.spec.simulated:  # the clock of the records: what the answer stands for, nothing else
        ran = reason is None and not (rejected or repeat)
        seconds = float(metrics.get("simulated_seconds", 0.0)) if ran else 0.0
    return TrialRecord(
        arch,
        metrics,
        runner.cost(
            seconds,
            label=f"{kind}trial {number}",
            overhead=interrupted or rejected or repeat,
            rung=step[1] if step and not (rejected or repeat) else None,
        ),
        reason,
        runner.baselines.get(arch.key, "") if arch is not None and not repeat else "",
        runner.objectives,
        runner.directions,
        constraints,
        rejected,
        step[1] if step else None,
        step[0] if step else None,
        earlier.number if repeat else None,
    )


def _evaluate(
    runner: TrialRunner, arch: Arch, report: Report | None, step: tuple[int, int] | None
) -> tuple[dict[str, Any], dict[str, float], bool]:
    """(metrics, constraint values, rejected) of ``arch``: measured against the limits, and evaluated
    unless it is over one (a baseline is evaluated whatever its cost), under the trial deadline."""
    guard = deadline(runner.settings.trial_timeout)
    try:
        with guard:
            measured = runner.measure(arch) if runner.limits or runner.settings.measures_latency else None
            constraints = runner.limits.violations(measured) if runner.limits else {}
            if any(v > 0 for v in constraints.values()) and arch.key not in runner.baselines:
                where = {"host": socket.gethostname(), "pid": os.getpid()}
                return _jsonable({**measured, **where}), constraints, True
            ladder = {"step": step} if step is not None else {}  # a single fidelity's evaluate is unchanged
            metrics = _jsonable(runner.evaluate(arch, report, **ladder))
            _check_produced(runner, metrics)
            return metrics, constraints, False
    except TrialTimeout as err:
        if str(err):  # the deadline's own, with its message
            raise
        raise guard.escaped() from None  # one timeout reads as every other (the same-failure stop counts)


def _check_produced(runner: TrialRunner, metrics: dict[str, Any]) -> None:
    """An objective the evaluator declared but did not report, or reported as no number, is its bug."""
    bad = [n for n in runner.objectives if not isinstance(metrics.get(n), (int, float))]
    if bad:
        raise RuntimeError(
            f"the {runner.spec.name} evaluator declares {', '.join(bad)} but reported "
            f"{', '.join(repr(metrics.get(n)) for n in bad)}"
        )

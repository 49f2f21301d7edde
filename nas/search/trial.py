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

Cost: wall seconds times the devices held (:meth:`TrialRunner.cost`, the one charge formula). A trial's
seconds run from before its sampling (the sampler's suggestions are part of what a trial costs) to the end
of its evaluation, failed or not. An interrupted trial (Ctrl-C, SIGTERM) is charged as overhead: it spends
a time budget but is no trial of a ``trials`` budget, and the driver queues it again.
"""

from __future__ import annotations

import math
import os
import socket
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nas.arch import Arch
from nas.search.budget import TrialCost
from nas.search.failures import deadline, failure_reason, release_memory
from nas.search.settings import SearchSettings

__all__ = ["TrialRecord", "TrialRunner", "run_trial"]

Report = Callable[[int, dict[str, float]], None]
TARGET_IMG_SIZE = 224  # MACs and params are reported for the network as the papers count it


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

    @property
    def ok(self) -> bool:
        return self.reason is None

    @property
    def interrupted(self) -> bool:
        return self.reason is not None and self.reason.startswith("interrupted:")

    @property
    def values(self) -> list[float] | None:
        """The objective values in declared order (None for a failed trial)."""
        return [float(self.metrics[n]) for n in self.objectives] if self.ok else None

    def attrs(self) -> dict[str, Any]:
        """The records both engines store with a trial, and the trials table reads."""
        return {
            "arch": self.arch.key if self.arch else "",
            "arch_json": self.arch.to_json() if self.arch else "",
            "baseline": self.baseline,
            "metrics": self.metrics,
            "cost": self.cost.to_dict(),
            "fail_reason": self.reason or "",
        }


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
        from search_spaces import get_space

        self.settings = settings
        self.space = get_space(settings.space)
        self.profile = self.space.profile(settings.profile)
        self.spec = settings.evaluator_spec
        self.config = settings.evaluator_config_used()
        self.objectives = tuple(o.name for o in settings.parsed_objectives)
        self.baselines = self.space.baseline_names()
        self.id = uuid.uuid4().hex[:8]  # trials record which runner (so which worker's state) scored them
        self._device = device
        self._data = None
        self._evaluator: Any = None
        self._prepared = False

    @property
    def weights_dir(self):
        """Where the evaluated networks are kept (``runs/<study>/weights/``; only the front's survive)."""
        return self.settings.run_dir / "weights"

    @property
    def device(self):
        from evaluators.complexity import pick_device

        return pick_device(self._device)

    @property
    def gpus(self) -> int:
        """GPUs a trial holds: 0 on the CPU; on a GPU ``--gpus-per-trial`` (a fraction charged as a whole
        GPU), else 1."""
        if self.device.type != "cuda":
            return 0
        return max(1, math.ceil(self.settings.gpus_per_trial or 1))

    @property
    def device_kind(self) -> str:
        return "gpu" if self.gpus else "cpu"

    def cost(self, seconds: float, label: str = "trial", overhead: bool = False) -> TrialCost:
        """What ``seconds`` of this worker's time cost: the one charge formula of both engines."""
        return TrialCost.of(seconds, gpus=self.gpus, label=label, overhead=overhead)

    def data(self):
        if self._data is None:
            from evaluators.data import load_dataset

            self._data = load_dataset(
                self.settings.dataset,
                img_size=self.profile.img_size,
                data_dir=self.settings.data_dir,
                seed=self.settings.seed,
            )
        return self._data

    def prepare(self) -> TrialCost | None:
        """Build what every trial shares (imports, data, the evaluator, a one-shot supernet) before the
        first trial's clock and timeout start. The first call returns the cost of the evaluator's declared
        set-up work (None when it has none, and on later calls): the driver charges it as overhead."""
        if self._prepared:
            return None
        import evaluators.complexity  # noqa: F401 - torch and fvcore, imported once per worker

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
        )
        self._prepared = True
        if not self.spec.needs_setup:
            return None
        return self.cost(time.perf_counter() - start, label=f"{self.spec.name} set-up", overhead=True)

    def evaluate(self, arch: Arch, report: Report | None = None) -> dict[str, Any]:
        """Every metric of ``arch``: ``params`` and ``macs`` at the target resolution and the evaluator's
        own; exceptions (a diverged run, a bad architecture) propagate."""
        from evaluators.complexity import count

        self.prepare()
        img_size = self.settings.macs_img_size or TARGET_IMG_SIZE
        cost = count(arch, img_size=img_size, in_chans=3, num_classes=1000)
        metrics: dict[str, Any] = {
            "params": cost.params,
            "macs": cost.macs,
            "macs_img_size": img_size,
            "host": socket.gethostname(),  # where it ran
            "node": _ray_node(),  # and on which node of a Ray cluster ('' outside Ray)
            "pid": os.getpid(),  # in which worker process
            "runner": self.id,  # by which TrialRunner: one per worker process, on both engines
        }
        if self._evaluator is not None:
            # the evaluator's own counts are of the network it scored (proxy-scaled): kept apart, so that
            # params and macs stay the architecture's at the target resolution in every trial
            scored = self._evaluator.evaluate(arch, report=report)
            metrics.update({f"scored_{k}" if k in ("params", "macs") else k: v for k, v in scored.items()})
        return metrics


def run_trial(
    runner: TrialRunner,
    sample: Callable[[], Arch],
    *,
    number: int,
    on_arch: Callable[[Arch], None] | None = None,
    report: Report | None = None,
) -> TrialRecord:
    """Sample an architecture with ``sample``, evaluate it under the trial deadline, and return its record.

    ``on_arch`` is called with the architecture as soon as it is known (the Optuna driver stores it then, so
    that a worker killed mid-trial leaves enough to re-run it). Any exception fails the trial with its reason
    (:func:`~nas.search.failures.failure_reason`); Ctrl-C / SIGTERM fails it as ``interrupted:``, charged as
    overhead, and the driver stops the search after recording it.
    """
    start = time.perf_counter()
    arch: Arch | None = None
    metrics: dict[str, Any] = {}
    reason = None
    try:
        arch = sample()
        if on_arch is not None:
            on_arch(arch)
        with deadline(runner.settings.trial_timeout):
            metrics = _jsonable(runner.evaluate(arch, report))
        _check_produced(runner, metrics)
    except KeyboardInterrupt as err:
        reason = failure_reason(err)
    except Exception as err:  # the search goes on; the reason is kept in the trials table
        reason = failure_reason(err)
    if reason is not None:
        release_memory()  # after the except block: the exception no longer holds the trial's frames
    interrupted = reason is not None and reason.startswith("interrupted:")
    label = f"{'interrupted ' if interrupted else ''}trial {number}"
    return TrialRecord(
        arch,
        metrics,
        runner.cost(time.perf_counter() - start, label=label, overhead=interrupted),
        reason,
        runner.baselines.get(arch.key, "") if arch is not None else "",
        runner.objectives,
    )


def _check_produced(runner: TrialRunner, metrics: dict[str, Any]) -> None:
    """An objective the evaluator declared but did not report, or reported as no number, is its bug."""
    bad = [n for n in runner.objectives if not isinstance(metrics.get(n), (int, float))]
    if bad:
        raise RuntimeError(
            f"the {runner.spec.name} evaluator declares {', '.join(bad)} but reported "
            f"{', '.join(repr(metrics.get(n)) for n in bad)}"
        )

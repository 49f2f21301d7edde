"""One trial, whichever driver runs it: architecture in, objective values and cost out.

:class:`TrialRunner` owns the expensive, reusable state of a search worker (the data split, the evaluator, a
trained supernet) and builds it on first use. ``run(arch, report)`` returns a :class:`TrialResult`: every
metric the evaluator produced plus ``params`` and ``macs`` of the architecture at the space's target
resolution (fvcore), the wall seconds and the devices held, which the budget charges. A one-shot
evaluator's supernet training is returned once, by ``setup_cost()``, so that it is charged too.
"""

from __future__ import annotations

import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nas.arch import Arch
from nas.search.settings import SearchSettings

__all__ = ["TrialResult", "TrialRunner"]

Report = Callable[[int, dict[str, float]], None]
TARGET_IMG_SIZE = 224  # MACs and params are reported for the network as the papers count it


@dataclass
class TrialResult:
    metrics: dict[str, Any]
    seconds: float
    devices: float
    device_kind: str  # "gpu" | "cpu"
    extra: dict[str, Any] = field(default_factory=dict)

    def values(self, names: list[str]) -> list[float]:
        missing = [n for n in names if n not in self.metrics]
        if missing:
            raise KeyError(f"the evaluator reported no {', '.join(missing)}")
        return [float(self.metrics[n]) for n in names]


def _ray_node() -> str:
    ray = sys.modules.get("ray")  # never imported here for an Optuna search
    if ray is None or not ray.is_initialized():
        return ""
    return ray.get_runtime_context().get_node_id()


class TrialRunner:
    """Evaluates architectures for one worker under ``settings`` (built lazily, reused across trials)."""

    def __init__(self, settings: SearchSettings, device: str | None = None) -> None:
        from search_spaces import get_space

        self.settings = settings
        self.space = get_space(settings.space)
        self.profile = self.space.profile(settings.profile)
        self._device = device
        self._data = None
        self._evaluator: Any = None
        self._setup_seconds = 0.0
        self._setup_charged = False

    @property
    def weights_dir(self):
        """Where the evaluated networks are kept (``runs/<study>/weights/``; only the front's survive)."""
        return self.settings.run_dir / "weights"

    @property
    def device(self):
        from evaluators.complexity import pick_device

        return pick_device(self._device)

    @property
    def device_kind(self) -> str:
        return "gpu" if self.device.type == "cuda" else "cpu"

    def devices_held(self) -> float:
        if self.device_kind == "cpu":
            return 1.0
        gpus = self.settings.gpus_per_trial
        return float(gpus) if gpus else 1.0

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

    def evaluator(self) -> Any:
        """The proxy or one-shot evaluator (None for ``complexity``); a one-shot supernet is trained here."""
        if self._evaluator is None and self.settings.evaluator != "complexity":
            start = time.perf_counter()
            if self.settings.evaluator == "proxy":
                from evaluators.proxy import ProxyEvaluator

                self._evaluator = ProxyEvaluator(
                    self.profile,
                    self.data(),
                    seed=self.settings.seed,
                    device=self._device,
                    weights_dir=self.weights_dir,
                )
            else:
                from evaluators.oneshot import OneShotEvaluator

                self._evaluator = OneShotEvaluator(
                    self.space,
                    self.profile,
                    self.data(),
                    seed=self.settings.seed,
                    run_dir=self.settings.run_dir,
                    device=self._device,
                    weights_dir=self.weights_dir,
                )
                self._evaluator.train()
            self._setup_seconds = time.perf_counter() - start
        return self._evaluator

    def prepare(self) -> None:
        """Build what every trial shares (imports, data, evaluator, a one-shot supernet) before the first
        trial's clock, and its timeout, start."""
        import evaluators.complexity  # noqa: F401 - torch and fvcore, imported once per worker

        self.evaluator()

    def setup_cost(self) -> tuple[float, float]:
        """(seconds, devices) of one-off work not yet charged (one-shot supernet training), then (0, 0)."""
        self.evaluator()
        if self._setup_charged or self._setup_seconds == 0.0:
            return 0.0, 0.0
        self._setup_charged = True
        return self._setup_seconds, self.devices_held()

    def run(self, arch: Arch, report: Report | None = None) -> TrialResult:
        """Evaluate ``arch``; exceptions (a diverged run, bad architecture) propagate to the driver."""
        from evaluators.complexity import count

        start = time.perf_counter()
        img_size = self.settings.macs_img_size or TARGET_IMG_SIZE
        cost = count(arch, img_size=img_size, in_chans=3, num_classes=1000)
        metrics: dict[str, Any] = {
            "params": cost.params,
            "macs": cost.macs,
            "macs_img_size": img_size,
            "host": socket.gethostname(),  # where it ran
            "node": _ray_node(),  # and on which node of a Ray cluster ('' outside Ray)
        }
        evaluator = self.evaluator()
        if evaluator is not None:
            # the evaluator's own counts are of the network it scored (proxy-scaled): kept apart, so that
            # params and macs stay the architecture's at the target resolution in every trial
            scored = evaluator.evaluate(arch, report=report)
            metrics.update({f"scored_{k}" if k in ("params", "macs") else k: v for k, v in scored.items()})
        return TrialResult(metrics, time.perf_counter() - start, self.devices_held(), self.device_kind)

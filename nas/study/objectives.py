"""Search objectives, declared once: a metric name and its direction, shared by the drivers and the reports.

``top1`` (validation accuracy of the evaluator, percent) is maximized; ``macs`` and ``params`` (of the
architecture at the space's target resolution, counted by fvcore), ``latency_ms`` and ``loss`` are
minimized. A spec is ``"top1,macs"`` (known directions) or ``"top1:max,macs:min"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nas.core.bounds import shown

__all__ = ["DEFAULT_OBJECTIVES", "KNOWN_DIRECTIONS", "Objective", "parse_objectives"]

KNOWN_DIRECTIONS = {
    "top1": "maximize",
    "macs": "minimize",
    "params": "minimize",
    "latency_ms": "minimize",
    "loss": "minimize",
}
_ALIASES = {"max": "maximize", "maximize": "maximize", "min": "minimize", "minimize": "minimize"}


@dataclass(frozen=True)
class Objective:
    name: str
    direction: str  # "maximize" | "minimize"

    def __str__(self) -> str:
        return f"{self.name}:{self.direction[:3]}"


def parse_objectives(spec: str | Sequence[str]) -> tuple[Objective, ...]:
    """``"top1,macs"`` or ``["top1:max", "macs:min"]`` -> objectives; ValueError in one sentence otherwise."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    odd = next((p for p in items if not isinstance(p, str)), None)
    if odd is not None:  # a manifest's or a config's list may hold anything
        raise ValueError(f"objectives: each is a metric's name, as text; got {shown(odd)}")
    parts = [p.strip() for p in items if p.strip()]
    if not parts:
        raise ValueError("objectives: none given; e.g. --objectives top1,macs")
    out: list[Objective] = []
    for part in parts:
        name, _, direction = part.partition(":")
        name = name.strip()
        if name not in KNOWN_DIRECTIONS:
            raise ValueError(
                f"objectives: unknown metric {name!r}; allowed: {', '.join(KNOWN_DIRECTIONS)} "
                "(e.g. top1:max,macs:min)"
            )
        if direction and direction.strip().lower() not in _ALIASES:
            raise ValueError(f"objectives: unknown direction {direction!r} for {name}; allowed: max, min")
        out.append(
            Objective(name, _ALIASES[direction.strip().lower()] if direction else KNOWN_DIRECTIONS[name])
        )
    names = [o.name for o in out]
    if len(set(names)) != len(names):
        raise ValueError(f"objectives: {', '.join(names)} names a metric twice")
    return tuple(out)


DEFAULT_OBJECTIVES = parse_objectives("top1:max,macs:min")

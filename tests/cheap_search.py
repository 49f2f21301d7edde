"""The cheap search the driver tests run: the `sasa` space under the complexity evaluator (no training),
MACs and params of 32 px images as objectives, so the search logic is under test and not fvcore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nas.search.settings import SearchSettings


def cheap_settings(runs_dir: str | Path, **changes: Any) -> SearchSettings:
    values: dict[str, Any] = {
        "space": "sasa",
        "evaluator": "complexity",
        "objectives": ("macs", "params"),
        "budget": "6trials",
        "macs_img_size": 32,
        "runs_dir": str(runs_dir),
        "study": "t",
    }
    values.update(changes)
    return SearchSettings(**values)

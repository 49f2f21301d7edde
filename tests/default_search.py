"""The embedded default search (``coatnet``, proxy training on Fashion-MNIST under the ``cpu`` profile) made
small: 2 trials, no baselines. At seed 3 its second trial is off the front (lower top-1 at more MACs), so
tests of what a search keeps for its front can tell the front from the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nas.study.settings import SearchSettings

SEED = 3


def default_settings(runs_dir: str | Path, study: str, **changes: Any) -> SearchSettings:
    values: dict[str, Any] = {
        "budget": "2trials",
        "baselines": False,
        "seed": SEED,
        "runs_dir": str(runs_dir),
        "study": study,
    }
    values.update(changes)
    return SearchSettings(**values)

"""``runs/<study>/manifest.json``: what a search ran with, so that its results can be read and repeated.

Space, seed, budget (as given and as spent), evaluator settings (profile, training config), storage, data
location and split, package versions and the machine. Written atomically at the end of a search and on
interruption; a resumed search appends its session to ``sessions``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import socket
import sys
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from nas.atomic import replaced
from nas.search.settings import SearchSettings

__all__ = ["package_versions", "write_manifest"]

_PACKAGES = ("nas-hybrid", "torch", "torchvision", "timm", "optuna", "ray", "fvcore", "pandas", "numpy")


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _evaluator_settings(settings: SearchSettings) -> dict[str, Any]:
    from search_spaces import get_space

    profile = get_space(settings.space).profile(settings.profile)
    out: dict[str, Any] = {"name": settings.evaluator, "profile": dataclasses.asdict(profile)}
    if settings.evaluator == "proxy":
        from evaluators.proxy import TrainConfig

        out["train_config"] = dataclasses.asdict(TrainConfig())
    elif settings.evaluator == "oneshot":
        from evaluators.oneshot import OneShotConfig

        out["oneshot_config"] = dataclasses.asdict(OneShotConfig())
    return out


def write_manifest(
    settings: SearchSettings,
    *,
    storage: str,
    budget: dict[str, Any],
    data: dict[str, Any] | None,
    trials: dict[str, int],
    session: dict[str, Any],
) -> Path:
    """Write (or update) ``manifest.json`` in the study's run directory; returns its path."""
    path = settings.run_dir / "manifest.json"
    previous: dict[str, Any] = {}
    if path.exists():
        try:
            previous = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            previous = {}
    sessions = [s for s in previous.get("sessions", []) if s.get("id") != session.get("id")] + [session]
    manifest = {
        "study": settings.study_name,
        "space": settings.space,
        "seed": settings.seed,
        "settings": settings.to_dict(),
        "storage": storage,
        "budget": budget,
        "evaluator": _evaluator_settings(settings),
        "data": data or previous.get("data"),
        "trials": trials,
        "packages": package_versions(),
        "machine": {
            "host": socket.gethostname(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "argv": sys.argv,
        },
        "sessions": sessions,
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced(path) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    return path

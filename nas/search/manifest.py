"""``runs/<study>/manifest.json``: what a search ran with, so that its results can be read and repeated.

Space, seed, budget (as given and as spent), the limits (resolved to numbers), evaluator settings (profile,
the config instance the trials ran with), storage, data location and split, package versions and the
machine. Written atomically at the end of a search and on interruption; a resumed search appends its session
to ``sessions``.

This module is the manifest's one writer: :func:`update_manifest` replaces the sections it is given and keeps
every other (the report's ``report`` section, with its fixed hypervolume reference point, survives a resume),
reading and replacing the file under a lock, so writers in several processes never drop each other's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import platform
import socket
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from nas.atomic import replaced
from nas.search.credentials import redact, redact_all
from nas.search.settings import SearchSettings

__all__ = ["package_versions", "read_manifest", "update_manifest", "write_manifest"]

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
    spec, config = settings.evaluator_spec, settings.evaluator_config_used()
    return {
        "name": spec.name,
        "produces": sorted(spec.objectives),
        "profile": dataclasses.asdict(profile),
        "config": dataclasses.asdict(config) if config is not None else None,
    }


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The manifest of ``run_dir`` ({} when there is none or it cannot be read as JSON)."""
    try:
        data = json.loads((Path(run_dir) / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / ".manifest.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def update_manifest(run_dir: str | Path, update: Callable[[dict[str, Any]], None]) -> Path:
    """Read the manifest, let ``update`` change it in place, write it back atomically; every section
    ``update`` leaves alone is kept. Returns its path."""
    run_dir = Path(run_dir)
    path = run_dir / "manifest.json"
    with _locked(run_dir):
        manifest = read_manifest(run_dir)
        update(manifest)
        with replaced(path) as tmp:
            tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    return path


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

    def update(manifest: dict[str, Any]) -> None:
        sessions = [s for s in manifest.get("sessions", []) if s.get("id") != session.get("id")]
        manifest.update(
            {
                "study": settings.study_name,
                "space": settings.space,
                "seed": settings.seed,
                "settings": redact_all(settings.to_dict()),  # a storage URL's password is never written
                "storage": redact(storage),
                "budget": budget,
                "evaluator": _evaluator_settings(settings),
                "limits": settings.limits.to_dict(),  # resolved: --at-cost-of as the baseline's own counts
                "data": data or manifest.get("data"),
                "trials": trials,
                "packages": package_versions(),
                "machine": {
                    "host": socket.gethostname(),
                    "platform": platform.platform(),
                    "cpus": os.cpu_count(),
                    "argv": [redact(arg) for arg in sys.argv],
                },
                "sessions": [*sessions, session],
                "written": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        )

    return update_manifest(settings.run_dir, update)

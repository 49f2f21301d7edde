"""``runs/<study>/manifest.json``: what a search ran with, so that its results can be read and repeated.

Space, seed, budget (as given and as spent), the limits (resolved to numbers), evaluator settings (profile,
the config instance the trials ran with), storage, data location and split, package versions and the
machine. Written atomically as a study's first session opens it (so that ``nas report`` can read a running
study), then at the end of every session and on interruption; a resumed search appends its session to
``sessions``. ``nas report`` and ``nas export`` update the budget spent as they read the study again.

This module is the manifest's one writer: :func:`update_manifest` replaces the sections it is given and keeps
every other (the report's ``report`` section, with its fixed hypervolume reference point, survives a resume),
reading and replacing the file under a lock, so writers in several processes never drop each other's.

A manifest that exists but is not a JSON object (hand-edited, cut by a full disk) is never silently replaced:
it holds the session history and the report's fixed reference point, which the study does not. A search
refuses it in one sentence before it starts (:func:`check_manifest`); ``--repair`` sets it aside as
``manifest.json.corrupt-<time>`` and starts a new one from what can be read of it (the reference point),
which the search then fills from the study.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import re
import socket
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from nas.core import userfiles
from nas.core.atomic import locked, replaced
from nas.core.bounds import MAX_RUNGS, shown
from nas.study.credentials import redact, redact_all
from nas.study.settings import SearchSettings

__all__ = [
    "check_manifest",
    "manifest_problem",
    "package_versions",
    "read_manifest",
    "update_manifest",
    "write_manifest",
]

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
    profile = settings.proxy_profile
    spec, config = settings.evaluator_spec, settings.evaluator_config_used
    return {
        "name": spec.name,
        "produces": sorted(spec.objectives),
        "profile": dataclasses.asdict(profile),
        "config": dataclasses.asdict(config) if config is not None else None,
    }


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The manifest of ``run_dir`` ({} when there is none or it cannot be read as a JSON object within the
    bounds of :func:`nas.core.userfiles.load_store`)."""
    try:
        data = userfiles.load_store(Path(run_dir) / "manifest.json")
    except (FileNotFoundError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _problem(path: Path) -> str | None:
    """Why the manifest at ``path`` cannot be used (None: it is a JSON object, or there is none)."""
    try:
        data = userfiles.load_store(path)
    except FileNotFoundError:
        return None  # no manifest (a run folder that cannot exist is preflight's to refuse)
    except ValueError as err:  # not JSON, not UTF-8, too deep or large, a FIFO: what is wrong with it
        return str(err)
    if not isinstance(data, dict):
        return f"holds a JSON {type(data).__name__}, not an object"
    # the sections a session's end and a report's refresh add to, which a hand's edit may have changed
    sessions = data.get("sessions", [])
    if not isinstance(sessions, list) or not all(isinstance(s, dict) for s in sessions):
        return "has sessions that are not a list of objects"
    if not isinstance(data.get("budget", {}), dict):
        return "has a budget that is not an object"
    return None


_SECTIONS = ("settings", "report", "limits", "budget", "evaluator")  # the objects a report reads


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def manifest_problem(manifest: dict[str, Any]) -> str | None:
    """What makes a manifest (a JSON object with valid objectives) one that a report, an export or a
    comparison cannot read, or whose budget a refresh cannot record, as the end of a sentence naming it; None
    where they can. Checked before anything is written from it."""
    for key in _SECTIONS:
        if manifest.get(key) is not None and not isinstance(manifest[key], dict):
            return f"has a {key} that is not an object ({shown(manifest[key])})"
    if "budget" in manifest and manifest["budget"] is None:
        return "has a budget that is not an object (None)"
    settings = manifest.get("settings") or {}
    if settings.get("fidelity") == "ladder":
        rungs = settings.get("rungs")
        if isinstance(rungs, bool) or not isinstance(rungs, int) or not 2 <= rungs <= MAX_RUNGS:
            return f"records a ladder of {shown(rungs)} rungs (settings.rungs), not 2 to {MAX_RUNGS}"
    point = (manifest.get("report") or {}).get("reference_point")
    if point is not None and not (isinstance(point, dict) and all(_finite(v) for v in point.values())):
        return f"has a report.reference_point that is not an object of finite numbers ({shown(point)})"
    for name, value in (manifest.get("limits") or {}).items():
        if name == "at_cost_of" and not isinstance(value, (str, type(None))):
            return f"has a limit at_cost_of that is not a baseline's name ({shown(value)})"
        if name != "at_cost_of" and not _finite(value):
            return f"has a limit {shown(name)} that is not a finite number ({shown(value)})"
    return None


def check_manifest(run_dir: str | Path) -> None:
    """ValueError in one sentence if ``run_dir`` holds a manifest.json that is not a JSON object."""
    path = Path(run_dir) / "manifest.json"
    problem = _problem(path)
    if problem is not None:
        raise ValueError(
            f"{path} {problem}; it holds the study's session history and the report's fixed reference "
            "point, so it is not replaced: mend it, or pass --repair to set it aside and rebuild it from "
            "the study (keeping the reference point if it can be read)"
        )


def _salvaged(text: str) -> dict[str, Any]:
    """What a corrupt manifest still tells: the report's reference point, if its object can be parsed."""
    found = re.search(r'"reference_point"\s*:\s*(\{[^{}]*\})', text)
    if found is None:
        return {}
    try:
        point = json.loads(found.group(1))
    except json.JSONDecodeError:
        return {}
    if not (isinstance(point, dict) and all(isinstance(v, (int, float)) for v in point.values())):
        return {}
    return {"report": {"reference_point": point}}


def _set_aside(path: Path) -> dict[str, Any]:
    """Rename the corrupt manifest at ``path`` beside it; the new manifest's start: what it salvaged."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    try:  # a FIFO is not read (that would wait forever), nor a file of any size
        userfiles.check_regular(path, "manifest", userfiles.STORE_BOUNDS.max_bytes)
        text = path.read_bytes().decode("utf-8", errors="replace")
    except (OSError, ValueError):
        text = ""
    path.rename(aside)
    start = _salvaged(text)
    start["repaired"] = {"set_aside": aside.name, "at": stamp, "kept": sorted(start.get("report", {}))}
    return start


def update_manifest(
    run_dir: str | Path, update: Callable[[dict[str, Any]], None], *, repair: bool = False
) -> Path:
    """Read the manifest, let ``update`` change it in place, write it back atomically; every section
    ``update`` leaves alone is kept. Returns its path. A manifest that is not a JSON object is refused
    (:func:`check_manifest`), or with ``repair`` set aside and started anew from what it salvages."""
    run_dir = Path(run_dir)
    path = run_dir / "manifest.json"
    run_dir.mkdir(parents=True, exist_ok=True)
    with locked(run_dir / ".manifest"):  # the lock file .manifest.lock
        if repair and _problem(path) is not None:
            manifest = _set_aside(path)
        else:
            check_manifest(run_dir)
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

    return update_manifest(settings.run_dir, update, repair=settings.repair)

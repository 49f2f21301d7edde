"""Taking found architectures away: ``nas export STUDY (--trial N | --pareto)``.

For each chosen trial it writes ``<out>/trial_<N>/`` (replacing an earlier export of it); every folder is made
complete beside ``<out>`` first and renamed into place only when all are, so a failed export leaves nothing:

- ``arch.json``: the architecture as searched (``nas.create_model("arch.json", num_classes=...)`` builds it
  at any size; ``nas train arch.json`` trains it);
- ``model.pt``, when the search kept the weights it evaluated (``runs/<study>/weights/``; a search keeps
  those of its Pareto front): a model file of the network that was scored (the proxy-scaled network the
  proxy trained, or the one-shot supernet's extracted path), which ``nas.create_model("model.pt")`` and
  ``timm.create_model("nas_arch", ..., checkpoint_path="model.pt")`` reload;
- a standalone file of that network for use without this package (:mod:`results.standalone`):
  ``model.pt2`` (``torch.export``, the default), ``model.onnx`` (ONNX opset 20) or ``model.torchscript.pt``;
- ``trial.json``: the trial's row of the trials table (objectives, params, MACs, cost).

The front is :func:`nas.study.front.front_numbers`, where a search's :func:`~nas.study.front.prune_weights`
left the front's networks' weights.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nas.core import userfiles
from nas.core.arch import Arch
from nas.core.atomic import scratch_folder
from nas.core.bounds import shown
from nas.core.create import load_model_file, model_of_payload
from nas.study.front import front_numbers
from nas.study.trials_table import completed_trial, top_rung, why_no_front
from results.analysis import load_run
from results.standalone import check_format, write_standalone

__all__ = ["export_trials"]


def export_trials(
    run_dir: str | Path,
    out_dir: str | Path,
    *,
    trials: Sequence[int] | None = None,
    fmt: str = "export",
) -> list[Path]:
    """Export the given trial numbers (None: the Pareto front) of the study in ``run_dir``; returns the
    trials' folders, each holding exactly the files this export wrote into it. ``fmt`` is the standalone
    file's format (:data:`results.standalone.FILES`, or ``none``)."""
    check_format(fmt)
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    frame, manifest = load_run(run_dir)
    settings = manifest["settings"]
    top = top_rung(settings)
    numbers = list(trials) if trials is not None else front_numbers(frame, settings["objectives"], top)
    if not numbers:
        raise ValueError(
            f"pareto: study {manifest.get('study')!r} has no front to export ({why_no_front(frame, top)})"
        )
    # every trial is checked before anything is written: a bad one exports none
    numbers = list(dict.fromkeys(int(n) for n in numbers))  # a trial named twice is exported once
    rows = [(n, completed_trial(frame, n, manifest.get("study"), "export")) for n in numbers]
    staging = scratch_folder(out_dir, "out")  # each trial's folder is made complete here first
    try:
        for number, row in rows:
            _export_one(run_dir, staging / f"trial_{number}", row, fmt, _superseded(frame, row))
        out_dir.mkdir(parents=True, exist_ok=True)
        for number, _ in rows:
            _put(staging / f"trial_{number}", out_dir / f"trial_{number}", staging)
    except OSError as err:
        raise ValueError(f"out: cannot write the folder {out_dir} ({err.strerror})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [out_dir / f"trial_{number}" for number, _ in rows]


def _put(source: Path, target: Path, staging: Path) -> None:
    """Rename the complete ``source`` to ``target``; an earlier export there is moved into ``staging`` (and
    goes with it), or put back if the rename fails."""
    old = staging / f"{target.name}.old" if target.exists() else None
    if old is not None:
        target.rename(old)
    try:
        source.rename(target)
    except OSError:
        if old is not None:
            old.rename(target)
        raise


def _superseded(frame: pd.DataFrame, row: pd.Series) -> bool:
    """Whether a higher rung of ``row``'s ladder lineage completed: the lineage's rungs keep one weights file
    (by architecture), which then holds that rung's training, not this one's."""
    if "lineage" not in frame or pd.isna(row.get("rung")):
        return False
    lineage = frame[(frame["lineage"] == row["lineage"]) & (frame["state"] == "COMPLETE")]
    return bool((pd.to_numeric(lineage["rung"], errors="coerce") > float(row["rung"])).any())


def _export_one(run_dir: Path, target: Path, row: pd.Series, fmt: str, superseded: bool = False) -> None:
    target.mkdir()
    arch = Arch.from_json(str(row["arch_json"]))
    (target / "arch.json").write_text(arch.to_json(indent=1) + "\n")
    record = {k: _jsonable(v) for k, v in row.items() if k != "arch_json"}
    (target / "trial.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    source = None if superseded else _weights_file(run_dir, row.get("weights"))
    if source is None:
        return  # the architecture only: weights not kept (off the front, no training, or a higher rung's)
    shutil.copyfile(source, target / "model.pt")
    if fmt != "none":
        payload = load_model_file(source)  # an unreadable file is named as the user knows it
        meta = payload.get("meta")
        model = model_of_payload(payload, source=source)
        write_standalone(model, target, fmt, meta if isinstance(meta, dict) else None)


def _weights_file(run_dir: Path, name: Any) -> Path | None:
    """The model file the trials table names for a trial (None where the search kept none): a file name in
    the run's ``weights/`` folder, and a regular file, refused in one sentence otherwise (a table naming
    ``../x`` would export a file from elsewhere, a FIFO would block the copy and ``/dev/zero`` never end
    it)."""
    if not isinstance(name, str) or not name:
        return None
    weights = run_dir / "weights"
    if name in (".", "..") or any(c in name for c in "/\\\0"):
        raise ValueError(
            f"study: the trials table names {shown(name)} as a trial's weights, not a file name in {weights}"
        )
    source = weights / name
    if not os.path.lexists(source):
        return None
    userfiles.check_regular(source, "model file", max_bytes=None)
    return source


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value

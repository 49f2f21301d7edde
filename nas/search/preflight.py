"""What a search checks before it writes anything: its settings against this machine, files and cluster.

:class:`~nas.study.settings.SearchSettings` validates each value on its own (a seed's range, an address's
form); :func:`preflight` checks what only the world can answer, in one place, before the first file or folder
of the run exists (the study storage, ``runs/<study>/``, a Ray experiment), so that a refused search leaves
everything as it was:

- the run folder can be made (its nearest existing parent is a folder this process may write in);
- a Ray cluster's address answers (one TCP connection; ``auto`` is left to Ray, which says so at once);
- the budget's device is the one the trials run on (GPU time needs trials that hold a GPU, CPU time trials
  that hold none), a local Ray has the CPUs and GPUs one trial asks for (else no trial could ever start), and
  ``--latency-device`` exists where the trials run;
- the dataset is there (its description and split record, :meth:`~evaluators.data.DataSplit.split_record`,
  go into ``manifest.json``);
- the evaluator's own check (``EvaluatorSpec.check``): its splits hold the images it trains and validates on
  (at least a batch), and files it would read at its set-up are its own (a one-shot ``supernet.pt``); one
  that reads no dataset (``reads_data`` False: a table) is checked without one and given the ladder (the
  table's file, its space, and whether its curves hold the epochs asked for);
- the files every trial reads as it measures an architecture, the part-cost store and the latency table
  under ``--runs-dir``, are not damaged (else each trial would fail on them, its time charged);
- the run folder's study, if any, is this backend's: Optuna keeps its trials in its storage and Ray in the
  folder's ledger, neither reads the other's, so a search under the other backend would start a second study
  there and overwrite the first one's trials table, report and manifest.

Each refusal is a ``ValueError`` of one sentence naming the setting.
"""

from __future__ import annotations

import math
import os
import socket
from pathlib import Path
from typing import Any

from nas.core.atomic import scratch_folder
from nas.core.option_names import option, setting, together
from nas.search.trial import worker_runner
from nas.study.budget import BudgetTracker
from nas.study.manifest import read_manifest
from nas.study.settings import SearchSettings

__all__ = ["CONNECT_SECONDS", "preflight"]

CONNECT_SECONDS = 5.0  # a cluster that takes longer to accept one connection is not reachable in practice


def preflight(settings: SearchSettings) -> dict[str, Any] | None:
    """Check ``settings`` against the machine, the files and the cluster (the module docstring's list);
    returns the description of the data the trials train on with its split record (None for an evaluator
    that trains nothing or reads no dataset)."""
    _check_run_dir(settings.run_dir)
    _check_backend(settings)
    runner = worker_runner(settings)  # the driver's worker 0 keeps it (the data loaded once)
    if settings.backend == "ray":
        _check_ray(settings)
    else:
        BudgetTracker(settings.parsed_budget).check_device(runner.device_kind)
    _check_latency_device(settings)
    runner.read_stores(latency=settings.backend != "ray")  # a Ray trial measures latency on the GPU it holds
    spec = settings.evaluator_spec
    if spec.counts_only:
        return None
    split = runner.data() if spec.reads_data else None  # a table answers from its own file
    spec.check(
        runner.config,
        space=runner.space,
        profile=runner.profile,
        data=split,
        seed=settings.seed,
        run_dir=settings.run_dir,
        **({} if spec.reads_data else {"ladder": runner.ladder}),
    )
    if split is None:
        return None
    return {**split.describe(), **split.split_record()}  # the split exactly: its fingerprints


def _check_run_dir(run_dir: Path) -> None:
    """The run folder exists or can be made: a folder is made and removed beside where it goes."""
    os.rmdir(scratch_folder(run_dir, "runs-dir"))


def _check_backend(settings: SearchSettings) -> None:
    """The backend that searched the run folder's study (the manifest's, else the one whose files are
    there) is this search's."""
    recorded = read_manifest(settings.run_dir).get("settings")
    held = recorded.get("backend") if isinstance(recorded, dict) else None
    if held not in ("optuna", "ray"):  # no manifest yet: a first session killed before writing it
        ledger, database = (settings.run_dir / name for name in ("ray_ledger.jsonl", "study.db"))
        held = "ray" if ledger.exists() else "optuna" if database.exists() else None
    if held is None or held == settings.backend:
        return
    raise ValueError(
        f"study {settings.study_name!r} in {settings.run_dir} was searched on the {held} backend, which "
        f"keeps its trials where the {settings.backend} backend cannot read them; continue it with "
        f"{together(setting('backend', held), option('resume'))}, or choose another {option('study', 'NAME')}"
    )


def _check_ray(settings: SearchSettings) -> None:
    gpus = settings.trial_gpus
    budget = settings.parsed_budget
    if budget.device == "gpu" and not gpus:
        raise ValueError(
            f"budget {budget} counts GPU time but trials hold no GPU; give --gpus-per-trial or a cpu budget"
        )
    if budget.device == "cpu" and gpus:
        raise ValueError(
            f"budget {budget} counts CPU time but each trial holds {gpus:g} GPU; give --gpus-per-trial 0 or "
            "a gpu budget"
        )
    if settings.address in (None, "local"):  # a local Ray has this machine's CPUs and GPUs, no more
        _check_local_resources(settings.cpus_per_trial, gpus)
        _check_local_supernet_workers(settings, gpus)
    elif settings.address != "auto":
        _check_reachable(settings.address)


def _check_local_resources(cpus: float, gpus: float) -> None:
    have_cpus = os.cpu_count() or 1
    if cpus > have_cpus:
        raise ValueError(
            f"cpus-per-trial: {cpus:g} CPUs per trial, but a local Ray has this machine's {have_cpus}, so no "
            "trial could start; give at most that or --address of a cluster"
        )
    if gpus:
        have_gpus = _cuda_devices()
        if gpus > have_gpus:
            raise ValueError(
                f"gpus-per-trial: {gpus:g} GPUs per trial, but a local Ray has this machine's {have_gpus}, "
                "so no trial could start; give --gpus-per-trial 0 (and a cpu or plain time budget) or "
                "--address of a cluster"
            )


def _check_local_supernet_workers(settings: SearchSettings, gpus: float) -> None:
    """The supernet's Ray Train workers fit in a local Ray: each holds --cpus-per-worker CPUs (and a GPU)."""
    workers = settings.supernet_workers
    if workers < 2:
        return
    have_cpus = os.cpu_count() or 1
    if workers * settings.cpus_per_worker > have_cpus:
        raise ValueError(
            f"supernet-workers: {workers} workers of {settings.cpus_per_worker:g} CPUs, but a local Ray has "
            f"this machine's {have_cpus}, so the supernet could never start; give fewer workers, a smaller "
            "--cpus-per-worker or --address of a cluster"
        )
    if gpus and workers > _cuda_devices():
        raise ValueError(
            f"supernet-workers: {workers} workers of 1 GPU each, but a local Ray has this machine's "
            f"{_cuda_devices()}; give at most that or --address of a cluster"
        )


def _check_reachable(address: str) -> None:
    """One TCP connection to the Ray Client or GCS port of ``address`` (``[ray://]HOST:PORT``)."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as err:
        reason = err.strerror or str(err) or type(err).__name__
        raise ValueError(f"address: cannot reach the Ray cluster at {address} ({reason})") from None


def _cuda_devices() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _check_latency_device(settings: SearchSettings) -> None:
    """A CUDA latency device must be one the trials see: on Optuna one of this machine's GPUs; on Ray one of
    the GPUs a trial holds, which Ray numbers from cuda:0 within each trial, on any node."""
    device = settings.latency_device
    if device is None or not device.startswith("cuda"):
        return
    index = int(device.partition(":")[2] or 0)
    if settings.backend == "ray":
        gpus = settings.trial_gpus
        held = math.ceil(gpus)
        if not held:
            raise ValueError(
                f"latency-device: {device} is a GPU, but a Ray trial here holds none (--gpus-per-trial "
                f"{gpus:g}); give --gpus-per-trial 1, or --latency-device cpu"
            )
        if index >= held:
            raise ValueError(
                f"latency-device: {device} is not among the {held} GPU(s) a Ray trial holds, which Ray "
                f"numbers from cuda:0 within each trial; give cuda:0 to cuda:{held - 1}, or more "
                "--gpus-per-trial"
            )
        return
    have = _cuda_devices()
    if index >= have:
        there = f"its GPUs are cuda:0 to cuda:{have - 1}" if have else "it has no CUDA GPU"
        raise ValueError(f"latency-device: {device} is not on this machine; {there}")

"""Determinism: the same seed and settings give the same sampled architectures and, on the CPU, the same proxy
accuracies; another seed gives another sequence (so the comparison can fail)."""

from __future__ import annotations

import zlib
from pathlib import Path

import pandas as pd
import pytest
from default_search import default_settings

from nas.api import run_search
from nas.core.arch import Arch
from nas.search.trial import TrialRunner
from nas.study.settings import SearchSettings


def _trials(tmp_path: Path, study: str, **changes: object) -> pd.DataFrame:
    values: dict[str, object] = {"baselines": False, "runs_dir": str(tmp_path), "study": study}
    values.update(changes)
    return run_search(SearchSettings(**values)).trials.sort_values("number").reset_index(drop=True)


def _table(run_dir: Path) -> pd.DataFrame:
    return pd.read_csv(run_dir / "trials.csv").sort_values("number").reset_index(drop=True)


def _checksum_run(self: TrialRunner, arch: Arch, report: object = None) -> dict[str, float]:
    """A cheap evaluator that is a function of the arch alone: what is under test is the sampling."""
    h = zlib.crc32(arch.key.encode())
    return {"params": float(h % 100_003), "macs": float(h // 100_003)}


def test_same_seed_samples_the_same_architectures_on_every_sampler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(TrialRunner, "evaluate", _checksum_run)
    common = {"evaluator": "complexity", "objectives": ("macs", "params"), "budget": "30trials"}
    for sampler in ("nsga2", "tpe", "random"):
        first = _trials(tmp_path, f"{sampler}-a", sampler=sampler, seed=7, **common)
        again = _trials(tmp_path, f"{sampler}-b", sampler=sampler, seed=7, **common)
        other = _trials(tmp_path, f"{sampler}-c", sampler=sampler, seed=8, **common)
        assert len(first) == 30 and list(first["arch"]) == list(again["arch"]), sampler
        assert list(first["arch"]) != list(other["arch"]), sampler


def test_same_seed_gives_the_same_proxy_accuracies_on_the_cpu(tmp_path: Path, default_search: Path) -> None:
    """The embedded default (coatnet, proxy training) run again with the same settings, in another folder."""
    first = _table(default_search)
    again = _table(run_search(default_settings(tmp_path, "again")).run_dir)
    assert len(first) == len(again) == 2
    assert list(first["arch"]) == list(again["arch"])
    assert list(first["top1"]) == list(again["top1"]) and list(first["loss"]) == list(again["loss"])
    assert first["top1"].between(10.5, 100).all()  # trained: not a constant at chance

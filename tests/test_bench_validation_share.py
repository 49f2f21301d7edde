"""benchmarks/bench_validation_share.py on a tiny profile: each network trained both ways, the same result."""

from __future__ import annotations

from dataclasses import replace

import pytest
from benchmark_scripts import load_benchmark

from search_spaces.sasa import SasaSpace


def test_validating_once_and_every_epoch_end_at_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    bench = load_benchmark("bench_validation_share")
    tiny = replace(SasaSpace.profiles["cpu"], epochs=3, train_samples=128, batch_size=64, val_samples=64)
    monkeypatch.setitem(SasaSpace.profiles, "cpu", tiny)
    result = bench.run("sasa", archs=2, seed=0)
    assert [r["arch"] for r in result["rows"]] == [SasaSpace().sample_random(i).key for i in (0, 1)]
    assert result["all_same_result"] and result["profile"] == {"epochs": 3, "train_samples": 128}
    once, every = result["rows"][0]["once"], result["rows"][0]["every epoch"]
    assert once["top1"] == every["top1"] and once["loss"] == every["loss"]

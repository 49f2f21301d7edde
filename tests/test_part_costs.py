"""The traced part costs of `count` kept on disk (evaluators/part_costs.py): a second process traces nothing
and counts the same, a search keeps them under <runs>/counts, and a damaged store is refused in one sentence.
Traces are counted, not timed, so these tests do not depend on the machine's speed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cheap_search import cheap_settings

import evaluators.complexity as complexity
import evaluators.part_costs as part_costs
from evaluators.complexity import clear_count_cache, count, counts_kept_in
from evaluators.part_costs import PartCosts
from nas.search.trial import TrialRunner
from search_spaces import get_space

IMG = 32  # the cheap search's image size
ARCH = "ResNet-26 conv-stem+attention"


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the modules fvcore traces, in order."""
    seen: list[str] = []
    real = complexity.flop_count_analysis

    def spy(model, inputs, convention="fvcore"):
        seen.append(type(model).__name__)
        return real(model, inputs, convention)

    monkeypatch.setattr(complexity, "flop_count_analysis", spy)
    return seen


def test_a_second_process_reads_the_part_costs_and_traces_nothing(tmp_path: Path, traces: list[str]) -> None:
    arch = get_space("sasa").baselines()[ARCH].arch
    clear_count_cache()
    with counts_kept_in(PartCosts(tmp_path)):
        first = count(arch, img_size=IMG)
    distinct = len(traces)
    assert distinct == 2 + complexity._block_cost.cache_info().misses  # the stem, distinct blocks, the head
    assert len(PartCosts(tmp_path)) == distinct  # all of them in the file

    clear_count_cache()  # what a new process has in memory: nothing; its store is read from the file
    traces.clear()
    with counts_kept_in(PartCosts(tmp_path)):
        assert count(arch, img_size=IMG) == first
        assert traces == []
        count(arch, img_size=IMG, convention="paper")  # another convention is other counts: traced
    assert len(traces) == distinct
    clear_count_cache()
    assert count(arch, img_size=IMG) == first  # outside the store: traced again, the same


def test_a_search_keeps_its_part_costs_under_runs_counts(tmp_path: Path, traces: list[str]) -> None:
    arch = get_space("sasa").baselines()[ARCH].arch
    clear_count_cache()
    first = TrialRunner(cheap_settings(tmp_path)).measure(arch)
    assert traces and [p.parent.name for p in tmp_path.glob("counts/*.json")] == ["counts"]

    clear_count_cache()
    traces.clear()
    second = TrialRunner(cheap_settings(tmp_path, study="another")).measure(arch)
    assert traces == [] and second == first


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{not json", r"is not valid JSON \(Expecting property name .* at line 1 column 2\)"),
        # past json's recursion: a RecursionError before
        (
            "[" * 100_000 + "]" * 100_000,
            "nests lists and mappings deeper than 32 levels, the limit of a file of a run",
        ),
        ('{"format": "something else"}', "is not a part-cost store"),
        ("costs", r"holds a cost that is not two non-negative integers \(\[1, -2\]\)"),
    ],
)
def test_a_damaged_store_is_refused_naming_its_file(tmp_path: Path, text: str, says: str) -> None:
    store = PartCosts(tmp_path)
    store.add("fvcore", "block x", (1, 2))
    if text == "costs":
        document = json.loads(store.path.read_text())
        document["costs"]["fvcore"]["block x"] = [1, -2]
        text = json.dumps(document)
    store.path.write_text(text)
    with pytest.raises(
        ValueError, match=f"part-cost store {re.escape(str(store.path))} {says}; delete it to count again"
    ):
        PartCosts(tmp_path)


def test_a_package_without_its_metadata_is_fingerprinted_by_its_version_attribute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """fvcore copied onto the path without its dist-info (a machine that cannot run pip) made every trial of a
    search fail with PackageNotFoundError: the count's fingerprint falls back to ``fvcore.__version__``."""
    import importlib.metadata

    import fvcore

    real = importlib.metadata.version

    def without_fvcore(name: str) -> str:
        if name == "fvcore":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", without_fvcore)
    assert part_costs.package_version("fvcore") == fvcore.__version__
    assert part_costs.package_version("torch") == real("torch")

"""--workers N on one machine: the workers share the caller's intra-op threads instead of each taking all
of them (N workers at all threads each ran several times slower than one: benchmarks/bench_workers.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from cheap_search import cheap_settings

from nas.search.worker_pool import WorkerPool, threads_per_worker
from nas.study.budget import Session
from nas.study.settings import SearchSettings


def _report_threads(settings: SearchSettings, worker: int, session: Session) -> int:
    """A worker loop that runs no trial and says how many intra-op threads its process has."""
    return torch.get_num_threads()


@pytest.mark.parametrize(
    ("workers", "threads", "share"), [(1, 2, 2), (2, 2, 1), (2, 16, 8), (3, 16, 5), (4, 2, 1), (3, 1, 1)]
)
def test_each_worker_gets_an_equal_share_of_the_threads_and_at_least_one(
    workers: int, threads: int, share: int
) -> None:
    assert threads_per_worker(workers, threads) == share


def test_helpers_and_the_callers_worker_run_on_their_share_and_the_caller_gets_its_threads_back(
    tmp_path: Path,
) -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(12)  # not this machine's core count, which a spawned process starts with
    try:
        pool = WorkerPool(_report_threads, cheap_settings(tmp_path, workers=4), Session())
        with pool:
            inside = torch.get_num_threads()
        assert inside == 3  # the caller's own worker
        assert pool.ran == 3 * 3  # three helpers of 3 threads each
        assert torch.get_num_threads() == 12
    finally:
        torch.set_num_threads(before)

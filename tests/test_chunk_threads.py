"""``map_chunks``: every chunk once on single-threaded workers, errors raised, the caller's threads kept."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest
import torch

from nas.core.ops._chunk_threads import map_chunks

CPU = torch.device("cpu")


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _record(seen: list, lock: threading.Lock):
    def fn(chunk: int, scratch: list) -> None:
        scratch.append(chunk)
        with lock:
            seen.append((chunk, torch.get_num_threads(), threading.get_ident(), scratch))

    return fn


def test_every_chunk_runs_once_on_single_threaded_workers(two_threads) -> None:
    seen, lock = [], threading.Lock()
    map_chunks(_record(seen, lock), range(0, 40, 4), list, CPU)
    assert sorted(chunk for chunk, *_ in seen) == list(range(0, 40, 4))
    assert {threads for _, threads, _, _ in seen} == {1}
    assert threading.get_ident() not in {ident for _, _, ident, _ in seen}
    owners = {}  # scratch (kept alive in seen) -> the threads that used it: one each
    for _, _, ident, scratch in seen:
        owners.setdefault(id(scratch), set()).add(ident)
    assert all(len(threads) == 1 for threads in owners.values())
    assert torch.get_num_threads() == 2
    fresh = []  # the process default that a new thread reads is the caller's again
    thread = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
    thread.start()
    thread.join()
    assert fresh == [2]


def test_one_thread_or_one_chunk_runs_in_order_on_the_caller() -> None:
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        seen, lock = [], threading.Lock()
        map_chunks(_record(seen, lock), [3, 1, 2], list, CPU)
        assert [chunk for chunk, *_ in seen] == [3, 1, 2]
        assert {ident for _, _, ident, _ in seen} == {threading.get_ident()}
    finally:
        torch.set_num_threads(before)


def test_a_failing_chunk_raises_after_all_workers_stop(two_threads) -> None:
    done = []

    def fn(chunk: int, _scratch: None) -> None:
        if chunk == 1:
            raise ValueError("chunk 1 failed")
        time.sleep(0.02)
        done.append(chunk)

    with pytest.raises(ValueError, match="chunk 1 failed"):
        map_chunks(fn, range(8), lambda: None, CPU)
    count = len(done)
    time.sleep(0.2)
    assert len(done) == count  # no worker still runs (and writes outputs) once the error is raised


def test_workers_follow_the_callers_inference_mode(two_threads) -> None:
    modes = []

    def fn(_chunk: int, scratch: torch.Tensor) -> None:
        modes.append((torch.is_inference_mode_enabled(), torch.is_grad_enabled(), scratch.is_inference()))

    map_chunks(fn, range(4), lambda: torch.zeros(1), CPU)
    with torch.inference_mode():
        map_chunks(fn, range(4, 8), lambda: torch.zeros(1), CPU)
    assert modes[:4] == [(False, False, False)] * 4
    assert modes[4:] == [(True, False, True)] * 4


def _chunks_in_child(result) -> None:
    seen, lock = [], threading.Lock()
    map_chunks(_record(seen, lock), range(6), list, CPU)
    result.put(sorted(chunk for chunk, *_ in seen))


def test_a_forked_child_gets_its_own_workers(two_threads) -> None:
    map_chunks(lambda chunk, scratch: None, range(4), lambda: None, CPU)  # the parent's pool exists
    context = multiprocessing.get_context("fork")
    result = context.Queue()
    child = context.Process(target=_chunks_in_child, args=(result,))
    child.start()
    child.join(60)
    if child.is_alive():  # the parent's worker threads do not exist in the child: waiting on them hangs
        child.kill()
        pytest.fail("map_chunks hung in a forked child")
    assert child.exitcode == 0 and result.get(timeout=5) == list(range(6))

"""Runs a blocked kernel's independent chunks on single-threaded workers, one join per call (CPU).

Why not intra-op threads: a blocked kernel issues a few thousand small ops per step, and with torch's
intra-op parallelism each op is its own OpenMP fork and join. When another process oversubscribes the
cores, a join waits for whichever thread the OS preempted, and libgomp's default wait policy spins while it
waits, taking CPU from the threads it waits for: beside one busy loop per core (2 cores) the
local-attention kernel fell to 0.35x of its unfold form, which (few, large ops) slowed 2 to 3x. Chunks
are coarse units of independent work, so here each worker thread runs whole chunks with one intra-op
thread, takes the next chunk when it is done (a preempted worker simply does fewer), and the caller joins
once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

import torch

__all__ = ["map_chunks"]

Scratch = TypeVar("Scratch")

# (process id, workers, pool): a pool's threads do not survive a fork, and its size follows
# torch.get_num_threads()
_pool_state: tuple[int, int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def _single_threaded_pool(workers: int) -> ThreadPoolExecutor:
    """A pool of ``workers`` threads whose torch ops each run on one intra-op thread."""
    global _pool_state
    with _pool_lock:
        if _pool_state is not None and _pool_state[:2] == (os.getpid(), workers):
            return _pool_state[2]
        pool = ThreadPoolExecutor(workers, thread_name_prefix="nas-chunks")
        started = threading.Barrier(workers)  # holds each set-up task on its own thread

        def one_intra_op_thread() -> None:
            torch.get_num_threads()  # torch's lazy per-thread set-up first, or it would undo the next line
            torch.set_num_threads(1)  # this thread's OpenMP and MKL thread counts
            started.wait()

        for done in [pool.submit(one_intra_op_thread) for _ in range(workers)]:
            done.result()
        # set_num_threads also stores the process default that threads read when torch first runs on them;
        # put back the caller's, which the workers' calls overwrote
        torch.set_num_threads(workers)
        if _pool_state is not None and _pool_state[0] == os.getpid():
            _pool_state[2].shutdown(wait=False)
        _pool_state = (os.getpid(), workers, pool)
        return pool


def map_chunks(
    fn: Callable[[int, Scratch], None],
    chunks: Sequence[int],
    scratch: Callable[[], Scratch],
    device: torch.device,
) -> None:
    """Calls ``fn(chunk, buffers)`` once for every chunk; ``scratch()`` makes one worker's buffers.

    The calls must be independent (each writes its own slice of the outputs). On a CPU with more than one
    intra-op thread they run on that many single-threaded workers, in no fixed order; elsewhere (GPUs,
    where ops are asynchronous launches, or one thread) in order on the calling thread.
    """
    workers = min(torch.get_num_threads(), len(chunks)) if device.type == "cpu" else 1
    if workers <= 1:
        buffers = scratch()
        for chunk in chunks:
            fn(chunk, buffers)
        return
    pool = _single_threaded_pool(torch.get_num_threads())
    pending, lock = iter(chunks), threading.Lock()
    inference = torch.is_inference_mode_enabled()

    def work() -> None:
        # grad mode and inference mode are per thread: take the caller's (a kernel's body records no graph)
        with torch.inference_mode(inference), torch.no_grad():
            buffers = scratch()
            while True:
                with lock:
                    chunk = next(pending, None)
                if chunk is None:
                    return
                fn(chunk, buffers)

    running = [pool.submit(work) for _ in range(workers)]
    wait(running)  # all of them, so that no worker still writes outputs when an error is raised
    for done in running:
        done.result()

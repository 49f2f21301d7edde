"""The helper worker processes of a search on this machine (``--workers N``): N - 1 spawned processes, each
running a driver's worker loop against the same storage, beside the caller's own worker.

The workers share this process's intra-op threads (``torch.get_num_threads()``: the cores it may use, or
``OMP_NUM_THREADS``): each runs torch on :func:`threads_per_worker` of them, the caller's own worker too while
the pool is open. A spawned process would otherwise start with all of them, so N workers on a CPU would run N
times the cores' threads, and torch's intra-op joins wait for threads the OS preempted (on 2 cores, two
2-thread workers trained at a fraction of one worker's rate: ``benchmarks/bench_workers.py``).

Spawned, not forked: a fork would copy the parent's torch threads and open storage connections. A helper
ends quietly on what ends a worker (its streak of rejections, the study's file removed, a storage it cannot
write, a signal); the first worker raises those itself. A signal to the parent is passed on: Ctrl-C reaches a
terminal's whole process group, but a SIGTERM sent to the parent alone would not reach the helpers.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable
from typing import Any

import torch

from nas.study.budget import Session
from nas.study.constraints import NothingFeasible
from nas.study.settings import SearchSettings
from nas.study.study_file import StudyFileLost
from nas.system import stopping
from nas.system.failures import WriteFailed

__all__ = ["WorkerLoop", "WorkerPool", "threads_per_worker"]

# ``loop(settings, worker, session=session)`` runs trials until the budget is spent; returns how many it ran.
# It must be a module-level function: a spawned process imports it by name.
WorkerLoop = Callable[..., int]

JOIN_POLL_SECONDS = 0.2  # how often the parent looks for a signal while it waits for its helpers


def threads_per_worker(workers: int, threads: int | None = None) -> int:
    """The intra-op threads each of ``workers`` worker processes gets of ``threads`` (default this
    process's): an equal share, at least 1."""
    return max(1, (threads or torch.get_num_threads()) // workers)


def _helper(
    loop: WorkerLoop, settings: SearchSettings, worker: int, session: Session, ran: Any, threads: int
) -> None:
    torch.set_num_threads(threads)
    stops = (NothingFeasible, StudyFileLost, WriteFailed, KeyboardInterrupt)
    with contextlib.suppress(*stops), stopping.signals(defer=True):
        ran.value = loop(settings, worker, session=session)


class WorkerPool:
    """Workers 1 .. ``settings.workers - 1`` as spawned processes, for one session: started on entering the
    ``with`` block, joined on leaving it (whichever way the parent's own worker ended); :attr:`ran` is the
    number of trials they ran. Inside the block this process runs on its worker's share of the threads."""

    def __init__(self, loop: WorkerLoop, settings: SearchSettings, session: Session) -> None:
        context = multiprocessing.get_context("spawn")
        self._caller_threads = torch.get_num_threads()
        self._threads = threads_per_worker(settings.workers, self._caller_threads)
        self._counts = [context.Value("i", 0) for _ in range(1, settings.workers)]
        self._processes = [
            context.Process(
                target=_helper, args=(loop, settings, w, session, self._counts[w - 1], self._threads)
            )
            for w in range(1, settings.workers)
        ]

    def __enter__(self) -> WorkerPool:
        for p in self._processes:
            p.start()
        torch.set_num_threads(self._threads)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.join()
        finally:
            torch.set_num_threads(self._caller_threads)

    @property
    def ran(self) -> int:
        return sum(c.value for c in self._counts)

    def join(self) -> None:
        """Wait for the helpers; once this process has received a signal, SIGTERM them (each records its
        running trial as interrupted, then ends)."""
        told = False
        while any(p.is_alive() for p in self._processes):
            if not told and stopping.received() is not None:
                for p in self._processes:
                    if p.is_alive():
                        p.terminate()
                told = True
            for p in self._processes:
                p.join(timeout=JOIN_POLL_SECONDS)

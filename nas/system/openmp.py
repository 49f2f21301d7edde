"""How torch's OpenMP threads wait at a join: briefly, then they sleep. Set before torch loads.

Torch's CPU kernels run on OpenMP (GNU libgomp in the Linux wheels), and every parallel operation ends in a
join. A thread that reaches it first spins, by libgomp's default for ``GOMP_SPINCOUNT`` = 300,000 iterations
(about 3 ms), before it sleeps. On a free machine the spin saves a wake-up; when another process holds a
core, the thread the join waits for is often the one the OS preempted, and the spinning burns the time that
thread needs. A proxy training on 2 threads of 2 cores kept 0.33x of its free rate beside a loop that
held one core, and 0.19x beside another such training, where fair shares are 0.67x and 0.5x
(``benchmarks/bench_busy_cores.py``, median of 3 rounds).

At :data:`SPIN_COUNT` spins (libgomp's own count under ``OMP_WAIT_POLICY=ACTIVE`` for a process with more
threads than cores) it kept 0.49x and 0.48x, for about 9% of its rate on a free machine; no count from
10,000 to 100,000 did better beside other work, and none (passive waiting) cost 21% when free. The spin
count changes how threads wait, never what they compute, so a seed trains the same network at any count.

libgomp reads the variable once, when it loads, so :func:`wait_briefly` runs before anything imports
torch: first in the command line (``nas.cli.commands.main``), whose child processes (a search's ``--workers``)
inherit it. A user's own ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` wins. From Python, set
``GOMP_SPINCOUNT=1000`` before ``import torch``. Other OpenMP runtimes (LLVM's libomp in the macOS wheels,
Intel's) read ``KMP_BLOCKTIME`` instead and are left as they are: not measured here.
"""

from __future__ import annotations

import os

__all__ = ["SPIN_COUNT", "wait_briefly"]

SPIN_COUNT = "1000"


def wait_briefly() -> None:
    """Set ``GOMP_SPINCOUNT`` to :data:`SPIN_COUNT` for this process and its children, unless the user
    chose how OpenMP waits. It takes effect only where torch has not been imported yet."""
    if "GOMP_SPINCOUNT" not in os.environ and "OMP_WAIT_POLICY" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT

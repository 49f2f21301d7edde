"""nas.system: the operating-system plumbing of a search, knowing nothing of studies or networks.

Signals (:mod:`nas.system.stopping`) and exceptions dropped in finalizers (:mod:`nas.system.unraisable`), a
trial's deadline and failure reasons (:mod:`nas.system.failures`), which process this is and whether another
still runs (:mod:`nas.system.processes`), the watchdog of a search's local Ray
(:mod:`nas.system.ray_watchdog`)
and libgomp's spin policy (:mod:`nas.system.openmp`). Standard library, torch and the core only.
"""

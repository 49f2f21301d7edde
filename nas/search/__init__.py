"""nas.search: the search engine: one trial, the Optuna and Ray drivers around it, the worker pool, the
fidelity ladder's promotions, the live view, and ``run_search`` that runs a study to its budget's end.

It reads the study's records (:mod:`nas.study`) and the plumbing of :mod:`nas.system`; reports are written
above it (:mod:`results`, called by :mod:`nas.api`).

``import nas.search`` is cheap: it imports no submodule, and none of torch, optuna or ray.
"""

"""nas.search: what a search run needs around its sampler and evaluator.

:mod:`nas.search.budget` parses and enforces search budgets (``8gpu-days``, ``45min``, ``200trials``).

``import nas.search`` is cheap: it imports no submodule, and none of torch, optuna or ray.
"""

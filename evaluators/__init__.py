"""evaluators: what an architecture costs and how well it learns, knowing nothing of Optuna or Ray.

Cost models (params, MACs via fvcore, measured latency), data, proxy training, one-shot supernet training and
zero-cost baselines live here; each takes an :class:`nas.arch.Arch` and returns numbers.
"""

from evaluators.complexity import Complexity, StageCost, count, latency_ms, macs_of

__all__ = ["Complexity", "StageCost", "count", "latency_ms", "macs_of"]

"""The distinct architectures of a small search space, counted by brute force over its own define-by-run
decisions: the independent check of a space's ``count`` formula."""

from __future__ import annotations

from search_spaces import SearchSpace, get_space
from search_spaces.base import _ReplayTrial


def count_by_enumeration(space: str | SearchSpace) -> int:
    """Brute force over the space's own define-by-run decisions (small spaces only)."""
    sp = get_space(space) if isinstance(space, str) else space
    seen = set()

    def walk(fixed: dict) -> None:
        class Probe(_ReplayTrial):
            def _get(self, name):
                if name not in self.params:
                    raise LookupError(name)
                return super()._get(name)

            def suggest_categorical(self, name, choices):
                self.last = (name, list(choices))
                return super().suggest_categorical(name, choices)

            def suggest_int(self, name, low, high, step=1, log=False):
                self.last = (name, list(range(low, high + 1, step)))
                return super().suggest_int(name, low, high, step)

        probe = Probe(fixed)
        try:
            seen.add(sp.sample(probe).key)
        except LookupError:
            name, values = probe.last
            for value in values:
                walk({**fixed, name: value})

    walk({})
    return len(seen)

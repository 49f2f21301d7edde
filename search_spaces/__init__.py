"""search_spaces: one module per search space (its choices, ``sample(trial)``, baselines, proxy profiles).

A space describes which :class:`nas.arch.Arch` values exist and how to sample them; it never builds layers.
The spaces themselves arrive with the search-spaces issue; this package is their home.
"""

__all__: list[str] = []

"""results: the trials table, Pareto fronts and hypervolume, reports and export of found architectures.

Reads what searches recorded; never trains anything. Run outputs go to ``runs/<study>/``, not here.
"""

__all__: list[str] = []

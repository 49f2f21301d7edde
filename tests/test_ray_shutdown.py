"""A Ray search that starts its own local Ray shuts it down on its way out, whichever way that is: no Ray
process of it outlives the search in a long-lived Python process (a notebook, a service)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from cheap_search import cheap_settings

from nas.search.run import run_search

pytestmark = pytest.mark.integration


def _ray_children() -> list[str]:
    """This process's children that belong to a Ray node (GCS, raylet, dashboard, workers)."""
    import os

    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        argv = command.split()
        cli_start = any(
            a.endswith("ray") and b == "start" for a, b in itertools.pairwise(argv)
        )  # a fixture's cluster
        started_by_init = "ray" in command and not cli_start
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and started_by_init:
            out.append(command[:80])
    return out


@pytest.mark.parametrize("ending", ["budget", "interrupted"])
def test_a_local_ray_is_shut_down_when_the_search_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ending: str
) -> None:
    import ray

    if ray.is_initialized():  # another test's
        ray.shutdown()
    if ending == "interrupted":  # Ctrl-C while the driver waits on its trials

        def fit(self):
            assert _ray_children(), "no local Ray was started"
            raise KeyboardInterrupt

        monkeypatch.setattr("ray.tune.Tuner.fit", fit)
    outcome = run_search(cheap_settings(tmp_path, backend="ray", budget="2trials", baselines=False))
    assert outcome.interrupted == (ending == "interrupted")
    assert not ray.is_initialized()
    assert _ray_children() == []
    if ending == "budget":
        assert len(outcome.trials) == 2

"""optuna-dashboard on a study that `nas search` wrote: started on a free port, its trials read through its
HTTP API (the parameters by the space's choice names, the values by the objectives, the user attributes a
reader needs), then stopped. CI installs the ``dashboard`` extra: missing there is a failure."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from cheap_search import cheap_settings
from processes import free_port, stop

from nas.api import run_search
from nas.study.storage import open_storage


def _dashboard() -> str:
    found = shutil.which("optuna-dashboard", path=str(Path(sys.executable).parent)) or shutil.which(
        "optuna-dashboard"
    )
    if found is None:
        message = "optuna-dashboard is not installed (pip install -e '.[dashboard]')"
        if os.environ.get("NAS_REQUIRE_SERVICES"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def _get(url: str, deadline: float) -> dict:
    """The JSON at ``url``, asked again until the server answers or ``deadline`` passes."""
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.integration
def test_dashboard_serves_the_study_with_readable_names(tmp_path: Path) -> None:
    dashboard = _dashboard()
    outcome = run_search(cheap_settings(tmp_path, space="coatnet", budget="3trials", study="dash"))
    db = outcome.run_dir / "study.db"
    port = free_port()
    proc = subprocess.Popen(
        [dashboard, f"sqlite:///{db}", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}/api/studies"
        summaries = _get(base, time.monotonic() + 60)["study_summaries"]
        assert [s["study_name"] for s in summaries] == ["dash"]
        study = _get(f"{base}/{summaries[0]['study_id']}", time.monotonic() + 60)
    finally:
        stop(proc, signal.SIGINT, timeout=10)
    assert proc.returncode is not None
    assert study["objective_names"] == ["macs", "params"]  # not "Objective 0", "Objective 1"
    trials = [t for t in study["trials"] if t["state"] == "Complete"]  # the other baselines wait, queued
    assert len(trials) == 3
    first = trials[0]
    names = {p["name"] for p in first["params"]}
    assert {"stem", "s1.op", "s1.depth", "s1.width", "s4.op"} <= names
    attrs = {a["key"]: a["value"] for a in first["user_attrs"]}
    assert attrs["baseline"] == "CoAtNet-0"
    assert attrs["arch"].startswith("conv64|C2x96|C3x192|Trel5x384|Trel2x768")
    assert float(attrs["macs"]) == first["values"][0] and float(attrs["params"]) == first["values"][1]
    assert attrs["fail_reason"] == ""
    sortable = {a["key"] for a in study["union_user_attrs"] if a["sortable"]}
    assert {"macs", "params"} <= sortable


def test_a_study_from_before_metric_names_gets_them_at_its_resume(tmp_path: Path) -> None:
    import optuna

    settings = cheap_settings(tmp_path, budget="1trials", baselines=False)
    run_search(settings)
    storage = open_storage(settings)[0]
    # as a study written before this version, or by Optuna < 3.2, has them
    storage.set_study_system_attr(storage.get_study_id_from_name("t"), "study:metric_names", None)
    assert optuna.load_study(study_name="t", storage=storage).metric_names is None
    more = run_search(cheap_settings(tmp_path, budget="2trials", baselines=False, resume=True))
    assert len(more.trials) == 2  # the parameters kept their names: the resumed sampler reads them
    assert optuna.load_study(study_name="t", storage=storage).metric_names == ["macs", "params"]

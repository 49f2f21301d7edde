import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

from nas.system.openmp import wait_briefly

wait_briefly()  # before torch loads: the tests' OpenMP threads wait as a `nas` command's do

import pytest  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # test helpers (strategies, references) import by name

# The example search-space plugin (examples/space_plugin) installed for the whole run, in this process and
# the processes it starts, before the test modules are collected: every test parametrized over the
# registry (list_spaces()) covers a plugin's space too.
_plugin_site = tempfile.mkdtemp(prefix="nas-test-plugins-")
atexit.register(shutil.rmtree, _plugin_site, True)
from space_plugins import install_example  # noqa: E402

install_example(Path(_plugin_site))
sys.path.insert(0, _plugin_site)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_plugin_site, os.environ.get("PYTHONPATH")]))

torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory: pytest.TempPathFactory):
    """A real Ray head node on localhost (1 CPU, ports and auth token of its own) shared by the cluster
    tests; searches join it with ``--address``."""
    from ray_nodes import RayNode, wait_for_nodes

    head = RayNode(tmp_path_factory.mktemp("ray-cluster"), "head", num_cpus=1).start()
    try:
        wait_for_nodes(head, 1)
        yield head
    finally:
        head.stop()


@pytest.fixture(scope="session")
def default_search(tmp_path_factory: pytest.TempPathFactory):
    """The run folder of a real search with the embedded default's settings (tests/default_search.py), run
    once for the tests that read it (export, determinism); none of them writes to it."""
    from default_search import default_settings

    from nas.api import run_search

    return run_search(default_settings(tmp_path_factory.mktemp("default-search"), "default")).run_dir


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server on localhost (its own data directory and port), shared by the tests that
    put a study in it. CI installs PostgreSQL: missing there is a failure, elsewhere a skip."""
    from postgres_server import PostgresServer, postgres_bin

    bin_dir = postgres_bin()
    if bin_dir is None:
        if os.environ.get("NAS_REQUIRE_SERVICES"):
            pytest.fail("PostgreSQL is not installed (apt-get install postgresql)")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    server = PostgresServer(bin_dir).start()
    try:
        yield server
    finally:
        server.stop()

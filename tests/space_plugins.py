"""Search-space plugins installed for a test: a module and the ``.dist-info`` folder an installer writes for
it (``METADATA`` and ``entry_points.txt``), in a folder that the test puts on ``sys.path`` (in-process) or on
``PYTHONPATH`` (for the processes it starts), which is where ``importlib.metadata`` finds distributions."""

from __future__ import annotations

import importlib
from pathlib import Path

import search_spaces

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "space_plugin" / "isotropic_space.py"


def install(site: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    """Distribution ``dist`` 0.1 in ``site``: each module's source as ``<name>.py``, and its entry points
    (``{name: "module:attr"}``) in the ``nas.search_spaces`` group."""
    site.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (site / f"{name}.py").write_text(source)
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    points = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[nas.search_spaces]\n{points}")
    importlib.invalidate_caches()
    search_spaces._plugins_on.cache_clear()  # the installed plugins are read once per sys.path


def install_example(site: Path) -> None:
    """The example plugin of ``examples/space_plugin`` (the ``isotropic`` space), as pip installs it."""
    install(
        site,
        "nas-isotropic-space",
        {"isotropic": "isotropic_space:IsotropicSpace"},
        {"isotropic_space": EXAMPLE.read_text()},
    )

"""How far the search settings travel: one real search traced from ``run_search`` to its end.

Issue 65 asks that the settings be resolved once into a plan that the engine reads and never calls back.
This script runs one small Optuna search in this process (coatnet, proxy evaluator, 2 trials, 1 epoch on
200 images, single worker) under two probes and counts, along that one search:

* **passes**: the distinct functions that receive the settings object as an argument (found with
  ``sys.setprofile``: a Python call whose arguments hold a ``SearchSettings``);
* **call-backs**: the distinct source lines outside the settings module that ask the settings object for a
  derived value: a method, a property or a cached property of its class, as opposed to a plain field (found
  by wrapping the class's ``__getattribute__``).

Both are counted per distinct function or source line, so a loop counts once. It runs on any commit of the
project since the settings lived in ``nas.search.settings`` (found by name), so a before/after pair is
measured with one method: ``python benchmarks/settings_walk.py --out FILE`` in each checkout.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path.cwd()


def _import(*names: str):
    for name in names:
        module_name, _, attr = name.rpartition(".")
        try:
            return getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            continue
    raise SystemExit(f"none of {names} importable from {REPO}")


def _where(code) -> str:
    path = Path(code.co_filename)
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return ""  # outside the project (a library): not counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="JSON file for the counts and the lists")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    # this checkout's modules only: an editable install's finder would answer a module this checkout lacks
    sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
    settings_cls = _import("nas.study.settings.SearchSettings", "nas.search.settings.SearchSettings")
    run_search = _import("nas.api.run_search", "nas.search.run.run_search")
    settings_file = inspect.getsourcefile(settings_cls)
    derived = {
        name
        for klass in settings_cls.__mro__[:-1]
        for name, member in vars(klass).items()
        if not name.startswith("__")
        and (callable(member) or hasattr(member, "__get__"))
        and name not in settings_cls.__dataclass_fields__
    }
    callbacks: Counter[tuple[str, str]] = Counter()
    original = settings_cls.__getattribute__

    def probe(self, name):
        if name in derived:
            caller = sys._getframe(1)
            if caller.f_code.co_filename != settings_file and (where := _where(caller.f_code)):
                callbacks[(f"{where}:{caller.f_lineno}", name)] += 1
        return original(self, name)

    passes: Counter[str] = Counter()

    def profile(frame, event, arg):
        if event != "call":
            return
        code = frame.f_code
        if code.co_filename in (settings_file, __file__):  # the settings' own methods; this script's probe
            return
        count = code.co_argcount + code.co_kwonlyargcount
        values = [frame.f_locals.get(n) for n in code.co_varnames[:count]]
        if any(isinstance(v, settings_cls) for v in values) and (where := _where(code)):
            passes[f"{where}:{code.co_qualname}"] += 1

    with tempfile.TemporaryDirectory() as runs:
        settings = settings_cls(
            space="coatnet", evaluator="proxy", budget="2trials", runs_dir=runs, study="walk",
            proxy_epochs=1, baselines=False,
        )  # fmt: skip
        settings_cls.__getattribute__ = probe
        sys.setprofile(profile)
        try:
            run_search(settings)
        finally:
            sys.setprofile(None)
            settings_cls.__getattribute__ = original
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout
    files = {key.split(":")[0] for key in passes} | {site.split(":")[0] for site, _ in callbacks}
    out = {
        "commit": commit.strip(),
        "search": "coatnet, proxy, 2 trials, 1 epoch, optuna, 1 worker, in-process",
        "passes": len(passes),
        "call_backs": len(callbacks),
        "files": len(files),
        "pass_list": sorted(passes),
        "call_back_list": sorted(f"{site} {name}" for site, name in callbacks),
        "threads": os.environ.get("OMP_NUM_THREADS", ""),
    }
    print(f"{out['commit']}: passes {out['passes']}, call-backs {out['call_backs']}, files {out['files']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

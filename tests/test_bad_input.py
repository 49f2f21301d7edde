"""A corpus of malformed inputs: every one is refused with one sentence and never touches a study.

One cheap real study (``runs/s``, 3 complexity trials at 32 px) is made once for the module; every CLI case
points at the same ``--runs-dir`` and ``--study s`` (with ``--resume`` where that reaches deeper code), or at
a new study ``fresh`` that must never be made, so a case that writes before it fails is caught: the study's
tables (read from ``study.db`` with sqlite3), its ``trials.csv``, ``trials.parquet`` and ``manifest.json``
bytes and its file listing must be as they were, and so must every other file and folder the cases can
reach (``tree``: no new run folder, storage file, export or training folder, no file changed).

A CLI case must exit with code 2 and print exactly one line, ``error: ...``, with no traceback and no warning.
An API case must raise ValueError whose message is one line.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import warnings
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
from cheap_search import cheap_settings
from typer.testing import CliRunner

from nas.arch import Arch
from nas.cli import app
from nas.search.settings import MAX_SEED

ROOT = Path(__file__).resolve().parents[1]
HYBRID = ROOT / "examples" / "hybrid.json"
STUDY = "s"
FRESH = "fresh"  # a study no case may create
CUDA = torch.cuda.is_available()
# a budget of the device the trials do not run on, and the sentence refusing it
OTHER_DEVICE_BUDGET, OTHER_DEVICE_REFUSAL = (
    ("1cpu-hours", "counts CPU time but the trials would run on a GPU")
    if CUDA
    else ("1gpu-hours", "counts GPU time but no GPU is available")
)
TABLES = (
    "studies",
    "study_user_attributes",
    "trials",
    "trial_values",
    "trial_params",
    "trial_user_attributes",
)
SEARCH = {
    "--space": "sasa",
    "--evaluator": "complexity",
    "--objectives": "macs,params",
    "--budget": "3trials",
    "--macs-img-size": "32",
    "--study": STUDY,
}
runner = CliRunner()


# --- the study and the files the cases use -----------------------------------------------------------------


@dataclass(frozen=True)
class Env:
    root: Path  # holds the bad files and the empty folders
    runs: Path  # --runs-dir of the study

    @property
    def run_dir(self) -> Path:
        return self.runs / STUDY

    def fill(self, text: str) -> str:
        return text.format(root=self.root, runs=self.runs, hybrid=HYBRID)


def _hybrid(**changes: Any) -> dict[str, Any]:
    flat = json.loads(HYBRID.read_text())
    flat.update(changes)
    return flat


BAD_ARCHS: dict[str, str] = {
    "even-k": json.dumps(_hybrid(**{"s2.k": 4})),
    "zero-width": json.dumps(_hybrid(**{"s1.width": 0})),
    "unknown-mixer": json.dumps(_hybrid(**{"s2.mixer": "magic"})),
    "truncated": HYBRID.read_text()[: len(HYBRID.read_text()) // 2],
    "list": json.dumps([_hybrid()]),
}
ARCH_MESSAGES = {
    "even-k": "s2.k: the 'local' mixer needs an odd integer k >= 3, got 4",
    "zero-width": "s1.width: must be an integer >= 1, got 0",
    "unknown-mixer": "s2.mixer: unknown value 'magic'",
    "truncated": "not valid JSON",
    "list": "expected a dict of labelled fields, got list",
    "missing": "missing.json",
}


def _damaged_weights(run_dir: Path) -> None:
    """Trial 0 kept weights that are garbage; an earlier export of it is in ``export/trial_0``."""
    from results.store import save_trials

    frame = pd.read_parquet(run_dir / "trials.parquet")
    frame["weights"] = ["w.pt" if n == 0 else "" for n in frame["number"]]
    save_trials(frame, run_dir)
    (run_dir / "weights").mkdir()
    (run_dir / "weights" / "w.pt").write_bytes(b"PK\x03\x04 not a model file")
    (run_dir / "export" / "trial_0").mkdir(parents=True)
    (run_dir / "export" / "trial_0" / "arch.json").write_text("an earlier export\n")


BROKEN_RUNS: dict[str, Callable[[Path], object]] = {
    "manifest-not-json": lambda d: (d / "manifest.json").write_text('{"study": "s", '),
    "manifest-no-objectives": lambda d: (d / "manifest.json").write_text('{"study": "s", "settings": {}}'),
    "table-damaged": lambda d: (d / "trials.parquet").write_bytes(b"PAR1 damaged"),
    "table-foreign": lambda d: ((d / "trials.parquet").unlink(), (d / "trials.csv").write_text("a,b\n1,2\n")),
    "weights-damaged": _damaged_weights,
}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    root = tmp_path_factory.mktemp("bad_input")
    for name, text in BAD_ARCHS.items():
        (root / f"{name}.json").write_text(text)
    (root / "binary.json").write_bytes(b"\x80\x81\xfe\xff" * 8)
    (root / "empty").mkdir()
    (root / "cache").mkdir()
    (root / "missing-key.yaml").write_text("spaec: sasa\n")
    (root / "invalid.yaml").write_text("space: [sasa\nbudget: 3trials\n")
    (root / "list.yaml").write_text("- space: sasa\n")
    (root / "wrong-type.yaml").write_text("workers: two\n")
    (root / "invalid.toml").write_text("space = sasa\n")
    (root / "truncated.pt").write_bytes(b"PK\x03\x04 not a zip")
    env = Env(root, root / "runs")
    ok = runner.invoke(app, ["search", *_flags(SEARCH), "--runs-dir", str(env.runs)])
    assert ok.exit_code == 0, ok.output
    for name, damage in BROKEN_RUNS.items():  # copies of the study's outputs, each damaged in one way
        broken = env.runs / name
        broken.mkdir()
        for file in ("manifest.json", "trials.csv", "trials.parquet"):
            shutil.copyfile(env.run_dir / file, broken / file)
        damage(broken)
    (env.runs / "supernet-refused").mkdir()  # a new study's folder holding a supernet.pt that is none
    (env.runs / "supernet-refused" / "supernet.pt").write_bytes(b"not a supernet checkpoint\n")
    return env


def _flags(options: dict[str, str | None]) -> list[str]:
    return [part for name, value in options.items() if value is not None for part in (name, value)]


def snapshot(run_dir: Path) -> dict[str, Any]:
    """Everything a bad input must leave as it was: the study's rows and the files beside them."""
    out: dict[str, Any] = {}
    with closing(sqlite3.connect(f"file:{run_dir / 'study.db'}?mode=ro", uri=True)) as db:
        for table in TABLES:
            out[table] = db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
    for name in ("trials.csv", "trials.parquet", "manifest.json"):
        out[name] = (run_dir / name).read_bytes()
    out["files"] = sorted(
        str(p.relative_to(run_dir))
        for p in run_dir.rglob("*")
        if not p.name.endswith(("-wal", "-shm", "-journal"))
    )
    return out


def tree(root: Path) -> dict[str, bytes | None]:
    """Every folder (None) and file (its bytes) under ``root``, but the user cache (where a system dataset
    is unpacked) and the SQLite databases, whose bytes a reader may change (their rows are ``snapshot``'s)."""
    out: dict[str, bytes | None] = {}
    for path in root.rglob("*"):
        name = str(path.relative_to(root))
        if name == "cache" or name.startswith("cache/") or path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        out[name] = None if path.is_dir() else b"" if path.suffix == ".db" else path.read_bytes()
    return out


@pytest.fixture(scope="module")
def study_made(env: Env) -> None:
    """The module's study is there: 3 trials complete, the other baselines still queued."""
    state = snapshot(env.run_dir)
    assert [row[3] for row in state["trials"]].count("COMPLETE") == 3


@pytest.fixture
def clean_data_env(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """No dataset anywhere: no $NAS_DATA, an empty cache (so a copy on this machine cannot answer)."""
    monkeypatch.delenv("NAS_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(env.root / "cache"))


# --- the CLI ---------------------------------------------------------------------------------------------


def search(*extra: str, **changes: str | None) -> list[str]:
    """``nas search`` on the module's study, with options changed (None drops one) and ``extra`` flags."""
    options = dict(SEARCH)
    options.update({"--" + k.replace("_", "-"): v for k, v in changes.items()})
    return ["search", *_flags(options), "--runs-dir", "{runs}", *extra]


def arch_cases(command: str, *extra: str) -> list[Any]:
    """One case per bad architecture file (``ARCH_MESSAGES``) given to ``command``."""
    return [
        pytest.param([command, f"{{root}}/{name}.json", *extra], message, id=f"{command}-arch-{name}")
        for name, message in ARCH_MESSAGES.items()
    ]


CLI_CASES = [
    # what to search
    pytest.param(search("--resume", space="nope"), "unknown search space 'nope'", id="search-unknown-space"),
    pytest.param(search(evaluator="magic"), "evaluator: unknown 'magic'", id="search-unknown-evaluator"),
    pytest.param(
        search("--resume", backend="spark"), "backend: unknown 'spark'", id="search-unknown-backend"
    ),
    pytest.param(
        search("--resume", sampler="annealing"), "sampler: unknown 'annealing'", id="search-unknown-sampler"
    ),
    pytest.param(
        search("--resume", profile="tpu"), "unknown proxy profile 'tpu'", id="search-unknown-profile"
    ),
    pytest.param(
        search("--resume", objectives="accuracy"), "unknown metric 'accuracy'", id="search-unknown-objective"
    ),
    pytest.param(
        search("--resume", objectives="top1,macs"),
        "complexity evaluator trains nothing",
        id="search-complexity-top1",
    ),
    # the budget
    pytest.param(search("--resume", budget="3 lightyears"), "3 lightyears", id="search-budget-lightyears"),
    pytest.param(search("--resume", budget="-5min"), "-5min", id="search-budget-negative"),
    pytest.param(search("--resume", budget="trials"), "'trials'", id="search-budget-no-amount"),
    pytest.param(search("--resume", budget="0trials"), "0trials", id="search-budget-0trials"),
    pytest.param(search("--resume", budget="0min"), "0min", id="search-budget-0min"),
    # the study and its storage
    pytest.param(search(), "already exists", id="search-exists-without-resume"),
    pytest.param(
        search("--resume", storage="postgresql://nobody@127.0.0.1:1/none"),
        "storage: cannot open postgresql://nobody@127.0.0.1:1/none",
        id="search-storage-unreachable-postgres",
    ),
    pytest.param(
        search("--resume", storage="sqlite:////proc/nas-no-such-dir/study.db"),
        "storage: cannot open sqlite:////proc/nas-no-such-dir/study.db",
        id="search-storage-sqlite-uncreatable-dir",
    ),
    pytest.param(
        search("--resume", storage="nonsense://x"), "storage: cannot open", id="search-storage-bad-url"
    ),
    pytest.param(
        search("--runs-dir", "/proc/nas-no-such-dir"),
        "runs-dir: cannot create the folder /proc/nas-no-such-dir/s",
        id="search-runs-dir-uncreatable",
    ),
    pytest.param(
        search("--runs-dir", "{hybrid}/runs"),
        f"runs-dir: cannot create the folder {HYBRID}/runs/s: {HYBRID} is a file",
        id="search-runs-dir-under-a-file",
    ),
    pytest.param(
        search("--resume", storage="journal:{runs}/nope.log"),
        "study 's' does not exist in journal:{runs}/nope.log",
        id="search-resume-journal-missing",
    ),
    pytest.param(
        search("--resume", storage="sqlite:///{runs}/nope.db"),
        "study 's' does not exist in sqlite:///{runs}/nope.db",
        id="search-resume-sqlite-url-missing",
    ),
    pytest.param(search(study="../x"), "'../x' is not a valid name", id="search-study-dotdot"),
    pytest.param(search(study="a/b"), "'a/b' is not a valid name", id="search-study-slash"),
    pytest.param(search(study="/abs"), "'/abs' is not a valid name", id="search-study-absolute"),
    pytest.param(
        search("--resume", objectives="params,macs"), "cannot be resumed", id="search-resume-other-objectives"
    ),
    pytest.param(
        search("--resume", objectives="macs"), "cannot be resumed", id="search-resume-fewer-objectives"
    ),
    pytest.param(search("--resume", space="coatnet"), "cannot be resumed", id="search-resume-other-space"),
    # data
    pytest.param(
        search(
            "--resume", evaluator="proxy", objectives="top1,macs", dataset="cifar10", data_dir="{root}/empty"
        ),
        "CIFAR10 not found",
        id="search-dataset-missing-cifar10",
    ),
    pytest.param(
        search("--resume", evaluator="proxy", objectives="top1,macs", dataset="imagefolder:/nonexistent"),
        "image folder not found",
        id="search-dataset-missing-imagefolder",
    ),
    pytest.param(
        search("--resume", evaluator="proxy", objectives="top1,macs", dataset="mnist-ish"),
        "unknown dataset 'mnist-ish'",
        id="search-dataset-unknown",
    ),
    # sizes and numbers
    pytest.param(
        search("--resume", macs_img_size="8"), "macs-img-size: 8", id="search-macs-img-size-too-small"
    ),
    pytest.param(search("--resume", macs_img_size="0"), "macs-img-size: 0", id="search-macs-img-size-zero"),
    pytest.param(search("--resume", trial_timeout="-1"), "trial-timeout", id="search-negative-trial-timeout"),
    pytest.param(search("--resume", workers="0"), "workers: must be at least 1", id="search-zero-workers"),
    pytest.param(search("--resume", cpus_per_trial="0"), "cpus-per-trial", id="search-zero-cpus-per-trial"),
    pytest.param(
        search("--resume", gpus_per_trial="-1"), "gpus-per-trial", id="search-negative-gpus-per-trial"
    ),
    # a new study: every setting is checked before its folder, storage or first trial exists
    pytest.param(
        search(study=FRESH, budget=OTHER_DEVICE_BUDGET), OTHER_DEVICE_REFUSAL, id="search-budget-other-device"
    ),
    pytest.param(
        search(study=FRESH, budget=OTHER_DEVICE_BUDGET, storage="journal:{runs}/fresh.log"),
        OTHER_DEVICE_REFUSAL,
        id="search-budget-other-device-journal",
    ),
    pytest.param(
        search(study=FRESH, seed="-1"),
        f"seed: must be a whole number from 0 to {MAX_SEED}, got -1",
        id="search-seed-negative",
    ),
    pytest.param(
        search(study=FRESH, seed=str(2**32)),
        f"seed: must be a whole number from 0 to {MAX_SEED}",
        id="search-seed-too-large",
    ),
    pytest.param(
        search(study=FRESH, seed="-1", storage="journal:{runs}/fresh.log"),
        "seed: must be a whole number",
        id="search-seed-negative-journal",
    ),
    pytest.param(
        search("--resume", seed="-7"), "seed: must be a whole number", id="search-resume-seed-negative"
    ),
    pytest.param(
        search(study=FRESH, latency_device="cuda:99", max_latency="10ms"),
        "latency-device: cuda:99 is not on this machine",
        id="search-latency-device-missing",
    ),
    pytest.param(
        search(study="supernet-refused", evaluator="oneshot", objectives="top1,macs", dataset="synthetic"),
        "checkpoint {runs}/supernet-refused/supernet.pt cannot be read",
        id="search-oneshot-refused-supernet",
    ),
    pytest.param(
        search(
            study="supernet-refused",
            backend="ray",
            evaluator="oneshot",
            objectives="top1,macs",
            dataset="synthetic",
        ),
        "checkpoint {runs}/supernet-refused/supernet.pt cannot be read",
        id="search-ray-oneshot-refused-supernet",
    ),
    pytest.param(
        search(
            study=FRESH, evaluator="proxy", objectives="top1,macs", dataset="cifar10", data_dir="{root}/empty"
        ),
        "CIFAR10 not found",
        id="search-fresh-dataset-missing",
    ),
    # Ray: the cluster answers, and a trial fits it, before the first file
    pytest.param(
        search(study=FRESH, backend="ray", address="ray://nowhere:1"),
        "address: cannot reach the Ray cluster at ray://nowhere:1",
        id="search-ray-address-unresolvable",
    ),
    pytest.param(
        search(study=FRESH, backend="ray", address="ray://127.0.0.1:1"),
        "address: cannot reach the Ray cluster at ray://127.0.0.1:1 (Connection refused)",
        id="search-ray-client-port-refused",
    ),
    pytest.param(
        search(study=FRESH, backend="ray", address="127.0.0.1:1"),
        "address: cannot reach the Ray cluster at 127.0.0.1:1 (Connection refused)",
        id="search-ray-gcs-port-refused",
    ),
    pytest.param(
        search(study=FRESH, backend="ray", address="nowhere"),
        "address: 'nowhere' is not a Ray cluster's address",
        id="search-ray-address-malformed",
    ),
    pytest.param(
        search(study=FRESH, backend="ray", address="ray://head:99999"),
        "address: 'ray://head:99999' is not a Ray cluster's address",
        id="search-ray-address-port-out-of-range",
    ),
    pytest.param(
        search(study=FRESH, backend="ray", gpus_per_trial="64"),
        "gpus-per-trial: 64 GPUs per trial, but a local Ray has this machine's",
        id="search-ray-local-too-many-gpus",
    ),
    pytest.param(
        search(study=FRESH, backend="ray", cpus_per_trial="4096"),
        "cpus-per-trial: 4096 CPUs per trial, but a local Ray has this machine's",
        id="search-ray-local-too-many-cpus",
    ),
    pytest.param(
        search(study=FRESH, backend="ray", budget="1gpu-hours", gpus_per_trial="0"),
        "counts GPU time but trials hold no GPU",
        id="search-ray-gpu-budget-without-gpus",
    ),
    pytest.param(
        search(study=FRESH, backend="ray", budget="1cpu-hours", gpus_per_trial="1"),
        "counts CPU time but each trial holds 1 GPU",
        id="search-ray-cpu-budget-with-gpus",
    ),
    pytest.param(
        search(study=FRESH, backend="ray", latency_device="cuda:99", max_latency="10ms"),
        "latency-device: cuda:99 is not on this machine",
        id="search-ray-latency-device-missing",
    ),
    # conflicting flags
    pytest.param(search("--resume", address="auto"), "needs --backend ray", id="search-address-without-ray"),
    pytest.param(
        search("--resume", workers="2", backend="ray"),
        "parallelism is --concurrency",
        id="search-workers-with-ray",
    ),
    pytest.param(
        search("--resume", concurrency="2"), "concurrency: 2 is Ray's", id="search-concurrency-with-optuna"
    ),
    # config files
    pytest.param(
        search("--resume", config="{root}/nope.yaml"), "config: no such file", id="search-config-missing"
    ),
    pytest.param(
        search("--resume", config="{root}/invalid.yaml"), "is not valid YAML", id="search-config-invalid-yaml"
    ),
    pytest.param(
        search("--resume", config="{root}/invalid.toml"), "is not valid TOML", id="search-config-invalid-toml"
    ),
    pytest.param(
        search("--resume", config="{root}/missing-key.yaml"),
        "unknown setting(s) spaec",
        id="search-config-unknown-key",
    ),
    pytest.param(
        search("--resume", config="{root}/list.yaml"), "must hold a mapping", id="search-config-not-a-mapping"
    ),
    pytest.param(
        search("--resume", config="{root}/wrong-type.yaml"), "workers: must be", id="search-config-wrong-type"
    ),
    pytest.param(search("--resume", config="{hybrid}"), "must end in .yaml", id="search-config-wrong-suffix"),
    # architecture files
    *arch_cases("cost"),
    *arch_cases("inspect"),
    *arch_cases("train", "--out", "{root}/train-out"),
    pytest.param(["cost", "{root}/binary.json"], "binary.json", id="cost-arch-binary"),
    pytest.param(["inspect", "{root}"], "cannot be read", id="inspect-arch-is-a-directory"),
    pytest.param(
        ["train", "{root}", "--out", "{root}/train-out"], "cannot be read", id="train-arch-is-a-directory"
    ),
    pytest.param(["cost", "{hybrid}", "--img-size", "8"], "8x8 is too small", id="cost-img-size-too-small"),
    pytest.param(
        ["inspect", "{hybrid}", "--img-size", "8"], "8x8 is too small", id="inspect-img-size-too-small"
    ),
    pytest.param(["cost", "{hybrid}", "--format", "xml"], "unknown format 'xml'", id="cost-unknown-format"),
    pytest.param(
        ["cost", "{hybrid}", "--num-classes", "0"], "num-classes: must be at least 1", id="cost-zero-classes"
    ),
    pytest.param(
        ["inspect", "{hybrid}", "--in-chans", "0"], "in-chans: must be at least 1", id="inspect-zero-chans"
    ),
    pytest.param(["ops", "--width", "0"], "width: must be at least 1", id="ops-zero-width"),
    pytest.param(
        ["train", "{hybrid}", "--dataset", "imagefolder:/nonexistent", "--out", "{root}/train-out"],
        "image folder not found",
        id="train-dataset-missing",
    ),
    pytest.param(
        ["train", "{hybrid}", "--space", "nope", "--out", "{root}/train-out"],
        "unknown search space 'nope'",
        id="train-unknown-space",
    ),
    # reading a study back
    pytest.param(["report", "nope", "--runs-dir", "{runs}"], "no manifest.json", id="report-no-such-study"),
    pytest.param(
        ["report", "../x", "--runs-dir", "{runs}"], "not a valid name", id="report-study-path-chars"
    ),
    pytest.param(
        ["export", "nope", "--trial", "0", "--runs-dir", "{runs}"],
        "no manifest.json",
        id="export-no-such-study",
    ),
    pytest.param(
        ["export", STUDY, "--trial", "0", "--pareto", "--runs-dir", "{runs}"],
        "either --trial N",
        id="export-trial-and-pareto",
    ),
    pytest.param(
        ["export", STUDY, "--runs-dir", "{runs}"], "either --trial N", id="export-neither-trial-nor-pareto"
    ),
    pytest.param(
        ["export", STUDY, "--trial", "999", "--runs-dir", "{runs}"],
        "has no trial 999",
        id="export-no-such-trial",
    ),
    pytest.param(
        ["export", STUDY, "--trial", "0", "--trial", "999", "--runs-dir", "{runs}"],
        "has no trial 999",
        id="export-one-good-one-missing-trial",
    ),
    pytest.param(
        ["export", STUDY, "--trial", "0", "--out", "/proc/nas-no-such-dir", "--runs-dir", "{runs}"],
        "out: cannot create the folder /proc/nas-no-such-dir",
        id="export-out-uncreatable",
    ),
    pytest.param(
        ["report", "manifest-not-json", "--runs-dir", "{runs}"], "is not valid JSON", id="report-bad-manifest"
    ),
    pytest.param(
        ["report", "manifest-no-objectives", "--runs-dir", "{runs}"],
        "records no valid objectives",
        id="report-manifest-without-objectives",
    ),
    pytest.param(
        ["report", "table-damaged", "--runs-dir", "{runs}"], "cannot be read", id="report-damaged-table"
    ),
    pytest.param(
        ["export", "table-foreign", "--trial", "0", "--runs-dir", "{runs}"],
        "is not a trials table",
        id="export-foreign-table",
    ),
    pytest.param(
        ["export", STUDY, "--trial", "0", "--format", "onnx", "--runs-dir", "{runs}"],
        "format: unknown 'onnx'",
        id="export-unknown-format",
    ),
    # an export that fails leaves no folder, and an earlier export as it was
    pytest.param(
        ["export", "weights-damaged", "--trial", "0", "--runs-dir", "{runs}"],
        "{runs}/weights-damaged/weights/w.pt",
        id="export-damaged-weights-over-an-earlier-export",
    ),
    pytest.param(
        ["export", "weights-damaged", "--trial", "0", "--out", "{root}/export-out", "--runs-dir", "{runs}"],
        "{runs}/weights-damaged/weights/w.pt",
        id="export-damaged-weights-new-out",
    ),
    pytest.param(
        [
            "export",
            "weights-damaged",
            "--trial",
            "1",
            "--trial",
            "0",
            "--out",
            "{root}/export-out",
            "--runs-dir",
            "{runs}",
        ],
        "{runs}/weights-damaged/weights/w.pt",
        id="export-good-trial-then-damaged-weights",
    ),
    pytest.param(
        ["export", STUDY, "--trial", "0", "--out", "{hybrid}/out", "--runs-dir", "{runs}"],
        f"out: cannot create the folder {HYBRID}/out: {HYBRID} is a file",
        id="export-out-under-a-file",
    ),
]


@pytest.mark.usefixtures("study_made", "clean_data_env")
@pytest.mark.parametrize(("args", "message"), CLI_CASES)
def test_cli_bad_input_is_one_sentence_exit_2_and_leaves_the_study(
    env: Env, args: list[str], message: str
) -> None:
    state, files = snapshot(env.run_dir), tree(env.root)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = runner.invoke(app, [env.fill(a) for a in args])
    output = result.output.strip()
    shown = [w for w in caught if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))]
    assert not shown, [f"{w.category.__name__}: {w.message}" for w in shown]  # a warning prints lines too
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    assert output.startswith("error:"), output
    assert len(output.splitlines()) == 1, output
    assert env.fill(message) in output
    assert snapshot(env.run_dir) == state
    assert tree(env.root) == files  # no new study, storage file, export or training folder; no file changed


# --- the Python API ----------------------------------------------------------------------------------------


def _settings(env: Env, **changes: Any):
    return cheap_settings(env.runs, **{"budget": "3trials", "study": STUDY, "resume": True, **changes})


def _run(env: Env, **changes: Any) -> None:
    from nas.search.run import run_search

    run_search(_settings(env, **changes))


def _from_sources(env: Env, config: str) -> None:
    from nas.search.settings import SearchSettings

    SearchSettings.from_sources(env.fill(config), budget="3trials")


def _export(run_dir: Path, out: Path, trials: list[int]) -> None:
    from results.export import export_trials

    export_trials(run_dir, out, trials=trials)


def _create(arch: Any, **kwargs: Any) -> None:
    from nas.create import create_model

    create_model(arch, **kwargs)


Case = Callable[[Env], object]
API_CASES: list[Any] = [
    # SearchSettings
    pytest.param(lambda e: _settings(e, space="nope"), "unknown search space", id="settings-unknown-space"),
    pytest.param(
        lambda e: _settings(e, evaluator="magic"), "evaluator: unknown", id="settings-unknown-evaluator"
    ),
    pytest.param(
        lambda e: _settings(e, budget="3 lightyears"), "3 lightyears", id="settings-budget-lightyears"
    ),
    pytest.param(lambda e: _settings(e, budget="0min"), "0min", id="settings-budget-0min"),
    pytest.param(
        lambda e: _settings(e, budget=5), "budget: must be a string", id="settings-budget-not-a-string"
    ),
    pytest.param(
        lambda e: _settings(e, macs_img_size=8), "macs-img-size: 8", id="settings-macs-img-size-too-small"
    ),
    pytest.param(
        lambda e: _settings(e, concurrency=2), "concurrency: 2 is Ray's", id="settings-concurrency-optuna"
    ),
    pytest.param(
        lambda e: _settings(e, workers="two"), "workers: must be", id="settings-workers-not-a-number"
    ),
    pytest.param(lambda e: _settings(e, seed=1.5), "seed: must be", id="settings-seed-not-an-integer"),
    pytest.param(
        lambda e: _settings(e, seed=-1), "seed: must be a whole number from 0", id="settings-seed-negative"
    ),
    pytest.param(
        lambda e: _settings(e, seed=MAX_SEED + 1), f"got {MAX_SEED + 1}", id="settings-seed-too-large"
    ),
    pytest.param(
        lambda e: _settings(e, backend="ray", address="head"),
        "address: 'head' is not a Ray cluster's address",
        id="settings-address-malformed",
    ),
    pytest.param(
        lambda e: _settings(e, backend="ray", address="ray://head"),
        "is not a Ray cluster's address",
        id="settings-address-without-port",
    ),
    pytest.param(
        lambda e: _settings(e, trial_timeout=-1), "trial-timeout", id="settings-negative-trial-timeout"
    ),
    pytest.param(lambda e: _settings(e, study="a/b"), "not a valid name", id="settings-study-path-chars"),
    pytest.param(lambda e: _settings(e, objectives=5), "objectives:", id="settings-objectives-not-a-list"),
    pytest.param(
        lambda e: _from_sources(e, "{root}/nope.yaml"), "no such file", id="settings-config-missing"
    ),
    pytest.param(
        lambda e: _from_sources(e, "{root}/invalid.yaml"), "not valid YAML", id="settings-config-invalid"
    ),
    pytest.param(
        lambda e: _from_sources(e, "{root}/wrong-type.yaml"), "workers: must be", id="settings-config-type"
    ),
    # run_search on the module's study
    pytest.param(lambda e: _run(e, resume=False), "already exists", id="run-exists-without-resume"),
    pytest.param(
        lambda e: _run(e, storage="postgresql://nobody@127.0.0.1:1/none"),
        "storage: cannot open",
        id="run-postgres",
    ),
    pytest.param(
        lambda e: _run(e, storage="sqlite:////proc/nas-no-such-dir/s.db"),
        "storage: cannot open",
        id="run-sqlite-proc",
    ),
    pytest.param(
        lambda e: _run(e, objectives=("params", "macs")), "cannot be resumed", id="run-other-objectives"
    ),
    pytest.param(lambda e: _run(e, space="coatnet"), "cannot be resumed", id="run-other-space"),
    pytest.param(
        lambda e: _run(
            e, evaluator="proxy", objectives=("top1", "macs"), dataset="cifar10", data_dir=str(e.root)
        ),
        "CIFAR10 not found",
        id="run-dataset-missing",
    ),
    pytest.param(
        lambda e: _run(e, study=FRESH, resume=False, budget=OTHER_DEVICE_BUDGET),
        OTHER_DEVICE_REFUSAL,
        id="run-budget-other-device",
    ),
    pytest.param(
        lambda e: _run(e, study=FRESH, resume=False, latency_device="cuda:99", max_latency="10ms"),
        "latency-device: cuda:99 is not on this machine",
        id="run-latency-device-missing",
    ),
    pytest.param(
        lambda e: _run(
            e,
            study="supernet-refused",
            resume=False,
            evaluator="oneshot",
            objectives=("top1", "macs"),
            dataset="synthetic",
        ),
        "supernet-refused/supernet.pt cannot be read",
        id="run-oneshot-refused-supernet",
    ),
    pytest.param(
        lambda e: _run(e, storage=f"journal:{e.runs}/nope.log"),
        "does not exist",
        id="run-resume-journal-missing",
    ),
    pytest.param(
        lambda e: _run(e, study=FRESH, resume=False, backend="ray", address="ray://nowhere:1"),
        "address: cannot reach the Ray cluster",
        id="run-ray-address-unreachable",
    ),
    pytest.param(
        lambda e: _run(e, study=FRESH, resume=False, backend="ray", gpus_per_trial=64),
        "gpus-per-trial: 64 GPUs per trial",
        id="run-ray-local-too-many-gpus",
    ),
    # nas export
    pytest.param(
        lambda e: _export(e.runs / "weights-damaged", e.runs / "weights-damaged" / "export", [0]),
        "weights-damaged/weights/w.pt",
        id="export-api-damaged-weights",
    ),
    pytest.param(
        lambda e: _export(e.runs / "weights-damaged", e.root / "export-out", [1, 2, 0]),
        "weights-damaged/weights/w.pt",
        id="export-api-two-good-then-damaged",
    ),
    # Arch
    pytest.param(lambda e: Arch.load(e.root / "even-k.json"), "got 4", id="arch-load-even-k"),
    pytest.param(lambda e: Arch.load(e.root / "zero-width.json"), "got 0", id="arch-load-zero-width"),
    pytest.param(lambda e: Arch.load(e.root / "unknown-mixer.json"), "'magic'", id="arch-load-unknown-mixer"),
    pytest.param(lambda e: Arch.load(e.root / "truncated.json"), "not valid JSON", id="arch-load-truncated"),
    pytest.param(lambda e: Arch.load(e.root / "missing.json"), "cannot be read", id="arch-load-missing"),
    pytest.param(lambda e: Arch.load(e.root / "binary.json"), "not UTF-8 text", id="arch-load-binary"),
    pytest.param(lambda e: Arch.load(e.root), "cannot be read", id="arch-load-directory"),
    pytest.param(lambda e: Arch.from_json("[1, 2]"), "got list", id="arch-json-list"),
    pytest.param(lambda e: Arch.from_json("null"), "got NoneType", id="arch-json-null"),
    pytest.param(
        lambda e: Arch.from_json(json.dumps(_hybrid(**{"s1.depth": "2"}))),
        "got '2'",
        id="arch-json-str-depth",
    ),
    pytest.param(
        lambda e: Arch.from_json(json.dumps(_hybrid(**{"s1.width": 2.5}))),
        "got 2.5",
        id="arch-json-float-width",
    ),
    pytest.param(
        lambda e: Arch.from_json('{"stem.kind": "conv", "stem.width": 64}'),
        "no stage fields",
        id="arch-no-stages",
    ),
    pytest.param(
        lambda e: Arch.from_json(json.dumps(_hybrid(**{"s7.depth": 1}))), "s5: missing", id="arch-stage-gap"
    ),
    pytest.param(
        lambda e: Arch.from_json(json.dumps(_hybrid(**{"s1.colour": 1}))),
        "unknown field",
        id="arch-unknown-field",
    ),
    # nas.create
    pytest.param(
        lambda e: _create(e.root / "missing.json"), "neither an architecture JSON", id="create-missing-file"
    ),
    pytest.param(lambda e: _create(str(e.root / "even-k.json")), "got 4", id="create-even-k"),
    pytest.param(lambda e: _create(str(e.root)), "cannot be read", id="create-directory"),
    pytest.param(lambda e: _create(str(e.root / "binary.json")), "not UTF-8 text", id="create-binary-file"),
    pytest.param(lambda e: _create("{not json"), "not valid JSON", id="create-invalid-json-text"),
    pytest.param(
        lambda e: _create(_hybrid(), img_size=8), "8x8 is too small", id="create-img-size-too-small"
    ),
    pytest.param(lambda e: _create(e.root / "truncated.pt"), "cannot read", id="create-truncated-model-file"),
    pytest.param(lambda e: _create(e.root / "nope.pt"), "cannot read", id="create-missing-model-file"),
    pytest.param(lambda e: _create(42), "neither an architecture JSON", id="create-not-an-arch"),
    pytest.param(
        lambda e: _create(_hybrid(), num_classes=0), "num_classes: must be", id="create-zero-classes"
    ),
]


@pytest.mark.usefixtures("study_made", "clean_data_env")
@pytest.mark.parametrize(("call", "message"), API_CASES)
def test_api_bad_input_raises_one_line_value_error(env: Env, call: Case, message: str) -> None:
    state, files = snapshot(env.run_dir), tree(env.root)
    with pytest.raises(ValueError) as err:
        call(env)
    text = str(err.value)
    assert "\n" not in text, text
    assert env.fill(message) in text, text
    assert snapshot(env.run_dir) == state
    assert tree(env.root) == files


def test_objectives_given_as_text_are_normalized(env: Env) -> None:
    """``objectives="macs"`` is one objective, not four letters."""
    one = _settings(env, objectives="macs")
    assert one.objectives == ("macs",)
    two = _settings(env, objectives=["macs", "params"])
    assert two.objectives == ("macs", "params")


def test_resume_of_a_study_that_does_not_exist_is_an_error(env: Env) -> None:
    result = runner.invoke(
        app, [env.fill(a) for a in search("--resume", "--no-baselines", study="ghost", budget="1trials")]
    )
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith("error: study 'ghost' does not exist")
    assert not (env.runs / "ghost").exists()

"""A corpus of malformed inputs: every one is refused with one sentence and never touches a study.

One cheap real study (``runs/s``, 3 complexity trials at 32 px) is made once for the module; every CLI case
points at the same ``--runs-dir`` and ``--study s`` (with ``--resume`` where that reaches deeper code), or at
a new study ``fresh`` that must never be made, so a case that writes before it fails is caught: the study's
tables (read from ``study.db`` with sqlite3), its ``trials.csv``, ``trials.parquet`` and ``manifest.json``
bytes and its file listing must be as they were, and so must every other file and folder the cases can
reach (``tree``: no new run folder, storage file, export or training folder, no file changed).

A CLI case must exit with code 2 and print exactly one line, ``error: ...``, with no traceback and no warning.
An API case must raise ValueError whose message is one line. Every case runs under a timeout, so an input that
would block (a FIFO) or never end (``/dev/zero``, a YAML alias bomb) fails instead of hanging the suite.

The size cases try every size option of every command with values out of bounds (``nas.core.bounds``): below
the
least, one past the most, huge, and values the command line cannot read as a number (a word, a fraction, a
bool, a huge exponent, 5000 digits). The file cases (``nas.core.userfiles``) cover architecture JSON and
search
configs that are deep, oversized, alias bombs, not regular files, not UTF-8, or sections of the wrong type.
"""

from __future__ import annotations

import json
import os
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

from evaluators.hyperparams import MAX_LR
from nas.cli.commands import app
from nas.core import bounds
from nas.core.arch import Arch, Stage, Stem
from nas.study.settings import MAX_SEED

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


_STAGE = {"block": "mbconv", "mixer": "conv", "depth": 1, "width": 768}


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
    # sizes out of bounds, before anything of that size is made
    "huge-depth": json.dumps(_hybrid(**{"s1.depth": 10**9})),
    "negative-depth": json.dumps(_hybrid(**{"s1.depth": -1})),
    "float-depth": json.dumps(_hybrid(**{"s1.depth": 2.0})),
    "bool-depth": json.dumps(_hybrid(**{"s1.depth": True})),
    "text-depth": json.dumps(_hybrid(**{"s1.depth": "1e9"})),
    "inf-depth": json.dumps(_hybrid(**{"s1.depth": 1})).replace('"s1.depth": 1', '"s1.depth": 1e999'),
    "digits-depth": json.dumps(_hybrid(**{"s1.depth": 1})).replace(
        '"s1.depth": 1', '"s1.depth": ' + "9" * 5000
    ),
    "huge-width": json.dumps(_hybrid(**{"s4.width": 10**6})),
    "huge-stem": json.dumps(_hybrid(**{"stem.width": 10**9})),
    "huge-head": json.dumps(_hybrid(**{"head.kind": "mlp", "head.width": 10**9})),
    "big-k": json.dumps(_hybrid(**{"s2.k": 33})),
    "many-heads": json.dumps(_hybrid(**{"s4.heads": 512})),
    "huge-memory": json.dumps(_hybrid(**{"s3.memory": 10**6})),
    "huge-expand": json.dumps(_hybrid(**{"s1.expand": 1000})),
    "stage-17": json.dumps(_hybrid(**{f"s{i}.{f}": v for i in range(5, 18) for f, v in _STAGE.items()})),
    # files out of bounds
    "deep": '{"s1.depth": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "deep-33": '{"s1.depth": ' + "[" * 32 + "]" * 32 + "}",  # the 33rd level counts the outer object
    "big": HYBRID.read_text() + " " * (1 << 20),  # valid JSON, just over 1 MiB
    "many-values": json.dumps({"stem.kind": "conv", "s1.depth": [0] * 20_000}),
    # a string left open on a line of escaped quotes: a bracket scan that tried each quote again took hours
    "escaped-quotes": '{"stem.kind": "' + '\\"' * 400_000,
}
ARCH_MESSAGES = {
    "huge-depth": "s1.depth: must be a whole number between 1 and 64, got 1000000000",
    "negative-depth": "s1.depth: must be a whole number between 1 and 64, got -1",
    "float-depth": "s1.depth: must be a whole number between 1 and 64, got 2.0",
    "bool-depth": "s1.depth: must be a whole number between 1 and 64, got True",
    "text-depth": "s1.depth: must be a whole number between 1 and 64, got '1e9'",
    "inf-depth": "s1.depth: must be a whole number between 1 and 64, got inf",
    "digits-depth": "not valid JSON (a number of more than 4300 digits)",
    "huge-width": "s4.width: must be a whole number between 1 and 8192, got 1000000",
    "huge-stem": "stem.width: must be a whole number between 1 and 8192, got 1000000000",
    "huge-head": "head.width: must be a whole number between 1 and 8192, got 1000000000",
    "big-k": "s2.k: the 'local' mixer needs an odd whole number k between 3 and 31, got 33",
    "many-heads": "s4.heads: must be a whole number between 1 and 256, got 512",
    "huge-memory": "s3.memory: must be a whole number between 1 and 4096, got 1000000",
    "huge-expand": "s1.expand: must be a whole number between 1 and 16, got 1000",
    "stage-17": "stages are numbered s1 to s16 at most",
    "deep": "deep.json': nests lists and mappings deeper than 32 levels",
    "deep-33": "deep-33.json': nests lists and mappings deeper than 32 levels",
    "big": "big.json': is 1,048,997 bytes, over the limit of an input, 1,048,576 bytes (1 MiB)",
    "many-values": "many-values.json': holds more than 10,000 values",
    "escaped-quotes": "escaped-quotes.json': not valid JSON (Unterminated string starting at line 1 column",
    "fifo": "fifo.json': cannot be read (it is a FIFO, not a regular file)",
    "even-k": "s2.k: the 'local' mixer needs an odd whole number k between 3 and 31, got 4",
    "zero-width": "s1.width: must be a whole number between 1 and 8192, got 0",
    "unknown-mixer": "s2.mixer: unknown value 'magic'",
    "truncated": "not valid JSON",
    "list": "expected a dict of labelled fields, got list",
    "missing": "missing.json",
}


_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(  # 9**9 values in 318 bytes ("billion laughs")
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(8)
)
BAD_CONFIGS: dict[str, str | bytes] = {
    # the bomb inside a setting's value: a type error that shows the value used to hang formatting it
    "bomb.yaml": "workers:\n" + "".join(f"  - {line.split(': ', 1)[1]}\n" for line in _BOMB.splitlines()),
    "bomb-in-section.yaml": "search:\n  objectives:\n"
    + "".join(f"    - {line.split(': ', 1)[1]}\n" for line in _BOMB.splitlines()),
    "bomb-top.yaml": _BOMB + "workers: *i\n",
    "bomb-merge.yaml": "a: &a {x: 1, y: 2}\n"
    + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} {{<<: [{', '.join([f'*{chr(97 + i)}'] * 9)}]}}\n" for i in range(8)
    ),
    "cycle.yaml": "workers: &a [*a]\n",
    "deep.yaml": "workers: " + "[" * 100_000 + "\n",
    "deep-block.yaml": "".join(" " * i + "a:\n" for i in range(200)) + " " * 200 + "b: 1\n",
    "deep.toml": "workers = " + "[" * 100_000 + "\n",
    "deep-tables.toml": "[" + ".".join(["a"] * 40) + "]\nb = 1\n",
    "big.yaml": "# padding\n" * 120_000,
    "big.toml": "# padding\n" * 120_000,
    "binary.yaml": b"\xff\xfe\x00w\x00o\x00r\x00k\x00",
    "latin1.toml": 'budget = "caf\xe9"\n'.encode("latin-1"),
    "section.yaml": "search: 5\n",
    "section-list.yaml": "search: [workers, 2]\n",
    "section-null.yaml": "search:\n",
    "section.toml": "search = 5\n",
    "section-text.toml": 'search = "workers = 2"\n',
    "section-and-top.yaml": "search: {workers: 2}\nseed: 3\n",
    "evaluator-config.yaml": "evaluator-config: 5\n",
    "evaluator-config.toml": "evaluator_config = [1, 2]\n",
    "digits.yaml": "workers: " + "9" * 5000 + "\n",
    "digits.toml": "workers = " + "9" * 5000 + "\n",
    "huge-workers.yaml": "workers: 100000000000000000000\n",
    "float-workers.yaml": "workers: 2.0\n",
    "bool-workers.toml": "workers = true\n",
    "text-workers.yaml": "workers: 1e20\n",
    "inf-timeout.yaml": "trial-timeout: .inf\n",
    "nan-cpus.toml": "cpus-per-trial = nan\n",
    "huge-seed.toml": "seed = 4294967296\n",
    "negative-seed.yaml": "seed: -1\n",
    "huge-img.yaml": "macs-img-size: 1000000\n",
    "huge-eta.toml": "eta = 1_000_000_000\n",
    "huge-rungs.yaml": "rungs: 1000000000\n",
    "long-text.yaml": "data-dir: " + "x" * 100_000 + "\n",
    "python-tag.yaml": "workers: !!python/object/apply:os.getpid []\n",
    "oneshot-epochs.yaml": "evaluator: oneshot\nevaluator-config: {epochs: 100000000000000000000}\n",
    "oneshot-batch.toml": 'evaluator = "oneshot"\n[evaluator-config]\nbatch_size = 1_000_000_000\n',
    "oneshot-bn-batches.yaml": "evaluator: oneshot\nevaluator-config: {bn_batches: 1.0e+30}\n",
    "proxy-eval-every.yaml": "evaluator: proxy\nevaluator-config: {eval_every: -1}\n",
    "proxy-eval-every-0.yaml": "evaluator: proxy\nevaluator-config: {eval_every: 0}\n",
    "proxy-opt.toml": 'evaluator = "proxy"\n[evaluator-config]\nopt = "sgdd"\n',
    "oneshot-opt.yaml": "evaluator: oneshot\nevaluator-config: {opt: rm -rf}\n",
    "two-documents.yaml": "workers: 1\n---\nworkers: 2\n",
    "escaped-quotes.toml": 'budget = "' + '\\"' * 400_000 + "\n",
    # a training setting timm or torch would refuse in every trial, each trial charged to the budget
    "proxy-lr.yaml": "evaluator: proxy\nevaluator-config: {lr: -1}\n",
    "proxy-sched.toml": 'evaluator = "proxy"\n[evaluator-config]\nsched = "cosin"\n',
    "proxy-opt-kwargs.yaml": "evaluator: proxy\nevaluator-config: {opt_kwargs: {bogus: 1}}\n",
    "proxy-smoothing.toml": 'evaluator = "proxy"\n[evaluator-config]\nlabel_smoothing = 1.5\n',
    "proxy-grad-clip.yaml": "evaluator: proxy\nevaluator-config: {grad_clip: -1.0}\n",
    "oneshot-finetune-lr.yaml": "evaluator: oneshot\nevaluator-config: {finetune_lr: 0.0}\n",
    # more batches than the run's training images make: cut short without a word (recalibration skipped)
    "oneshot-scoring.yaml": "evaluator: oneshot\nevaluator-config: {bn_batches: 99, finetune_steps: 101}",
    "proxy-recalibration.yaml": "evaluator: proxy\nevaluator-config: {bn_recalibration: 5000}\n",
}
# refused by the search's preflight, against the data (SearchSettings alone accepts them)
PREFLIGHT_CONFIG_MESSAGES = {
    "oneshot-scoring.yaml": "evaluator-config: bn_batches + finetune_steps ask for 200 batches of "
    "64, but the 10,000 training images a run uses make 156; give at most 156",
    "proxy-recalibration.yaml": "evaluator-config: bn_recalibration asks for 5,000 batches of 128, but the",
}
CONFIG_MESSAGES = {
    "bomb.yaml": "bomb.yaml': holds more than 10,000 values, YAML aliases counted each time they are used",
    "bomb-top.yaml": "bomb-top.yaml': holds more than 10,000 values, YAML aliases counted",
    "bomb-in-section.yaml": "holds more than 10,000 values, YAML aliases counted",
    "bomb-merge.yaml": "holds more than 10,000 values, YAML aliases counted",
    "cycle.yaml": "cycle.yaml': a YAML alias refers to a collection that holds it",
    "deep.yaml": "deep.yaml': nests lists and mappings deeper than 32 levels",
    "deep-block.yaml": "deep-block.yaml': nests lists and mappings deeper than 32 levels",
    "deep.toml": "deep.toml': nests lists and mappings deeper than 32 levels",
    "deep-tables.toml": "deep-tables.toml': nests lists and mappings deeper than 32 levels",
    "big.yaml": "big.yaml': is 1,200,000 bytes, over the limit of an input, 1,048,576 bytes (1 MiB)",
    "big.toml": "big.toml': is 1,200,000 bytes, over the limit of an input",
    "binary.yaml": "binary.yaml': not UTF-8 text (byte 0xff at offset 0)",
    "latin1.toml": "latin1.toml': not UTF-8 text (byte 0xe9 at offset 13)",
    "section.yaml": "section.yaml': the search section must be a mapping of settings, got 5",
    "section-list.yaml": "the search section must be a mapping of settings, got a list (['workers', 2])",
    "section-null.yaml": "the search section must be a mapping of settings, got None",
    "section.toml": "section.toml': the search section must be a mapping of settings, got 5",
    "section-text.toml": "the search section must be a mapping of settings, got text ('workers = 2')",
    "section-and-top.yaml": "settings both in the search section and at the top level (seed)",
    "evaluator-config.yaml": "evaluator-config: must be a mapping of settings, got 5",
    "evaluator-config.toml": "evaluator-config: must be a mapping of settings, got [1, 2]",
    "digits.yaml": "digits.yaml': not valid YAML (a number of more than 4300 digits)",
    "digits.toml": "digits.toml': not valid TOML (a number of more than 4300 digits)",
    "huge-workers.yaml": "workers: must be a whole number between 1 and 1024, got 100000000000000000000",
    "float-workers.yaml": "workers: must be a whole number, got 2.0",
    "bool-workers.toml": "workers: must be a whole number, got True",
    "text-workers.yaml": "workers: must be a whole number, got '1e20'",
    "inf-timeout.yaml": "trial-timeout: must be a number or unset, got inf",
    "nan-cpus.toml": "cpus-per-trial: must be a number, got nan",
    "huge-seed.toml": "seed: must be a whole number between 0 and 2147483647, got 4294967296",
    "negative-seed.yaml": "seed: must be a whole number between 0 and 2147483647, got -1",
    "huge-img.yaml": "macs-img-size: must be a whole number between 1 and 4096, got 1000000",
    "huge-eta.toml": "eta: must be a whole number between 2 and 100, got 1000000000",
    "huge-rungs.yaml": "rungs: must be a whole number between 2 and 20, got 1000000000",
    "long-text.yaml": "data-dir: must be at most 4096 characters, got 100,000",
    "python-tag.yaml": "python-tag.yaml': not valid YAML (could not determine a constructor",
    "oneshot-epochs.yaml": "evaluator-config: epochs: must be a whole number between 1 and 10000, got 1000",
    "oneshot-batch.toml": "evaluator-config: batch_size: must be a whole number between 1 and 65536",
    "oneshot-bn-batches.yaml": "evaluator-config: bn_batches must be a whole number, got 1e+30",
    "proxy-eval-every.yaml": "evaluator-config: eval_every: must be a whole number between 1 and 10000",
    "proxy-eval-every-0.yaml": "evaluator-config: eval_every: must be a whole number between 1 and 10000",
    "proxy-opt.toml": "evaluator-config: opt: timm has no optimizer 'sgdd' (such as adamw, sgd, lamb",
    "oneshot-opt.yaml": "evaluator-config: opt: timm has no optimizer 'rm -rf'",
    "two-documents.yaml": "two-documents.yaml': not valid YAML (but found another document",
    "escaped-quotes.toml": "escaped-quotes.toml': not valid TOML (Illegal character",
    "proxy-lr.yaml": "evaluator-config: lr: must be a number above 0 and at most 100, got -1",
    "proxy-sched.toml": "evaluator-config: sched: timm has no scheduler 'cosin' (such as cosine",
    "proxy-opt-kwargs.yaml": "evaluator-config: opt_kwargs: timm's adamw optimizer refuses {{'bogus': 1}}",
    "proxy-smoothing.toml": "evaluator-config: label_smoothing: must be a number between 0 and 1, got 1.5",
    "proxy-grad-clip.yaml": "evaluator-config: grad_clip: must be a number above 0 and at most 1e+06",
    "oneshot-finetune-lr.yaml": "evaluator-config: finetune_lr: must be a number above 0 and at most 100",
    "fifo.yaml": "fifo.yaml': cannot be read (it is a FIFO, not a regular file)",
    "zero.yaml": "zero.yaml': cannot be read (it is a character device, not a regular file)",
    "folder.yaml": "folder.yaml': cannot be read (it is a directory, not a regular file)",
}


def _to_dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _damaged_weights(run_dir: Path) -> None:
    """Trial 0 kept weights that are garbage; an earlier export of it is in ``export/trial_0``."""
    from nas.study.trials_table import save_trials

    frame = pd.read_parquet(run_dir / "trials.parquet")
    frame["weights"] = ["w.pt" if n == 0 else "" for n in frame["number"]]
    save_trials(frame, run_dir)
    (run_dir / "weights").mkdir()
    (run_dir / "weights" / "w.pt").write_bytes(b"PK\x03\x04 not a model file")
    (run_dir / "export" / "trial_0").mkdir(parents=True)
    (run_dir / "export" / "trial_0" / "arch.json").write_text("an earlier export\n")


def _weights(run_dir: Path, name: str, make: Callable[[Path], object] | None = None) -> None:
    """Trial 0's row names the weights file ``name``, which ``make`` makes (if given) in ``weights/``."""
    from nas.study.trials_table import save_trials

    frame = pd.read_parquet(run_dir / "trials.parquet")
    frame["weights"] = [name if n == 0 else "" for n in frame["number"]]
    save_trials(frame, run_dir)
    (run_dir / "weights").mkdir()
    if make is not None:
        make(run_dir / "weights" / name)


def _misfit_model(path: Path) -> None:
    """A model file whose weights are not its network's: its classifier's bias has one value, not 10."""
    from nas.core.create import save_model
    from nas.core.model import build_model

    tiny = {"stem.kind": "conv", "stem.width": 8, "s1.block": "mbconv", "s1.mixer": "conv", "s1.depth": 1}
    save_model(build_model(Arch.from_flat({**tiny, "s1.width": 8}), num_classes=10, img_size=32), path)
    payload = torch.load(path, weights_only=True)
    payload["state_dict"]["fc.bias"] = torch.zeros(1)
    torch.save(payload, path)


def _manifest(run_dir: Path, **changes: Any) -> None:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.update(changes)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


def _csv_cell(run_dir: Path, column: str, row: int, text: str) -> None:
    """The table as CSV only, with the cell of ``column`` in data row ``row`` (from 0) set to ``text``."""
    (run_dir / "trials.parquet").unlink()
    frame = pd.read_csv(run_dir / "trials.csv", keep_default_na=False, na_values=[""], dtype=str)
    frame.loc[row, column] = text
    frame.to_csv(run_dir / "trials.csv", index=False)


def _replace(path: Path, make: Callable[[Path], object]) -> None:
    path.unlink()
    make(path)


BROKEN_RUNS: dict[str, Callable[[Path], object]] = {
    "manifest-not-json": lambda d: (d / "manifest.json").write_text('{"study": "s", '),
    "manifest-no-objectives": lambda d: (d / "manifest.json").write_text('{"study": "s", "settings": {}}'),
    # a manifest nested past any parser's recursion (RecursionError), or one that blocks (a FIFO)
    "manifest-deep": lambda d: (d / "manifest.json").write_text(
        '{"settings": {"objectives": ["macs"]}, "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    ),
    "manifest-fifo": lambda d: _replace(d / "manifest.json", os.mkfifo),
    "manifest-bad-limit": lambda d: _manifest(d, limits={"max_macs": "a lot"}),
    "manifest-bad-reference": lambda d: _manifest(d, report={"reference_point": {"macs": "far"}}),
    "table-damaged": lambda d: (d / "trials.parquet").write_bytes(b"PAR1 damaged"),
    "table-foreign": lambda d: ((d / "trials.parquet").unlink(), (d / "trials.csv").write_text("a,b\n1,2\n")),
    "table-nan-number": lambda d: _csv_cell(d, "number", 0, "NaN"),
    "table-twice": lambda d: _csv_cell(d, "number", 1, "0"),
    "table-deep-arch": lambda d: _csv_cell(d, "arch_json", 2, "[" * 5000 + "]" * 5000),
    # a table that never ends: read, it would fill memory
    "table-dev-zero": lambda d: ((d / "trials.parquet").unlink(), _replace(d / "trials.csv", _to_dev_zero)),
    "weights-damaged": _damaged_weights,
    # weights that never end (copied, they would fill the disk), outside the run, or not the network's
    "weights-dev-zero": lambda d: _weights(d, "z.pt", _to_dev_zero),
    "weights-outside": lambda d: _weights(d, "../manifest.json"),
    "weights-misfit": lambda d: _weights(d, "w.pt", _misfit_model),
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
    for name, content in BAD_CONFIGS.items():
        (root / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    for name in ("fifo.json", "fifo.yaml", "fifo.pt"):  # reading one blocks until a writer comes: never
        os.mkfifo(root / name)
    (root / "zero.yaml").symlink_to("/dev/zero")  # endless zeros
    (root / "folder.yaml").mkdir()
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
    is unpacked) and the SQLite databases, whose bytes a reader may change (their rows are ``snapshot``'s);
    a FIFO or device file some cases make is named, never read."""
    out: dict[str, bytes | None] = {}
    for path in root.rglob("*"):
        name = str(path.relative_to(root))
        if name == "cache" or name.startswith("cache/") or path.name.endswith(("-wal", "-shm", "-journal")):
            continue
        if path.is_dir() or not path.is_file():
            out[name] = None
            continue
        out[name] = b"" if path.suffix == ".db" else path.read_bytes()
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


# Values the command line cannot read as a whole number; each is one sentence naming the option.
NOT_WHOLE = {"word": "two", "fraction": "1.5", "bool": "true", "exponent": "1e999999", "digits": "9" * 5000}


def whole_cases(tag: str, command: Callable[[str, str], list[str]], option: str, low: int, high: int) -> list:
    """A whole-number ``option`` of a command out of its bounds [low, high] and not a whole number."""
    name = option.removeprefix("--")
    out = {"below": str(low - 1), "past": str(high + 1), "negative": "-5", "huge": str(10**20)}
    cases = [
        pytest.param(
            command(option, v),
            f"{name}: must be a whole number between {low} and {high}, got {v}",
            id=f"{tag}-{name}-{kind}",
        )
        for kind, v in out.items()
    ]
    return cases + [
        pytest.param(command(option, v), f"error: {name}: ", id=f"{tag}-{name}-{kind}")
        for kind, v in NOT_WHOLE.items()
    ]


def number_cases(tag: str, command: Callable[[str, str], list[str]], option: str, high: float, above: bool):
    """A number ``option`` (at least 0, or above 0) out of its bounds, not finite and not a number."""
    name = option.removeprefix("--")
    out = {"negative": "-1", "past": str(high * 2), "huge": "1e300", "nan": "nan", "inf": "inf"}
    out |= {"exponent": "1e999999", **({"zero": "0"} if above else {})}
    cases = [
        pytest.param(command(option, v), f"{name}: must be a number", id=f"{tag}-{name}-{kind}")
        for kind, v in out.items()
    ]
    return [*cases, pytest.param(command(option, "two"), f"error: {name}: ", id=f"{tag}-{name}-word")]


def _search_with(option: str, value: str) -> list[str]:
    return search("--resume", **{option.removeprefix("--").replace("-", "_"): value})


def _with(*before: str, after: tuple[str, ...] = ()) -> Callable[[str, str], list[str]]:
    return lambda option, value: [*before, option, value, *after]


SIZE_CASES = [
    # nas search: the same bounds as a config file's or the Python API's (SearchSettings)
    *whole_cases("search", _search_with, "--workers", 1, bounds.MAX_WORKERS),
    *whole_cases("search", _search_with, "--seed", 0, bounds.MAX_SEED),
    *whole_cases("search", _search_with, "--concurrency", 1, bounds.MAX_WORKERS),
    *whole_cases("search", _search_with, "--macs-img-size", 1, bounds.MAX_IMG_SIZE),
    *whole_cases("search", _search_with, "--latency-batch", 1, bounds.MAX_BATCH),
    *whole_cases("search", _search_with, "--eta", 2, bounds.MAX_ETA),
    *whole_cases("search", _search_with, "--rungs", 2, bounds.MAX_RUNGS),
    *whole_cases("search", _search_with, "--min-fidelity", 1, bounds.MAX_IMAGES),
    *whole_cases("search", _search_with, "--proxy-epochs", 1, bounds.MAX_EPOCHS),
    pytest.param(
        _search_with("--proxy-epochs", "3"),
        "proxy-epochs: the complexity evaluator trains nothing, so it trains no proxy schedule; use "
        "--evaluator proxy / table:PATH or drop --proxy-epochs",
        id="search-proxy-epochs-no-proxy",
    ),
    pytest.param(
        _search_with("--rung-val-images", "0"),
        f"rung-val-images: must be a whole number between 1 and {bounds.MAX_IMAGES}, got 0",
        id="search-rung-val-images-below",
    ),
    pytest.param(
        _search_with("--rung-val-images", "most"),
        "rung-val-images: must be a whole number or all, got 'most'",
        id="search-rung-val-images-word",
    ),
    pytest.param(
        _search_with("--promotion", "halving"),
        "promotion: unknown 'halving'; allowed: asha, quota",
        id="search-promotion-unknown",
    ),
    *number_cases("search", _search_with, "--trial-timeout", bounds.MAX_TRIAL_SECONDS, above=True),
    *number_cases("search", _search_with, "--cpus-per-trial", bounds.MAX_CPUS_PER_TRIAL, above=True),
    *whole_cases("search", _search_with, "--supernet-workers", 1, bounds.MAX_WORKERS),
    *number_cases("search", _search_with, "--cpus-per-worker", bounds.MAX_CPUS_PER_TRIAL, above=True),
    *number_cases("search", _search_with, "--gpus-per-trial", bounds.MAX_GPUS_PER_TRIAL, above=False),
    # the network a command builds
    *whole_cases("cost", _with("cost", "{hybrid}"), "--img-size", 1, bounds.MAX_IMG_SIZE),
    *whole_cases("cost", _with("cost", "{hybrid}"), "--num-classes", 1, bounds.MAX_CLASSES),
    *whole_cases("inspect", _with("inspect", "{hybrid}"), "--img-size", 1, bounds.MAX_IMG_SIZE),
    *whole_cases("inspect", _with("inspect", "{hybrid}"), "--num-classes", 1, bounds.MAX_CLASSES),
    *whole_cases("inspect", _with("inspect", "{hybrid}"), "--in-chans", 1, bounds.MAX_IN_CHANS),
    *whole_cases("baselines", _with("baselines", "--space", "sasa"), "--img-size", 1, bounds.MAX_IMG_SIZE),
    *whole_cases("ops", _with("ops"), "--width", 1, bounds.MAX_WIDTH),
    *whole_cases("ops", _with("ops"), "--size", 1, bounds.MAX_IMG_SIZE // 4),
    # nas train, before any data is loaded or a run folder made
    *(
        case
        for option, low, high in (
            ("--epochs", 1, bounds.MAX_EPOCHS),
            ("--batch-size", 1, bounds.MAX_BATCH),
            ("--train-samples", 1, bounds.MAX_IMAGES),
            ("--seed", 0, bounds.MAX_SEED),
        )
        for case in whole_cases(
            "train", _with("train", "{hybrid}", after=("--out", "{root}/train-out")), option, low, high
        )
    ),
    *number_cases(
        "train", _with("train", "{hybrid}", after=("--out", "{root}/train-out")), "--lr", MAX_LR, above=True
    ),
    *(
        pytest.param(
            ["export", STUDY, "--runs-dir", "{runs}", "--trial", v], "error: trial: ", id=f"export-trial-{k}"
        )
        for k, v in NOT_WHOLE.items()
    ),
    # an architecture given as JSON text on the command line (braces doubled for str.format)
    pytest.param(
        ["train", '{{"s1.depth": ' + "[" * 50_000 + "]" * 50_000 + "}}", "--out", "{root}/train-out"],
        "arch JSON: nests lists and mappings deeper than 32 levels",
        id="train-arch-text-deep",
    ),
    pytest.param(
        [
            "train",
            json.dumps(_hybrid(**{"s1.depth": 10**9})).replace("{", "{{").replace("}", "}}"),
            "--out",
            "{root}/train-out",
        ],
        "s1.depth: must be a whole number between 1 and 64, got 1000000000",
        id="train-arch-text-huge-depth",
    ),
    *(
        pytest.param(
            [command, "/dev/zero", *extra],
            "'/dev/zero': cannot be read (it is a character device",
            id=f"{command}-arch-dev-zero",
        )
        for command, extra in (("cost", ()), ("inspect", ()), ("train", ("--out", "{root}/train-out")))
    ),
    # a message quoting a user's text that looks like rich markup, and a missing argument: one line too
    pytest.param(search("--resume", space="[/x]"), "unknown search space '[/x]'", id="search-space-markup"),
    pytest.param(["cost"], "error: missing argument", id="cost-missing-argument"),
    pytest.param(
        search("--resume", config="/dev/zero"),
        "must end in .yaml, .yml or .toml",
        id="search-config-dev-zero",
    ),
    *(
        pytest.param(
            search(
                "--resume", config=f"{{root}}/{name}", macs_img_size=None, evaluator=None, objectives=None
            ),
            message,
            id=f"search-config-{name}",
        )
        for name, message in {**CONFIG_MESSAGES, **PREFLIGHT_CONFIG_MESSAGES}.items()
    ),
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
    *(
        pytest.param(
            search(study=FRESH, storage=url),
            "storage: an in-memory SQLite database (sqlite://, :memory:) lives only in the process that "
            "opens it, so worker processes cannot share it and the study would be gone when the search "
            "ends; name a file (sqlite:///PATH/study.db), or drop --storage",
            id=f"search-storage-in-memory-{tag}",
        )
        for tag, url in (
            ("no-path", "sqlite://"),
            ("memory", "sqlite:///:memory:"),
            ("uri", "sqlite:///file::memory:"),
        )
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
    pytest.param(
        search("--resume", macs_img_size="0"),
        "macs-img-size: must be a whole number",
        id="search-macs-img-size-zero",
    ),
    pytest.param(search("--resume", trial_timeout="-1"), "trial-timeout", id="search-negative-trial-timeout"),
    pytest.param(
        search("--resume", workers="0"), "workers: must be a whole number between 1", id="search-zero-workers"
    ),
    pytest.param(search("--resume", cpus_per_trial="0"), "cpus-per-trial", id="search-zero-cpus-per-trial"),
    pytest.param(
        search("--resume", gpus_per_trial="-1"), "gpus-per-trial", id="search-negative-gpus-per-trial"
    ),
    # a new study: every setting is checked before its folder, storage or first trial exists
    pytest.param(
        search(study=FRESH, storage="sqlite:///{runs}"),
        "storage: cannot open sqlite:///{runs}: {runs} is a folder, not a database file",
        id="search-storage-sqlite-folder",
    ),
    pytest.param(
        search(study=FRESH, storage="journal:{runs}"),
        "storage: cannot open journal:{runs}: {runs} is a folder, not a journal file",
        id="search-storage-journal-folder",
    ),
    pytest.param(
        search(study=FRESH, storage="journal:{hybrid}"),
        "{hybrid} is not an Optuna journal (its lines are not JSON records)",
        id="search-storage-journal-not-a-journal",
    ),
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
        f"seed: must be a whole number between 0 and {MAX_SEED}, got -1",
        id="search-seed-negative",
    ),
    pytest.param(
        search(study=FRESH, seed=str(2**32)),
        f"seed: must be a whole number between 0 and {MAX_SEED}",
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
        search(study=FRESH, backend="ray", storage="postgresql://bob:hunter2@db/nas"),
        "storage: a Ray search keeps its study in the run folder (ray/ and ray_ledger.jsonl), not in an",
        id="search-ray-storage-refused",
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
        search(study=FRESH, backend="ray", cpus_per_trial="1000"),
        "cpus-per-trial: 1000 CPUs per trial, but a local Ray has this machine's",
        id="search-ray-local-too-many-cpus",
    ),
    pytest.param(
        search(study=FRESH, backend="ray", evaluator="oneshot", objectives=None, supernet_workers="1000"),
        "supernet-workers: 1000 workers of 1 CPUs, but a local Ray has this machine's",
        id="search-ray-local-too-many-supernet-workers",
    ),
    pytest.param(
        search(study=FRESH, supernet_workers="2"),
        "supernet-workers: the complexity evaluator trains no supernet; use --evaluator oneshot",
        id="search-supernet-workers-without-a-supernet",
    ),
    pytest.param(
        search(study=FRESH, evaluator="oneshot", objectives=None, supernet_workers="2"),
        "supernet-workers: the supernet trains in Ray Train workers, so it needs --backend ray",
        id="search-supernet-workers-without-ray",
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
        "latency-device: cuda:99 is a GPU, but a Ray trial here holds none (--gpus-per-trial 0)",
        id="search-ray-latency-device-without-gpus",
    ),
    pytest.param(  # on a cluster (no local check of its GPUs), a trial sees the one it holds, as cuda:0
        search(study=FRESH, backend="ray", address="auto", gpus_per_trial="1", latency_device="cuda:1"),
        "latency-device: cuda:1 is not among the 1 GPU(s) a Ray trial holds, which Ray numbers from cuda:0",
        id="search-ray-latency-device-beyond-the-trials-gpus",
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
        search("--resume", config="{root}/nope.yaml"),
        "nope.yaml': cannot be read (no such file)",
        id="search-config-missing",
    ),
    pytest.param(
        search("--resume", config="{root}/invalid.yaml"), "not valid YAML", id="search-config-invalid-yaml"
    ),
    pytest.param(
        search("--resume", config="{root}/invalid.toml"), "not valid TOML", id="search-config-invalid-toml"
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
    pytest.param(
        search("--resume", "--fidelity", "ladder", budget="8trials", evaluator="proxy"),
        "8 trials end before any architecture can reach the top rung of this ladder (3 rungs, eta 3), whose "
        "results alone make the front: the first gets there after 9 trials at the soonest, 13 if the first "
        "results stay the best; give a budget of at least 13 trials, fewer rungs, a smaller eta, or "
        "--fidelity single",
        id="search-ladder-budget-reaches-no-top-rung",
    ),
    # architecture files
    *arch_cases("cost"),
    *arch_cases("inspect"),
    *arch_cases("train", "--out", "{root}/train-out"),
    *SIZE_CASES,
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
        ["cost", "{hybrid}", "--num-classes", "0"],
        "num-classes: must be a whole number between 1 and",
        id="cost-zero-classes",
    ),
    pytest.param(
        ["inspect", "{hybrid}", "--in-chans", "0"],
        "in-chans: must be a whole number between 1 and",
        id="inspect-zero-chans",
    ),
    pytest.param(["ops", "--width", "0"], "width: must be a whole number between 1 and", id="ops-zero-width"),
    pytest.param(
        ["train", "{hybrid}", "--dataset", "imagefolder:/nonexistent", "--out", "{root}/train-out"],
        "image folder not found",
        id="train-dataset-missing",
    ),
    # an --out that is a file, or under one: FileExistsError / NotADirectoryError tracebacks before
    *(
        pytest.param(
            ["train", "{hybrid}", "--epochs", "1", "--out", out],
            "out: cannot create the folder {}: {hybrid} is a file".replace("{}", out),
            id=f"train-out-{tag}",
        )
        for tag, out in (("a-file", "{hybrid}"), ("under-a-file", "{hybrid}/run"))
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
        ["report", "manifest-deep", "--runs-dir", "{runs}"],
        "manifest-deep/manifest.json nests lists and mappings deeper than 32 levels, the limit of a file of "
        "a run",
        id="report-deep-manifest",
    ),
    pytest.param(
        ["export", "manifest-deep", "--trial", "0", "--runs-dir", "{runs}"],
        "manifest-deep/manifest.json nests lists and mappings deeper than 32 levels",
        id="export-deep-manifest",
    ),
    pytest.param(
        ["report", "manifest-fifo", "--runs-dir", "{runs}"],
        "manifest-fifo/manifest.json cannot be read (it is a FIFO, not a regular file)",
        id="report-fifo-manifest",
    ),
    pytest.param(
        ["report", "manifest-bad-limit", "--runs-dir", "{runs}"],
        "manifest-bad-limit/manifest.json has a limit 'max_macs' that is not a finite number ('a lot')",
        id="report-manifest-bad-limit",
    ),
    pytest.param(
        ["report", "manifest-bad-reference", "--runs-dir", "{runs}"],
        "has a report.reference_point that is not an object of finite numbers ({{'macs': 'far'}})",
        id="report-manifest-bad-reference",
    ),
    *(
        pytest.param(
            [command, "table-nan-number", *extra, "--runs-dir", "{runs}"],
            "table-nan-number/trials.csv, row 1 below the header, column number: 'NaN' is not a trial "
            "number, a whole number from 0 to 2,147,483,647",
            id=f"{command}-table-nan-number",
        )
        for command, extra in (("report", ()), ("export", ("--trial", "0")))
    ),
    pytest.param(
        ["report", "table-twice", "--runs-dir", "{runs}"],
        "table-twice/trials.csv, row 2 below the header, column number: trial 0 is in an earlier row too",
        id="report-table-number-twice",
    ),
    pytest.param(
        ["report", "table-deep-arch", "--runs-dir", "{runs}"],
        "table-deep-arch/trials.csv, row 3 below the header, column arch_json: arch JSON: nests lists and "
        "mappings deeper than 32 levels",
        id="report-table-deep-arch",
    ),
    pytest.param(
        ["report", "table-dev-zero", "--runs-dir", "{runs}"],
        "table-dev-zero/trials.csv': cannot be read (it is a character device, not a regular file)",
        id="report-table-dev-zero",
    ),
    pytest.param(
        ["export", "weights-dev-zero", "--trial", "0", "--format", "none", "--runs-dir", "{runs}"],
        "weights/z.pt': cannot be read (it is a character device, not a regular file)",
        id="export-weights-dev-zero",
    ),
    pytest.param(
        ["export", "weights-outside", "--trial", "0", "--format", "none", "--runs-dir", "{runs}"],
        "the trials table names '../manifest.json' as a trial's weights, not a file name in",
        id="export-weights-outside-the-run",
    ),
    pytest.param(
        ["export", "weights-misfit", "--trial", "0", "--format", "torchscript", "--runs-dir", "{runs}"],
        "weights/w.pt: its weights do not fit the network it records (size mismatch for fc.bias",
        id="export-weights-misfit",
    ),
    pytest.param(
        ["export", "table-foreign", "--trial", "0", "--runs-dir", "{runs}"],
        "is not a trials table",
        id="export-foreign-table",
    ),
    pytest.param(
        ["export", STUDY, "--trial", "0", "--format", "tflite", "--runs-dir", "{runs}"],
        "format: unknown 'tflite'",
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


@pytest.mark.timeout(60)  # a FIFO or /dev/zero read regresses into a failure, not a hang
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
    from nas.api import run_search

    run_search(_settings(env, **changes))


def _from_sources(env: Env, config: str) -> None:
    from nas.study.settings import SearchSettings

    SearchSettings.from_sources(env.fill(config), budget="3trials")


def _export(run_dir: Path, out: Path, trials: list[int]) -> None:
    from results.export import export_trials

    export_trials(run_dir, out, trials=trials)


def _create(arch: Any, **kwargs: Any) -> None:
    from nas.core.create import create_model

    create_model(arch, **kwargs)


def _build(**kwargs: Any) -> None:
    from nas.core.model import build_model

    build_model(Arch.from_flat(_hybrid()), **kwargs)


def _count(**kwargs: Any) -> None:
    from evaluators.complexity import count

    count(Arch.from_flat(_hybrid()), **kwargs)


def _ladder(**kwargs: Any) -> None:
    from nas.study.fidelity import Ladder

    Ladder(**kwargs)


BOUNDS_API_CASES: list[Any] = [
    # SearchSettings: every size, from Python
    *(
        pytest.param(lambda e, k=k, v=v: _settings(e, **{k: v}), message, id=f"settings-{k}-{i}")
        for i, (k, v, message) in enumerate(
            (
                (
                    "workers",
                    10**20,
                    "workers: must be a whole number between 1 and 1024, got 100000000000000000000",
                ),
                ("workers", 0, "workers: must be a whole number between 1 and 1024, got 0"),
                ("workers", 2.0, "workers: must be a whole number, got 2.0"),
                ("workers", True, "workers: must be a whole number, got True"),
                ("seed", -1, "seed: must be a whole number between 0 and 2147483647, got -1"),
                ("seed", 2**32, "seed: must be a whole number between 0 and 2147483647, got 4294967296"),
                ("concurrency", 10**9, "concurrency: must be a whole number between 1 and 1024"),
                ("macs_img_size", 10**6, "macs-img-size: must be a whole number between 1 and 4096"),
                ("latency_batch", 10**9, "latency-batch: must be a whole number between 1 and 65536"),
                ("trial_timeout", float("inf"), "trial-timeout: must be a number or unset, got inf"),
                ("trial_timeout", 1e300, "trial-timeout: must be a number above 0 and at most 31536000"),
                ("cpus_per_trial", float("nan"), "cpus-per-trial: must be a number, got nan"),
                ("gpus_per_trial", 1e9, "gpus-per-trial: must be a number between 0 and 64"),
                ("eta", 10**9, "eta: must be a whole number between 2 and 100"),
                ("rungs", 10**9, "rungs: must be a whole number between 2 and 20"),
                ("min_fidelity", 10**20, "min-fidelity: must be a whole number between 1 and 10000000000"),
                ("budget", "x" * 10**6, "budget: must be at most 4096 characters, got 1,000,000"),
                (
                    "workers",
                    10**5000,
                    "workers: must be a whole number between 1 and 1024, got an integer of",
                ),
            )
        )
    ),
    # config files, through SearchSettings.from_sources
    *(
        pytest.param(
            lambda e, n=name: _from_sources(e, f"{{root}}/{n}"), message, id=f"settings-config-{name}"
        )
        for name, message in CONFIG_MESSAGES.items()
    ),
    pytest.param(lambda e: _from_sources(e, "/dev/zero"), "must end in", id="settings-config-dev-zero"),
    # Arch, from every source: fields, the flat dict (Optuna params, Ray configs), JSON text and files
    pytest.param(
        lambda e: Stage("mbconv", "conv", 10**9, 64),
        "depth: must be a whole number between 1 and 64",
        id="stage-huge-depth",
    ),
    pytest.param(
        lambda e: Stage("transformer", "local", 1, 64, k=10**9),
        "between 3 and 31, got 1000000000",
        id="stage-huge-k",
    ),
    pytest.param(
        lambda e: Stem("patch", 64, patch=10**6),
        "stem.patch: must be a whole number between 1 and 64",
        id="stem-huge-patch",
    ),
    pytest.param(
        lambda e: Arch(Stem("conv", 8), [Stage("mbconv", "conv", 1, 8)] * 1000),
        "stages: must be between 1 and 16 stages, got 1000",
        id="arch-1000-stages",
    ),
    *(
        pytest.param(
            lambda e, n=name: Arch.from_flat(json.loads(BAD_ARCHS[n])),
            ARCH_MESSAGES[name],
            id=f"arch-flat-{name}",
        )
        for name in (
            "huge-depth",
            "huge-width",
            "big-k",
            "many-heads",
            "huge-memory",
            "stage-17",
            "bool-depth",
        )
    ),
    pytest.param(
        lambda e: Arch.from_flat({**_hybrid(), "s" + "9" * 5000 + ".depth": 1}),
        "unknown field",
        id="arch-flat-huge-stage-number",
    ),
    pytest.param(
        lambda e: Arch.from_json(BAD_ARCHS["deep"]),
        "arch JSON: nests lists and mappings deeper",
        id="arch-json-deep",
    ),
    pytest.param(
        lambda e: Arch.from_json(BAD_ARCHS["digits-depth"]),
        "a number of more than 4300 digits",
        id="arch-json-digits",
    ),
    pytest.param(
        lambda e: Arch.from_json(BAD_ARCHS["big"]),
        "arch JSON: is longer than 1,048,576 characters",
        id="arch-json-big",
    ),
    pytest.param(
        lambda e: Arch.from_json(BAD_ARCHS["many-values"]),
        "holds more than 10,000 values",
        id="arch-json-many-values",
    ),
    *(
        pytest.param(
            lambda e, n=name: Arch.load(e.root / f"{n}.json"), ARCH_MESSAGES[name], id=f"arch-load-{name}"
        )
        for name in ("deep", "big", "many-values", "huge-depth", "fifo")
    ),
    pytest.param(
        lambda e: Arch.load("/dev/zero"), "cannot be read (it is a character device", id="arch-load-dev-zero"
    ),
    # building a network
    pytest.param(
        lambda e: _create(_hybrid(), num_classes=10**9),
        "num_classes: must be a whole number between 1 and 100000",
        id="create-huge-classes",
    ),
    pytest.param(
        lambda e: _create(_hybrid(), in_chans=10**6),
        "in_chans: must be a whole number between 1 and 256",
        id="create-huge-chans",
    ),
    pytest.param(
        lambda e: _create(_hybrid(), img_size=10**6),
        "img_size: must be a whole number between 1 and 4096",
        id="create-huge-img-size",
    ),
    pytest.param(
        lambda e: _create(_hybrid(), img_size=(224, 10**6)),
        "img_size: must be a whole number between 1",
        id="create-huge-img-height",
    ),
    pytest.param(
        lambda e: _create(_hybrid(), img_size=224.0),
        "img_size: must be a side or a (height, width) pair",
        id="create-float-img-size",
    ),
    pytest.param(lambda e: _create("x" * 10**6), "arch: 'xxx", id="create-huge-text"),
    pytest.param(
        lambda e: _create(e.root / "fifo.pt"),
        "fifo.pt': cannot be read (it is a FIFO",
        id="create-fifo-model-file",
    ),
    pytest.param(lambda e: _create(str(e.root / "fifo.json")), "it is a FIFO", id="create-fifo-arch-file"),
    pytest.param(
        lambda e: _build(num_classes=-1),
        "num_classes: must be a whole number between 0 and 100000",
        id="build-negative-classes",
    ),
    pytest.param(
        lambda e: _build(in_chans=10**9),
        "in_chans: must be a whole number between 1 and 256",
        id="build-huge-chans",
    ),
    pytest.param(
        lambda e: _build(img_size=10**9),
        "img_size: must be a whole number between 1 and 4096",
        id="build-huge-img-size",
    ),
    pytest.param(
        lambda e: _count(img_size=10**9),
        "img_size: must be a whole number between 1 and 4096",
        id="count-huge-img-size",
    ),
    pytest.param(
        lambda e: _count(in_chans=0),
        "in_chans: must be a whole number between 1 and 256",
        id="count-zero-chans",
    ),
    pytest.param(
        lambda e: _ladder(eta=10**9), "eta: must be a whole number between 2 and 100", id="ladder-huge-eta"
    ),
    pytest.param(
        lambda e: _ladder(rungs=10**9),
        "rungs: must be a whole number between 2 and 20",
        id="ladder-huge-rungs",
    ),
]


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
        lambda e: _settings(e, seed=-1), "seed: must be a whole number between 0", id="settings-seed-negative"
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
    # nas.core.create
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
    pytest.param(lambda e: _create(e.root / "nope.pt"), "cannot be read", id="create-missing-model-file"),
    pytest.param(lambda e: _create(42), "neither an architecture JSON", id="create-not-an-arch"),
    pytest.param(
        lambda e: _create(_hybrid(), num_classes=0), "num_classes: must be", id="create-zero-classes"
    ),
    *BOUNDS_API_CASES,
]


@pytest.mark.timeout(60)
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

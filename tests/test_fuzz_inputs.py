"""Property-based fuzz of every file the tool reads and every option that parses a value, by the real CLI.

Each file kind is drawn as a mutation of a valid file of its kind (cut short, a value swapped for another of
any type, huge, negative, NaN or infinite, nested far too deep, unicode, empty, binary, a key dropped or
added; not a regular file at all: a FIFO, a folder, ``/dev/zero``), and given to a command that reads it and
stops early:

- an architecture's JSON: ``nas cost``;
- a search's YAML or TOML config: ``nas search --config`` resuming a study that does not exist (the config
  is read, checked and preflighted, then the search is refused);
- a run's ``manifest.json``: ``nas report``, ``nas export`` and ``nas compare`` (the study readable, so their
  refresh runs), and a resumed ``nas search`` whose budget is spent;
- a trials table (``trials.csv`` or ``trials.parquet``): ``nas report``, ``nas export`` and ``nas compare``
  (the study's storage gone, so they read the table as it is);
- a latency table and a part-cost store under ``--runs-dir``: ``nas search``'s preflight;
- a model file (the checkpoint ``nas export`` reads and converts): ``nas export --format torchscript``;

and every option that parses a value (budgets, limits, sizes, narrows, objectives, trial numbers) of ``nas
search``, ``nas cost``, ``nas train`` and ``nas export`` gets text drawn for it. Whatever the input, the
command ends with exit code 0, or 2 and exactly one line, ``error: ...``; never a traceback, a warning, or a
hang past a bound (a minute an example); the study's trials are never changed (its rows in ``study.db``), and
a refusal leaves every file under the example's folder as it was (byte for byte).

The default suite runs a few seconds per kind, with a fixed seed (``derandomize``: the same examples each run,
so a failure is reproducible); ``pytest -m slow`` runs 40 times as many (``NAS_FUZZ_LONG`` sets another
multiple), drawn afresh. Hypothesis keeps the examples that failed in ``.hypothesis/`` and tries them first.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import sqlite3
import tempfile
import traceback
import warnings
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from nas.cli.commands import app

ROOT = Path(__file__).resolve().parents[1]
HYBRID = ROOT / "examples" / "hybrid.json"
STUDY = "s"
TINY = {  # the network whose model file the checkpoint cases start from: built and exported in a blink
    "stem.kind": "conv",
    "stem.width": 8,
    "s1.block": "mbconv",
    "s1.mixer": "conv",
    "s1.depth": 1,
    "s1.width": 8,
    "head.kind": "fc",
}
SEARCH = ["search", "--space", "sasa", "--evaluator", "complexity", "--objectives", "macs,params",
          "--budget", "3trials", "--macs-img-size", "32"]  # fmt: skip
# the study's rows: its trials; and its own attributes, which a resumed session adds to (a refusal none)
TABLES = ("studies", "trials", "trial_values", "trial_params", "trial_user_attributes",
          "study_user_attributes")  # fmt: skip
SESSIONS = "study_user_attributes"
SKIPPED = ("-wal", "-shm", "-journal", ".lock")  # SQLite's side files and lock files: touched by readers

runner = CliRunner()


def _fast(examples: int) -> settings:
    """The default suite's run: ``examples`` fixed examples (the same each run), a bound on each."""
    return settings(
        max_examples=examples,
        deadline=timedelta(seconds=60),
        derandomize=True,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


def _long(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=timedelta(seconds=60),
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


# --- the study and the valid files the mutations start from ------------------------------------------------


@dataclass(frozen=True)
class Base:
    root: Path
    runs: Path  # --runs-dir of the study, with its counts/ and latency/ stores
    config: dict[str, Any]  # a valid search config
    model: bytes  # a valid model file of TINY

    @property
    def run_dir(self) -> Path:
        return self.runs / STUDY


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Base:
    """One real study (3 complexity trials at 32 px, latency measured under a loose limit, so that its
    run folder has a part-cost store and a latency table), a valid config and a model file."""
    from evaluators.complexity import clear_count_cache
    from nas.core.arch import Arch
    from nas.core.create import save_model
    from nas.core.model import build_model

    root = tmp_path_factory.mktemp("fuzz")
    runs = root / "runs"
    clear_count_cache()  # parts this process counted before are traced again, so the search stores them
    made = runner.invoke(app, [*SEARCH, "--study", STUDY, "--max-latency", "10s", "--runs-dir", str(runs)])
    assert made.exit_code == 0, made.output
    assert list((runs / "counts").glob("*.json")) and list((runs / "latency").glob("*.json"))
    model = save_model(build_model(Arch.from_flat(TINY), num_classes=10, img_size=32), root / "tiny.pt")
    config = {
        "space": "sasa",
        "evaluator": "complexity",
        "objectives": ["macs", "params"],
        "budget": "3trials",
        "macs-img-size": 32,
        "workers": 1,
        "seed": 3,
        "sampler": "tpe",
        "narrow": {"s1.depth": [1, 2]},
        "max-macs": "10G",
        "trial-timeout": 600,
        "evaluator-config": {},
    }
    return Base(root, runs, config, model.read_bytes())


@pytest.fixture
def clean_data_env(base: Base, monkeypatch: pytest.MonkeyPatch) -> None:
    """No CIFAR-10 anywhere ($NAS_DATA unset, an empty cache; the system may hold Fashion-MNIST): a command
    that would train on it stops at its data."""
    monkeypatch.delenv("NAS_DATA", raising=False)
    (base.root / "cache").mkdir(exist_ok=True)
    monkeypatch.setenv("XDG_CACHE_HOME", str(base.root / "cache"))


def _rows(run_dir: Path) -> dict[str, list[Any]]:
    """The study's rows (none where it has no study.db)."""
    path = run_dir / "study.db"
    if not path.exists():
        return {}
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in TABLES}


def _files(folder: Path) -> dict[str, bytes | None]:
    """Every file (its bytes; a database's rows are ``_rows``'s) and folder (None) under ``folder``; a FIFO
    or device file is named, never read."""
    out: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.name.endswith(SKIPPED):
            continue
        if path.is_symlink() or not path.is_file():
            out[name] = None
        else:
            out[name] = b"" if path.suffix == ".db" else path.read_bytes()
    return out


def _copy_study(base: Base, target: Path, *, with_db: bool = True) -> Path:
    """A copy of the study's run folder (its report left behind) as ``target/s``: the same name, so that its
    manifest's settings still open its own ``study.db``."""
    run_dir = target / STUDY
    shutil.copytree(
        base.run_dir,
        run_dir,
        ignore=shutil.ignore_patterns("report.html", "pareto.png", "*.lock", "*-wal", "*-shm"),
    )
    if not with_db:
        (run_dir / "study.db").unlink()
    return run_dir


def invoke(args: list[str], watched: Path) -> int:
    """Run ``nas args``; assert it ended as a command must, whatever its input: exit 0, or exit 2 with one
    line ``error: ...`` and nothing under ``watched`` changed (files byte for byte); never a traceback or a
    warning; the trials of every study under ``watched`` the same either way (and its own attributes, which a
    resumed session adds to, after a refusal). Returns the exit code."""
    studies = {p.parent: _rows(p.parent) for p in watched.rglob("study.db")}
    files = _files(watched)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = runner.invoke(app, [str(a) for a in args])
    output = result.output.strip()
    crash = ""
    if result.exc_info is not None and not isinstance(result.exception, SystemExit):
        crash = "".join(traceback.format_exception(*result.exc_info))
    assert result.exit_code in (0, 2), f"exit {result.exit_code}: {output}\n{crash}"
    assert "Traceback" not in output, output
    shown = [w for w in caught if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))]
    if result.exit_code == 2:
        assert output.startswith("error: "), output
        assert len(output.splitlines()) == 1, output
        assert not shown, [f"{w.category.__name__}: {w.message}" for w in shown]
        assert _files(watched) == files, "a refused command changed a file"
    else:
        assert "error:" not in output, output
    for run_dir, rows in studies.items():
        after = _rows(run_dir)
        if result.exit_code == 0:
            after.pop(SESSIONS, None), rows.pop(SESSIONS, None)
        assert after == rows, f"the study in {run_dir} changed"
    return result.exit_code


# --- values of any kind, and mutations of a valid document --------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**30, -(10**30), 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, -0.0, 1e-320, 1e308, math.nan, math.inf, -math.inf]),
    st.text(max_size=30),
    st.sampled_from(["", " ", "NaN", "nan", "inf", "-1", "1e999", "0x10", "1_000", "\u0661\u0662", "\x00"]),
    st.sampled_from(["sasa", "coatnet", "mbconv", "local", "rel", "conv", "COMPLETE", "FAIL", "macs:max"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path (keys and indices) into a parsed document, the root's () first."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, (*prefix, index))
    return out


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> Any:
    """``document`` (JSON-like) with one to three of its values replaced, removed, or given a sibling."""
    document = json.loads(json.dumps(document))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(document)
        path = draw(st.sampled_from(paths))
        kind = draw(st.sampled_from(["replace", "replace", "remove", "add", "deep"]))
        new = _nested(draw(st.integers(30, 120))) if kind == "deep" else draw(VALUES)
        if not path:
            document = new if kind in ("replace", "deep") else document
            continue
        parent = document
        for step in path[:-1]:
            parent = parent[step]
        last = path[-1]
        if kind == "remove":
            del parent[last]
        elif kind == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = new
        elif kind == "add":
            parent.insert(last, new)
        else:
            parent[last] = new
    return document


def _json(value: Any) -> str:
    return json.dumps(value, indent=1, default=str)


def _toml_value(value: Any) -> str:
    if value is None:
        return '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else "inf"
            if value == math.inf
            else "-inf"
            if value < 0 and math.isinf(value)
            else repr(value)
        )
    if isinstance(value, (int, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"


def _toml(document: Any) -> str:
    if not isinstance(document, dict):
        return f"value = {_toml_value(document)}\n"
    return "".join(f"{json.dumps(str(k))} = {_toml_value(v)}\n" for k, v in document.items())


def _yaml(document: Any) -> str:
    return yaml.safe_dump(document, allow_unicode=True, sort_keys=False)


@st.composite
def damaged(draw: st.DrawFn, text: str) -> bytes:
    """The bytes of ``text`` damaged as a disk, an editor or a hostile hand would."""
    data = text.encode()
    kind = draw(
        st.sampled_from(["cut", "insert", "overwrite", "empty", "binary", "unicode", "nest", "bom", "nul"])
    )
    at = draw(st.integers(0, len(data)))
    if kind == "cut":
        return data[:at]
    if kind == "insert":
        return data[:at] + draw(st.text(max_size=40)).encode("utf-8", "surrogatepass") + data[at:]
    if kind == "overwrite":
        return data[:at] + draw(st.binary(max_size=40)) + data[at + 40 :]
    if kind == "empty":
        return b""
    if kind == "binary":
        return draw(st.binary(max_size=200))
    if kind == "unicode":
        return draw(st.text(max_size=200)).encode("utf-8", "surrogatepass")
    if kind == "nest":
        depth = draw(st.integers(30, 200_000))
        return b"[" * depth + data + b"]" * depth
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    return data[:at] + b"\x00" + data[at:]


SPECIAL = ["fifo", "folder", "dev-zero", "dangling", "huge"]


def write_file(path: Path, content: bytes | str) -> None:
    """``content`` at ``path``: bytes, or one of SPECIAL (not a regular file, or past any limit)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "fifo":
        os.mkfifo(path)  # reading it would wait for a writer forever
    elif content == "folder":
        path.mkdir()
    elif content == "dev-zero":
        path.symlink_to("/dev/zero")  # endless
    elif content == "dangling":
        path.symlink_to(path.parent / "no-such-file")
    else:  # a sparse file of 20 MiB: past every limit, without the disk
        with path.open("wb") as file:
            file.truncate(20 << 20)


def file_of(text: str, document: Any, render: Callable[[Any], str]) -> st.SearchStrategy[bytes | str]:
    """A file of a kind whose valid form is ``text`` (``document`` parsed, ``render`` to write it again):
    the document mutated, its bytes damaged, or no regular file."""
    return st.one_of(
        mutated(document).map(lambda d: render(d).encode("utf-8", "surrogatepass")),
        damaged(text),
        st.sampled_from(SPECIAL),
    )


@st.composite
def damaged_binary(draw: st.DrawFn, data: bytes) -> bytes:
    """The bytes of a binary file ``data`` damaged: cut, overwritten, grown, emptied or replaced."""
    kind = draw(st.sampled_from(["cut", "overwrite", "insert", "empty", "binary"]))
    at = draw(st.integers(0, len(data)))
    if kind == "cut":
        return data[:at]
    if kind == "overwrite":
        return data[:at] + draw(st.binary(min_size=1, max_size=64)) + data[at + 64 :]
    if kind == "insert":
        return data[:at] + draw(st.binary(min_size=1, max_size=64)) + data[at:]
    if kind == "empty":
        return b""
    return draw(st.binary(max_size=300))


# --- one example's folder -------------------------------------------------------------------------


@pytest.fixture
def example(base: Base, monkeypatch: pytest.MonkeyPatch, clean_data_env: None) -> Callable[[], Path]:
    """A function giving a new empty folder for each example, made the working directory (a relative path a
    mutation names lands there, never in the repository)."""
    (base.root / "examples").mkdir(exist_ok=True)

    def fresh() -> Path:
        folder = Path(tempfile.mkdtemp(dir=base.root / "examples"))
        monkeypatch.chdir(folder)
        return folder

    return fresh


# --- the files ---------------------------------------------------------------------------------------------

ARCH_TEXT = HYBRID.read_text()


def _arch_file(draw: st.DrawFn) -> bytes | str:
    return draw(file_of(ARCH_TEXT, json.loads(ARCH_TEXT), _json))


def check_arch(ex: Path, content: bytes | str, fmt: str) -> None:
    path = ex / "arch.json"
    write_file(path, content)
    invoke(["cost", path, "--img-size", "32", "--format", fmt], ex)


@st.composite
def arch_cases(draw: st.DrawFn) -> tuple[bytes | str, str]:
    return _arch_file(draw), draw(st.sampled_from(["table", "json"]))


@st.composite
def config_cases(draw: st.DrawFn, config: dict[str, Any]) -> tuple[str, bytes | str]:
    suffix = draw(st.sampled_from([".yaml", ".toml", ".yml", ".json", ".txt"]))
    render = _toml if suffix == ".toml" else _json if suffix == ".json" else _yaml
    text = render(config)
    if suffix == ".yaml" and draw(st.booleans()):  # a section of its own, as a project's config may have
        text = _yaml({"search": config})
    return suffix, draw(file_of(text, config, render))


def check_config(ex: Path, suffix: str, content: bytes | str) -> None:
    path = ex / f"config{suffix}"
    write_file(path, content)
    runs = ex / "runs"
    runs.mkdir()
    # resuming a study that does not exist: a valid config is read, checked and preflighted, then refused
    invoke(["search", "--config", path, "--resume", "--study", "nope", "--runs-dir", runs], ex)
    assert not (runs / "nope").exists()


@st.composite
def manifest_cases(draw: st.DrawFn, text: str) -> tuple[bytes | str, list[str]]:
    command = draw(
        st.sampled_from(
            [
                ["report", STUDY],
                ["export", STUDY, "--trial", "0", "--format", "none"],
                ["export", STUDY, "--pareto", "--format", "none"],
                ["compare", STUDY, "t"],  # beside a copy of the study, as it was
                # a resumed search whose budget is spent: it checks the manifest, runs no trial, rewrites it
                [*SEARCH, "--max-latency", "10s", "--study", STUDY, "--resume"],
            ]
        )
    )
    return draw(file_of(text, json.loads(text), _json)), command


def _outputs(base: Base, ex: Path, command: list[str]) -> list[Any]:
    """Where ``command`` writes, in the example's folder (``compare`` also gets its other study, ``t``)."""
    if command[0] == "compare":
        shutil.copytree(base.run_dir, ex / "runs" / "t", ignore=shutil.ignore_patterns("*.html", "*.lock"))
        return ["--out", ex / "compare.html"]
    return ["--out", ex / "out"] if command[0] == "export" else []


def check_manifest(base: Base, ex: Path, content: bytes | str, command: list[str]) -> None:
    run_dir = _copy_study(base, ex / "runs")
    write_file(run_dir / "manifest.json", content)
    invoke([*command, *_outputs(base, ex, command), "--runs-dir", ex / "runs"], ex)


# a trials table: a cell, a column or a row changed in the CSV, or a cell of the parquet file; or its bytes
CELLS = st.one_of(
    SCALARS.map(lambda v: "" if v is None else str(v)),
    st.sampled_from(
        ["NaN", "nan", "inf", "-inf", "-1", "1.5", "1e400", "99999999999999999999", "True", "[]", "{}"]
    ),
    st.sampled_from(
        ['{"stem.kind": "conv"}', "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"]
    ),
)


@st.composite
def csv_table(draw: st.DrawFn, text: str) -> bytes | str:
    rows = list(csv.reader(io.StringIO(text)))
    header, body = rows[0], rows[1:]
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cell", "cell", "cell", "column", "rename", "drop", "row", "duplicate"]))
        column = draw(st.integers(0, len(header) - 1))
        if kind == "cell" and body:
            draw(st.sampled_from(body))[column] = draw(CELLS)
        elif kind == "column":
            header.append(draw(st.sampled_from([*header, "rung", "lineage", "repeat_of", "weights", "x"])))
            for row in body:
                row.append(draw(CELLS))
        elif kind == "rename":
            header[column] = draw(st.sampled_from([*header, "", "x"]))
        elif kind == "drop":
            del header[column]
            for row in body:
                del row[column : column + 1]
        elif kind == "row":
            body.append([draw(CELLS) for _ in header])
        elif body:
            body.append(list(draw(st.sampled_from(body))))
    out = io.StringIO()
    csv.writer(out).writerows([header, *body])
    return draw(st.one_of(st.just(out.getvalue().encode()), damaged(text), st.sampled_from(SPECIAL)))


@st.composite
def parquet_table(draw: st.DrawFn, frame: pd.DataFrame) -> bytes | str:
    frame = frame.copy()
    for _ in range(draw(st.integers(1, 3))):
        column = draw(st.sampled_from(list(frame.columns)))
        kind = draw(st.sampled_from(["cell", "cell", "column-type", "drop"]))
        if kind == "drop":
            frame = frame.drop(columns=[column])
            continue
        if kind == "column-type":
            frame[column] = draw(st.sampled_from([1.5, "x", None, True, -1, math.nan]))
            continue
        frame[column] = frame[column].astype(object)
        frame.at[draw(st.integers(0, len(frame) - 1)), column] = draw(SCALARS)
    buffer = io.BytesIO()
    try:
        frame.to_parquet(buffer, index=False)
    except Exception:  # a column of mixed types pyarrow will not write: as text, then
        frame = frame.astype({c: str for c in frame.columns if frame[c].dtype == object})
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
    data = buffer.getvalue()
    return draw(st.one_of(st.just(data), damaged_binary(data), st.sampled_from(SPECIAL)))


@st.composite
def table_cases(draw: st.DrawFn, base: Base) -> tuple[str, bytes | str, list[str]]:
    name = draw(st.sampled_from(["trials.csv", "trials.parquet"]))
    if name == "trials.csv":
        content = draw(csv_table((base.run_dir / "trials.csv").read_text()))
    else:
        content = draw(parquet_table(pd.read_parquet(base.run_dir / "trials.parquet")))
    trial = draw(st.sampled_from(["0", "1", "2", "7"]))
    command = draw(
        st.sampled_from(
            [
                ["report", STUDY],
                ["export", STUDY, "--trial", trial, "--format", "none"],
                ["export", STUDY, "--pareto", "--format", "none"],
                ["compare", STUDY, "t"],  # beside a copy of the study, as it was
            ]
        )
    )
    return name, content, command


def check_table(base: Base, ex: Path, name: str, content: bytes | str, command: list[str]) -> None:
    run_dir = _copy_study(base, ex / "runs", with_db=False)  # the storage gone: the table is read as it is
    if name == "trials.csv":
        (run_dir / "trials.parquet").unlink()
    write_file(run_dir / name, content)
    invoke([*command, *_outputs(base, ex, command), "--runs-dir", ex / "runs"], ex)


def _store(folder: Path) -> Path:
    (path,) = [p for p in folder.glob("*.json")]
    return path


@st.composite
def store_cases(draw: st.DrawFn, base: Base) -> tuple[str, bytes | str]:
    kind = draw(st.sampled_from(["counts", "latency"]))
    text = _store(base.runs / kind).read_text()
    return kind, draw(file_of(text, json.loads(text), _json))


def check_store(base: Base, ex: Path, kind: str, content: bytes | str) -> None:
    runs = ex / "runs"
    for folder in ("counts", "latency"):
        shutil.copytree(base.runs / folder, runs / folder, ignore=shutil.ignore_patterns("*.lock"))
    write_file(_store(runs / kind), content)
    args = [*SEARCH, "--max-latency", "10s", "--resume", "--study", "nope", "--runs-dir", runs]
    invoke(args, ex)
    assert not (runs / "nope").exists()


@st.composite
def model_cases(draw: st.DrawFn, model: bytes) -> bytes | str:
    import torch

    payload = torch.load(io.BytesIO(model), weights_only=True)
    kind = draw(st.sampled_from(["payload", "state", "bytes", "special"]))
    if kind == "bytes":
        return draw(damaged_binary(model))
    if kind == "special":
        return draw(st.sampled_from(SPECIAL))
    if kind == "payload":
        plain = draw(mutated({k: v for k, v in payload.items() if k != "state_dict"}))
        payload = {**plain, "state_dict": payload["state_dict"]} if isinstance(plain, dict) else plain
    else:
        state = payload["state_dict"]
        key = draw(st.sampled_from(sorted(state)))
        change = draw(st.sampled_from(["shape", "dtype", "drop", "nan", "value"]))
        if change == "shape":
            state[key] = torch.zeros(draw(st.lists(st.integers(0, 3), max_size=3)))
        elif change == "dtype":
            state[key] = state[key].to(draw(st.sampled_from([torch.int64, torch.bool, torch.float16])))
        elif change == "drop":
            del state[key]
        elif change == "nan":
            state[key] = torch.full_like(state[key].float(), math.nan)
        else:
            state[key] = draw(SCALARS)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getvalue()


def check_model(base: Base, ex: Path, content: bytes | str) -> None:
    run_dir = _copy_study(base, ex / "runs", with_db=False)
    (run_dir / "trials.parquet").unlink()
    frame = pd.read_csv(run_dir / "trials.csv")
    frame["weights"] = ["w.pt" if n == 0 else "" for n in frame["number"]]
    frame.loc[frame["number"] == 0, "arch_json"] = json.dumps(TINY)
    frame.to_csv(run_dir / "trials.csv", index=False)
    (run_dir / "weights").mkdir()
    write_file(run_dir / "weights" / "w.pt", content)
    args = ["export", STUDY, "--trial", "0", "--format", "torchscript", "--out", ex / "out"]
    invoke([*args, "--runs-dir", ex / "runs"], ex)


# --- the options that parse a value ------------------------------------------------------------------------

NUMBERS = st.one_of(
    st.integers(-(10**6), 10**6).map(str),
    st.integers().map(str),
    st.floats().map(repr),
    st.sampled_from(
        ["0", "-0", "1e999999", "9" * 5000, "nan", "inf", "-inf", "0x10", "1_000", "\u0661\u0662"]
    ),
    st.sampled_from(["\u00bd", "1,5", " 3", "3 ", "", "+2", "2.", ".5", "1e-9", "0.0001"]),
)
UNITS = [
    "",
    "trials",
    "trial",
    "min",
    "m",
    "h",
    "s",
    "ms",
    "us",
    "gpu-hours",
    "cpu-hours",
    "G",
    "M",
    "k",
    "%",
]
TEXT = st.text(max_size=24)
VALUE = st.one_of(TEXT, st.builds(lambda n, u: n + u, NUMBERS, st.sampled_from(UNITS)))
KEYS = ["s1.depth", "s3.mixer", "s2.k", "stem.kind", "s4.width", "head.kind", "s9.block", "x"]
NARROW = st.one_of(
    VALUE,
    st.builds(
        lambda key, values, sep: f"{key}={sep.join(values)}",
        st.sampled_from(KEYS),
        st.lists(
            st.one_of(NUMBERS, st.sampled_from(["rel", "ext", "local", "conv", "mbconv", "1-3"])), max_size=4
        ),
        st.sampled_from([",", ";", " "]),
    ),
)
OBJECTIVES = st.one_of(
    VALUE,
    st.lists(
        st.builds(
            lambda name, direction: name + direction,
            st.sampled_from(["macs", "params", "top1", "latency_ms", "loss", ""]),
            st.sampled_from(["", ":min", ":max", ":up", ":"]),
        ),
        max_size=4,
    ).map(",".join),
)
SEARCH_OPTIONS: dict[str, st.SearchStrategy[str]] = {
    "--budget": VALUE,
    "--objectives": OBJECTIVES,
    "--narrow": NARROW,
    "--max-macs": VALUE,
    "--max-params": VALUE,
    "--max-latency": VALUE,
    "--at-cost-of": st.one_of(TEXT, st.sampled_from(["resnet26", "ResNet-26", "sasa-resnet26", ""])),
    **dict.fromkeys(
        [
            "--workers",
            "--seed",
            "--concurrency",
            "--macs-img-size",
            "--latency-batch",
            "--eta",
            "--rungs",
            "--min-fidelity",
            "--proxy-epochs",
            "--rung-val-images",
            "--supernet-workers",
        ],
        VALUE,
    ),
    **dict.fromkeys(["--trial-timeout", "--cpus-per-trial", "--gpus-per-trial", "--cpus-per-worker"], VALUE),
    "--fidelity": st.one_of(TEXT, st.sampled_from(["single", "ladder"])),
    "--rung-schedule": TEXT,
    "--promotion": st.one_of(TEXT, st.sampled_from(["asha", "quota"])),
    "--sampler": st.one_of(TEXT, st.sampled_from(["tpe", "nsga2", "gp", "random"])),
    "--profile": st.one_of(TEXT, st.sampled_from(["cpu", "gpu", "full"])),
    "--space": st.one_of(TEXT, st.sampled_from(["sasa", "coatnet"])),
    "--evaluator": st.one_of(TEXT, st.sampled_from(["complexity", "proxy", "oneshot"])),
    "--latency-device": st.one_of(TEXT, st.sampled_from(["cpu", "cuda", "cuda:0", "cuda:99", "meta"])),
    "--storage": st.one_of(
        TEXT,
        st.sampled_from(
            [
                "sqlite://",
                "sqlite:///:memory:",
                "sqlite:///",
                "sqlite+pysqlite://",
                "sqlite:///file::memory:?cache=shared",
                "sqlite:///x.db",
                "sqlite:////proc/x.db",
                "journal:x.log",
                "x.log",
                "postgresql://nobody@127.0.0.1:1/none",
                "mysql://x@127.0.0.1:1/y",
                "nonsense://x",
            ]
        ),
    ),
}
COST_OPTIONS = {
    "--img-size": VALUE,
    "--num-classes": VALUE,
    "--format": st.one_of(TEXT, st.sampled_from(["table", "json"])),
    "--convention": st.one_of(TEXT, st.sampled_from(["fvcore", "paper"])),
}
TRAIN_OPTIONS = {
    **dict.fromkeys(["--epochs", "--batch-size", "--train-samples", "--seed", "--randaugment"], VALUE),
    **dict.fromkeys(["--lr", "--mixup", "--cutmix", "--ema-decay"], VALUE),
    "--recipe": TEXT,
    "--score-on": st.one_of(TEXT, st.sampled_from(["val", "test"])),
    "--profile": st.one_of(TEXT, st.sampled_from(["cpu", "gpu", "full"])),
    "--space": st.one_of(TEXT, st.sampled_from(["sasa", "coatnet"])),
}
EXPORT_OPTIONS = {"--trial": VALUE, "--format": st.one_of(TEXT, st.sampled_from(["none", "onnx", "export"]))}


@st.composite
def option_cases(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    command = draw(st.sampled_from(["search", "search", "search", "cost", "train", "export"]))
    table = {"search": SEARCH_OPTIONS, "cost": COST_OPTIONS, "train": TRAIN_OPTIONS, "export": EXPORT_OPTIONS}
    options = table[command]
    names = draw(st.lists(st.sampled_from(sorted(options)), min_size=1, max_size=3, unique=True))
    return command, {name: draw(options[name]) for name in names}


def check_options(base: Base, ex: Path, command: str, options: dict[str, str]) -> None:
    runs = ex / "runs"
    _copy_study(base, runs)
    given = [part for name, value in options.items() for part in (name, value)]
    if command == "search":
        defaults = dict(zip(SEARCH[1::2], SEARCH[2::2], strict=True))
        merged = {**defaults, "--dataset": "cifar10", **options}  # an evaluator that trains stops at its data
        args = ["search", *[p for n, v in merged.items() for p in (n, v)], "--resume", "--study", "nope"]
        invoke([*args, "--runs-dir", runs], ex)
        assert not (runs / "nope").exists()
    elif command == "cost":
        invoke(["cost", HYBRID, *given], ex)
    elif command == "train":  # CIFAR-10 is nowhere: valid options stop at the data, before any folder
        invoke(["train", HYBRID, *given, "--dataset", "cifar10", "--out", ex / "train-out"], ex)
        assert not (ex / "train-out").exists()
    else:
        given = given if "--trial" in options else [*given, "--trial", "0"]
        invoke(["export", STUDY, *given, "--out", ex / "out", "--runs-dir", runs], ex)


# --- the tests: a short run in the default suite, a long one under -m slow ---------------------------------


def _kinds(base: Base) -> dict[str, tuple[st.SearchStrategy[Any], Callable[[Path, Any], None]]]:
    """Each kind of input: its strategy, and how an example of it is tried in a new folder."""
    manifest = (base.run_dir / "manifest.json").read_text()
    return {
        "arch": (arch_cases(), lambda ex, case: check_arch(ex, *case)),
        "config": (config_cases(base.config), lambda ex, case: check_config(ex, *case)),
        "manifest": (manifest_cases(manifest), lambda ex, case: check_manifest(base, ex, *case)),
        "table": (table_cases(base), lambda ex, case: check_table(base, ex, *case)),
        "store": (store_cases(base), lambda ex, case: check_store(base, ex, *case)),
        "model": (model_cases(base.model), lambda ex, case: check_model(base, ex, case)),
        "options": (option_cases(), lambda ex, case: check_options(base, ex, *case)),
    }


# examples per kind in the default suite (a few seconds each: a report or an export takes ~0.5 s, a cost or a
# refused search ~0.05 s) and under -m slow
SHORT = {"arch": 30, "config": 30, "manifest": 12, "table": 15, "store": 20, "model": 10, "options": 40}
LONG = int(os.environ.get("NAS_FUZZ_LONG", "40"))  # times as many (the variable sets another multiple)


def _fuzz(base: Base, fresh: Callable[[], Path], kind: str, run: settings) -> None:
    strategy, check = _kinds(base)[kind]

    @run
    @given(case=strategy)
    def one(case: Any) -> None:
        check(fresh(), case)

    one()


@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", list(SHORT))
def test_any_input_ends_in_exit_0_or_one_error_line(
    base: Base, example: Callable[[], Path], kind: str
) -> None:
    _fuzz(base, example, kind, _fast(SHORT[kind]))


@pytest.mark.slow
@pytest.mark.timeout(4 * 3600)
@pytest.mark.parametrize("kind", list(SHORT))
def test_any_input_ends_in_exit_0_or_one_error_line_long(
    base: Base, example: Callable[[], Path], kind: str
) -> None:
    _fuzz(base, example, kind, _long(SHORT[kind] * LONG))


@pytest.mark.parametrize("kind", ["counts", "latency"])
def test_a_damaged_store_is_refused_before_the_search_starts(
    base: Base, example: Callable[[], Path], kind: str
) -> None:
    """A part-cost store or latency table that cannot be read is one sentence before the first trial, not a
    failure of every trial the budget pays for."""
    ex = example()
    runs = ex / "runs"
    _copy_study(base, runs)
    for folder in ("counts", "latency"):
        shutil.copytree(base.runs / folder, runs / folder, ignore=shutil.ignore_patterns("*.lock"))
    _store(runs / kind).write_text("garbage")
    args = [*SEARCH, "--budget", "5trials", "--max-latency", "10s", "--study", STUDY, "--resume"]
    assert invoke([*args, "--runs-dir", runs], ex) == 2
    what = "part-cost store" if kind == "counts" else "latency table"
    result = runner.invoke(app, [str(a) for a in [*args, "--runs-dir", runs]])
    assert f"error: {what} {_store(runs / kind)} is not valid JSON" in result.output

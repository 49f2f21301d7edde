"""A tabular benchmark: every architecture of a small space trained in advance, read back as an evaluator.

A table (``benchmarks/build_table.py`` builds it; issue 68) holds, for every architecture of a space that
can be enumerated (:class:`search_spaces.micro.MicroSpace`) and each of a few training seeds, the whole
learning curve, the score on the official test split, the seconds each epoch took, and the network's costs.
:func:`load_table` reads one; ``nas search --evaluator table:PATH`` (:class:`TableEvaluator`) answers each
trial from it and charges the seconds it records on a simulated clock instead of training, so a sampler, a
budget, the limits and the fidelity ladder run unchanged, in seconds, at no cost.

The file
--------
One Parquet file (``pyarrow``), one row per (architecture, training seed), and the build's settings as JSON
under the schema's metadata key ``nas.table``. Columns (a *curve* is a list with one entry per epoch, entry
``e - 1`` after epoch ``e``):

==========================  =========  ===========================================================
column                      type       what
==========================  =========  ===========================================================
``arch_id``                 string     the space's stable id (``conv-C-L3-R``; ``MicroSpace.arch_id``)
``arch_index``              int        its place in ``MicroSpace.architectures()``
``arch``                    string     ``Arch.key``
``arch_json``               string     the architecture's flat JSON (``Arch.to_json``)
``seed``                    int        the training seed (weights, data order, augmentation, drop-path)
``epochs``                  int        epochs of the schedule (the curves' length)
``val_top1``                curve      top-1 (%) on the validation images held out of the training split
``val_loss``                curve      mean cross-entropy there
``train_loss``              curve      mean training loss of the epoch (label smoothing included)
``train_seconds``           curve      CPU seconds of the epoch's training, one thread
``eval_seconds``            curve      CPU seconds of the epoch's validation (and its checkpoint write)
``train_wall_seconds``      curve      the same epochs' wall seconds
``eval_wall_seconds``       curve      the same validations' wall seconds
``test_top1``, ``test_loss``  float    after the last epoch, on the dataset's official test split
``test_seconds``            float      CPU seconds of that scoring
``params``                  int        parameters of the network as trained (its task's classes, channels)
``macs``                    int        MACs of one image at the trained size, fvcore's convention
``macs_paper``              int        the same with the attention maps' arithmetic (``convention="paper"``)
``latency_torch_b1_ms``     float      median forward time, torch on the CPU, batch 1 (NaN: not measured)
``latency_torch_b32_ms``    float      the same at batch 32
``latency_ort_b1_ms``       float      onnxruntime's CPU provider, batch 1 (NaN: no ONNX file or no ort)
``latency_ort_b32_ms``      float      the same at batch 32
``onnx_exports``            bool       whether ``torch.onnx`` (dynamo, opset 20) exported the network
``onnx_error``              string     why not, in one line ('' where it did)
==========================  =========  ===========================================================

The ``nas.table`` metadata holds at least ``format`` (:data:`FORMAT`), ``space``, ``dataset``, ``img_size``,
``in_chans``, ``num_classes``, ``images_per_epoch`` (the training images an epoch sees: whole batches),
``val_images``, ``test_images``, ``threads`` and how the seconds were measured; the build adds its
training settings, machine and package versions.

The evaluator
-------------
A trial of architecture ``a`` at ``e`` epochs is answered with row (``a``, seed) at entry ``e - 1`` of its
curves: ``top1``, ``loss``, ``train_loss``. ``e`` is the search's proxy epochs (the space's ``cpu`` profile:
the table's own schedule; ``--proxy-epochs`` chooses fewer), or on a fidelity ladder the rung's images over
the table's ``images_per_epoch``, rounded (at least 1): rung ``r`` answers at its epochs, so the ladder
promotes by the table's curves. A curve's entry ``e`` is the run of ``epochs`` epochs seen at epoch ``e``, as
the ladder's ``--rung-schedule top`` measures a rung mid-schedule (``rung``, a schedule restarted at every
rung, is not in the table and is refused).

Seeds (:attr:`TableConfig.seed`): ``"search"`` (the default) answers every trial of a search with the row of
table seed ``seeds[search seed % len(seeds)]``, as a real search trains every network under its own seed,
so a search sees one training run's noise per network, the noise it would meet; ``"mean"`` averages the
seeds' rows (less noise than any real search sees: an upper bound of what a sampler could do); a number
picks that table seed.

The clock: a trial trains from the epochs it starts at (0, or on a ladder the rung below's) to ``e``, so it
is charged the ``train_seconds`` of those epochs plus one validation's ``eval_seconds`` at ``e`` (a search
validates at the end of a trial only), reported as ``simulated_seconds``; the search charges that instead
of its wall time (:class:`~evaluators.registry.EvaluatorSpec` ``simulated``). Nothing trains and no image is
read.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.core.arch import Arch
from nas.core.atomic import replaced
from nas.core.bounds import shown
from nas.core.userfiles import check_regular, where
from search_spaces import get_space

__all__ = [
    "COLUMNS",
    "CURVES",
    "FORMAT",
    "META_KEY",
    "Table",
    "TableConfig",
    "TableEvaluator",
    "check_table",
    "load_table",
    "write_table",
]

FORMAT = 1  # the file's layout; a reader refuses another
META_KEY = "nas.table"
MAX_TABLE_BYTES = 64 << 20  # the micro table is well under 1 MB; the issue caps a table at 20 MB
CURVES = (
    "val_top1",
    "val_loss",
    "train_loss",
    "train_seconds",
    "eval_seconds",
    "train_wall_seconds",
    "eval_wall_seconds",
)
COLUMNS: dict[str, str] = {  # column -> kind: str, int, float, bool, curve
    "arch_id": "str",
    "arch_index": "int",
    "arch": "str",
    "arch_json": "str",
    "seed": "int",
    "epochs": "int",
    **dict.fromkeys(CURVES, "curve"),
    "test_top1": "float",
    "test_loss": "float",
    "test_seconds": "float",
    "params": "int",
    "macs": "int",
    "macs_paper": "int",
    "latency_torch_b1_ms": "float",
    "latency_torch_b32_ms": "float",
    "latency_ort_b1_ms": "float",
    "latency_ort_b32_ms": "float",
    "onnx_exports": "bool",
    "onnx_error": "str",
}
META_FIELDS = ("format", "space", "dataset", "img_size", "in_chans", "num_classes", "images_per_epoch")
SEED_POLICIES = ("search", "mean")


@dataclass(frozen=True)
class Row:
    """One (architecture, seed) of a table, or the mean of several seeds (``seed`` None)."""

    arch_id: str
    seed: int | None
    curves: dict[str, tuple[float, ...]]
    values: dict[str, Any]

    @property
    def epochs(self) -> int:
        return len(self.curves["val_top1"])


class Table:
    """A loaded table: its rows by (architecture id, seed) and the build's settings (:attr:`meta`)."""

    def __init__(self, path: Path, meta: dict[str, Any], rows: list[Row]) -> None:
        self.path = path
        self.meta = meta
        self._rows = {(row.arch_id, row.seed): row for row in rows}
        self.seeds: tuple[int, ...] = tuple(sorted({row.seed for row in rows if row.seed is not None}))
        self.ids: tuple[str, ...] = tuple(dict.fromkeys(row.arch_id for row in rows))
        self.epochs = min((row.epochs for row in rows), default=0)

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def space(self) -> str:
        return str(self.meta["space"])

    @property
    def images_per_epoch(self) -> int:
        return int(self.meta["images_per_epoch"])

    def rows(self) -> list[Row]:
        return list(self._rows.values())

    def row(self, arch_id: str, seed: int | str) -> Row:
        """The row of ``arch_id`` at table seed ``seed``, or its seeds' mean (``seed="mean"``); a KeyError
        naming what the table lacks."""
        if seed == "mean":
            rows = [self._rows[(arch_id, s)] for s in self.seeds if (arch_id, s) in self._rows]
            if not rows:
                raise KeyError(f"the table {self.path} has no row of {arch_id}")
            return _mean(rows)
        found = self._rows.get((arch_id, int(seed)))
        if found is None:
            raise KeyError(f"the table {self.path} has no row of {arch_id} at seed {seed}")
        return found

    def epochs_of_images(self, images: int) -> int:
        """The epochs ``images`` training images make here (rounded; at least 1)."""
        return max(1, round(images / self.images_per_epoch))


def _mean(rows: Sequence[Row]) -> Row:
    epochs = min(row.epochs for row in rows)
    curves = {
        name: tuple(math.fsum(row.curves[name][e] for row in rows) / len(rows) for e in range(epochs))
        for name in CURVES
    }
    values = dict(rows[0].values)
    for name, kind in COLUMNS.items():
        if kind == "float":
            values[name] = math.fsum(float(row.values[name]) for row in rows) / len(rows)
    return Row(rows[0].arch_id, None, curves, values)


# --- reading ----------------------------------------------------------------------------------------------


def load_table(path: str | Path) -> Table:
    """The table at ``path``; a ValueError of one sentence naming the file where it is not one (missing, not
    a regular file, too large, not Parquet, or without this layout's columns and metadata)."""
    path = Path(path)
    label = where("table", path)
    check_regular(path, "table", MAX_TABLE_BYTES)
    info = path.stat()
    return _load(str(path.resolve()), info.st_mtime_ns, info.st_size, label)


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime_ns: int, size: int, label: str) -> Table:
    # one read per process and version of the file: each trial of a search asks for it
    try:
        import pyarrow.parquet as pq  # heavy: pyarrow, only to read a table
    except ImportError:  # pragma: no cover - pyarrow ships with the project's dependencies
        raise ValueError(f"{label}: cannot be read without pyarrow; pip install pyarrow") from None
    try:
        data = pq.read_table(path)
    except Exception as err:  # pyarrow's errors (ArrowInvalid, OSError, ...) on a file that is not Parquet
        raise ValueError(f"{label}: is not a Parquet table ({_said(err)})") from None
    meta = _meta(data.schema.metadata or {}, label)
    missing = [name for name in COLUMNS if name not in data.column_names]
    if missing:
        raise ValueError(f"{label}: lacks the column(s) {', '.join(missing)} of a table")
    columns = data.to_pydict()
    try:
        space = get_space(meta["space"])
    except ValueError as err:
        raise ValueError(f"{label}: {err}") from None
    rows = [_row(columns, i, label) for i in range(data.num_rows)]
    if not rows:
        raise ValueError(f"{label}: holds no rows")
    for row in rows[:: max(1, len(rows) // 50)]:  # the ids are the space's: a sample is checked exactly
        arch = Arch.from_json(row.values["arch_json"])
        if _space_id(space, arch) != row.arch_id:
            raise ValueError(f"{label}: row {row.arch_id} holds the architecture {arch.key}")
    return Table(Path(path), meta, rows)


def _said(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _meta(raw: dict[bytes, bytes], label: str) -> dict[str, Any]:
    text = raw.get(META_KEY.encode())
    if text is None:
        raise ValueError(f"{label}: is Parquet but no table (no {META_KEY} metadata)")
    try:
        meta = json.loads(text)
    except ValueError:
        raise ValueError(f"{label}: its {META_KEY} metadata is not JSON") from None
    if not isinstance(meta, dict) or any(name not in meta for name in META_FIELDS):
        raise ValueError(f"{label}: its {META_KEY} metadata lacks one of {', '.join(META_FIELDS)}")
    if meta["format"] != FORMAT:
        raise ValueError(f"{label}: is a table of format {shown(meta['format'])}; this reader reads {FORMAT}")
    if not isinstance(meta["images_per_epoch"], int) or meta["images_per_epoch"] < 1:
        raise ValueError(f"{label}: images_per_epoch {shown(meta['images_per_epoch'])} is no whole number")
    return meta


_KINDS: dict[str, Callable[[Any], bool]] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
}


def _row(columns: dict[str, list[Any]], i: int, label: str) -> Row:
    values = {name: columns[name][i] for name in COLUMNS}
    arch_id = values["arch_id"]
    where_ = f"{label}: row {i} ({shown(arch_id)})"
    for name, kind in COLUMNS.items():
        value = values[name]
        if kind == "curve":
            if not isinstance(value, list) or not all(_KINDS["float"](v) for v in value):
                raise ValueError(f"{where_}: {name} is not a list of numbers")
        elif kind == "float" and value is None:
            values[name] = math.nan  # a cost not measured
        elif not _KINDS[kind](value):
            raise ValueError(f"{where_}: {name} is {shown(value)}, not a {kind}")
    epochs = values["epochs"]
    curves = {name: tuple(float(v) for v in values.pop(name)) for name in CURVES}
    if epochs < 1 or any(len(curve) != epochs for curve in curves.values()):
        raise ValueError(f"{where_}: its curves are not {epochs} epochs long")
    seconds = curves["train_seconds"] + curves["eval_seconds"]
    if any(not math.isfinite(s) or s < 0 for s in seconds):
        raise ValueError(f"{where_}: a recorded number of seconds is negative or not finite")
    return Row(arch_id, values["seed"], curves, values)


def _space_id(space: Any, arch: Arch) -> str:
    if not hasattr(space, "arch_id"):
        raise ValueError(f"the {space.name} space names no architecture ids, so it has no table")
    return space.arch_id(arch)


# --- writing (the build) -----------------------------------------------------------------------------------


def write_table(rows: Sequence[dict[str, Any]], meta: dict[str, Any], path: str | Path) -> Path:
    """Write ``rows`` (dicts with every column of :data:`COLUMNS`) and ``meta`` as a table at ``path``
    (zstd-compressed Parquet), atomically; returns the path."""
    import pyarrow as pa  # heavy: pyarrow, only to write a table
    import pyarrow.parquet as pq

    meta = {"format": FORMAT, **meta}
    missing = [name for name in META_FIELDS if name not in meta]
    if missing:
        raise ValueError(f"table metadata lacks {', '.join(missing)}")
    types = {
        "str": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
        "curve": pa.list_(pa.float64()),
    }
    schema = pa.schema([(name, types[kind]) for name, kind in COLUMNS.items()])
    data = pa.Table.from_pylist([{name: row[name] for name in COLUMNS} for row in rows], schema=schema)
    data = data.replace_schema_metadata({META_KEY: json.dumps(meta, sort_keys=True)})
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with replaced(target) as tmp:
        pq.write_table(data, str(tmp), compression="zstd")
    return target


# --- the evaluator -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableConfig:
    """``path``: the table file (``--evaluator table:PATH`` sets it); ``seed``: ``search`` (the search's
    seed picks a table seed), ``mean`` (the seeds averaged) or a table seed's number."""

    path: str = ""
    seed: str = "search"

    def __post_init__(self) -> None:
        if self.seed not in SEED_POLICIES and not str(self.seed).isdecimal():
            raise ValueError(
                f"seed: {shown(self.seed)} is none of {', '.join(SEED_POLICIES)} or a table seed's number"
            )


class TableEvaluator:
    """Answers a trial from a :class:`Table` (the module docstring); ``seed`` is the search's."""

    def __init__(self, table: Table, config: TableConfig, profile: Any, seed: int = 0) -> None:
        self.table = table
        self.config = config
        self.profile = profile
        self.space = get_space(table.space)  # the whole space: a narrowed one names its archs the same
        if config.seed == "mean":
            self.table_seed: int | str = "mean"
        elif config.seed == "search":
            self.table_seed = table.seeds[seed % len(table.seeds)]
        else:
            self.table_seed = int(config.seed)
            if self.table_seed not in table.seeds:
                raise ValueError(
                    f"evaluator-config: seed {self.table_seed} is not among the table's seeds "
                    f"{', '.join(map(str, table.seeds))}"
                )

    def ladder_min_images(self, eta: int, rungs: int) -> int:
        """Rung 0's images where a ladder is not given them: the top rung at the table's last epoch."""
        return math.ceil(self.table.epochs * self.table.images_per_epoch / eta ** (rungs - 1))

    def epochs(self, fidelity: Any = None) -> tuple[int, int]:
        """(from, to): the epochs a trial starts at and trains to (ValueError beyond the table's)."""
        if fidelity is None:
            start, end = 0, self.profile.epochs
        else:
            start = self.table.epochs_of_images(fidelity.from_images) if fidelity.from_images else 0
            end = self.table.epochs_of_images(fidelity.images)
        if end > self.table.epochs:
            raise ValueError(
                f"the table's curves end at {self.table.epochs} epochs; this trial asks for {end}"
            )
        return start, end

    def evaluate(self, arch: Arch, report: Any = None, fidelity: Any = None) -> dict[str, Any]:
        arch_id = _space_id(self.space, arch)
        try:
            row = self.table.row(arch_id, self.table_seed)
        except KeyError as err:
            raise ValueError(err.args[0]) from None
        start, end = self.epochs(fidelity)
        curves = row.curves
        for epoch in range(start + 1, end + 1):
            if report is not None:
                shown_ = {"train_loss": curves["train_loss"][epoch - 1]}
                if epoch == end:
                    shown_.update(top1=curves["val_top1"][epoch - 1], loss=curves["val_loss"][epoch - 1])
                report(epoch, shown_)
        train = math.fsum(curves["train_seconds"][start:end])
        evaluate = curves["eval_seconds"][end - 1]
        return {
            "top1": curves["val_top1"][end - 1],
            "loss": curves["val_loss"][end - 1],
            "train_loss": curves["train_loss"][end - 1],
            "epochs": end,
            "train_seconds": train,
            "eval_seconds": evaluate,
            "simulated_seconds": train + evaluate,
            "table_id": arch_id,
            "table_seed": -1 if row.seed is None else row.seed,
            "params": row.values["params"],
            "macs": row.values["macs"],
            "macs_paper": row.values["macs_paper"],
            **{
                name: row.values[name]
                for name in COLUMNS
                if name.startswith("latency_") and math.isfinite(row.values[name])
            },
        }


def check_table(
    config: TableConfig | None, *, space: Any, profile: Any, ladder: Any = None, **_: Any
) -> None:
    """Refuse in one sentence, before a search writes anything, a table that cannot be read or does not
    answer this search: another space's, a profile's epochs beyond its curves, a ladder whose rungs are."""
    config = config or TableConfig()
    if not config.path:
        raise ValueError("evaluator: the table evaluator needs its file: --evaluator table:PATH")
    table = load_table(config.path)
    label = where("table", config.path)
    if table.space != space.name:
        raise ValueError(
            f"{label}: holds the {table.space} space, not {space.name}; search it with --space {table.space}"
        )
    if ladder is None and profile.epochs > table.epochs:
        raise ValueError(
            f"{label}: its curves end at {table.epochs} epoch(s), so it cannot answer {profile.epochs}; give "
            f"--proxy-epochs {table.epochs} or fewer"
        )
    if ladder is not None:
        top = table.epochs_of_images(ladder.images(ladder.top))
        if top > table.epochs:
            raise ValueError(
                f"{label}: its curves end at {table.epochs} epochs of {table.images_per_epoch} images, but "
                f"the ladder's top rung trains {ladder.images(ladder.top)} images ({top} epochs); give a "
                "smaller --min-fidelity, --eta or --rungs"
            )
        if ladder.schedule != "top":
            raise ValueError(
                f"{label}: holds one schedule per network, so it answers a rung mid-schedule only "
                "(--rung-schedule top), not a schedule restarted at every rung"
            )


def build_table_evaluator(config: TableConfig, *, profile: Any, seed: int = 0, **_: Any) -> TableEvaluator:
    """The registry's builder: the table of ``config.path`` (read once per process) as an evaluator."""
    if not config.path:
        raise ValueError("evaluator: the table evaluator needs its file: --evaluator table:PATH")
    return TableEvaluator(load_table(config.path), config, profile, seed)

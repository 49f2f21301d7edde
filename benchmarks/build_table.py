"""Build the ``micro`` space's tabular benchmark (issue 68): every architecture, trained on each seed, in one
Parquet file that ``nas search --evaluator table:PATH`` answers from (:mod:`evaluators.table`).

What is trained
---------------
All 250 architectures of :class:`search_spaces.micro.MicroSpace` (``--archs`` / ``--limit`` take fewer), each
on every training seed of ``--seeds`` (0, 1), with the project's own full training,
:func:`evaluators.train.train_arch` (``nas train``'s loop: AdamW, cosine with a 1-epoch warmup, crops and
flips, label smoothing 0.1, drop-path 0.1), rather than the proxy trainer: it validates after every epoch (the
learning curve; the proxy, as a search runs it, validates once), scores the official test split at the end
(``test=``, :func:`evaluators.data.load_test`), and resumes a killed run from its epoch checkpoint. Its
``report`` and ``progress`` call-backs give each epoch's training and validation seconds.

- Fashion-MNIST at 32 px, 1 channel, 10 classes; 1,000 validation images held out of the 60,000 training
  images with split seed 0, and the first ``--train-images`` (1,536) of the rest as the training set of every
  epoch; the official 10,000-image test split scored once, after the last epoch;
- ``--epochs`` (9) epochs at batch ``--batch`` (64), learning rate ``--lr`` (2e-3; the rest
  :class:`~evaluators.train.FullTrainConfig`'s defaults), the networks as they are (no shrinking); these
  defaults are the micro space's (``search_spaces.micro.TABLE_*``), whose ``cpu`` profile is this schedule;
- one thread (``--threads``; ``torch.set_num_threads``, OMP_NUM_THREADS), so a row's seconds are those of one
  core; two shards (``--shard 0/2``, ``--shard 1/2``) fill a 2-core machine. Seconds are recorded twice: CPU
  seconds of the process (``time.process_time``: what the table's clock charges, steadier than wall time
  under the machine's other load) and wall seconds.

Per architecture, once: params and MACs of the network as trained (:func:`evaluators.complexity.count`,
fvcore's convention and the paper's), latency on the CPU at batch 1 and 32 with torch
(:func:`evaluators.complexity.latency_ms`, one thread) and with onnxruntime's CPU provider (one thread) on the
ONNX file :func:`results.standalone.write_standalone` exports (dynamo, opset 20), and whether that export
worked (``onnx_error`` says why not).

Sizing (measured 2026-12-07/08 on this machine: 2 vCPUs, one thread per run, beside other work at load
average 3 to 6, which moves one run's CPU seconds by up to ~1.4x between repeats)
-------------------------------------------------------------------------------------------------------
1. First draft, widths 32/64/128, batch 128, 1,024 training images, 5 networks: 3.0 to 6.0 CPU s per epoch,
   1.1 to 1.7 s per 1,000 validation images, 10 to 17 s for the test split: 8 epochs of 2,048 images would
   take ~100 s a row, 14 CPU-hours for 500 rows. Too much: the widths were halved to 16/32/64, 2.2x faster
   on the same 5 networks (1.1 to 3.1 s per epoch of 1,024).
2. The schedule. ``conv-C-C-R``, 2,048 images an epoch: 8 epochs at batch 128 reached 72.2% test top-1 (lr
   2e-3), at batch 64 73.0% (lr 1e-3) and 74.4% (lr 2e-3), 16 epochs at batch 64 and 2e-3 78.1%;
   ``patch-R-L3-C`` 8 epochs: 66.6% (batch 128), 67.4% and 72.4% (batch 64, lr 1e-3 and 2e-3). Batch 64 and
   lr 2e-3 learn most in a short schedule; a schedule twice as long still gains ~4 points, so the table is a
   short schedule's ground truth (as a search's proxy is), its curves flat at their end because the cosine
   rate is. 9 epochs of 1,536 images (216 steps) cost what 7 of 2,048 would, and put a 3-rung ladder of
   eta 3 at exactly 1, 3 and 9 epochs.
3. The final settings, 10 networks drawn at random from the 250 (seed 1), 2 epochs each: training 1.8 to
   6.0 CPU s per epoch of 1,536 images, mean 3.9 (local attention in stage 1, on 16 x 16 maps, costs most);
   validation of 1,000 images 0.4 to 1.5 s, mean 0.9; the test split with the run's final writes 3.3 to
   13.6 s, mean 9.3; building the network 0.2 s.

One row (architecture, seed) = 0.2 + 9 x (3.9 + 0.9) + 9.3 = 53 CPU s; 250 architectures x 2 seeds = 500
rows: 26,700 s = 7.4 CPU-hours. Each architecture's costs (two counts, torch at batch 1 and 32, the ONNX
export, onnxruntime at batch 1 and 32) about 10 s: 250 x 10 s = 0.7 CPU-hours. In all about 8.1
CPU-hours, ~4 hours on the two cores with ``--shard 0/2`` and ``--shard 1/2`` side by side: inside the issue's
10 CPU-hours with ~20% for the machine's load. ``--status`` prints the CPU seconds the finished rows took and
projects the rest from them.

Resuming
--------
Each finished row is written at once to ``<out>/cache/<arch_id>-s<seed>.json``, each architecture's costs to
``<out>/cache/<arch_id>.costs.json``; a run skips what is there, and a training killed mid-run continues from
its last epoch (its checkpoint and seconds under ``runs/build_table/``, deleted when the row is written). The
cache holds the build's settings (``cache/settings.json``): a run with other settings is refused.
``--assemble`` writes ``<out>/micro.parquet`` from the cache (refused while a row is missing, unless
``--partial``).

    nice -n 19 .venv/bin/python benchmarks/build_table.py --shard 0/2 &
    nice -n 19 .venv/bin/python benchmarks/build_table.py --shard 1/2 &
    .venv/bin/python benchmarks/build_table.py --status
    .venv/bin/python benchmarks/build_table.py --assemble

A smoke run (3 architectures, 1 seed, 1 epoch, into a scratch folder):

    .venv/bin/python benchmarks/build_table.py --limit 3 --seeds 0 --epochs 1 --out /tmp/smoke --assemble
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch loads: one thread per build process

import argparse
import contextlib
import json
import math
import platform
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from search_spaces import micro

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "build_table"
WORK = ROOT / "runs" / "build_table"
TABLE_NAME = "micro.parquet"
DATASET = "fashion-mnist"
IMG_SIZE = 32
SPLIT_SEED = 0
VAL_IMAGES = micro.TABLE_VAL_IMAGES
IN_CHANS, NUM_CLASSES = 1, 10


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """What makes a row what it is: a cache built with other settings is not this build's."""
    from evaluators.train import FullTrainConfig  # heavy: torch

    config = FullTrainConfig(epochs=args.epochs, batch_size=args.batch, lr=args.lr)
    return {
        "space": "micro",
        "dataset": DATASET,
        "img_size": IMG_SIZE,
        "in_chans": IN_CHANS,
        "num_classes": NUM_CLASSES,
        "split_seed": SPLIT_SEED,
        "val_images": VAL_IMAGES,
        "train_images": args.train_images,
        "images_per_epoch": (args.train_images // args.batch) * args.batch,  # whole batches only
        "config": {k: v for k, v in config.record().items() if k != "seed"},  # the seed is each row's
        "threads": args.threads,
    }


def _plan(args: argparse.Namespace) -> list[tuple[int, str]]:
    """(index, id) of the architectures this process builds: ``--archs``, else the first ``--limit`` of the
    space's order, of this ``--shard``."""
    from search_spaces.micro import MicroSpace

    space = MicroSpace()
    ids = [space.arch_id(arch) for arch in space.architectures()]
    chosen = list(enumerate(ids))
    if args.archs:
        wanted = args.archs.split(",")
        unknown = sorted(set(wanted) - set(ids))
        if unknown:
            raise SystemExit(f"--archs: not ids of the micro space: {', '.join(unknown)}")
        chosen = [(i, a) for i, a in chosen if a in wanted]
    if args.limit is not None:
        chosen = chosen[: args.limit]
    shard, shards = args.shard
    return [(i, a) for i, a in chosen if i % shards == shard]


def _write_json(path: Path, value: Any) -> None:
    from nas.core.atomic import replaced

    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced(path) as tmp:
        tmp.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")


def _check_cache(cache: Path, settings: dict[str, Any]) -> None:
    path = cache / "settings.json"
    if path.exists():
        held = json.loads(path.read_text())
        if held != settings:
            changed = sorted(k for k in {*held, *settings} if held.get(k) != settings.get(k))
            raise SystemExit(
                f"{cache} holds rows built with other settings ({', '.join(changed)}); use another --out"
            )
    else:
        _write_json(path, settings)


def _machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"host": platform.node(), "cpu": model, "cpus": os.cpu_count(), "platform": platform.platform()}


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in ("torch", "timm", "fvcore", "onnx", "onnxscript", "onnxruntime", "pyarrow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


# --- one row -------------------------------------------------------------------------------------------


class _Clock:
    """Each epoch's CPU and wall seconds of training and validation, from train_arch's call-backs: the last
    batch of an epoch ends its training, its report ends its validation (and the checkpoint written between
    them). An epoch whose start this process did not see (the first, or the first after a resume) is timed
    from its first batch's end and scaled by steps / (steps - 1)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.epochs: dict[str, dict[str, float]] = json.loads(path.read_text()) if path.exists() else {}
        self.reported: tuple[float, float] | None = None  # (cpu, wall) at the last report seen
        self.first: tuple[float, float] | None = None
        self.last: tuple[float, float] | None = None

    def progress(self, status: Any) -> None:
        now = (time.process_time(), time.perf_counter())
        if status.step == 1:
            self.first = now
        self.last = now
        self.steps = status.steps

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        now = (time.process_time(), time.perf_counter())
        assert self.last is not None and self.first is not None
        if self.reported is not None:
            cpu = self.last[0] - self.reported[0]
        else:
            cpu = (self.last[0] - self.first[0]) * self.steps / max(1, self.steps - 1)
        self.epochs[str(epoch)] = {
            "train_seconds": cpu,
            "eval_seconds": now[0] - self.last[0],
            "train_wall_seconds": float(metrics["train_seconds"]),
            "eval_wall_seconds": now[1] - self.last[1],
            "val_top1": float(metrics["top1"]),
            "val_loss": float(metrics["loss"]),
            "train_loss": float(metrics["train_loss"]),
        }
        self.reported = now
        _write_json(self.path, self.epochs)


def run_row(index: int, arch_id: str, seed: int, args: argparse.Namespace, data: Any, test: Any) -> dict:
    """Train one (architecture, seed) to the end and return its row (every curve, the test score)."""
    from evaluators.train import FullTrainConfig, train_arch  # heavy: torch
    from search_spaces.base import ProxyProfile
    from search_spaces.micro import MicroSpace

    arch = MicroSpace().from_id(arch_id)
    work = args.work / f"{arch_id}-s{seed}"
    clock = _Clock(work / "seconds.json")
    config = FullTrainConfig(epochs=args.epochs, batch_size=args.batch, lr=args.lr, seed=seed)
    profile = ProxyProfile("table", img_size=IMG_SIZE)  # the network as it is
    started = time.process_time(), time.perf_counter(), os.getloadavg()[0]
    out = train_arch(
        arch, profile, data, work / "run", config=config, resume=(work / "run" / "checkpoint.pt").exists(),
        device="cpu", report=clock.report, progress=clock.progress, test=test,
    )  # fmt: skip
    after = (time.process_time(), time.perf_counter())
    last = clock.reported or started[:2]
    epochs = [clock.epochs[str(e)] for e in range(1, args.epochs + 1)]
    row = {
        "arch_id": arch_id,
        "arch_index": index,
        "arch": arch.key,
        "arch_json": arch.to_json(),
        "seed": seed,
        "epochs": args.epochs,
        **{name: [e[name] for e in epochs] for name in epochs[0]},
        "test_top1": float(out["test_top1"]),
        "test_loss": float(out["test_loss"]),
        "test_seconds": after[0] - last[0],
        "test_wall_seconds": after[1] - last[1],
        "trained_params": int(out["params"]),
        "load_average": [started[2], os.getloadavg()[0]],
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
    }
    shutil.rmtree(work, ignore_errors=True)
    return row


# --- one architecture's costs ----------------------------------------------------------------------------


def _ort_latency_ms(path: Path, batch: int, warmup: int, repeats: int) -> float:
    import numpy as np
    import onnxruntime as ort  # heavy: optional (the onnx extra)

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((batch, IN_CHANS, IMG_SIZE, IMG_SIZE)).astype(np.float32)
    times = []
    for i in range(warmup + repeats):
        start = time.perf_counter()
        session.run(None, {"image": x})
        if i >= warmup:
            times.append(1000 * (time.perf_counter() - start))
    return statistics.median(times)


def run_costs(arch_id: str) -> dict[str, Any]:
    """Params, MACs (both conventions), latency (torch and onnxruntime, batch 1 and 32) and the ONNX export
    of ``arch_id``'s network as trained."""
    import torch  # heavy

    from evaluators.complexity import count, latency_ms
    from nas import build_model
    from results.standalone import write_standalone
    from search_spaces.micro import MicroSpace

    arch = MicroSpace().from_id(arch_id)
    task = {"img_size": IMG_SIZE, "in_chans": IN_CHANS, "num_classes": NUM_CLASSES}
    fvcore, paper = count(arch, **task), count(arch, **task, convention="paper")
    torch.manual_seed(0)
    model = build_model(arch, num_classes=NUM_CLASSES, in_chans=IN_CHANS, img_size=IMG_SIZE).eval()
    start = time.process_time()
    row: dict[str, Any] = {
        "params": fvcore.params,
        "macs": fvcore.macs,
        "macs_paper": paper.macs,
        "latency_torch_b1_ms": latency_ms(model, IMG_SIZE, IN_CHANS, "cpu", warmup=10, repeats=50),
        "latency_torch_b32_ms": latency_ms(model, IMG_SIZE, IN_CHANS, "cpu", warmup=3, repeats=20, batch=32),
        "latency_ort_b1_ms": None,
        "latency_ort_b32_ms": None,
        "onnx_exports": False,
        "onnx_error": "",
    }
    with tempfile.TemporaryDirectory() as folder:
        try:
            (path,) = write_standalone(model, folder, "onnx")
        except Exception as err:  # the exporter's failure is a result: the row says why, in one line
            row["onnx_error"] = " ".join(str(err).split())[:300] or type(err).__name__
        else:
            row["onnx_exports"] = True
            try:
                row["latency_ort_b1_ms"] = _ort_latency_ms(path, 1, 10, 50)
                row["latency_ort_b32_ms"] = _ort_latency_ms(path, 32, 3, 20)
            except ImportError:
                row["onnx_error"] = ""  # exported; onnxruntime is not installed to time it
    row["cost_seconds"] = time.process_time() - start
    return row


# --- the build, its status, the table ----------------------------------------------------------------------


def _data(args: argparse.Namespace) -> tuple[Any, Any]:
    """The training split and the test split, loaded once before the first training (which runs on
    ``--threads`` threads from here on); their description goes into the cache."""
    import torch  # heavy

    from evaluators.data import load_dataset, load_test

    torch.set_num_threads(args.threads)
    data = load_dataset(
        DATASET, img_size=IMG_SIZE, val_size=VAL_IMAGES, seed=SPLIT_SEED, train_samples=args.train_images
    )
    test = load_test(DATASET, img_size=IMG_SIZE)
    record = {**data.describe(), **data.split_record(), "test": test.describe()}
    _write_json(args.out / "cache" / "data.json", record)
    return data, test


def build(args: argparse.Namespace) -> None:
    settings = _settings(args)
    cache = args.out / "cache"
    _check_cache(cache, settings)
    plan = _plan(args)
    loaded: tuple[Any, Any] | None = None
    for index, arch_id in plan:
        costs = cache / f"{arch_id}.costs.json"
        if not costs.exists():
            _write_json(costs, run_costs(arch_id))
        for seed in args.seeds:
            path = cache / f"{arch_id}-s{seed}.json"
            if path.exists():
                continue
            if loaded is None:
                loaded = _data(args)
            row = run_row(index, arch_id, seed, args, *loaded)
            _write_json(path, row)
            took = sum(row["train_seconds"]) + sum(row["eval_seconds"]) + row["test_seconds"]
            print(
                f"{arch_id} seed {seed}: val top-1 {row['val_top1'][-1]:.1f}, test {row['test_top1']:.2f}, "
                f"{took:.0f} CPU s",
                flush=True,
            )


def _rows(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[str]]:
    """The finished rows of the whole plan (every shard), with their architecture's costs; and what is
    missing."""
    cache = args.out / "cache"
    plan_args = argparse.Namespace(**{**vars(args), "shard": (0, 1)})
    rows, missing = [], []
    for _, arch_id in _plan(plan_args):
        costs_path = cache / f"{arch_id}.costs.json"
        costs = json.loads(costs_path.read_text()) if costs_path.exists() else None
        for seed in args.seeds:
            path = cache / f"{arch_id}-s{seed}.json"
            if not path.exists() or costs is None:
                missing.append(f"{arch_id}-s{seed}")
                continue
            rows.append({**json.loads(path.read_text()), **costs})
    return rows, missing


def status(args: argparse.Namespace) -> None:
    rows, missing = _rows(args)
    total = len(rows) + len(missing)
    print(f"{len(rows)} of {total} rows done ({len(missing)} to go) in {args.out / 'cache'}")
    if rows:
        cpu = [sum(r["train_seconds"]) + sum(r["eval_seconds"]) + r["test_seconds"] for r in rows]
        mean = statistics.fmean(cpu)
        print(
            f"a row took {mean:.0f} CPU s on average ({min(cpu):.0f} to {max(cpu):.0f}); the rows done "
            f"{sum(cpu) / 3600:.2f} CPU-hours, those left about {mean * len(missing) / 3600:.2f}"
        )


def assemble(args: argparse.Namespace) -> Path:
    from evaluators.table import COLUMNS, load_table, write_table

    rows, missing = _rows(args)
    if missing and not args.partial:
        raise SystemExit(
            f"{len(missing)} rows are missing (e.g. {missing[0]}); build them, or pass --partial"
        )
    if not rows:
        raise SystemExit("no row is built yet")
    cache = args.out / "cache"
    settings = json.loads((cache / "settings.json").read_text())
    data = json.loads((cache / "data.json").read_text()) if (cache / "data.json").exists() else {}
    for row in rows:
        for name, kind in COLUMNS.items():
            if kind == "float" and row.get(name) is None:
                row[name] = math.nan
    meta = {
        **settings,
        "test_images": data.get("test", {}).get("test"),
        "data": data,
        "seeds": sorted({r["seed"] for r in rows}),
        "rows": len(rows),
        "complete": not missing,
        "seconds": "train_seconds / eval_seconds / test_seconds: CPU seconds of the process "
        "(time.process_time), one thread; *_wall_seconds: wall seconds",
        "machine": _machine(),
        "versions": _versions(),
        "assembled": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    path = write_table(rows, meta, args.table or args.out / TABLE_NAME)
    table = load_table(path)  # it reads back, whole
    print(f"{path}: {len(table)} rows, {len(table.ids)} architectures, seeds {table.seeds}, "
          f"{path.stat().st_size:,} bytes")  # fmt: skip
    return path


def _shard(text: str) -> tuple[int, int]:
    i, _, n = text.partition("/")
    if not (i.isdigit() and n.isdigit() and 0 <= int(i) < int(n)):
        raise argparse.ArgumentTypeError(f"{text!r} is not I/N with 0 <= I < N")
    return int(i), int(n)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--work", type=Path, default=WORK, help="checkpoints of the rows under way")
    parser.add_argument(
        "--table", type=Path, default=None, help=f"the table file (default <out>/{TABLE_NAME})"
    )
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1])
    parser.add_argument("--epochs", type=int, default=micro.TABLE_EPOCHS)
    parser.add_argument("--train-images", type=int, default=micro.TABLE_TRAIN_IMAGES)
    parser.add_argument("--batch", type=int, default=micro.TABLE_BATCH)
    parser.add_argument("--lr", type=float, default=micro.TABLE_LR)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--shard", type=_shard, default=(0, 1), help="I/N: the architectures i with i %% N == I"
    )
    parser.add_argument("--archs", default="", help="comma-separated ids (default: the whole space)")
    parser.add_argument("--limit", type=int, default=None, help="the first N architectures only")
    parser.add_argument("--status", action="store_true", help="say what is done, train nothing")
    parser.add_argument(
        "--assemble", action="store_true", help="write the table from the cache (after a build)"
    )
    parser.add_argument("--partial", action="store_true", help="with --assemble: the rows there are")
    parser.add_argument("--no-build", action="store_true", help="with --assemble: do not train first")
    args = parser.parse_args(argv)
    if args.status:
        status(args)
        return
    if not args.no_build:
        build(args)
    if args.assemble:
        assemble(args)


if __name__ == "__main__":
    main()

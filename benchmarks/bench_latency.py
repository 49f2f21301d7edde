"""Predicted against measured latency: how well the per-device part table predicts whole networks.

What: for ``--archs`` (30) seeded architectures per space (``coatnet``, ``sasa``;
``space.sample_random(seed)`` for seeds 0..N-1, full size) at ``--img-size`` (224) px and each ``--batches``
size (1 and 8), on the CPU and on CUDA when present (``--devices``):

- ``predicted``: :meth:`evaluators.latency.LatencyTable.predict` from a table started cold in a temporary
  root, one per (device, batch, space), with the table's default timing, growing arch by arch as a search
  grows it; its build time (calibration plus every distinct part of the N architectures) is reported. Each
  arch's new parts are timed right before its whole network, so that a change in the machine's load between
  the two is not mistaken for an error of the method;
- ``measured``: :func:`evaluators.latency.measured_latency_ms`, the whole network built and timed in both
  memory formats, the faster kept (the rule the prediction follows), with adaptive repeats: one warm-up pass,
  then timed passes until ``--seconds`` (1 s) of timing per format, at least 3;
- ``macs`` from :func:`evaluators.complexity.count` at the same size (one multiply-add = 1).

Reported per (device, batch, space): the median and the worst relative error ``|pred - meas| / meas``, how
often the predicted format is the measured faster one, the cold build time, and Spearman's rho between the
predicted latency and the MACs (:func:`evaluators.ranking.spearman`): well below 1 means latency orders
networks differently from MACs, so it is an objective of its own. Targets on the CPU: median error <= 10%,
worst <= 25%; the table says whether each row meets them (CUDA rows are reported, not judged).

Run from the repository root, on a quiet machine (errors are relative to measurements that another process
can slow down)::

    .venv/bin/python benchmarks/bench_latency.py [--archs 30] [--batches 1 8] [--spaces coatnet sasa]
        [--threads 2] [--devices cpu cuda] [--out benchmarks/results/bench_latency]

It pins ``torch.set_num_threads(--threads)`` (2 by default) for the tables and the measurements alike and
says so. Each (device, batch, space) row records when it was measured and the load averages before and after
(``os.getloadavg``): measure on a quiet machine, under the shared bench lock where there is one
(``flock /work/bench.lock nice -n -10 ...``). A run replaces the rows it measures in an existing
``bench_latency.json`` of the same per-row settings and keeps the others, so the study can be measured in
pieces (``--spaces coatnet --batches 1``) that each fit a quiet spell. The default run takes about 20-25
minutes on 2 quiet CPU cores, more than half of it the batch-8 coatnet networks (17 G MACs per image on
average, up to 50 G); a smoke run (``--archs 3 --batches 1``) about a minute. It prints a table and writes
``bench_latency.json`` (settings, per-architecture rows, per-row summary) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluators.complexity import count  # noqa: E402
from evaluators.latency import LatencyEstimate, LatencyTable, device_name, whole_network_ms  # noqa: E402
from evaluators.ranking import spearman  # noqa: E402
from nas.core.arch import Arch  # noqa: E402
from search_spaces import get_space  # noqa: E402

TARGET_MEDIAN, TARGET_WORST = 0.10, 0.25  # relative error, on the CPU
MEASURE = {"warmup": 1, "repeats": 3}  # and --seconds of timing per memory format


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", type=int, default=30, help="seeded architectures per space (default 30)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8], help="batch sizes (default 1 8)")
    parser.add_argument("--spaces", nargs="+", default=["coatnet", "sasa"])
    parser.add_argument("--img-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument(
        "--devices", nargs="+", default=None, help="default: cpu, and cuda when present (e.g. cpu cuda:0)"
    )
    parser.add_argument(
        "--seconds", type=float, default=1.0, help="timing per format of a measured network (default 1)"
    )
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bench_latency"))
    args = parser.parse_args(argv)
    for device in args.devices or []:
        try:
            device_name(device)  # checks it: a present CPU or CUDA device
        except ValueError as err:
            parser.error(f"--devices: {str(err).removeprefix('device: ')}")
    return args


def _row(seed: int, arch: Arch, estimate: LatencyEstimate, measured: dict[str, float], img_size: int) -> dict:
    """One architecture's result; ``measured`` holds both formats, the faster is the measurement."""
    fastest = min(measured, key=measured.__getitem__)
    return {
        "seed": seed,
        "arch": arch.key,
        "macs": count(arch, img_size).macs,
        "predicted_ms": estimate.ms,
        "predicted_format": estimate.memory_format,
        "predicted_by_format": dict(estimate.by_format),
        "overhead_ms": estimate.overhead_ms,
        "measured_ms": measured[fastest],
        "measured_format": fastest,
        "measured_by_format": measured,
        "error": abs(estimate.ms - measured[fastest]) / measured[fastest],
    }


def study(space_name: str, device: str, batch: int, args: argparse.Namespace) -> dict[str, Any]:
    """One row: a cold table's predictions for the space's seeded archs against measured whole networks."""
    space = get_space(space_name)
    archs = [space.sample_random(seed) for seed in range(args.archs)]
    rows, build_s = [], 0.0
    load_before, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory() as root:
        table = LatencyTable(device, batch=batch, root=root, threads=args.threads)
        for seed, arch in enumerate(archs):
            # the table grows arch by arch, as in a search; each arch's parts are timed right before its
            # whole network, so a change in the machine's load between the two does not pass for an error
            start = time.perf_counter()
            estimate = table.estimate(arch, args.img_size)
            build_s += time.perf_counter() - start
            measured = whole_network_ms(
                arch, args.img_size, batch, device, threads=args.threads, seconds=args.seconds, **MEASURE
            )
            rows.append(_row(seed, arch, estimate, measured, args.img_size))
            print(
                f"  {space_name} b{batch} seed {seed:>2}: predicted {estimate.ms:9.2f} ms, measured "
                f"{rows[-1]['measured_ms']:9.2f} ms ({rows[-1]['error']:6.1%})  {arch.key}",
                flush=True,
            )
    errors = [r["error"] for r in rows]
    judged = torch.device(device).type == "cpu"
    median, worst = statistics.median(errors), max(errors)
    return {
        "device": device,
        "device_name": device_name(device),
        "device_id": table.device_id,
        "batch": batch,
        "space": space_name,
        "archs": len(rows),
        "median_error": median,
        "worst_error": worst,
        "format_agreement": sum(r["predicted_format"] == r["measured_format"] for r in rows) / len(rows),
        "table_build_s": build_s,
        "parts_measured": table.measurements,
        "spearman_latency_macs": spearman([r["predicted_ms"] for r in rows], [r["macs"] for r in rows]),
        "meets_target": (median <= TARGET_MEDIAN and worst <= TARGET_WORST) if judged else None,
        "measured_at": started,
        "load": {"before": load_before, "after": os.getloadavg()},  # 1, 5 and 15 min load averages
        "rows": rows,
    }


def _row_id(summary: dict[str, Any]) -> tuple[str, int, str]:
    return summary["device"], summary["batch"], summary["space"]


def _earlier_summaries(path: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The rows of an earlier run in ``path`` measured with the same per-row settings (archs, image size,
    threads, seconds), so that a run of some rows (``--spaces coatnet --batches 1``) replaces just those."""
    try:
        earlier = json.loads(path.read_text())
    except FileNotFoundError:
        return []
    same = ("archs", "img_size", "threads", "seconds")
    if any(earlier.get("settings", {}).get(k) != getattr(args, k) for k in same):
        return []
    return list(earlier.get("summaries", []))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    devices = args.devices or ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]
    print(
        f"torch {torch.__version__}, torch.set_num_threads({args.threads}), "
        f"{args.archs} archs per space at {args.img_size} px",
        flush=True,
    )
    start = time.perf_counter()
    summaries = [
        study(space, device, batch, args)
        for device in devices
        for batch in args.batches
        for space in args.spaces
    ]
    out = Path(args.out)
    measured = {_row_id(s) for s in summaries}
    kept = [s for s in _earlier_summaries(out / "bench_latency.json", args) if _row_id(s) not in measured]
    every = sorted(kept + summaries, key=_row_id)
    result = {
        "what": "predicted (part table) against measured (whole network) latency of seeded architectures",
        "method": (
            "cold LatencyTable per (device, batch, space), default timing; measured: whole network in both "
            f"memory formats, the faster kept, {MEASURE['warmup']} warm-up, at least {MEASURE['repeats']} "
            f"timed passes and {args.seconds} s per format, median; error |pred - meas| / meas"
        ),
        "targets": {"median_error": TARGET_MEDIAN, "worst_error": TARGET_WORST, "judged_on": "cpu"},
        "settings": {
            "archs": args.archs,
            "batches": sorted({s["batch"] for s in every}),
            "spaces": list(dict.fromkeys(s["space"] for s in every)),
            "img_size": args.img_size,
            "threads": args.threads,
            "devices": list(dict.fromkeys(s["device"] for s in every)),
            "seconds": args.seconds,
        },
        "wall_s": time.perf_counter() - start,  # of the last run (the rows it measured)
        "summaries": every,
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_latency.json").write_text(json.dumps(result, indent=1) + "\n")

    print(
        f"\n{'device':<6} {'batch':>5} {'space':<8} {'archs':>5} {'median':>7} {'worst':>7} {'format':>7} "
        f"{'build s':>8} {'rho(lat,MACs)':>13}  target"
    )
    for s in result["summaries"]:
        ok = {True: "met", False: "NOT met", None: "-"}[s["meets_target"]]
        print(
            f"{torch.device(s['device']).type:<6} {s['batch']:>5} {s['space']:<8} {s['archs']:>5} "
            f"{s['median_error']:>7.1%} {s['worst_error']:>7.1%} {s['format_agreement']:>7.0%} "
            f"{s['table_build_s']:>8.1f} {s['spearman_latency_macs']:>13.3f}  {ok}"
        )
    print(
        f"targets (cpu): median <= {TARGET_MEDIAN:.0%}, worst <= {TARGET_WORST:.0%}; format: share of archs "
        f"whose predicted format is the measured faster one; {result['wall_s'] / 60:.1f} min"
    )
    print(f"wrote {out / 'bench_latency.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

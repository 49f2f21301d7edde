"""Pool several ``bench_fidelity.py`` results (same ladder, other seeds or other sessions) into one figure.

A claim about the ladder rests on several seeds, and seeds are run in batches (three at a time, often in
different sessions). This reads the ``bench_fidelity.json`` of each folder given, refuses to pool results
whose ladder or budget differ (pooling two ladders would answer no question), and prints per seed and
pooled: the device time the ladder needed to reach single fidelity's final hypervolume over single's own
(``never`` where it did not), how many seeds meet the target, and both methods' final judged hypervolume
(mean +- population std over the seeds, as ``bench_fidelity.py`` reports it). A seed run in two batches
(e.g. on two code versions) counts twice, labelled by its folder.

    .venv/bin/python benchmarks/pool_fidelity.py \\
        benchmarks/results/bench_fidelity/bench_fidelity_paired_10_r0_v500_s789 \\
        benchmarks/results/bench_fidelity/bench_fidelity_paired_10_r0_v500_s012_today

``--out FILE`` also writes the pooled figures as JSON. Trains nothing; reads only the JSON files.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

TARGET = 0.5  # the ladder reaches single fidelity's final front in <= half its time (bench_fidelity.py too)
# The settings that make two results one experiment: the ladder, the promotion rule, the budget, what
# single fidelity trains and how the proxies validate. (Seeds, threads, pairing and folders may differ.)
SAME = (
    "budget", "eta", "rungs", "min_fidelity", "rung_schedule", "rung_val_images", "promotion", "single",
    "bn_recalibration",
)  # fmt: skip
# what results written before the key ran (bn_recalibration: the proxy's default then, and now)
DEFAULTS = {"promotion": "asha", "single": "proxy", "bn_recalibration": 0}
PAIR_KEYS = {"seed", "ratio_to_single_time", "ladder_final_hv", "single_final_hv"}


def _experiment(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings in ``SAME``, a key that a result predates (or left unset) read as its default."""
    return {key: DEFAULTS.get(key) if settings.get(key) is None else settings[key] for key in SAME}


def load(folder: Path) -> dict[str, Any]:
    """One folder's ``bench_fidelity.json``, or a one-sentence ``ValueError``."""
    path = folder / "bench_fidelity.json" if folder.is_dir() else folder
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} cannot be read as JSON ({err})") from None
    if not (
        isinstance(document, dict)
        and isinstance(document.get("settings"), dict)
        and isinstance(document.get("pairs"), list)
        and all(isinstance(pair, dict) and pair.keys() >= PAIR_KEYS for pair in document["pairs"])
    ):
        raise ValueError(
            f"{path} is not a bench_fidelity.py result (no settings, or pairs without their figures)"
        )
    return document


def pool(documents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per-seed rows and pooled figures over ``{label: bench_fidelity.json document}``."""
    experiments = {label: _experiment(doc["settings"]) for label, doc in documents.items()}
    first_label, first = next(iter(experiments.items()))
    for label, experiment in experiments.items():
        differ = {k: (first[k], experiment[k]) for k in SAME if experiment[k] != first[k]}
        if differ:
            detail = ", ".join(f"{k} {a} against {b}" for k, (a, b) in differ.items())
            raise ValueError(f"{label} ran another experiment than {first_label} ({detail}): not pooled")
    rows = [
        {
            "label": label,
            "seed": pair["seed"],
            "ratio": math.inf if pair["ratio_to_single_time"] is None else pair["ratio_to_single_time"],
            "ladder_final_hv": pair["ladder_final_hv"],
            "single_final_hv": pair["single_final_hv"],
        }
        for label, doc in documents.items()
        for pair in doc["pairs"]
    ]
    ratios = [row["ratio"] for row in rows]
    ladder = [row["ladder_final_hv"] for row in rows]
    single = [row["single_final_hv"] for row in rows]
    return {
        "experiment": first,
        "rows": rows,
        "seeds": len(rows),
        "ratio_median": statistics.median(ratios),
        "meet_target": sum(r <= TARGET for r in ratios),
        "reached": sum(math.isfinite(r) for r in ratios),
        "ladder_final_hv_mean": statistics.fmean(ladder),
        "ladder_final_hv_std": statistics.pstdev(ladder),
        "single_final_hv_mean": statistics.fmean(single),
        "single_final_hv_std": statistics.pstdev(single),
        "ladder_front_higher": sum(a > b for a, b in zip(ladder, single, strict=True)),
        "target": TARGET,
    }


def _finite_or_none(value: float) -> float | None:
    """JSON has no infinity: a seed that never reached single fidelity's front is written as null."""
    return value if math.isfinite(value) else None


def _ratio(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "never"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", type=Path, nargs="+", help="bench_fidelity.py --out folders or JSON files")
    parser.add_argument("--out", type=Path, help="also write the pooled figures here (JSON)")
    args = parser.parse_args(argv)
    try:
        documents = {str(folder): load(folder) for folder in args.folders}
        pooled = pool(documents)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{'seed':>4} {'ratio':>6} {'ladder HV':>10} {'single HV':>10}  from")
    for row in pooled["rows"]:
        print(f"{row['seed']:>4} {_ratio(row['ratio']):>6} {row['ladder_final_hv']:>10.3f} "
              f"{row['single_final_hv']:>10.3f}  {row['label']}")  # fmt: skip
    n = pooled["seeds"]
    print(
        f"{n} seeds: the ladder's time to single fidelity's final front over single's own, median "
        f"{_ratio(pooled['ratio_median'])} (target <= {TARGET}; {pooled['meet_target']} of {n} meet it, "
        f"reached on {pooled['reached']}); final judged HV ladder {pooled['ladder_final_hv_mean']:.3f} +- "
        f"{pooled['ladder_final_hv_std']:.3f}, single {pooled['single_final_hv_mean']:.3f} +- "
        f"{pooled['single_final_hv_std']:.3f} (the ladder's higher on {pooled['ladder_front_higher']} of {n})"
    )
    if args.out is not None:
        rows = [{**row, "ratio": _finite_or_none(row["ratio"])} for row in pooled["rows"]]
        document = {**pooled, "ratio_median": _finite_or_none(pooled["ratio_median"]), "rows": rows}
        args.out.write_text(json.dumps(document, indent=1, allow_nan=False))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

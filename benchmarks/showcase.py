"""The showcase under the retrain protocol: do searched networks beat the papers' at no more cost?

The rules below were fixed, and committed, before any network of this showcase was retrained; the JSON
repeats them. Per space (``--spaces``, ``coatnet`` by default; ``sasa`` where it fits 6 CPU-hours):

1. **Searches.** ``--searches`` independent searches (search seeds 0, 1, 2), the same budget each:
   ``nas search --space SPACE --evaluator proxy --profile cpu --budget 60trials --seed S`` (the space's
   baselines enqueued first, as ``nas search`` does), studies ``showcase-<space>-s<S>`` under ``--runs-dir``.
   A finished study's ``manifest.json`` and ``trials.csv`` are copied to ``<out>/studies/<study>/`` (what
   the retraining plans from), so a later session on another machine continues without the search.
2. **The found network of each search:** the completed, feasible trial that is not a baseline with the best
   proxy top-1 among those that cost no more than the space's reference baseline (:data:`REFERENCE`:
   CoAtNet-0, SASA's ResNet-26 full-attention) at both scales: MACs and params at 224 px (3 channels, 1000
   classes, as the search counts them) and of the cpu profile's network at 32 px (1 channel, 10 classes, as
   it is trained); ties: fewer MACs, then the earlier trial. Written once to ``<out>/picks.json``.
3. **Retraining** (:mod:`results.retrain`, the three found networks in one plan, :func:`combine_plans`):
   each against every baseline of the space it does not exceed at the search's scale (the rows say whether
   that also holds at the scale trained), and against ``--controls`` (1) random architecture(s) drawn under
   its cost at both scales (3 random controls in all); training seeds 0, 1, 2; ``nas train``'s default
   schedule (AdamW, cosine, crops and flips, label smoothing 0.1, batch 64) for E epochs (rule 4) of the
   54,000 training images, the cpu profile's networks; scored once, at the end, on Fashion-MNIST's official
   10,000-image test split, which no search opens. Paired differences over the seeds, bootstrap 95%
   intervals, and Holm's correction across every comparison of the space.
4. **Training long enough:** the plateau check (the first found network and the first baseline trained again
   for twice the epochs on seed 0; reached where each one's test top-1 moves by less than 0.3 points) runs
   *first*, at each E of ``--epochs`` in turn (8, then 16): E is the first at which it is reached, else the
   last, and then the JSON says the plateau was not reached. Only then is the rest trained, at that E.
5. **Cut for the CPU:** a found network is compared only with the eligible baselines of at most
   ``--max-cost-ratio`` (2.5) times its MACs at 224 px (``nas retrain --max-cost-ratio``); for coatnet this
   leaves out CoAtNet-2, -3 and -4 (15.6 to 60.5 GMACs against at most CoAtNet-0's 4.17). The JSON lists
   every baseline left out with the CPU-hours its retraining would have taken here (:func:`estimate_hours`,
   from timed steps on this machine); ``--max-cost-ratio 0`` leaves nothing out.

Everything is resumable: each search resumes, each training is a ``nas train`` run folder under
``<out>/retrain/`` (checkpointed every epoch; only its small files are committed, ``*.pt`` is ignored), and a
rerun skips what has finished. Run from the repository root, niced, for as long as there is time::

    nice -n 19 .venv/bin/python benchmarks/showcase.py [--spaces coatnet] [--epochs 8,16]
    .venv/bin/python benchmarks/showcase.py --status

It writes ``<out>/<space>/showcase.json`` (the rules, the picks, what was cut, the machine, the threads and
load, the comparisons and the plateau check), and the retraining's own page and tables
(``retrain.html``, ``members.csv``, ``comparisons.csv``, ``runs.csv``) in ``<out>/<space>/retrain/``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
import torch  # noqa: E402

from evaluators.complexity import count  # noqa: E402
from evaluators.train import FullTrainConfig  # noqa: E402
from nas.core.arch import Arch  # noqa: E402
from nas.core.model import build_model  # noqa: E402
from nas.study.trials_table import feasible_rows  # noqa: E402
from results.retrain import (  # noqa: E402
    RetrainPlan,
    combine_plans,
    finished_runs,
    plan_retrain,
    run_retrain,
    summarize,
)
from results.retrain_page import comparisons_table, protocol_lines, write_retraining  # noqa: E402
from search_spaces import get_space  # noqa: E402

REFERENCE = {"coatnet": "CoAtNet-0", "sasa": "ResNet-26 full-attention"}
BUDGET = "60trials"
PROFILE = "cpu"
DATASET = "fashion-mnist"
TRAIN_IMAGES = 54_000  # Fashion-MNIST's training set less the 10% held out
STUDY_FILES = ("manifest.json", "trials.csv")


def _nas(*args: str) -> list[str]:
    return [sys.executable, "-m", "nas", *args]


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)


# --- 1. the searches -----------------------------------------------------------------------------------


def search(space: str, seed: int, runs_dir: Path, out: Path) -> Path:
    """The study's committed copy, ``<out>/studies/<study>/``, after running (or resuming) its search."""
    study = f"showcase-{space}-s{seed}"
    copy = out / "studies" / study
    if all((copy / name).is_file() for name in STUDY_FILES):
        return copy
    run_dir = runs_dir / study
    resume = ["--resume"] if (run_dir / "manifest.json").exists() else []
    command = _nas(
        "search", "--space", space, "--evaluator", "proxy", "--profile", PROFILE, "--budget", BUDGET,
        "--seed", str(seed), "--study", study, "--runs-dir", str(runs_dir), *resume,
    )  # fmt: skip
    print(f"search: {' '.join(command[3:])}", flush=True)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
    if code != 0:
        raise SystemExit(f"nas search {study} exited with {code}; rerun this script to resume it")
    frame = pd.read_csv(run_dir / "trials.csv")
    ended = int(frame["state"].isin(["COMPLETE", "FAIL", "INFEASIBLE", "REPEAT", "PRUNED"]).sum())
    if ended < int(BUDGET.removesuffix("trials")):
        raise SystemExit(f"{study} ended {ended} trials of {BUDGET}; rerun this script to resume it")
    copy.mkdir(parents=True, exist_ok=True)
    for name in STUDY_FILES:
        shutil.copy2(run_dir / name, copy / name)
    return copy


# --- 2. the pick ---------------------------------------------------------------------------------------


def costs(space: str, arch: Arch) -> dict[str, float]:
    """MACs and params at the search's scale and at the scale trained (the cpu profile, Fashion-MNIST)."""
    profile = get_space(space).profile(PROFILE)
    searched = count(arch, img_size=224, in_chans=3, num_classes=1000)
    trained = count(profile.apply(arch), img_size=profile.img_size, in_chans=1, num_classes=10)
    return {
        "macs": searched.macs,
        "params": searched.params,
        "macs_trained": trained.macs,
        "params_trained": trained.params,
    }


def pick(space: str, study: Path) -> dict[str, Any]:
    """The found network of a search, by rule 2 of the module docstring."""
    frame = pd.read_csv(study / "trials.csv")
    ok = (frame["state"] == "COMPLETE") & pd.Series(feasible_rows(frame), index=frame.index)
    searched = frame[ok & frame["baseline"].isna()]
    limit = costs(space, get_space(space).baselines()[REFERENCE[space]].arch)
    best = None
    for row in searched.itertuples():
        arch = Arch.from_json(str(row.arch_json))
        cost = costs(space, arch)
        if all(cost[k] <= limit[k] for k in limit):
            rank = (-float(row.top1), cost["macs"], int(row.number))
            if best is None or rank < best[0]:
                best = (rank, int(row.number), arch.key, float(row.top1), cost)
    if best is None:
        raise SystemExit(
            f"{study.name}: no searched trial costs no more than {REFERENCE[space]} at both scales"
        )
    _, number, key, top1, cost = best
    return {"study": study.name, "trial": number, "arch": key, "proxy_top1": top1, "costs": cost}


def picks(space: str, studies: list[Path], out: Path) -> list[dict[str, Any]]:
    """The picks, written once: a rerun checks that the rule still picks the same trials."""
    path = out / "picks.json"
    now = [pick(space, s) for s in studies]
    if path.exists():
        recorded = json.loads(path.read_text())["picks"]
        if [(p["study"], p["trial"]) for p in recorded] != [(p["study"], p["trial"]) for p in now]:
            raise SystemExit(f"{path} records other picks than the rule gives now; remove it only on purpose")
        return recorded
    _write_json(path, {"rule": __doc__.split("2. ")[1].split("3. ")[0].strip(), "picks": now})
    return now


# --- 3. and 5. the plan, and what the CPU cuts --------------------------------------------------------------


def estimate_hours(space: str, arch: Arch, epochs: int, seeds: int, steps: int = 3) -> float:
    """Hours of training here: a few timed steps of batch 64 on this machine's threads, scaled to
    ``epochs`` of the training images per seed (validation and scoring not counted)."""
    profile = get_space(space).profile(PROFILE)
    model = build_model(profile.apply(arch), num_classes=10, in_chans=1, img_size=profile.img_size)
    optimizer = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(64, 1, profile.img_size, profile.img_size), torch.randint(0, 10, (64,))
    for i in range(steps + 1):
        if i == 1:  # the first step warms up
            start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    per_image = (time.perf_counter() - start) / (steps * 64)
    return per_image * TRAIN_IMAGES * epochs * seeds / 3600


def plan(
    space: str, studies: list[Path], chosen: list[dict[str, Any]], epochs: int, args: argparse.Namespace
) -> tuple[RetrainPlan, list[dict[str, Any]]]:
    """The three picks' combined plan at ``epochs`` (in ``retrain-e<epochs>/``) under rule 5's band, and
    the eligible baselines the band left out, each with the hours it would have taken."""
    config = FullTrainConfig(epochs=epochs)
    out = args.out / space / f"retrain-e{epochs}"
    plans = [
        plan_retrain(
            study,
            config=config,
            trials=[p["trial"]],
            seeds=args.seeds,
            profile=PROFILE,
            dataset=DATASET,
            out=out,
            controls=args.controls,
            control_seed=0,
            max_cost_ratio=args.max_cost_ratio or None,
        )
        for study, p in zip(studies, chosen, strict=True)
    ]
    combined = combine_plans(plans, out)
    baselines = get_space(space).baselines()
    found = [p["costs"] for p in chosen]
    cut = []
    for name in combined.not_compared:  # eligible but over the band, not those cheaper than every pick
        arch = baselines[name].arch if name in baselines else None
        if arch is None:
            continue
        cost = costs(space, arch)
        if any(f["macs"] <= cost["macs"] and f["params"] <= cost["params"] for f in found):
            hours = estimate_hours(space, arch, epochs, len(args.seeds))
            cut.append({"label": name, "estimated_cpu_hours": round(hours, 1), "costs": cost})
    return combined, cut


# --- the run -----------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "load": os.getloadavg(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def report(space: str, combined: RetrainPlan, chosen: list[dict[str, Any]], cut: list[dict[str, Any]],
           calibration: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:  # fmt: skip
    retraining = summarize(combined, finished_runs(combined))
    write_retraining(retraining)
    table = comparisons_table(retraining)
    out = {
        "what": __doc__.split("\n")[0],
        "rules": __doc__.split("\n\n", 1)[1].split("Everything is resumable")[0].strip(),
        "settings": {
            "space": space,
            "budget": BUDGET,
            "profile": PROFILE,
            "dataset": DATASET,
            "epochs": combined.config.epochs,
            "seeds": args.seeds,
            "controls": args.controls,
            "max_cost_ratio": args.max_cost_ratio,
        },
        "machine": machine(),
        "picks": chosen,
        "cut": cut,
        "calibration": calibration,
        "protocol": protocol_lines(retraining),
        "trainings": {"finished": len(retraining.runs), "total": len(combined.trainings())},
        "plateau": retraining.plateau,
        "comparisons": table.to_dict("records"),
        "members": retraining.members.to_dict("records"),
    }
    _write_json(args.out / space / "showcase.json", out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spaces", nargs="+", default=["coatnet"], choices=sorted(REFERENCE))
    parser.add_argument("--searches", type=int, default=3)
    parser.add_argument("--epochs", type=lambda s: [int(x) for x in s.split(",")], default=[8, 16])
    parser.add_argument("--seeds", type=lambda s: [int(x) for x in s.split(",")], default=[0, 1, 2])
    parser.add_argument("--controls", type=int, default=1)
    parser.add_argument("--max-cost-ratio", type=float, default=2.5)
    parser.add_argument("--runs-dir", type=Path, default=ROOT / "runs" / "showcase")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "showcase")
    parser.add_argument("--status", action="store_true", help="say what is done, train nothing")
    parser.add_argument("--searches-only", action="store_true")
    args = parser.parse_args(argv)
    for space in args.spaces:
        studies = [search(space, s, args.runs_dir, args.out / space) for s in range(args.searches)]
        if not args.searches_only:
            retrain_space(space, studies, args)


def retrain_space(space: str, studies: list[Path], args: argparse.Namespace) -> None:
    chosen = picks(space, studies, args.out / space)
    calibration: list[dict[str, Any]] = []

    def finished(result: Any, member: Any, seed: int, skipped: str) -> None:
        said = f"{result.top1:.2f}" if result is not None else skipped
        print(f"{space}: {member.label} seed {seed}: {said}", flush=True)

    for epochs in args.epochs:  # rule 4: the plateau check's networks, seed 0, before the rest
        combined, cut = plan(space, studies, chosen, epochs, args)
        first = dataclasses.replace(
            combined,
            members=tuple(m for m in combined.members if m.label in combined.plateau),
            seeds=combined.seeds[:1],
        )
        if not args.status:
            run_retrain(first, finished=finished)
        check = summarize(first, finished_runs(first)).plateau
        calibration.append({"epochs": epochs, "plateau": check})
        if check["reached"] is not False:  # reached, or (with --status) not decided yet
            break
    if not args.status:
        run_retrain(
            combined,
            finished=lambda *a: (finished(*a), report(space, combined, chosen, cut, calibration, args)),
        )
    said = report(space, combined, chosen, cut, calibration, args)
    print(f"{space}: {said['trainings']['finished']} of {said['trainings']['total']} trainings finished")
    for line in said["protocol"]:
        print(line)


if __name__ == "__main__":
    main()

"""Proxy-training throughput on a device, and what the expensive schedules would cost there.

Sizes what a GPU buys before spending it: for seeded architectures of each (space, profile) row below, one
short epoch with the real trainer (:func:`evaluators.proxy.train_proxy`, AMP as the evaluator picks it on
CUDA), images per second from the trainer's own ``train_seconds``, and the seconds the full schedule would
take at that rate:

- ``coatnet`` / ``gpu``: a trial of the gpu proxy profile (10 epochs of the training split at 64 px);
- ``sasa`` / ``cpu`` at batch 128: one reference of ``benchmarks/evaluator_quality.py`` for ``sasa``
  (592,768 images), the part of issue 18 that 2 CPU cores cannot run;
- ``coatnet`` / ``cpu`` at batch 128: one ``coatnet`` reference of the same study (99,840 images);
- ``sasa`` / ``gpu``: a trial of sasa's gpu proxy profile.

Run from the repository root (on the machine with the GPU)::

    .venv/bin/python benchmarks/gpu_throughput.py [--device cuda] [--seconds 85] [--out FILE]

It prints one JSON line per architecture and writes
``benchmarks/results/gpu_throughput/gpu_throughput.json``. A row that fails is recorded with its error and
the run goes on.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluators.complexity import pick_device  # noqa: E402
from evaluators.data import load_dataset  # noqa: E402
from evaluators.proxy import train_proxy  # noqa: E402
from search_spaces import get_space  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "gpu_throughput" / "gpu_throughput.json"
# (space, profile, archs, images of the probe epoch, batch (None: the profile's), images of the full
# schedule (None: the profile's epochs over the training split), what that schedule is)
PLAN = [
    ("coatnet", "gpu", 3, 20000, None, None, "gpu profile proxy (10 epochs of the training split)"),
    ("sasa", "cpu", 3, 6000, 128, 11 * 53888, "sasa evaluator-quality reference (11 epochs, batch 128)"),
    ("coatnet", "cpu", 2, 6000, 128, 99840, "coatnet evaluator-quality reference (2 x 50000, batch 128)"),
    ("sasa", "gpu", 2, 10000, None, None, "sasa gpu profile proxy"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default=None, help="default: CUDA when present, else the CPU")
    parser.add_argument("--seconds", type=float, default=85.0, help="start no architecture after this")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    device = pick_device(args.device)
    deadline = time.time() + args.seconds
    rows: list[dict] = []
    data_by_size = {}
    for space_name, profile_name, archs, images, batch, full_images, what in PLAN:
        space = get_space(space_name)
        base = space.profile(profile_name)
        if base.img_size not in data_by_size:
            data_by_size[base.img_size] = load_dataset("fashion-mnist", img_size=base.img_size, seed=0)
        data = data_by_size[base.img_size]
        probe = dataclasses.replace(base, epochs=1, train_samples=images, batch_size=batch or base.batch_size)
        full = full_images or base.epochs * len(data.train)
        for i in range(archs):
            if time.time() > deadline:
                print(f"--seconds {args.seconds:g} reached: {space_name}/{profile_name} stops", flush=True)
                break
            arch = space.sample_random(1000 + i)
            row = {"space": space_name, "profile": profile_name, "what": what, "arch": arch.key}
            start = time.time()
            try:
                result = train_proxy(arch, probe, data, seed=0, device=device)
            except Exception as err:  # recorded: a probe reports what fails and goes on
                row["error"] = f"{type(err).__name__}: {err}"
            else:
                ips = result["images_per_second"]
                row |= {
                    "probe_images": images,
                    "batch": probe.batch_size,
                    "images_per_second": ips,
                    "wall_s": time.time() - start,
                    "amp": result["amp"],
                    "device": result["device"],
                    "top1": result["top1"],
                    "full_images": full,
                    "full_seconds_est": full / ips,
                }
            rows.append(row)
            print(json.dumps(row), flush=True)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"torch": torch.__version__, "gpu": gpu, "rows": rows}, indent=1) + "\n")
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()

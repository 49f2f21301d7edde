"""Our baselines against timm's own implementations: training-step throughput per MAC.

Two pairs, each network randomly initialised at 224 px with 1000 classes:

- CoAtNet-0: the ``coatnet`` space's ``CoAtNet-0`` built from its ``Arch`` against timm's ``coatnet_0_224``;
- ResNet-50: the ``sasa`` space's ``ResNet-50 conv`` (the conv baseline of the SASA paper) against timm's
  ``resnet50``.

A step is one forward and backward pass of batch 8 in training mode (cross-entropy on random labels, the
gradients cleared with ``set_to_none``). The two networks of a pair alternate step by step after warm-up,
so that whatever else the machine does slows both alike, and each network's time is the median of its
steps. The networks differ slightly in design (timm's CoAtNet-0 downsamples inside the MBConv's depthwise
conv, ours follows the paper; their MAC counts differ by about 10%), so they are compared as throughput
per MAC: ``MACs per image x images per second`` (forward MACs counted by fvcore with this project's
handlers; the backward pass costs about twice the forward in both, so the ratio is the same with x3).
Target: ours at least 0.95x timm's, on the CPU and on CUDA when present (CUDA in fp32 and under bf16
autocast).

Run from the repository root::

    .venv/bin/python benchmarks/bench_vs_timm.py [--devices cpu,cuda] [--repeats 7]

It prints a table and writes ``benchmarks/results/bench_vs_timm/bench_vs_timm.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import timm  # noqa: E402

from evaluators.complexity import flop_count_analysis  # noqa: E402
from nas.core.model import build_model  # noqa: E402
from search_spaces import get_space  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "bench_vs_timm" / "bench_vs_timm.json"
TARGET = 0.95  # ours / timm, MACs per second
IMG_SIZE, BATCH = 224, 8
PAIRS = {  # name: (space, baseline, timm model)
    "CoAtNet-0": ("coatnet", "CoAtNet-0", "coatnet_0_224"),
    "ResNet-50": ("sasa", "ResNet-50 conv", "resnet50"),
}


def forward_macs(model: nn.Module) -> int:
    """MACs of one 224 px image through ``model`` (eval mode), every op accounted for."""
    model.eval()
    with torch.no_grad():
        analysis = flop_count_analysis(model, torch.zeros(1, 3, IMG_SIZE, IMG_SIZE))
        total, uncounted = int(analysis.total()), analysis.unsupported_ops()
    model.train()
    if uncounted:
        raise RuntimeError(f"{type(model).__name__}: ops without a MAC count: {dict(uncounted)}")
    return total


def build_pair(name: str) -> dict[str, nn.Module]:
    space, baseline, timm_name = PAIRS[name]
    arch = get_space(space).baselines()[baseline].arch
    torch.manual_seed(0)
    ours = build_model(arch, num_classes=1000, in_chans=3, img_size=IMG_SIZE)
    torch.manual_seed(0)
    theirs = timm.create_model(timm_name, pretrained=False, num_classes=1000)
    return {"ours": ours, "timm": theirs}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[Any]:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def time_pair(
    models: dict[str, nn.Module], device: torch.device, dtype: torch.dtype | None, warmup: int, repeats: int
) -> dict[str, list[float]]:
    """Seconds of each forward + backward step of each model, the models alternating step by step."""
    x = torch.randn(BATCH, 3, IMG_SIZE, IMG_SIZE, device=device)
    y = torch.randint(0, 1000, (BATCH,), device=device)
    times: dict[str, list[float]] = {name: [] for name in models}
    for model in models.values():
        model.to(device).train()
    for i in range(warmup + repeats):
        for name, model in models.items():
            _sync(device)
            start = time.perf_counter()
            with _autocast(device, dtype):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            _sync(device)
            seconds = time.perf_counter() - start
            model.zero_grad(set_to_none=True)
            if i >= warmup:
                times[name].append(seconds)
    return times


def settings_to_run(devices: list[str]) -> list[tuple[torch.device, torch.dtype | None]]:
    out = []
    for name in devices:
        device = torch.device(name)
        if device.type == "cuda" and not torch.cuda.is_available():
            print(f"{name}: no CUDA device here, skipped")
            continue
        out.append((device, None))
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            out.append((device, torch.bfloat16))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_devices = "cpu,cuda" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--devices", default=default_devices, help="comma-separated, e.g. cpu,cuda")
    parser.add_argument("--pairs", default=",".join(PAIRS), help=f"comma-separated of {', '.join(PAIRS)}")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    rows = []
    for pair in args.pairs.split(","):
        models = build_pair(pair)
        macs = {name: forward_macs(model) for name, model in models.items()}
        params = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
        for device, dtype in settings_to_run(args.devices.split(",")):
            times = time_pair(models, device, dtype, args.warmup, args.repeats)
            median = {name: statistics.median(t) for name, t in times.items()}
            rate = {name: BATCH * macs[name] / median[name] for name in models}  # forward MACs per second
            ratio = rate["ours"] / rate["timm"]
            row = {
                "pair": pair,
                "timm_model": PAIRS[pair][2],
                "device": str(device),
                "precision": str(dtype).removeprefix("torch.") if dtype else "fp32",
                "macs": macs,
                "params": params,
                "step_seconds_median": median,
                "step_seconds": times,
                "macs_per_second": rate,
                "ratio": ratio,
                "target": TARGET,
                "met": ratio >= TARGET,
            }
            rows.append(row)
            print(
                f"{pair:10s} {row['device']:5s} {row['precision']:5s}  ours {macs['ours'] / 1e9:5.2f} G MACs "
                f"{median['ours'] * 1e3:7.1f} ms  timm {macs['timm'] / 1e9:5.2f} G MACs "
                f"{median['timm'] * 1e3:7.1f} ms  MACs/s ours/timm {ratio:.3f} "
                f"({'met' if row['met'] else 'MISSED'}: >= {TARGET})",
                flush=True,
            )
        for model in models.values():
            model.cpu()
    result = {
        "benchmark": "bench_vs_timm",
        "batch": BATCH,
        "img_size": IMG_SIZE,
        "warmup": args.warmup,
        "repeats": args.repeats,
        "torch": torch.__version__,
        "timm": timm.__version__,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"saved {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()

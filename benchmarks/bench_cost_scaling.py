"""Cost scaling: what counting a network's MACs costs per trial, and how the supernet grows with its space.

1. **MAC counting** (:mod:`evaluators.complexity`). ``count`` (each distinct part, stem, block or head, traced
   once alone on the meta device; the memo of part costs cleared before each timing, so *cold*; the parts
   traced on the CPU because their meta trace failed are reported, ``cpu_fallbacks``) against
   ``count_traced`` (the whole network built with initialized weights and traced on the CPU in one piece, the
   reference), at 224 px, on
   ``--archs`` seeded random architectures of the ``coatnet`` space (``sample_random(seed)``, seeds 0..N-1)
   and on CoAtNet-0..4 (total depth 12..44). Per architecture: seconds of each (one call each, interleaved),
   the ratio, total depth and number of distinct blocks; the results are checked equal. Also: ``count`` again
   with its memo warm (the same architecture), and the N random architectures counted in a row from an
   empty memo (a search's first N trials: later ones reuse blocks counted for earlier ones). Least-squares
   lines give seconds against total depth (``count_traced``) and against distinct blocks (``count``).
2. **Supernet memory** (:class:`evaluators.supernet.Supernet`) over growing variants of the coatnet space
   (:class:`search_spaces.coatnet.CoAtNetSpace` keyword arguments): ops {mbconv} -> +rel -> +ext -> all four
   with local k in {3..11} (the default space), 2 -> 3 -> 4 -> 5 stages (S5 at stride 64, widths 1024..3072,
   depth 1..3), and two variants whose extra choices should cost nothing: k fixed at 11, and every width,
   depth and stem width fixed at its maximum. Each supernet is built in a fresh subprocess, under the
   space's ``cpu`` profile and at full size (profile None, 224 px): parameter and buffer counts and bytes
   (exact), weight groups, build seconds and the build's peak RSS above the idle process (``VmHWM`` after a
   reset via ``/proc/self/clear_refs``, minus ``VmRSS`` before). A full-size supernet is built for real only
   where its projected peak (``PEAK_PER_BYTE`` x its bytes, from measured builds) fits under
   ``--max-gib``; otherwise, and for the two "costs nothing" variants, it is built on the meta device
   (exact counts, no memory, meta build seconds). Each row also gives the cardinality and a structural
   prediction (the supernet docstring: per stage slot, each op's blocks at the largest depth, width and k,
   plus one stem per stem kind at its widest and the head at the widest last stage).

Run from the repository root::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_cost_scaling.py [--part count|supernet|all]
        [--archs 10] [--profiles cpu,full] [--variants ops1,ops2,...] [--max-gib 12]

On 2 busy CPU cores the count part takes about 25 s, the supernet part about 80 s under the cpu profile and
4-5 minutes at full size (with ``--max-gib 15``, which also builds the default space for real: 10 GiB);
``--profiles`` and ``--variants`` split it into shorter runs.

It prints tables and writes ``benchmarks/results/bench_cost_scaling/cost_scaling.json``; a run replaces only
what it measured (its part; in the supernet part, the rows and profiles it built).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from peak_rss import reset_peak_rss, status_kib  # noqa: E402  (benchmarks/, the script's folder)

from evaluators.complexity import CPU_FALLBACKS, clear_count_cache, count, count_traced  # noqa: E402
from nas.core.arch import Arch, Head, Stem  # noqa: E402
from nas.core.model import SkipMetaInit, build_model, count_params, head_layers, plan_blocks  # noqa: E402
from nas.core.ops import STEMS  # noqa: E402
from search_spaces import get_space  # noqa: E402
from search_spaces.coatnet import _DEPTHS, _STEM_WIDTHS, _WIDTHS, CoAtNetSpace, _stage  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "bench_cost_scaling" / "cost_scaling.json"
IMG_SIZE = 224
COATNETS = ("CoAtNet-0", "CoAtNet-1", "CoAtNet-2", "CoAtNet-3", "CoAtNet-4")
# peak RSS of a real full-size build over its parameter + buffer bytes is 2.1-3.1 (measured): the build
# keeps every weight group's freshly initialized source tensors until it ends, besides the shared ones
PEAK_PER_BYTE = 3.2
S5 = ((1, 3), (1024, 1536, 2048, 3072))  # a fifth stage, at stride 64: widths doubling S4's

# id -> (what it is, CoAtNetSpace keyword arguments, build it for real at full size when it fits)
VARIANTS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "ops1": ("ops {mbconv}", {"ops": ["mbconv"]}, True),
    "ops2": ("ops {mbconv, rel}", {"ops": ["mbconv", "rel"]}, True),
    "ops3": ("ops {mbconv, rel, ext}", {"ops": ["mbconv", "rel", "ext"]}, True),
    "default": ("all 4 ops, local k 3..11 (default)", {}, True),
    "k11": ("default with local k 11 only", {"local_k": [11]}, False),
    "max": (
        "default, widths/depths/stem at max only",
        {
            "depths": [[hi, hi] for _, hi in _DEPTHS],
            "widths": [[max(w)] for w in _WIDTHS],
            "stem_widths": [max(_STEM_WIDTHS)],
        },
        False,
    ),
    "stages2": (
        "2 stages (S1-S2), patches 4, 8",
        {"depths": _DEPTHS[:2], "widths": _WIDTHS[:2], "patches": [4, 8]},
        True,
    ),
    "stages3": ("3 stages (S1-S3)", {"depths": _DEPTHS[:3], "widths": _WIDTHS[:3]}, True),
    "stages5": (
        "5 stages (+S5 at stride 64)",
        {"depths": [*_DEPTHS, S5[0]], "widths": [*_WIDTHS, S5[1]]},
        True,
    ),
}


# --- 1. MAC counting ----------------------------------------------------------------------------------


def _timed(fn, *args, **kwargs) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def _distinct_blocks(arch: Arch) -> int:
    specs, _ = plan_blocks(arch, (IMG_SIZE, IMG_SIZE))
    return len({dataclasses.replace(s, stage=0, index=0) for s in specs})


def _count_row(name: str, arch: Arch) -> dict[str, Any]:
    clear_count_cache()
    fast, cold = _timed(count, arch, IMG_SIZE)
    _, warm = _timed(count, arch, IMG_SIZE)
    reference, traced = _timed(count_traced, arch, IMG_SIZE)
    if fast != reference:
        raise RuntimeError(f"{name}: count and count_traced disagree: {fast} != {reference}")
    return {
        "name": name,
        "arch": arch.key,
        "depth": arch.depth,
        "distinct_blocks": _distinct_blocks(arch),
        "params": fast.params,
        "macs": fast.macs,
        "count_s": cold,
        "count_warm_s": warm,
        "count_traced_s": traced,
        "speedup": traced / cold,
    }


def _line(xs: list[float], ys: list[float]) -> dict[str, float]:
    slope, intercept = statistics.linear_regression(xs, ys)
    return {"slope_s": slope, "intercept_s": intercept, "r": statistics.correlation(xs, ys)}


def bench_count(n_archs: int) -> dict[str, Any]:
    space = get_space("coatnet")
    count(space.baselines()["CoAtNet-0"].arch, 64)  # first-call costs (imports, fvcore's setup) outside
    randoms = []
    for seed in range(n_archs):
        randoms.append(_count_row(f"seed{seed}", space.sample_random(seed)))
        row = randoms[-1]
        print(
            f"  seed{seed:<3} depth {row['depth']:>2} distinct {row['distinct_blocks']:>2}  count "
            f"{row['count_s']:.3f} s  traced {row['count_traced_s']:.3f} s  x{row['speedup']:.1f}",
            flush=True,
        )
    clear_count_cache()
    archs = [space.sample_random(seed) for seed in range(n_archs)]
    _, in_a_row = _timed(lambda: [count(a, IMG_SIZE) for a in archs])
    baselines = [_count_row(name, space.baselines()[name].arch) for name in COATNETS]
    rows = randoms + baselines
    summary = {
        "random_median_count_s": statistics.median(r["count_s"] for r in randoms),
        "random_median_count_warm_s": statistics.median(r["count_warm_s"] for r in randoms),
        "random_median_count_traced_s": statistics.median(r["count_traced_s"] for r in randoms),
        "random_median_speedup": statistics.median(r["speedup"] for r in randoms),
        "random_mean_count_s": statistics.fmean(r["count_s"] for r in randoms),
        "random_mean_count_traced_s": statistics.fmean(r["count_traced_s"] for r in randoms),
        "random_in_a_row_s_per_arch": in_a_row / n_archs,
        "count_traced_vs_depth": _line([r["depth"] for r in rows], [r["count_traced_s"] for r in rows]),
        "count_vs_distinct_blocks": _line([r["distinct_blocks"] for r in rows], [r["count_s"] for r in rows]),
        "count_vs_depth": _line([r["depth"] for r in rows], [r["count_s"] for r in rows]),
        "cpu_fallbacks": dict(CPU_FALLBACKS),
    }
    return {"img_size": IMG_SIZE, "random_seeds": list(range(n_archs)), "rows": rows, "summary": summary}


def print_count(result: dict[str, Any]) -> None:
    print(f"\nMAC counting at {result['img_size']} px (seconds; count: cold memo; warm: memo filled)")
    print(f"{'arch':<10} {'depth':>5} {'distinct':>8} {'count':>7} {'warm':>7} {'traced':>7} {'ratio':>6}")
    for r in result["rows"]:
        print(
            f"{r['name']:<10} {r['depth']:>5} {r['distinct_blocks']:>8} {r['count_s']:>7.3f} "
            f"{r['count_warm_s']:>7.4f} {r['count_traced_s']:>7.3f} {r['speedup']:>6.1f}"
        )
    s = result["summary"]
    print(
        f"random archs, medians: count {s['random_median_count_s']:.3f} s, traced "
        f"{s['random_median_count_traced_s']:.3f} s, speed-up x{s['random_median_speedup']:.1f}; warm "
        f"{s['random_median_count_warm_s'] * 1e3:.2f} ms"
    )
    print(
        f"random archs, means: count {s['random_mean_count_s']:.3f} s, traced "
        f"{s['random_mean_count_traced_s']:.3f} s; in a row from an empty memo "
        f"{s['random_in_a_row_s_per_arch']:.3f} s per arch"
    )
    for key in ("count_traced_vs_depth", "count_vs_distinct_blocks", "count_vs_depth"):
        fit = s[key]
        print(f"{key}: {fit['intercept_s']:.3f} s + {fit['slope_s']:.4f} s per unit (r = {fit['r']:.2f})")
    print(f"parts traced on the CPU because their meta trace failed: {s.get('cpu_fallbacks', {}) or 'none'}")


# --- 2. supernet memory -------------------------------------------------------------------------------


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    """In a fresh process: build one supernet, its sizes, seconds and peak RSS above the idle process."""
    from evaluators.supernet import Supernet

    space = CoAtNetSpace(**spec["space"])
    profile = space.profile(spec["profile"]) if spec["profile"] != "full" else None
    meta = spec["device"] == "meta"
    reset = reset_peak_rss()
    idle = status_kib("VmRSS") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.manual_seed(0)
    start = time.perf_counter()
    if meta:
        with torch.device("meta"), SkipMetaInit():
            supernet = Supernet(space, profile)
    else:
        supernet = Supernet(space, profile)
    seconds = time.perf_counter() - start
    peak = (status_kib("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) - idle
    params = list(supernet.parameters())
    buffers = list(supernet.buffers())
    return {
        "device": spec["device"],
        "params": sum(p.numel() for p in params),
        "buffers": sum(b.numel() for b in buffers),
        "bytes": sum(t.numel() * t.element_size() for t in params + buffers),
        "groups": len(supernet.weights),
        "build_s": seconds,
        "peak_rss_mib": None if meta else peak / 1024,
        "peak_measure": "VmHWM after reset - VmRSS" if reset else "ru_maxrss growth",
    }


def _run_child(spec: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    child = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    done = subprocess.run(child, capture_output=True, text=True, cwd=ROOT, env=env)
    if done.returncode:
        raise RuntimeError(f"child {spec} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def structural_params(space: CoAtNetSpace, profile_name: str) -> int:
    """The supernet docstring's structure, counted from standalone networks built on the meta device: for
    each op, the stage blocks of the network that takes every stage at its largest depth and width (local:
    largest k); the conv stem at its widest and each patch stem at its stage's widest; one head."""
    profile = space.profile(profile_name) if profile_name != "full" else None
    img = profile.img_size if profile else IMG_SIZE
    widest = [max(w) for w in space.widths]
    total = 0
    with torch.device("meta"), SkipMetaInit():
        for op in space.ops:
            k = max(space.local_k) if op == "local" else None
            stages = tuple(_stage(op, hi, w, 2, k) for (_, hi), w in zip(space.depths, widest, strict=True))
            arch = Arch(Stem("conv", max(space.stem_widths)), stages, Head("mlp", widest[-1]))
            arch = profile.apply(arch) if profile else arch
            net = build_model(arch, img_size=img)
            total += count_params(net.stages)
        total += count_params(net.stem) + count_params(_head(arch))  # of the last op's network: the same
        for patch in space.patches:
            stage = space.strides.index(patch)
            arch = Arch(Stem("patch", widest[stage], patch=patch), stages[stage:], Head("mlp", widest[-1]))
            arch = profile.apply(arch) if profile else arch
            total += count_params(STEMS.get("patch")(3, arch.stem.width, patch=patch))
    return total


def _head(arch: Arch) -> torch.nn.Module:
    return torch.nn.ModuleList(head_layers(arch.head, arch.stages[-1].width)[:4])


def bench_supernet(profiles: list[str], max_gib: float, only: list[str] | None) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for label, (what, kwargs, real_full) in VARIANTS.items():
        if only and label not in only:
            continue
        space = CoAtNetSpace(**kwargs)
        n_ops = len(space.ops) - 1 + len(space.local_k) if "local" in space.ops else len(space.ops)
        row: dict[str, Any] = {
            "what": what,
            "space": kwargs,
            "stages": len(space.depths),
            "ops": list(space.ops),
            "op_choices_per_stage": n_ops,
            "cardinality": space.cardinality(),
        }
        for profile in profiles:
            spec = {"space": kwargs, "profile": profile, "device": "cpu"}
            if profile == "full":
                measured = _run_child({**spec, "device": "meta"})
                projected = PEAK_PER_BYTE * measured["bytes"] / 2**30
                measured["projected_peak_gib"] = projected
                if real_full and projected <= max_gib:
                    measured = {**_run_child(spec), "projected_peak_gib": projected}
                measured["max_gib"] = max_gib
            else:
                measured = _run_child(spec)
            measured["structural_params"] = structural_params(space, profile)
            row[profile] = measured
            print(
                f"  {label:<8} {profile:<4} {measured['device']:<4} params {measured['params']:>13,} "
                f"groups {measured['groups']:>3} build {measured['build_s']:6.1f} s",
                flush=True,
            )
        rows[label] = row
    return rows


# the law the rows show (full size, 224 px; the cpu profile alike, scaled) and how the structure explains it
LAW = (
    "params = sum over stage slots and candidate ops of that op's blocks at the slot's largest depth, width "
    "and k, + one stem per stem kind at its widest + one head: linear in the number of ops per stage (each "
    "candidate holds its own weights), additive over stages (a stage costs its ops x its largest depth x "
    "width^2), independent of the depth, width and k choices below the largest (local k choices share one "
    "set: k11 == default; widths/depths/stem at max only == default at full size). Residuals against the "
    "structural prediction (ratio 1.002-1.05): the first block of the stage a patch stem lands on takes the "
    "patch width (its own widest) as input, wider than the previous stage's; under the cpu profile, S1's "
    "projection shortcut (present only when the stem is narrower than S1 at stride 1) and ext memories sized "
    "by a narrower width's larger head dim (heads follow width)."
)
SEQUENCES = {
    "ops": ("ops1", "ops2", "ops3", "default"),
    "stages": ("stages2", "stages3", "default", "stages5"),
}


def increments(rows: dict[str, Any]) -> dict[str, Any]:
    """Params added by each step of the op and stage sequences, per profile."""
    out: dict[str, Any] = {}
    for name, ids in SEQUENCES.items():
        for profile in ("cpu", "full"):
            have = [i for i in ids if profile in rows.get(i, {})]
            params = [rows[i][profile]["params"] for i in have]
            out[f"{name}/{profile}"] = {
                i: {"params": p, "added": p - q if q is not None else None}
                for i, p, q in zip(have, params, [None, *params[:-1]], strict=True)
            }
    return out


def print_supernet(rows: dict[str, Any]) -> None:
    print("\nSupernet size (params exact; bytes = params + buffers, fp32; peak = build's RSS above idle)")
    head = (
        f"{'id':<8} {'space':<40} {'card.':>8} {'prof':<4} {'dev':<4} {'groups':>6} {'params':>14} "
        f"{'MiB':>9} {'build s':>8} {'peak MiB':>9} {'struct.':>7}"
    )
    print(head)
    for label, row in rows.items():
        for profile in ("cpu", "full"):
            m = row.get(profile)
            if m is None:
                continue
            peak = f"{m['peak_rss_mib']:>9.0f}" if m["peak_rss_mib"] is not None else f"{'-':>9}"
            print(
                f"{label:<8} {row['what']:<40} {row['cardinality']:>8.1e} {profile:<4} {m['device']:<4} "
                f"{m['groups']:>6} {m['params']:>14,} {m['bytes'] / 2**20:>9.1f} {m['build_s']:>8.1f} {peak} "
                f"{m['params'] / m['structural_params']:>7.4f}"
            )


# --- main ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("count", "supernet", "all"), default="all")
    parser.add_argument("--archs", type=int, default=10, help="random coatnet architectures to count")
    parser.add_argument("--profiles", default="cpu,full", help="supernet profiles: cpu, full or both")
    parser.add_argument(
        "--variants", default=None, help=f"comma-separated supernet rows among {', '.join(VARIANTS)} (all)"
    )
    parser.add_argument("--max-gib", type=float, default=12.0, help="largest projected peak of a real build")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(json.loads(args.child))))
        return 0

    result = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, OMP_NUM_THREADS="
          f"{os.environ.get('OMP_NUM_THREADS')}", flush=True)  # fmt: skip
    if args.part in ("count", "all"):
        result["count"] = bench_count(args.archs)
        print_count(result["count"])
    if args.part in ("supernet", "all"):
        profiles = [p.strip() for p in args.profiles.split(",") if p.strip()]
        only = [v.strip() for v in args.variants.split(",")] if args.variants else None
        rows = bench_supernet(profiles, args.max_gib, only)
        old = result.get("supernet", {}).get("rows", {})
        for label, row in rows.items():
            old[label] = {**old.get(label, {}), **row}
        rows = {label: old[label] for label in VARIANTS if label in old}
        result["supernet"] = {
            "rows": rows,
            "increments": increments(rows),
            "law": LAW,
            "peak_per_byte": PEAK_PER_BYTE,
            "structural": "params / structural prediction (see the module docstring); 1 = as the docstring",
        }
        print_supernet(rows)
        for name, steps in result["supernet"]["increments"].items():
            parts = []
            for i, v in steps.items():
                added = "" if v["added"] is None else f" (+{v['added'] / 1e6:.1f}M)"
                parts.append(f"{i} {v['params'] / 1e6:.1f}M{added}")
            print(f"{name}: {', '.join(parts)}")
        print(f"law: {LAW}")
    result["environment"] = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "cpu_count": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

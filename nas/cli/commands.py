"""The ``nas`` command line (typer + rich).

Heavy imports (torch, timm, optuna) happen inside the commands (each marked ``# heavy``), so ``nas --help``
stays fast. Errors a user can cause
(a bad architecture file, an image too small for an architecture, a size out of its bounds, a value that is
not a number) are caught here and printed as one sentence with exit code 2. Every size is checked against
:mod:`nas.core.bounds` before anything is loaded or built.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer.core import TyperCommand, TyperGroup

from nas.cli.options import argument, build, config_option, given_options, with_options
from nas.cli.train_options import RetrainOptions, ScheduleOptions, TrainOptions
from nas.cli.train_view import TrainView
from nas.core.arch import BLOCK_MIXERS, Arch, Stage
from nas.core.atomic import scratch_folder
from nas.core.bounds import (
    MAX_CLASSES,
    MAX_IMG_SIZE,
    MAX_IN_CHANS,
    MAX_WIDTH,
    whole,
)
from nas.core.option_names import flags
from nas.study.constraints import format_count
from nas.study.settings import NARROW_HELP, SearchSettings, check_study_name
from nas.study.study_file import StudyFileLost
from nas.system.failures import WriteFailed
from nas.system.openmp import wait_briefly
from results.comparison import check_by
from results.comparison import compare as compare_studies
from results.comparison_page import groups_shown, write_comparison
from search_spaces import get_space, list_spaces, origin, plugin_problems
from search_spaces.narrowed import parse_items

USER_ERROR = 2
console = Console()
err_console = Console(stderr=True)


def _print_error(message: str) -> None:
    """``error: message`` on stderr, on one line; the message is text, never rich markup."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


class _FlagsTakeNoValue:
    """typer 0.29's rich help gives every option a type column, flags included (``--resume <bool>``, as if
    it took a value): a flag's is left empty, as click's plain help leaves it."""

    def get_params(self, ctx: typer.Context) -> list[Any]:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:  # typer's own copy of click's classes: read as duck types
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
        return params


class _Command(_FlagsTakeNoValue, TyperCommand):
    """A ``nas`` command (its help shows no value for a flag)."""


class _Commands(_FlagsTakeNoValue, TyperGroup):
    """The ``nas`` commands. A value the command line cannot convert (a word or a fraction where a whole
    number is meant, a number of 5000 digits) is one sentence and exit code 2, like every other bad input,
    instead of typer's usage text and box."""

    def invoke(self, ctx: typer.Context) -> object:
        try:
            with flags():  # messages name options as this command's flags (--resume), not as keywords
                return super().invoke(ctx)
        except typer.BadParameter as err:
            name = err.param.name.replace("_", "-") if err.param is not None and err.param.name else "value"
            text = err.message.strip().rstrip(".")  # empty for a missing argument: its own message says it
            text = f"{name}: {_lower_first(text)}" if text else _lower_first(err.format_message().rstrip("."))
            _print_error(text)
            raise typer.Exit(USER_ERROR) from None


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


app = typer.Typer(
    cls=_Commands,
    name="nas",
    help="Neural architecture search over hybrid convolution / attention vision networks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@contextmanager
def _user_errors() -> Iterator[None]:
    """Turn a ValueError (bad input) into one clear sentence and exit code 2."""
    try:
        yield
    except ValueError as err:
        _print_error(str(err))
        raise typer.Exit(USER_ERROR) from None


def _check_task(
    img_size: int | None = None, num_classes: int | None = None, in_chans: int | None = None
) -> None:
    """The sizes of the network a command builds, within their bounds (:mod:`nas.core.bounds`)."""
    for name, value, most in (
        ("img-size", img_size, MAX_IMG_SIZE),
        ("num-classes", num_classes, MAX_CLASSES),
        ("in-chans", in_chans, MAX_IN_CHANS),
    ):
        if value is not None:
            whole(name, value, 1, most)


def _fwd_bwd_ms(module, x) -> float:
    start = time.perf_counter()
    module(x).float().sum().backward()
    return 1000 * (time.perf_counter() - start)


def _example_stage(block: str, mixer: str, width: int):
    """A one-block stage of this block and mixer at ``width``, with the most heads (<= 8) the width allows."""

    if mixer == "conv":
        return Stage(block, mixer, depth=1, width=width)
    stage = Stage(block, mixer, depth=1, width=width, k=7 if mixer == "local" else None, heads=1)
    return replace(stage, heads=stage.max_heads(8))


@app.command(cls=_Command)
def ops(
    width: Annotated[int, typer.Option(help="Channels of the example blocks.")] = 64,
    size: Annotated[int, typer.Option(help="Side of the example feature map.")] = 14,
) -> None:
    """Build every registered stem and every (block, mixer) pair, run forward + backward, print a summary."""
    import torch  # heavy: torch

    from nas.core.model import count_params, mixer_cfg  # heavy: torch
    from nas.core.ops import BLOCKS, STEMS  # heavy: torch

    torch.manual_seed(0)
    table = Table(
        title=f"ops: blocks at {width} channels on {size}x{size} maps, stems on 3x{4 * size}² images"
    )
    for column in ("kind", "op", "params", "output", "fwd+bwd ms"):
        table.add_column(column, justify="right" if column in ("params", "fwd+bwd ms") else "left")
    with _user_errors():
        whole("width", width, 1, MAX_WIDTH)
        whole("size", size, 1, MAX_IMG_SIZE // 4)  # the stems run on images of 4 x size
        for kind in STEMS.names():
            stem = STEMS.get(kind)(3, width, patch=4 if kind == "patch" else None)
            x = torch.randn(2, 3, 4 * size, 4 * size)
            ms = _fwd_bwd_ms(stem, x)
            table.add_row("stem", kind, f"{count_params(stem):,}", str(tuple(stem(x).shape)), f"{ms:.1f}")
        for block, mixers in BLOCK_MIXERS.items():
            for mixer in mixers:
                stage = _example_stage(block, mixer, width)
                op = BLOCKS.get(block)(
                    width, width, 2, mixer_cfg(stage, (size, size)), 0.0, expand=stage.expand
                )
                x = torch.randn(2, width, size, size)
                ms = _fwd_bwd_ms(op, x)
                table.add_row(
                    "block", stage.key, f"{count_params(op):,}", str(tuple(op(x).shape)), f"{ms:.1f}"
                )
    console.print(table)


@app.command(cls=_Command)
def inspect(
    arch_file: Annotated[Path, typer.Argument(help="Architecture JSON (the flat labelled dict).")],
    img_size: Annotated[int, typer.Option(help="Input side in pixels.")] = 224,
    num_classes: Annotated[int, typer.Option(help="Classifier outputs.")] = 1000,
    in_chans: Annotated[int, typer.Option(help="Input channels.")] = 3,
) -> None:
    """Build an architecture and print its stages: output shapes, parameters, forward time."""
    import torch  # heavy: torch

    from nas.core.model import build_model, count_params  # heavy: torch

    with _user_errors():
        _check_task(img_size, num_classes, in_chans)
        arch = Arch.load(arch_file)
        model = build_model(arch, num_classes=num_classes, in_chans=in_chans, img_size=img_size).eval()
    table = Table(title=arch.key)
    for column in ("part", "blocks", "output", "params"):
        table.add_column(column, justify="right" if column in ("blocks", "params") else "left")
    with torch.no_grad():
        x = torch.randn(1, in_chans, img_size, img_size)
        start = time.perf_counter()
        x = model.stem(x)
        table.add_row(f"stem {arch.stem.key}", "", str(tuple(x.shape)), f"{count_params(model.stem):,}")
        for i, (stage, module) in enumerate(zip(arch.stages, model.stages, strict=True), start=1):
            x = module(x)
            table.add_row(
                f"s{i} {stage.key}", str(stage.depth), str(tuple(x.shape)), f"{count_params(module):,}"
            )
        logits = model.forward_head(x)
        ms = 1000 * (time.perf_counter() - start)
    head_params = count_params(model) - count_params(model.stem) - count_params(model.stages)
    table.add_row(f"head {arch.head.kind}", "", str(tuple(logits.shape)), f"{head_params:,}")
    table.add_row("[bold]total", str(arch.depth), "", f"[bold]{count_params(model):,}")
    console.print(table)
    console.print(f"forward, batch 1 at {img_size}x{img_size} on the CPU: {ms:.0f} ms")


def _check_format(value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"unknown format {value!r}; allowed: {', '.join(allowed)}")


def _rel(ours: float, paper: float | None) -> float | None:
    return None if not paper else ours / paper - 1


@app.command(cls=_Command)
def spaces(
    space: Annotated[str | None, typer.Option(help="Only this space. \\[default: all of them]")] = None,
    narrow: Annotated[list[str] | None, typer.Option(help=NARROW_HELP + " Needs --space.")] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="table or json (every decision with all its values).")
    ] = "table",
) -> None:
    """List the search spaces: choices, cardinality, baselines and proxy profiles."""

    problems: list[str] = []
    with _user_errors():
        _check_format(fmt, ("table", "json"))
        if narrow and space is None:
            raise ValueError("narrow: name the space it narrows with --space")
        if space:
            shown = [get_space(space, parse_items(narrow or ()))]
        else:  # every space that builds; an installed plugin that does not is named after them
            shown, problems = [], plugin_problems()
            for name in list_spaces():
                with contextlib.suppress(ValueError):  # its sentence is among the problems
                    shown.append(get_space(name))
    for problem in problems:
        err_console.print(f"[yellow]skipped[/]: {escape(problem)}", highlight=False, soft_wrap=True)
    if fmt == "json":
        console.print_json(json.dumps([_space_json(one) for one in shown]))
        return
    for one in shown:
        _print_space(one)


def _space_json(space: Any) -> dict[str, Any]:
    """A space as data: each decision's values (an integer range as its low and high), its narrowing, its
    size, baselines and proxy profiles."""

    decisions = {
        name: {"low": values[0], "high": values[-1]} if isinstance(values, range) else list(values)
        for name, values in space.decisions().items()
    }

    return {
        "name": space.name,
        "description": space.description,
        "origin": origin(space.name),
        "decisions": decisions,
        "narrowed": space.narrowing,
        "cardinality": space.cardinality(),
        "baselines": list(space.baselines()),
        "profiles": {name: dataclasses.asdict(p) for name, p in space.profiles.items()},
    }


def _print_space(space: Any) -> None:

    where = origin(space.name)
    title = f"{space.name}: {space.description}" + ("" if where == "built in" else f" (plugin: {where})")
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column("decision", style="bold")
    table.add_column("choices")
    for decision, text in space.choices().items():
        table.add_row(decision, text)
    per_stage = dict.fromkeys(re.sub(r"^s\d+\.", "s<i>.", name) for name in space.decisions())
    table.add_row("decisions", ", ".join(per_stage) + " (what --narrow names; s<i> is stage i)")
    table.add_row("cardinality", f"{space.cardinality():,} architectures")
    table.add_row("baselines", ", ".join(space.baselines()) or "none inside")
    table.add_row(
        "profiles", "; ".join(f"{p.name}: {p.description} [{_schedule(p)}]" for p in space.profiles.values())
    )
    console.print(table)


def _schedule(profile: Any) -> str:
    """What a profile's proxy trains on, in words (``nas search --proxy-epochs`` changes the epochs)."""
    images = f"{profile.train_samples:,} images" if profile.train_samples else "the training split"
    return f"{profile.epochs} x {images}, batch {profile.batch_size}"


# `nas cost` and `nas baselines`: how MACs are counted (evaluators.complexity.CONVENTIONS)
_Convention = Annotated[
    str,
    typer.Option(
        help="How MACs are counted: fvcore (multiply-adds only, as every search counts them) or paper "
        "(plus the attention maps' arithmetic: 7 operations per map entry, the logit from its terms and "
        "the softmax; see evaluators/complexity.py)."
    ),
]


@app.command(cls=_Command)
def baselines(
    space: Annotated[str, typer.Option(help="Search space name (see `nas spaces`).")] = "coatnet",
    img_size: Annotated[int, typer.Option(help="Input side in pixels.")] = 224,
    fmt: Annotated[str, typer.Option("--format", help="table, json or csv.")] = "table",
    convention: _Convention = "fvcore",
) -> None:
    """Params and MACs of every baseline of a space beside the paper's figures (in the paper's convention)."""

    with _user_errors():
        _check_format(fmt, ("table", "json", "csv"))
        _check_task(img_size)
        from evaluators.complexity import check_convention, count  # heavy: torch, fvcore

        check_convention(convention)
        rows = []
        for baseline in get_space(space).baselines().values():
            cost = count(baseline.arch, img_size=img_size, convention=convention)
            paper = baseline.paper
            paper_flops = paper.flops_at(img_size)
            paper_macs = None if paper_flops is None else paper_flops / paper.to_paper_convention(1)
            rows.append(
                {
                    "name": baseline.name,
                    "key": baseline.arch.key,
                    "arch": baseline.arch.to_flat(),
                    "img_size": img_size,
                    "params": cost.params,
                    "macs": cost.macs,
                    "convention": convention,
                    "paper_params": paper.params,
                    "paper_macs": paper_macs,
                    "paper_flops": paper_flops,
                    "paper_convention": paper.convention,
                    "flops": paper.to_paper_convention(cost.macs),
                    "params_diff": _rel(cost.params, paper.params),
                    "macs_diff": _rel(cost.macs, paper_macs),
                    "source": paper.source,
                }
            )
    if fmt == "json":
        console.print_json(json.dumps(rows))
        return
    if fmt == "csv":
        writer = csv.DictWriter(
            sys.stdout, fieldnames=[k for k in rows[0] if k != "arch"], extrasaction="ignore"
        )
        writer.writeheader()
        writer.writerows(rows)
        return
    table = Table(
        title=f"{space} baselines at {img_size} px",
        caption=f"MACs counted as {convention} (one multiply-add = 1"
        + ("; plus attention maps' element-wise work" if convention == "paper" else "")
        + "). Paper FLOPs in the paper's convention: MACs (CoAtNet) or 2xMACs (SASA's FLOPS); "
        "Δ compares MACs.",
    )
    table.add_column("baseline")
    for column in ("params", "paper", "Δ", "MACs", "paper FLOPs", "Δ "):
        table.add_column(column, justify="right", no_wrap=True)
    for row in rows:
        paper_flops = (
            "-"
            if row["paper_flops"] is None
            else f"{row['paper_flops'] / 1e9:.1f}G {row['paper_convention']}"
        )
        table.add_row(
            row["name"],
            f"{row['params'] / 1e6:.2f}M",
            _fmt(row["paper_params"], 1e6, "M"),
            _pct(row["params_diff"]),
            f"{row['macs'] / 1e9:.3f}G",
            paper_flops,
            _pct(row["macs_diff"]),
        )
    console.print(table)


def _fmt(value: float | None, scale: float, unit: str) -> str:
    return "-" if value is None else f"{value / scale:.1f}{unit}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}%"


@app.command(cls=_Command)
def cost(
    arch_file: Annotated[Path, typer.Argument(help="Architecture JSON (the flat labelled dict).")],
    img_size: Annotated[int, typer.Option(help="Input side in pixels.")] = 224,
    num_classes: Annotated[int, typer.Option(help="Classifier outputs.")] = 1000,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    convention: _Convention = "fvcore",
) -> None:
    """Params and MACs of an architecture, in total and per stage."""

    with _user_errors():
        _check_format(fmt, ("table", "json"))
        _check_task(img_size, num_classes)
        from evaluators.complexity import check_convention, count  # heavy: torch, fvcore

        check_convention(convention)
        arch = Arch.load(arch_file)
        result = count(arch, img_size=img_size, num_classes=num_classes, convention=convention)
    if fmt == "json":
        parts = [{"part": p.name, "params": p.params, "macs": p.macs} for p in result.parts]
        console.print_json(
            json.dumps(
                {
                    "key": arch.key,
                    "arch": arch.to_flat(),
                    "img_size": img_size,
                    "params": result.params,
                    "macs": result.macs,
                    "convention": convention,
                    "parts": parts,
                }
            )
        )
        return
    table = Table(title=f"{arch.key} at {img_size} px, MACs counted as {convention}")
    for column in ("part", "params", "MACs", "share"):
        table.add_column(column, justify="left" if column == "part" else "right")
    for part in result.parts:
        table.add_row(
            part.name, f"{part.params:,}", f"{part.macs:,}", f"{100 * part.macs / result.macs:.1f}%"
        )
    table.add_row("[bold]total", f"[bold]{result.params:,}", f"[bold]{result.macs:,}", "")
    console.print(table)


@app.command(cls=_Command)
def data(
    data_dir: Annotated[
        str | None, typer.Option(help="Where the dataset lives (else $NAS_DATA, system copies).")
    ] = None,
) -> None:
    """Find Fashion-MNIST, or fetch it (Debian's package as root, else torchvision's download).

    `make demo` and `make test` run this first; where neither way works it names both, and NAS_DATA."""
    with _user_errors():
        from evaluators.obtain import obtain_fashion_mnist  # heavy: torch, torchvision

        where = obtain_fashion_mnist(data_dir, say=lambda text: console.print(text, highlight=False))
    console.print(f"Fashion-MNIST: {where}", highlight=False, soft_wrap=True)


@app.command(cls=_Command)
@with_options(SearchSettings, after=[config_option()], unset=True)
def search(config: Path | None = None, **options: Any) -> None:
    """Search a space: sample architectures, evaluate them, keep the study; writes runs/<study>/."""
    with _user_errors():
        from nas.api import run_search  # heavy: torch, optuna (`nas --help` stays fast)

        settings = SearchSettings.from_sources(config, **given_options(SearchSettings, options))
        try:
            outcome = run_search(settings, console)
        except (StudyFileLost, WriteFailed) as gone:  # one sentence says where, and why
            err_console.print(f"[bold red]error:[/] {gone}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
    _print_outcome(outcome)
    if outcome.interrupted:
        raise typer.Exit(128 + (outcome.signum or 2))  # 130 for Ctrl-C (SIGINT), 143 for SIGTERM
    if outcome.lost:
        err_console.print(f"[bold red]error:[/] {outcome.lost}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    if outcome.failed:  # the search produced nothing, or its trials fail: a script must not read success
        if outcome.failed != outcome.stopped:  # a failure streak was printed as it stopped the search
            err_console.print(f"[bold red]error:[/] {outcome.failed}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def _print_outcome(outcome: Any) -> None:
    """A search's last lines: its trials, files, front, and why this session ran none."""
    states = outcome.trials["state"].value_counts() if len(outcome.trials) else {}
    done, rejected = int(states.get("COMPLETE", 0)), int(states.get("INFEASIBLE", 0))
    repeats = int(states.get("REPEAT", 0))
    also = f", {_count(rejected, 'sample')} rejected over the limits" if rejected else ""
    also += f", {_count(repeats, 'repeated architecture')} answered from the study" if repeats else ""
    console.print(f"{_count(done, 'trial')} complete{also}; trials table: {outcome.run_dir / 'trials.csv'}")
    if outcome.ran is not None:
        console.print(f"this worker ran {_count(outcome.ran, 'trial')}")
    console.print(f"manifest: {outcome.manifest}")
    if outcome.report is not None:
        console.print(f"report: {outcome.report}")
    if outcome.front:
        console.print(f"front: {_count(outcome.front, 'architecture')} ({outcome.run_dir / 'pareto.csv'})")
    elif outcome.no_front:
        console.print(f"[yellow]the front is empty[/]: {outcome.no_front}", highlight=False)
    if outcome.idle:
        console.print(f"[yellow]note[/]: {outcome.idle}", highlight=False)


def _refresh(run_dir: Path) -> str | None:
    """Bring a study's trials table up to date from its storage (a search writes it as a session ends, so a
    running study's is behind); where the study cannot be read, why (the command goes on with the table
    and, once it has done its work, says so: a command that fails says only why it failed)."""
    if not (run_dir / "manifest.json").exists():
        return None  # not a run directory: the command says so in its own words
    from nas.search.run import refresh_trials  # heavy: torch, optuna

    # a report of a study whose PostgreSQL server is gone waits 10 s for it, not the TCP timeout (2 min)
    os.environ.setdefault("PGCONNECT_TIMEOUT", "10")
    try:
        refresh_trials(run_dir)
    except (ValueError, OSError) as why:
        return str(why)
    return None


def _say_behind(why: str | None) -> None:
    if why is not None:
        err_console.print(
            f"[yellow]note[/]: the trials table was read as the search last wrote it, not from the study: "
            f"{why}",
            highlight=False,
            soft_wrap=True,
        )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _run_dir(study: str, runs_dir: str) -> Path:
    """A study's run directory: a path to one, or a study name under ``runs_dir``."""
    path = Path(study)
    if (path / "manifest.json").exists():
        return path

    check_study_name(study)
    return Path(runs_dir) / study


@app.command(cls=_Command)
def report(
    study: Annotated[str, typer.Argument(help="Study name (under --runs-dir) or a run directory.")],
    runs_dir: Annotated[str, typer.Option(help="Folder of the run directories.")] = "runs",
) -> None:
    """Write report.html (offline, interactive), pareto.png and pareto.csv of a study."""
    with _user_errors():
        from results.report import write_report  # heavy: torch, plotly

        run_dir = _run_dir(study, runs_dir)
        behind = _refresh(run_dir)
        path = write_report(run_dir)
    _say_behind(behind)
    console.print(f"report: {path}")


@app.command(cls=_Command)
def compare(
    studies: Annotated[
        list[str], typer.Argument(help="Two or more studies: names under --runs-dir or run directories.")
    ],
    out: Annotated[
        Path, typer.Option(help="The page to write (.html); its table goes beside it (.csv).")
    ] = Path("compare.html"),
    by: Annotated[
        str | None,
        typer.Option(
            help="Group the studies by a setting (sampler, fidelity, space, evaluator, profile, backend): "
            "each group's mean and spread over its studies, e.g. its seeds."
        ),
    ] = None,
    runs_dir: Annotated[str, typer.Option(help="Folder of the run directories.")] = "runs",
) -> None:
    """Compare studies: fronts on one plot, hypervolumes on one box; writes compare.html and .csv."""
    with _user_errors():
        check_by(by)  # before any study is read
        run_dirs = [_run_dir(study, runs_dir) for study in studies]
        behind = {run_dir: why for run_dir in run_dirs if (why := _refresh(run_dir)) is not None}
        comparison = compare_studies(run_dirs, by=by)
        written = write_comparison(comparison, out)
    for run_dir, why in behind.items():
        _say_behind(f"{run_dir}: {why}")
    frame = comparison.table()
    at_equal = next(c for c in frame.columns if str(c).startswith("hypervolume at"))
    table = Table(title="studies compared (hypervolume: normalized, on one box)", title_justify="left")
    columns = ("study", "sampler", "fidelity", "trials", "device time", "front", "hypervolume", at_equal)
    for column in columns:
        table.add_column(column, overflow="fold")
    for _, row in frame.iterrows():
        table.add_row(*(f"{row[c]:.4f}" if "hypervolume" in c else str(row[c]) for c in columns))
    console.print(table)
    if comparison.differences:
        err_console.print(
            "[yellow]note[/]: the studies measure their objectives differently, so they compare only as "
            f"measured: {'; '.join(comparison.differences)}",
            highlight=False,
            soft_wrap=True,
        )
    if by is not None:
        groups = groups_shown(comparison.group_table())
        table = Table(title=f"by {by}: over each group's studies", title_justify="left")
        for column in groups.columns:
            table.add_column(str(column), overflow="fold")
        for row in groups.itertuples(index=False):
            table.add_row(*map(str, row))
        console.print(table)
    for path in written[1:]:
        console.print(f"table: {path}", highlight=False, soft_wrap=True)
    console.print(f"comparison: {written[0]}", highlight=False, soft_wrap=True)


@app.command(cls=_Command)
def export(
    study: Annotated[str, typer.Argument(help="Study name (under --runs-dir) or a run directory.")],
    trial: Annotated[list[int] | None, typer.Option(help="Trial number to export (repeatable).")] = None,
    pareto: Annotated[bool, typer.Option("--pareto", help="Export every trial on the Pareto front.")] = False,
    out: Annotated[str | None, typer.Option(help="Output folder. \\[default: runs/<study>/export]")] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="Standalone file: export (torch.export, model.pt2) | onnx (ONNX opset 20, model.onnx; "
            "pip install 'nas-hybrid\\[onnx]') | torchscript | none.",
        ),
    ] = "export",
    runs_dir: Annotated[str, typer.Option(help="Folder of the run directories.")] = "runs",
) -> None:
    """Write arch.json, trial.json, model.pt and a standalone file per chosen trial; prints each file.

    model.pt is the evaluated network (nas.create_model loads it)."""
    with _user_errors():
        if bool(trial) == pareto:
            raise ValueError("export: give either --trial N (one or more) or --pareto")
        from results.export import export_trials  # heavy: torch, onnx

        run_dir = _run_dir(study, runs_dir)
        behind = _refresh(run_dir)
        written = export_trials(run_dir, out or run_dir / "export", trials=trial or None, fmt=fmt)
    _say_behind(behind)
    for folder in written:  # each folder holds exactly what this export wrote (built complete, then renamed)
        for path in sorted(folder.iterdir()):
            console.print(str(path), highlight=False, soft_wrap=True)
        if not (folder / "model.pt").exists():
            console.print(f"{folder}: no model files (the search kept no weights for it)", highlight=False)


@app.command(cls=_Command)
@with_options(
    TrainOptions,
    ScheduleOptions,
    before=[argument("arch", str, "arch.json (or JSON text) of the architecture to train.")],
)
def train(arch: str, **options: Any) -> None:
    """Train one architecture with checkpoints every epoch; ends with model.pt (nas.create_model loads it)."""
    with _user_errors():
        given = build(TrainOptions, options)
        schedule = build(ScheduleOptions, options)
        from evaluators.complexity import pick_device  # heavy: torch, fvcore
        from evaluators.data import load_dataset, load_test  # heavy: torch
        from evaluators.train import train_arch  # heavy: torch, timm
        from nas.core.create import resolve_arch, weights_name  # heavy: torch

        config = schedule.config(seed=given.seed)
        built = resolve_arch(arch)
        space = given.space or _space_of(built)
        name = given.profile or ("full" if pick_device().type == "cuda" else "cpu")
        prof = get_space(space).profile(name)
        data = load_dataset(
            given.dataset,
            img_size=prof.img_size,
            data_dir=given.data_dir,
            seed=given.seed,
            download=given.download,
        )
        test = None
        if given.score_on == "test":
            test = load_test(
                given.dataset,
                img_size=prof.img_size,
                data_dir=given.data_dir,
                in_chans=data.in_chans,
                test_folder=given.test_folder,
                download=given.download,
                seed=given.seed,  # only synthetic data's test images depend on it
            )
        default = Path(arch).stem if arch.endswith(".json") else weights_name(built).removesuffix(".pt")
        target = Path(given.out) if given.out else Path("runs") / "train" / default
        os.rmdir(scratch_folder(target, "out"))  # refused before the run is announced
        console.print(
            f"training {prof.apply(built).key} ({space} {name} profile, {prof.img_size} px) -> {target}"
        )
        with TrainView(console, schedule.epochs) as view:
            result = train_arch(
                built,
                prof,
                data,
                target,
                config=config,
                resume=given.resume,
                report=view.epoch,
                progress=view.batch,
                test=test,
            )
    if test is not None:
        ema = f" (EMA weights {result['test_top1_ema']:.2f}%)" if "test_top1_ema" in result else ""
        console.print(
            f"test top-1 {result['test_top1']:.2f}%{ema} on the {result['test_images']:,} images of the test "
            f"split, after {result['epochs']} epochs (held-out training images: {result['top1']:.2f}%)"
        )
    else:
        console.print(
            f"top-1 {result['top1']:.2f}% on the held-out training images after {result['epochs']} epochs "
            "(images a search of this dataset may have seen; --score-on test gives the unbiased figure)"
        )
    console.print(f"model: {result['model_file']}")


def _space_of(arch: Any) -> str:
    """The space that holds ``arch``, whose profile the search scaled it by (an exported sasa network trained
    under coatnet's profile was another network); coatnet where none does."""

    holding = []
    for name in list_spaces():
        with contextlib.suppress(ValueError):  # a plugin that does not load holds nothing
            if get_space(name).contains(arch):
                holding.append(name)
    if len(holding) > 1:
        raise ValueError(
            f"space: the architecture is in the {' and '.join(holding)} spaces, whose profiles scale it "
            "differently; give --space"
        )
    return holding[0] if holding else "coatnet"


@app.command(cls=_Command)
@with_options(
    RetrainOptions,
    ScheduleOptions,
    before=[argument("study", str, "Study name (under --runs-dir) or a run directory.")],
)
def retrain(study: str, **options: Any) -> None:
    """Retrain a study's front beside its baselines and random controls, scored on the test split.

    Writes retrain.html and its tables. Each training is a nas train run (checkpointed: a rerun continues).
    Each found network is compared with every baseline it does not exceed in cost and with its random
    controls: paired differences over the seeds, t and bootstrap intervals, p-values Holm-corrected across
    the run; a plateau check trains two networks twice as long."""
    with _user_errors():
        from results.retrain import finished_runs, plan_retrain, run_retrain, summarize  # heavy: torch
        from results.retrain_page import write_retraining  # heavy: torch

        given = build(RetrainOptions, options)
        schedule = build(ScheduleOptions, options)
        config = schedule.config()
        run_dir = _run_dir(study, given.runs_dir)
        behind = _refresh(run_dir)
        plan = plan_retrain(
            run_dir,
            config=config,
            trials=given.trial or None,
            top=given.top,
            baselines=given.baselines,
            seeds=given.seed_list(),
            profile=given.profile,
            dataset=given.dataset,
            data_dir=given.data_dir,
            out=given.out,
            score_on=given.score_on,
            allow_seen=given.allow_seen_images,
            test_folder=given.test_folder,
            controls=given.controls,
            control_seed=given.control_seed,
            plateau=given.plateau,
            max_cost_ratio=given.max_cost_ratio,
        )
        _say_behind(behind)
        total = len(plan.trainings())
        console.print(
            f"retraining {_count(len(plan.members), 'network')} x {_count(len(plan.seeds), 'seed')} "
            f"({plan.profile.name} profile, {plan.profile.img_size} px, {plan.dataset}, "
            f"{_count(schedule.epochs, 'epoch')}, scored on the {plan.score_on} split) -> {plan.out}",
            highlight=False,
            soft_wrap=True,
        )
        with contextlib.ExitStack() as views:  # one training's progress view at a time
            trainings = plan.trainings()

            def started(index: int, _: int, member: Any, seed: int) -> tuple[Any, Any]:
                console.print(
                    f"[{index}/{total}] {member.label} seed {seed}: {plan.profile.apply(member.arch).key}",
                    highlight=False,
                    soft_wrap=True,
                )
                view = views.enter_context(TrainView(console, trainings[index - 1].epochs))
                return view.epoch, view.batch

            def finished(result: Any, member: Any, seed: int, skipped: str) -> None:
                views.close()
                if skipped:
                    err_console.print(f"[yellow]skipped[/]: {skipped}", highlight=False, soft_wrap=True)
                write_retraining(summarize(plan, finished_runs(plan)))  # the page holds what has finished

            _, skipped = run_retrain(plan, started=started, finished=finished, download=given.download)
        # every finished run, another process's too
        retraining = summarize(plan, finished_runs(plan))
        paths = write_retraining(retraining)
    _print_retraining(retraining)
    for why in skipped:
        err_console.print(f"[yellow]not finished[/]: {why}", highlight=False, soft_wrap=True)
    console.print(f"retraining: {paths[0]}", highlight=False, soft_wrap=True)


def _count_or_blank(value: Any) -> str:
    return format_count(value) if isinstance(value, (int, float)) and math.isfinite(value) else ""


def _print_retraining(retraining: Any) -> None:
    from results.retrain_page import (  # heavy: torch
        agreement_text,
        comparisons_table,
        plateau_text,
        protocol_lines,
    )

    def pm(mean: float, std: float) -> str:
        return "" if math.isnan(mean) else f"{mean:.2f}" + ("" if math.isnan(std) else f" +- {std:.2f}")

    for line in protocol_lines(retraining):
        console.print(line, highlight=False)
    plan = retraining.plan
    networks = Table(
        title=f"networks: cost at the search's scale ({plan.macs_img_size} px) and as trained "
        f"({plan.profile.name} profile, {plan.profile.img_size} px)"
    )
    for column in ("network", "role", "MACs", "params", "MACs trained", "params trained", "top-1", "seeds"):
        networks.add_column(column)
    for row in retraining.members.itertuples(index=False):
        costs = [
            _count_or_blank(getattr(row, name, math.nan))
            for name in ("macs", "params", "macs_trained", "params_trained")
        ]
        networks.add_row(row.label, row.role, *costs, pm(row.top1_mean, row.top1_std), str(row.seeds))
    console.print(networks)
    table = Table(title="found networks against every eligible baseline and their random controls")
    for column in ("found", "reference", "at equal cost", "found top-1", "reference top-1",
                   "difference [bootstrap 95%]", "p (Holm)", "verdict"):  # fmt: skip
        table.add_column(column)
    for row in comparisons_table(retraining).itertuples(index=False):
        diff = "" if math.isnan(row.difference) else f"{row.difference:+.2f}"
        if not math.isnan(row.bootstrap_low):
            diff += f" [{row.bootstrap_low:+.2f}, {row.bootstrap_high:+.2f}]"
        p = "" if math.isnan(row.p_holm) else f"{row.p_holm:.3f}"
        found, ref = pm(row.found_top1, row.found_std), pm(row.reference_top1, row.reference_std)
        reference = row.reference + (" (random)" if row.kind == "control" else "")
        table.add_row(row.found, reference, row.equal_cost, found, ref, diff, p, row.verdict.split(" (")[0])
    if table.row_count:
        console.print(table)
    console.print(plateau_text(retraining), highlight=False)
    console.print(agreement_text(retraining), highlight=False)


def main() -> None:
    wait_briefly()  # before anything imports torch: libgomp reads it when it loads
    app()

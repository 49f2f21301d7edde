"""The live view of a search (rich): trials done and failed, budget spent and left, the trials running now and
the best trade-offs of the whole study.

Every finished trial is logged as one line. On a terminal a live panel redraws twice a second: the study's
counts and budget, the running trials (number, architecture, rung, epoch, how long it has run and how long a
trial takes) and the study's Pareto front, whole-study (a resumed search shows what earlier sessions found),
one row per architecture, best first by the first objective, cut to :data:`FRONT_ROWS` rows with "+N more".
Elsewhere (CI logs, ``ray job`` output, a file) the same panel is printed once at the end, and a running
trial is reported by one plain line at most every ``plain_seconds`` (:data:`PLAIN_SECONDS`), from a
background thread that only reads what the drivers recorded, so it never slows a trial.

Drivers tell it what happens: :meth:`SearchProgress.add_rows` (trials the study holds, as trials-table rows),
:meth:`~SearchProgress.trial_started`, :meth:`~SearchProgress.trial_step` (its architecture, an epoch
reported) and :meth:`~SearchProgress.trial_done`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from nas.core.throttle import Throttle
from nas.search.trial import TrialRecord
from nas.study.budget import BudgetTracker, human_seconds
from nas.study.objectives import Objective
from nas.study.pareto import best_first, pareto_front
from nas.study.trials_table import trial_row

__all__ = ["FRONT_ROWS", "PLAIN_SECONDS", "SearchProgress", "format_metric"]

FRONT_ROWS = 8  # rows of the front the panel shows; the rest are counted ("+N more"), report.html has all
PLAIN_SECONDS = 30.0  # off a terminal: at most one line about the running trials per this many seconds


def format_metric(name: str, value: Any) -> str:
    if value is None:
        return "-"
    if name in ("macs", "params"):
        return f"{value / 1e9:.2f}G" if name == "macs" else f"{value / 1e6:.2f}M"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


@dataclass(frozen=True)
class _Row:
    """A finished trial as the panel counts it."""

    number: int
    arch: str
    baseline: str
    state: str  # the trials table's: COMPLETE, FAIL, INFEASIBLE, REPEAT, PRUNED
    feasible: bool
    values: tuple[float, ...] | None  # the objectives of a COMPLETE trial, else None
    rung: int | None
    this_session: bool


@dataclass
class _Running:
    number: int
    started: float  # time.monotonic()
    rung: int | None
    arch: str = "?"
    epoch: int | None = None


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _row(table_row: dict[str, Any], names: Sequence[str], this_session: bool) -> _Row:
    """A trials-table row (:func:`nas.study.trials_table.trial_row`) as the panel keeps it."""
    state = str(table_row["state"])
    values = tuple(table_row.get(n) for n in names)
    complete = state == "COMPLETE" and all(not _missing(v) for v in values)
    rung, feasible = table_row.get("rung"), table_row.get("feasible")
    return _Row(
        int(table_row["number"]),
        "?" if _missing(table_row.get("arch")) or not table_row.get("arch") else str(table_row["arch"]),
        "" if _missing(table_row.get("baseline")) else str(table_row["baseline"]),
        state,
        feasible is not False and str(feasible).lower() != "false",
        tuple(float(v) for v in values) if complete else None,
        None if _missing(rung) else int(rung),
        this_session,
    )


class SearchProgress:
    """Collects the study's finished and running trials and renders the search's state."""

    def __init__(
        self,
        title: str,
        objectives: Sequence[Objective],
        console: Console | None = None,
        top_rung: int | None = None,
        plain_seconds: float | None = None,
    ) -> None:
        self.title, self.objectives = title, tuple(objectives)
        self.top_rung = top_rung  # on a fidelity ladder the front is of the top rung's results
        self.console = console or Console()
        self.plain_seconds = PLAIN_SECONDS if plain_seconds is None else plain_seconds
        self.tracker: BudgetTracker | None = None
        self._rows: dict[int, _Row] = {}
        self._running: dict[int, _Running] = {}
        self._lock = threading.RLock()  # the live panel and the plain-line thread read what drivers write
        self._live: Live | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    @property
    def rows(self) -> list[_Row]:
        """The study's finished trials known so far, in trial order."""
        with self._lock:
            return [self._rows[n] for n in sorted(self._rows)]

    @property
    def session_trials(self) -> int:
        """The study's trials finished in this session (by any of its workers)."""
        return sum(r.this_session for r in self.rows)

    def __enter__(self) -> SearchProgress:
        if self.console.is_terminal:
            self._live = Live(
                console=self.console, refresh_per_second=2, transient=False, get_renderable=self.render
            )
            self._live.__enter__()
        else:
            self._ticker = threading.Thread(target=self._plain_lines, name="search-progress", daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        # a search that fails before its first trial (a study it cannot open or resume, bad input) shows only
        # its error: an empty panel above the one-sentence message would bury it
        silent = exc_type is not None and issubclass(exc_type, Exception) and not self.session_trials
        with self._lock:
            self._running.clear()
        if self._live is not None:
            if silent:
                self._live.transient = True
            else:
                self._live.refresh()
            self._live.__exit__(exc_type, *exc)
        elif not silent:
            self.console.print(self.render())

    def log(self, message: str) -> None:
        self.console.print(message, highlight=False, soft_wrap=True)

    # -- what the drivers tell ----------------------------------------------------------------------------

    def use_budget(self, tracker: BudgetTracker) -> None:
        """The budget the running trials are charged to (its summary is the projection shown with them)."""
        self.tracker = tracker

    def knows(self, number: int) -> bool:
        with self._lock:
            return number in self._rows

    def add_rows(self, table_rows: Iterable[dict[str, Any]], this_session: bool = False) -> None:
        """Finished trials of the study (trials-table rows, :func:`nas.study.trials_table.trial_row`) that
        this view
        has not seen: earlier sessions' on a resume, other workers' as they end. Unfinished ones are left."""
        names = [o.name for o in self.objectives]
        with self._lock:
            for table_row in table_rows:
                if (
                    str(table_row["state"]) in ("RUNNING", "WAITING")
                    or int(table_row["number"]) in self._rows
                ):
                    continue
                row = _row(table_row, names, this_session)
                self._rows[row.number] = row

    def trial_started(self, number: int, *, rung: int | None = None, arch: str | None = None) -> None:
        with self._lock:
            self._running[number] = _Running(number, time.monotonic(), rung, arch or "?")

    def trial_step(self, number: int, *, arch: str | None = None, epoch: int | None = None) -> None:
        """A running trial's architecture (once sampled) or the epoch its evaluator last reported."""
        with self._lock:
            running = self._running.get(number)
            if running is None:
                return
            if arch is not None:
                running.arch = arch
            if epoch is not None:
                running.epoch = epoch

    def trial_done(self, number: int, record: TrialRecord, tracker: BudgetTracker) -> None:
        names = [o.name for o in self.objectives]
        values = dict(zip(names, record.values, strict=True)) if record.values else None
        table_row = trial_row(number, "COMPLETE" if record.ok else "FAIL", record.attrs(), values)
        with self._lock:
            self._running.pop(number, None)
            row = self._rows[number] = _row(table_row, names, this_session=True)
        self.tracker = tracker
        shown = "  ".join(
            f"{o.name} {format_metric(o.name, record.metrics.get(o.name))}"
            for o in (self.objectives if record.ok else ())
        )
        mark = "rejected" if record.rejected else "ok" if record.ok else "fail"
        if record.rejected:
            over = [name for name, v in record.constraints.items() if v > 0]
            shown += f"  (over the {', '.join(over)} limit)"
        elif not record.feasible:
            shown += "  (a reference over the limits)"
        reason = f"  ({record.reason})" if record.reason else ""
        base = f" [{record.baseline}]" if record.baseline else ""
        if record.rung is not None and not record.rejected:
            base += f" rung {record.rung}"
        self.log(
            f"trial {number:>3} {mark:<8} {row.arch}{base}  {shown}  {record.cost.seconds:.1f} s{reason}"
            f"  | {tracker.summary()}"
        )

    # -- running trials -----------------------------------------------------------------------------------

    def _typical(self) -> float | None:
        return self.tracker.typical_seconds() if self.tracker is not None else None

    def running_lines(self, now: float | None = None) -> list[str]:
        """One line per running trial: number, architecture, rung, epoch, how long it has run (and how long a
        trial typically takes), and the budget's state and projection."""
        now = time.monotonic() if now is None else now
        typical = self._typical()
        summary = f" | {self.tracker.summary()}" if self.tracker is not None else ""
        with self._lock:
            running = sorted(self._running.values(), key=lambda r: r.number)
        lines = []
        for r in running:
            where = (f" rung {r.rung}" if r.rung is not None else "") + (
                f", epoch {r.epoch} done" if r.epoch is not None else ""
            )
            took = f" (a trial takes about {human_seconds(typical)})" if typical else ""
            lines.append(
                f"running: trial {r.number:>3} {r.arch}{where}, for {human_seconds(now - r.started)}{took}"
                f"{summary}"
            )
        return lines

    def _plain_lines(self) -> None:
        """Off a terminal: the running trials' lines, at most once per ``plain_seconds``, once one of them has
        run that long (a search of quick trials prints none)."""
        throttle = Throttle(self.plain_seconds)
        while not self._stop.wait(min(self.plain_seconds / 4, 1.0)):
            with self._lock:
                oldest = min((r.started for r in self._running.values()), default=None)
            if oldest is None or time.monotonic() - oldest < self.plain_seconds or not throttle.ready():
                continue
            for line in self.running_lines():
                self.log(line)

    def _running_table(self) -> Table | None:
        now = time.monotonic()
        with self._lock:
            running = sorted(self._running.values(), key=lambda r: r.number)
        if not running:
            return None
        typical = self._typical()
        table = Table(title="running", title_justify="left")
        for name, justify in (("trial", "right"), ("arch", "left"), ("rung", "right"), ("epoch", "right")):
            table.add_column(name, justify=justify)
        table.add_column("for" + (f" (a trial takes ~{human_seconds(typical)})" if typical else ""))
        for r in running:
            table.add_row(
                str(r.number),
                r.arch,
                "-" if r.rung is None else str(r.rung),
                "-" if r.epoch is None else str(r.epoch),
                human_seconds(now - r.started),
            )
        return table

    # -- the panel ----------------------------------------------------------------------------------------

    def front(self) -> tuple[list[_Row], int]:
        """The study's Pareto front as the panel lists it: one row per architecture (its best result), best
        first; cut to :data:`FRONT_ROWS`, with the number of rows left out."""
        rows = [
            r
            for r in self.rows
            if r.values is not None
            and r.feasible
            and r.state == "COMPLETE"
            and (self.top_rung is None or r.rung == self.top_rung)
        ]
        directions = [o.direction for o in self.objectives]
        on_front = [rows[i] for i in pareto_front([r.values for r in rows], directions)]
        seen: set[str] = set()
        unique = []
        for i in best_first([r.values for r in on_front], directions):
            if on_front[i].arch not in seen:
                seen.add(on_front[i].arch)
                unique.append(on_front[i])
        return unique[:FRONT_ROWS], max(len(unique) - FRONT_ROWS, 0)

    def render(self) -> Group:
        rows = self.rows
        count = {s: sum(r.state == s for r in rows) for s in ("COMPLETE", "FAIL", "INFEASIBLE", "REPEAT")}
        done = count["COMPLETE"]
        head = Text(f"{self.title}: {done} trial{'' if done == 1 else 's'} done, {count['FAIL']} failed")
        if count["INFEASIBLE"]:
            head.append(f", {count['INFEASIBLE']} samples rejected over the limits")
        if count["REPEAT"]:
            head.append(f", {count['REPEAT']} repeats answered from the study")
        session = sum(r.this_session for r in rows)
        if session < len(rows):
            head.append(f" ({session} of them in this session)")
        if self.tracker is not None:
            head.append(f"; {self.tracker.summary()}")
        table = Table(title="best trade-offs of the study (Pareto front)", title_justify="left")
        table.add_column("trial", justify="right")
        table.add_column("arch")
        for o in self.objectives:
            table.add_column(f"{o.name} ({o.direction[:3]})", justify="right")
        best, more = self.front()
        for r in best:
            table.add_row(
                str(r.number),
                r.arch + (f" [{r.baseline}]" if r.baseline else ""),
                *(format_metric(o.name, v) for o, v in zip(self.objectives, r.values or (), strict=True)),
            )
        if more:
            table.caption = f"+{more} more on the front (report.html lists them all)"
            table.caption_justify = "left"
        running = self._running_table()
        return Group(head, *([running] if running is not None else []), table)

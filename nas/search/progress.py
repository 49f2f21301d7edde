"""The live view of a search (rich): trials done and failed, budget spent and left, the best trade-offs.

On a terminal it is a live panel that redraws after every trial; elsewhere (CI logs, ``ray job`` output) the
same panel is printed once at the end, and every trial is logged as one line in both cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from nas.search.budget import BudgetTracker
from nas.search.objectives import Objective
from nas.search.trial import TrialRecord
from results.pareto import pareto_front

__all__ = ["SearchProgress", "format_metric"]


def format_metric(name: str, value: Any) -> str:
    if value is None:
        return "-"
    if name in ("macs", "params"):
        return f"{value / 1e9:.2f}G" if name == "macs" else f"{value / 1e6:.2f}M"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


class SearchProgress:
    """Collects finished trials and renders the search's state."""

    def __init__(
        self,
        title: str,
        objectives: Sequence[Objective],
        console: Console | None = None,
        top_rung: int | None = None,
    ) -> None:
        self.title, self.objectives = title, tuple(objectives)
        self.top_rung = top_rung  # on a fidelity ladder the front is of the top rung's results
        self.console = console or Console()
        self.rows: list[dict[str, Any]] = []  # number, arch, state, values, seconds
        self.tracker: BudgetTracker | None = None
        self._live: Live | None = None

    def __enter__(self) -> SearchProgress:
        if self.console.is_terminal:
            self._live = Live(self.render(), console=self.console, refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        # a search that fails before its first trial (a study it cannot open or resume, bad input) shows only
        # its error: an empty panel above the one-sentence message would bury it
        silent = exc_type is not None and issubclass(exc_type, Exception) and not self.rows
        if self._live is not None:
            if silent:
                self._live.transient = True
            else:
                self._live.update(self.render())
            self._live.__exit__(exc_type, *exc)
        elif not silent:
            self.console.print(self.render())

    def log(self, message: str) -> None:
        self.console.print(message, highlight=False, soft_wrap=True)
        self._refresh()

    def trial_done(self, number: int, record: TrialRecord, tracker: BudgetTracker) -> None:
        state = (
            "INFEASIBLE"
            if record.rejected
            else "REPEAT"
            if record.repeat_of is not None
            else "COMPLETE"
            if record.ok
            else "FAIL"
        )
        row = {
            "number": number,
            "arch": record.arch.key if record.arch else "?",
            "baseline": record.baseline,
            "state": state,
            "feasible": record.feasible,
            "values": record.values,
            "seconds": record.cost.seconds,
            "fail_reason": record.reason or "",
            "rung": record.rung,
        }
        self.rows.append(row)
        self.tracker = tracker
        values = "  ".join(
            f"{o.name} {format_metric(o.name, record.metrics.get(o.name))}"
            for o in (self.objectives if record.ok else ())
        )
        mark = "rejected" if record.rejected else "ok" if record.ok else "fail"
        if record.rejected:
            over = [name for name, v in record.constraints.items() if v > 0]
            values += f"  (over the {', '.join(over)} limit)"
        elif not record.feasible:
            values += "  (a reference over the limits)"
        reason = f"  ({record.reason})" if record.reason else ""
        base = f" [{record.baseline}]" if record.baseline else ""
        if record.rung is not None and not record.rejected:
            base += f" rung {record.rung}"
        self.log(
            f"trial {number:>3} {mark:<8} {row['arch']}{base}  {values}  {row['seconds']:.1f} s{reason}"
            f"  | {tracker.summary()}"
        )

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.render())

    def render(self) -> Group:
        done = [
            r
            for r in self.rows
            if r["state"] == "COMPLETE"
            and r["feasible"]
            and (self.top_rung is None or r["rung"] == self.top_rung)
        ]
        rejected = sum(r["state"] == "INFEASIBLE" for r in self.rows)
        repeats = sum(r["state"] == "REPEAT" for r in self.rows)
        failed = sum(r["state"] == "FAIL" for r in self.rows)
        done_count = len(self.rows) - failed - rejected - repeats
        head = Text(f"{self.title}: {done_count} trials done, {failed} failed")
        if rejected:
            head.append(f", {rejected} samples rejected over the limits")
        if repeats:
            head.append(f", {repeats} repeats answered from the study")
        if self.tracker is not None:
            head.append(f"; {self.tracker.summary()}")
        table = Table(title="best trade-offs so far (Pareto front)", title_justify="left")
        table.add_column("trial", justify="right")
        table.add_column("arch")
        for o in self.objectives:
            table.add_column(f"{o.name} ({o.direction[:3]})", justify="right")
        if done:
            front = pareto_front([r["values"] for r in done], [o.direction for o in self.objectives])
            best = sorted((done[i] for i in front), key=lambda r: r["values"][0])[:8]
            for r in best:
                name = r["arch"] + (f" [{r['baseline']}]" if r.get("baseline") else "")
                table.add_row(
                    str(r["number"]),
                    name,
                    *(format_metric(o.name, v) for o, v in zip(self.objectives, r["values"], strict=True)),
                )
        return Group(head, table)

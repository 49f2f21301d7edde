"""What ``nas train`` shows while it trains: where the run is inside the epoch, images per second, time left.

On a terminal a rich bar advances per batch (epoch and batch, images/s, the epoch's and the run's time left,
the running loss); elsewhere (a CI log, a file, ``nohup``) one plain line at most every ``plain_seconds``
(:data:`PLAIN_SECONDS`) says the same. Both print one line per finished epoch with its validation result.
Time left counts training at the current epoch's rate, not validation.
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from nas.core.throttle import Throttle
from nas.study.budget import human_seconds

if TYPE_CHECKING:
    from evaluators.train import TrainStatus

__all__ = ["PLAIN_SECONDS", "TrainView"]

PLAIN_SECONDS = 30.0  # off a terminal: at most one progress line per this many seconds


def _speed(status: TrainStatus) -> str:
    return f"{status.images_per_second:,.0f} images/s"


class TrainView:
    """Receives :class:`~evaluators.train.TrainStatus` per batch (:meth:`batch`) and each epoch's metrics
    (:meth:`epoch`); a context manager around the training."""

    def __init__(self, console: Console, epochs: int, plain_seconds: float | None = None) -> None:
        self.console, self.epochs = console, epochs
        self._throttle = Throttle(PLAIN_SECONDS if plain_seconds is None else plain_seconds)
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> TrainView:
        if self.console.is_terminal:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[speed]}"),
                TimeElapsedColumn(),
                TextColumn("{task.fields[left]}"),
                console=self.console,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task("starting", total=None, speed="", left="")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)

    def batch(self, status: TrainStatus) -> None:
        where = f"epoch {status.epoch}/{status.epochs} batch {status.step}/{status.steps}"
        left = f"epoch ends in {human_seconds(status.epoch_seconds_left)}"
        if status.epoch < status.epochs:
            left += f", run in {human_seconds(status.seconds_left)}"
        if self._bar is not None and self._task is not None:
            self._bar.update(
                self._task,
                description=where,
                total=status.epochs * status.steps,
                completed=(status.epoch - 1) * status.steps + status.step,
                speed=f"{_speed(status)}  loss {status.loss:.3f}",
                left=left,
            )
        elif self._throttle.ready():
            self.console.print(
                f"{where}: {_speed(status)}, loss {status.loss:.3f}; {left}", highlight=False, soft_wrap=True
            )

    def epoch(self, epoch: int, metrics: dict[str, float]) -> None:
        top1 = f"top-1 {metrics['top1']:.2f}%"
        top1 += f" (EMA {metrics['top1_ema']:.2f}%)" if "top1_ema" in metrics else ""
        self.console.print(
            f"epoch {epoch}/{self.epochs}: {top1}  loss {metrics['train_loss']:.3f}  "
            f"{metrics['images_per_second']:,.0f} images/s  {human_seconds(metrics['train_seconds'])}",
            highlight=False,
            soft_wrap=True,
        )

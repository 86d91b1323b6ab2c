"""The progress bar of ``trio-agent batch`` on a terminal, drawn with rich.

rich is the ``progress`` extra: this module is imported only when stderr is a
terminal, and when rich cannot be imported the command draws its plain line instead.
The bar is two lines on stderr::

    ⠼ batch ━━━━━━━━━━━━━━╸━━━━━━━━━━━━━━━ 120/250  48% 0:00:41 · 0:00:44 left
      117 done · 3 running · 0 failed · 45,210 tokens · $0.1234 · 2.9/s

rich never draws from a thread of its own here (``auto_refresh=False``): the batch's
Trio tasks call :meth:`Bar.draw`, so that nothing else writes to stderr at the same
time. Its clock is Trio's (a test's ``MockClock`` too). Colour follows rich's reading
of the terminal, and none with ``NO_COLOR`` set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, TextIO

import trio
from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from ._batch import Tally
from ._cost import money

__all__ = ["Bar", "clock_time", "rate", "stats"]


def clock_time(seconds: float) -> str:
    """``H:MM:SS``, or ``-:--:--`` when not known (infinite)."""
    if not math.isfinite(seconds):
        return "-:--:--"
    minutes, secs = divmod(round(max(seconds, 0.0)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def rate(tally: Tally) -> str:
    """Items a second: one decimal below 10, whole numbers from there."""
    value = tally.rate()
    return f"{value:.1f}/s" if value < 10 else f"{value:,.0f}/s"


def stats(tally: Tally) -> Text:
    """The bar's second line: done, running, failed (aborted when some are), tokens,
    dollars and items a second."""
    sep = (" · ", "dim")
    parts: list[str | tuple[str, str]] = [
        "  ",
        (f"{tally.done} done", "green"),
        sep,
        f"{len(tally.running)} running",
        sep,
        (f"{tally.failed} failed", "red" if tally.failed else ""),
    ]
    if tally.aborted:
        parts += [sep, (f"{tally.aborted} aborted", "yellow")]
    parts += [sep, f"{tally.tokens:,} tokens", sep, money(tally.cost), sep, rate(tally)]
    return Text.assemble(*parts)


class _Left(ProgressColumn):
    """The time left, at the batch's rate so far."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        super().__init__()

    def render(self, task: Task) -> Text:
        return Text(f"· {clock_time(self.tally.left())} left", style="progress.remaining")


class _TwoLines(Progress):
    """A rich ``Progress`` with a line of figures under its bar."""

    def __init__(self, figures: Callable[[], Text], *columns: Any, **options: Any) -> None:
        self.figures = figures
        super().__init__(*columns, **options)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        yield self.figures()


class Bar:
    """The batch's progress on a terminal, drawn with rich (see the module's docs).
    Drawn when made; :meth:`close` draws the last state and leaves it on the screen."""

    def __init__(self, err: TextIO, tally: Tally) -> None:
        self.tally = tally
        self.progress = _TwoLines(
            lambda: stats(tally),
            SpinnerColumn(finished_text="✓"),
            TextColumn("batch"),
            BarColumn(bar_width=30),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            _Left(tally),
            console=Console(file=err, highlight=False),
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
            get_time=trio.current_time,
        )
        self.task = self.progress.add_task("batch", total=tally.total)
        self.progress.start()

    def draw(self) -> None:
        self.progress.update(self.task, completed=self.tally.ended)
        self.progress.refresh()

    def close(self) -> None:
        self.progress.update(self.task, completed=self.tally.ended)
        self.progress.stop()

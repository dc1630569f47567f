"""What a long step is doing, how far it is and how long it has taken.

:class:`Steps` follows one step made of numbered parts (the compiler's ``[n/N]`` lines
during ``ptkit build``) and of named phases between them (configuring, installing):

- on a terminal, one status line that updates in place (rich's progress bar: the step,
  ``n/N``, the elapsed time, the part being worked on); the phases stay above it;
- anywhere else (a CI log, a pipe, a file, ``TERM=dumb``, or without rich) plain lines
  through the caller's ``echo``, each with the elapsed seconds, and a line when one part
  has gone on for another :data:`STILL_EVERY` seconds, so a long compile is not mistaken
  for a hang.

Colour follows rich's rules: none when ``NO_COLOR`` is set or the stream is no terminal.
rich is imported only for the terminal display (it comes with ``ptkit[build]``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

__all__ = ["STILL_EVERY", "Steps", "is_terminal"]

# A part that has gone on this long gets a line saying so (plain output), and again
# every as many seconds.
STILL_EVERY = 30.0


def is_terminal(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``stream`` is a terminal that can redraw a line (not ``TERM=dumb``)."""
    if (os.environ if environ is None else environ).get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed or odd stream
        return False


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


class Steps:
    """Progress of one step: ``phase`` lines, numbered ``part``s, ``tick`` while waiting.

    ``live=True`` asks for the terminal display; it is used when rich can be imported and
    ``stream`` (default stdout) is a terminal, else plain lines go to ``echo``. Use it as a
    context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        title: str,
        echo: Callable[[str], None],
        *,
        live: bool = False,
        stream: TextIO | None = None,
        indent: str = "      ",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.title = title
        self.echo = echo
        self.indent = indent
        self.clock = clock
        self.started = clock()
        self.part: tuple[int, int, str] | None = None  # the last part done: (n, N, what)
        self.last = ""  # the last phase or part said, and when
        self.last_at = self.started
        self._said_still = 0  # how many STILL_EVERY periods since `last` were said
        self._bar: tuple[Progress, TaskID] | None = None
        if live and is_terminal(stream or sys.stdout):
            self._bar = _terminal_bar(title, stream or sys.stdout)

    @property
    def elapsed(self) -> float:
        return self.clock() - self.started

    def _line(self, text: str) -> None:
        line = f"{self.indent}{_seconds(self.elapsed):>6}  {text}"
        if self._bar is not None:
            self._bar[0].console.print(line, highlight=False, markup=False, soft_wrap=True)
        else:
            self.echo(line)

    def _said(self, what: str) -> None:
        self.last, self.last_at, self._said_still = what, self.clock(), 0

    def phase(self, text: str) -> None:
        """A named phase (configuring, installing): always its own line."""
        self._said(text)
        self._line(text)

    def part_done(self, number: int, total: int, what: str) -> None:
        """Part ``number`` of ``total`` is done (ninja, writing to a pipe, prints ``[n/N]``
        with the count of finished parts)."""
        self.part = (number, total, what)
        self._said(f"[{number}/{total}] was done")
        if self._bar is not None:
            progress, task = self._bar
            progress.update(task, total=total, completed=number, what=what)
        else:
            self._line(f"[{number}/{total}] {what}")

    def tick(self) -> None:
        """Called while waiting: the terminal redraws itself; plain output says when
        nothing has been said for another STILL_EVERY seconds."""
        if self._bar is not None or not self.last:
            return
        waited = self.clock() - self.last_at
        periods = int(waited // STILL_EVERY)
        if periods > self._said_still:
            self._said_still = periods
            self._line(f"… still working, {_seconds(waited)} since {self.last}")

    def close(self) -> None:
        if self._bar is not None:
            progress, task = self._bar
            if self.part is not None:
                progress.update(task, completed=self.part[1])
            progress.stop()
            self._bar = None

    def __enter__(self) -> Steps:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _terminal_bar(title: str, stream: TextIO) -> tuple[Progress, TaskID] | None:
    """rich's progress line for ``title``, started; None where rich is not installed."""
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
    except ImportError:
        return None
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[what]}", style="dim"),
        console=Console(file=stream),
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    )
    task = progress.add_task(title, total=None, what="")
    progress.start()
    return progress, task

"""Options and value types several commands share, written once.

The types refuse a bad value while click parses the command line (a usage error, exit
status 2, one ``Error:`` line naming the option, the value and what is expected), so a
command never starts with one: a NaN timeout that would wait forever, a port the socket
layer rejects with ``OverflowError``, an output folder that cannot be written after an
hour of building, a device file given as an input.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = [
    "PORT",
    "InputFile",
    "Seconds",
    "SuggestingChoice",
    "WritableFolder",
    "json_option",
    "machine_probe_options",
    "source_option",
]

F = TypeVar("F", bound=Callable[..., Any])


class Seconds(click.ParamType):  # type: ignore[type-arg]
    """A duration in seconds: a finite number, at least ``minimum`` (NaN, ``inf`` and
    negative values are refused: they would wait forever or overflow a timer)."""

    name = "seconds"

    def __init__(self, minimum: float) -> None:
        self.minimum = minimum

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        else:
            try:
                seconds = float(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a number of seconds{self._expected}", param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a finite number of seconds{self._expected}", param, ctx)
        if seconds < self.minimum:
            self.fail(f"{value!r} is too short{self._expected}", param, ctx)
        return seconds

    @property
    def _expected(self) -> str:
        return f"; expected a number of seconds >= {self.minimum:g}"

    def __repr__(self) -> str:
        return f"Seconds(minimum={self.minimum:g})"


PORT = click.IntRange(0, 65535)
"""A TCP port; 0 asks the system for a free one."""


class InputFile(click.Path):
    """A file the command reads: it must exist, be readable and be a regular file (a
    device, FIFO or socket is refused before the command waits on it or reads it forever)."""

    def __init__(self) -> None:
        super().__init__(exists=True, dir_okay=False, readable=True, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        if not Path(os.fsdecode(path)).is_file():
            self.fail(
                f"{os.fsdecode(value)!r} is not a regular file (a device, FIFO or socket); "
                "pass a file",
                param,
                ctx,
            )
        return path


class WritableFolder(click.Path):
    """A folder the command writes into: an existing writable folder, or a path that can
    be created (its nearest existing parent is a writable folder). Checked before the
    command starts, so a long build does not end on an output it cannot write."""

    def __init__(self) -> None:
        super().__init__(file_okay=False, path_type=Path)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = super().convert(value, param, ctx)
        problem = self.problem(Path(os.fsdecode(path)))
        if problem is not None:
            self.fail(
                f"{os.fsdecode(value)!r} {problem}; pass a folder you can write (it is "
                "created when missing)",
                param,
                ctx,
            )
        return path

    @staticmethod
    def problem(path: Path) -> str | None:
        """Why ``path`` cannot be written into or created, or None."""
        try:
            if path.exists():
                if not path.is_dir():
                    return "exists and is not a folder"
                if not os.access(path, os.W_OK | os.X_OK):
                    return "is a folder you cannot write"
                return None
            parent = next(p for p in path.absolute().parents if p.exists())
            if not parent.is_dir():
                return f"cannot be created: {parent} is not a folder"
            if not os.access(parent, os.W_OK | os.X_OK):
                return f"cannot be created: {parent} is a folder you cannot write"
        except OSError as exc:
            return f"cannot be used: {exc.strerror or exc}"
        return None


class SuggestingChoice(click.Choice):  # type: ignore[type-arg]
    """``click.Choice`` whose refusal names the closest choice (did you mean …?)."""

    def __init__(self, choices: Sequence[str]) -> None:
        super().__init__(choices)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            from ptkit.backends.base import did_you_mean  # only on this error path

            hint = did_you_mean(str(value), [str(c) for c in self.choices])
            if not hint:
                raise
            self.fail(f"{exc.message.rstrip('.')}{hint}.", param, ctx)


def machine_probe_options(command: F) -> F:
    """``--root`` and ``--timeout``, the same for every command that probes the machine
    (``select``, ``doctor``): ``ptkit.hardware.detect``'s two parameters."""
    command = click.option(
        "--timeout",
        "timeout_s",
        type=Seconds(minimum=0.1),
        default=3.0,
        show_default=True,
        help="Seconds each probe (nvidia-smi, NVML, a subprocess) may take.",
    )(command)
    return click.option(
        "--root",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=Path("/"),
        show_default=True,
        help="Read /proc and /sys under this folder (a recorded machine tree); NVML is asked "
        "only for /, nvidia-smi is the one on PATH (put a recorded one first).",
    )(command)


def json_option(what: str = "text") -> Callable[[F], F]:
    """``--json`` (``as_json``): print JSON instead of ``what``."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print JSON instead of {what}.")


def source_option(purpose: str) -> Callable[[F], F]:
    """``--source``: the project folder (default: the current one), for ``purpose``."""
    return click.option(
        "--source",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        default=Path.cwd,
        show_default="current directory",
        help=purpose,
    )

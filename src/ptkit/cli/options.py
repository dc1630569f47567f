"""Options several commands share, written once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["json_option", "machine_probe_options", "source_option"]

F = TypeVar("F", bound=Callable[..., Any])


def machine_probe_options(command: F) -> F:
    """``--root`` and ``--timeout``, the same for every command that probes the machine
    (``select``, ``doctor``): ``ptkit.hardware.detect``'s two parameters."""
    command = click.option(
        "--timeout",
        "timeout_s",
        type=click.FloatRange(min=0.1),
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

"""``ptkit inspect``: what a wheel or native library contains."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import click

from ptkit.cli.failures import CommandFailed, CommandMisused
from ptkit.cli.options import InputFile, json_option
from ptkit.platforms import MAGIC_LENGTH, platform_for_binary


def _input_problem(path: Path) -> str | None:
    """Why ``path`` is neither a wheel nor a native library (ELF, Mach-O or PE), read
    from its first bytes (a zip's central directory for a wheel), or None."""
    size = path.stat().st_size
    if path.suffix == ".whl":
        if not zipfile.is_zipfile(path):
            return (
                f"{path} is not a wheel: it is not a zip archive ({size} bytes; a download "
                "cut short?); pass a wheel built by `ptkit build` or `pip wheel`"
            )
        return None
    with path.open("rb") as file:
        head = file.read(MAGIC_LENGTH)
    if platform_for_binary(head) is None:
        return (
            f"{path} is neither a wheel (.whl) nor a native library ({size} bytes, no ELF, "
            "Mach-O or PE header); pass a wheel or a native library (.so, .dylib, .dll) "
            "built by ptkit"
        )
    return None


@click.command()
@click.argument("path", type=InputFile())
@json_option()
@click.option(
    "--cuobjdump",
    envvar="PTKIT_CUOBJDUMP",
    help="cuobjdump to list CUDA fatbinaries with [env PTKIT_CUOBJDUMP; default: beside the "
    "CUDA toolkits ptkit finds (ptkit's toolchain cache: ptkit toolchain install cu13), then "
    "PATH].",
)
def inspect(path: Path, as_json: bool, cuobjdump: str | None) -> None:
    """What a wheel or native library contains: manifest, links, symbols, GPU code.

    Exits with status 1 when the audit finds a problem (a CUDA library's fatbinary is
    listed with cuobjdump: without one, that is the problem, and it names the command
    that installs it), 2 when PATH is neither a wheel nor a native library.
    """
    problem = _input_problem(path)
    if problem is not None:
        raise CommandMisused(f"ptkit inspect: {problem}")
    try:
        from ptkit.release.inspection import inspect_path, reports_json
    except ImportError as exc:  # pyelftools: a dependency, absent after a --no-deps install
        raise CommandFailed(
            f"ptkit inspect: {exc} (pyelftools, a dependency of ptkit); install it: "
            f"{sys.executable} -m pip install pyelftools"
        ) from exc

    reports = inspect_path(path, cuobjdump=cuobjdump)
    if not reports:
        raise click.ClickException(f"{path} contains no native library")
    click.echo(reports_json(reports) if as_json else "\n\n".join(r.format() for r in reports))
    if any(r.problems for r in reports):
        sys.exit(1)

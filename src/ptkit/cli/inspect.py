"""``ptkit inspect``: what a wheel or native library contains."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ptkit.cli.options import json_option


@click.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option()
@click.option(
    "--cuobjdump",
    envvar="PTKIT_CUOBJDUMP",
    help="cuobjdump to list CUDA fatbinaries with [env PTKIT_CUOBJDUMP; default: pip's, then PATH].",
)
def inspect(path: Path, as_json: bool, cuobjdump: str | None) -> None:
    """What a wheel or native library contains: manifest, links, symbols, GPU code.

    Exits with status 1 when the audit finds a problem.
    """
    try:
        from ptkit.release.inspection import inspect_path, reports_json
    except ImportError as exc:  # pyelftools is an extra
        raise click.ClickException(f"{exc}; install it with: pip install 'ptkit[build]'") from exc

    reports = inspect_path(path, cuobjdump=cuobjdump)
    if not reports:
        raise click.ClickException(f"{path} contains no native library")
    click.echo(reports_json(reports) if as_json else "\n\n".join(r.format() for r in reports))
    if any(r.problems for r in reports):
        sys.exit(1)

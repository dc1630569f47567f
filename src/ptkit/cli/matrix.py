"""``ptkit matrix``: the release plan, and the files generated from the recipes."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ptkit.cli.options import source_option


@click.command()
@click.option(
    "--check",
    is_flag=True,
    help="Exit 1 naming each generated file that differs from what recipes/ generates.",
)
@click.option(
    "--write",
    is_flag=True,
    help="Regenerate ci/cibuildwheel/<variant>.toml, .github/workflows/release.yml and "
    "recipes/recipe.schema.json from recipes/.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@source_option("The project whose recipes/ make the plan.")
def matrix(check: bool, write: bool, as_json: bool, source: Path) -> None:
    """The release plan: variant x platform x CPython (cp310-cp315, cp315t).

    One py3-none wheel per (variant, platform), built once with the first CPython and
    tested on every CPython by cibuildwheel. --write regenerates the files made from
    the recipes; --check exits 1 while a committed one is stale (exit 2: invalid recipes).
    """
    from ptkit.release.matrix import matrix_command

    status = matrix_command(
        source.resolve(),
        check=check,
        write=write,
        as_json=as_json,
        echo=click.echo,
        echo_err=lambda message: click.echo(message, err=True),
    )
    if status:
        sys.exit(status)

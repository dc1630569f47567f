"""``ptkit explain``: which implementation serves each op, per device type, and why."""

from __future__ import annotations

import json

import click

from ptkit.cli.options import json_option


@click.command()
@json_option("a table")
def explain(as_json: bool) -> None:
    """Which implementation serves each op on each device type, and why: for every
    installed package that uses ptkit (the ptkit.packages entry-point group)."""
    import ptkit.runtime as runtime
    from ptkit._version import __version__
    from ptkit.cli._packages import import_installed_packages

    problems = import_installed_packages()
    if as_json:
        payload = {
            "ptkit": __version__,
            "packages": [
                *(
                    {**p.to_json(), "routes": [r.to_json() for r in runtime.explain(p.name)]}
                    for p in runtime.package_loads()
                ),
                *({"name": name, "error": error} for name, error in problems.items()),
            ],
        }
        click.echo(json.dumps(payload, indent=2))
    else:
        click.echo(runtime.format_explain())
        for name, error in problems.items():
            click.echo(f"error: {name}: {error}")

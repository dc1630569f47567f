"""``ptkit profile``: what this machine and torch can do."""

from __future__ import annotations

import json

import click

from ptkit.cli.options import json_option


@click.command()
@json_option()
def profile(as_json: bool) -> None:
    """What this machine and torch can do: devices, torch.compile, graph capture, the
    distributed backend, Inductor GEMM backends, and which implementation serves each op."""
    import ptkit.runtime
    from ptkit.cli._packages import import_installed_packages

    import_installed_packages()
    runtime_profile = ptkit.runtime.profile()
    if as_json:
        click.echo(json.dumps(runtime_profile.to_json(), indent=2))
    else:
        click.echo(runtime_profile.format())

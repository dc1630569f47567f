"""``ptkit select``: which variant fits this machine, and the commands that install it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ptkit.cli.options import machine_probe_options

# ptkit.selection.ENV_INDEX_URL, spelled here so that `ptkit --help` need not import
# ptkit.selection (a unit test keeps the two equal).
ENV_INDEX_URL = "PTKIT_INDEX_URL"


@click.command("select")
@click.option(
    "--index-url",
    envvar=ENV_INDEX_URL,
    help="Root of ptkit's index (<root>/<variant>/simple); the commands need it. "
    "Env: PTKIT_INDEX_URL.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (schema_version 1).")
@click.option(
    "--source",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Choose among another project's variants (its recipes/ and the distribution its "
    "pyproject.toml names) instead of ptkit-ops'.",
)
@click.option(
    "--torch",
    "torch_version",
    default=None,
    metavar="VERSION",
    help="The torch the install is for (2.13.0+cpu): a torch-mode variant's build and the "
    "commands' torch pin follow it. Default: this environment's torch.",
)
@machine_probe_options
def select(
    index_url: str | None,
    as_json: bool,
    source: Path | None,
    torch_version: str | None,
    root: Path,
    timeout_s: float,
) -> None:
    """Which variant of ptkit-ops fits this machine, and the pip and uv commands that
    install it.

    Reads the NVIDIA driver and each GPU's compute capability, AMD gfx targets (KFD
    topology), Intel GPUs (PCI ids) and Apple silicon without importing torch, then
    picks the variant whose recipe targets cover every device. PTKIT_VARIANT overrides;
    a build override (PTKIT_CUDA_ARCHS, PTKIT_HIP_TARGETS) is checked as the build
    checks it. For a torch-mode variant (one wheel per torch minor) it names the build
    for this environment's torch, and the commands keep that torch. Exit 2 on a bad
    option or override.
    """
    from ptkit.recipes.torch_builds import TorchMinor
    from ptkit.selection import OPS_DISTRIBUTION, SelectionError, project_distribution, render_text
    from ptkit.selection import select as select_variant

    if torch_version is not None and TorchMinor.parse(torch_version) is None:
        raise SelectionError(
            f"ptkit select: --torch {torch_version!r} is not a torch version; expected one "
            "like 2.13.0+cpu or 2.14"
        )
    recipes = source / "recipes" if source is not None else None
    distribution = project_distribution(source) if source is not None else OPS_DISTRIBUTION
    # A SelectionError (a bad override or URL) is a usage error: the boundary says it, exit 2.
    result = select_variant(
        root,
        index_url=index_url,
        timeout_s=timeout_s,
        torch=torch_version,
        recipes_directory=recipes,
        distribution=distribution,
    )
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(render_text(result).rstrip("\n"))

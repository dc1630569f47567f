"""``ptkit new``: a new extension project that ptkit builds, ships and loads."""

from __future__ import annotations

from pathlib import Path

import click

from ptkit.cli.options import WritableFolder


@click.command()
@click.argument("name")
@click.option(
    "--backends",
    default="cpu",
    show_default=True,
    help="Comma list of backends to write an example op for: cpu, cuda (cpu is always in).",
)
@click.option(
    "--schemas",
    type=click.Choice(["python", "cpp"]),
    default="python",
    show_default=True,
    help="Where the op's schema is defined: python (with a reference implementation and the "
    "fake kernel, in the package) or cpp (STABLE_TORCH_LIBRARY in the CPU library, no "
    "reference).",
)
@click.option(
    "--dir",
    "directory",
    type=WritableFolder(),
    default=None,
    show_default="./NAME",
    help="Where to write the project (missing or empty).",
)
def new(name: str, backends: str, schemas: str, directory: Path | None) -> None:
    """Write a new extension project NAME that ptkit builds, ships and loads.

    pyproject.toml (scikit-build-core, ptkit), a CMakeLists.txt of a few lines, one
    example op (NAME::scale_add) per backend with its fake kernel (and, with --schemas
    python, its schema and reference in Python; cpp: its schema in C++), the recipes, tests, and the cibuildwheel configuration and release workflow generated
    from the recipes. Nothing is written unless all of it is (exit 1 with the reason).
    """
    from ptkit.scaffold import create_project

    # A ScaffoldError says why and what to do: the CLI's boundary prints it.
    root, files = create_project(
        name, backends=backends.split(","), directory=directory, schemas=schemas
    )
    click.echo(f"ptkit new: wrote {len(files)} files into {root}:")
    click.echo("\n".join(f"  {f}" for f in files))
    from ptkit.scaffold import parse_backends

    variants = "cpu and cu13 wheels" if "cuda" in parse_backends(backends) else "cpu wheel"
    click.echo(
        f"Next: cd {root} && make test (builds the {variants} with ptkit build, installs "
        "the cpu one with pytest, runs tests/); it needs torch and pip install 'ptkit[build]' "
        "in this Python"
    )

"""``ptkit adopt``: an existing extension project (setup.py, or kernel-builder's
build.toml) made into one that ptkit builds, without touching its kernels."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument(
    "path",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    required=False,
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace pyproject.toml, CMakeLists.txt and the recipes where they exist.",
)
def adopt(path: Path, force: bool) -> None:
    """Make the extension project at PATH (default: here) one that ptkit builds.

    Reads a setup.py with torch.utils.cpp_extension CppExtension/CUDAExtension (run with
    recording stand-ins: nothing is built) or a Hugging Face kernel-builder build.toml,
    and writes pyproject.toml (scikit-build-core, ptkit's version provider),
    CMakeLists.txt (one ptkit_add_kernel_library per extension), recipes/cpu.toml and
    recipes/cu13.toml, and the package's loader call. The kernel sources are not
    changed. Nothing is written unless all of it is (exit 1 with the reason); what could
    not be translated is listed, each with its fix.
    """
    from ptkit.adopt import adopt as run_adopt

    # An AdoptError says what was expected, what was found and the fix: the boundary prints it.
    result = run_adopt(path, force=force)
    adoption = result.adoption
    libraries = ", ".join(f"{lib.name} ({lib.backend})" for lib in adoption.libraries)
    click.echo(
        f"ptkit adopt: read {adoption.source} of {adoption.distribution} {adoption.version}: "
        f"{libraries}; ABI {adoption.abi}"
        + (" (the classic C++ API: one wheel per torch minor)" if adoption.abi == "torch" else "")
    )
    click.echo(f"wrote {len(result.written)} files into {result.root}:")
    click.echo("\n".join(f"  {name}" for name in result.written))
    if result.edited:
        count = len(result.edited)
        click.echo(f"edited {count} file{'s' if count != 1 else ''} (glue, not kernels):")
        click.echo("\n".join(f"  {edit.path}: {edit.why}" for edit in result.edited))
    if result.untranslated:
        click.echo(f"NOT translated ({len(result.untranslated)}): fix these by hand:")
        for item in result.untranslated:
            click.echo(f"  - {item.what}\n    fix: {item.fix}")
    else:
        click.echo("NOT translated: nothing")
    variants = [v for v, b in (("cpu", "cpu"), ("cu13", "cuda")) if b in adoption.backends()]
    click.echo(
        "Next: "
        + "; ".join(f"ptkit build --source {result.root} --variant {v}" for v in variants)
        + " (docs/adopting.md)"
    )

"""``ptkit toolchain``: the recipes' pinned toolkits in ptkit's toolchain cache.

``install`` puts a variant's ``[toolkit] packages`` (CUDA 13.5 from PyPI) into a venv
of their own in the cache, ``list`` shows what is there, ``path`` prints a variant's
toolkit root (the folder ``PTKIT_CUDA_ROOT`` takes). ``ptkit build`` installs a missing
toolkit by itself; ``ptkit inspect``, the doctor and CMake find the cached ones.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from ptkit.cli.failures import CommandFailed, CommandMisused
from ptkit.cli.options import json_option, source_option
from ptkit.recipes.model import Recipe

_WHERE = "the cache folder: $PTKIT_CACHE_DIR, else ~/.cache/ptkit (Linux)"


def load_variant_recipe(command: str, variant: str, source: Path) -> tuple[Recipe, str]:
    """The recipe ``variant`` names and where it came from: a ``.toml`` file, the
    project ``source``'s ``recipes/<variant>.toml``, or, outside a project, ptkit's own
    recipes (ptkit-ops' variants, shipped in the toolkit). A usage error otherwise."""
    from ptkit.backends.base import did_you_mean
    from ptkit.recipes import RecipeError, load_recipe, load_recipes
    from ptkit.selection import recipes_dir

    given = Path(variant)
    if given.suffix == ".toml":
        if not given.is_file():
            raise CommandMisused(f"{command}: recipe file {given} does not exist")
        return load_recipe(given.stem, given.parent), str(given)
    folders = [(source / "recipes", f"{source / 'recipes'}")]
    if not folders[0][0].is_dir():
        folders = [(recipes_dir(), "ptkit's own recipes")]
    known: list[str] = []
    for folder, label in folders:
        if (folder / f"{variant}.toml").is_file():
            return load_recipe(variant, folder), f"{label}/{variant}.toml"
        try:
            known += sorted(load_recipes(folder))
        except RecipeError:
            continue
    where = folders[0][1]
    raise CommandMisused(
        f"{command}: no recipe {variant!r} in {where}{did_you_mean(variant, known)}; expected "
        f"one of {', '.join(known) or 'none'} (or pass --source <project>, or a recipe file)"
    )


def _compiler_text(site: Path | None, backend: str) -> str:
    from ptkit.backends import BACKENDS

    compilers = BACKENDS[backend].pip_compilers(site) if site is not None else []
    name = BACKENDS[backend].compiler_name
    return f"{name} at {compilers[0]}" if compilers else f"no {name} in it"


@click.group()
def toolchain() -> None:
    """The recipes' pinned toolkits (CUDA 13.5 from PyPI) in ptkit's toolchain cache.

    Each toolchain is a venv of its own, one per (toolkit, version, packages), shared by
    every project and never torch's environment (torch pins its own CUDA runtime).
    The cache is $PTKIT_CACHE_DIR/toolchains, else the user cache folder
    (~/.cache/ptkit/toolchains on Linux, ~/Library/Caches/ptkit on macOS,
    %LOCALAPPDATA%/ptkit/Cache on Windows).
    """


@toolchain.command()
@click.argument("variant")
@source_option("The project whose recipes/<VARIANT>.toml to read (else ptkit's own recipes).")
def install(variant: str, source: Path) -> None:
    """Install VARIANT's [toolkit] packages into the toolchain cache (once).

    VARIANT is a recipe of the project (--source, default: the current folder), of
    ptkit's own variants outside a project, or a recipe file. pip's output shows the
    download; a failed or interrupted install leaves nothing behind.
    """
    from ptkit.backends.toolchain_cache import find_cached
    from ptkit.release.toolchains import install_toolchain, toolchain_spec

    command = f"ptkit toolchain install {variant}"
    recipe, origin = load_variant_recipe(command, variant, source.resolve())
    spec = toolchain_spec(recipe)
    if spec is None:
        click.echo(
            f"{command}: {origin} has no [toolkit] packages: its toolchain "
            f"({recipe.toolkit.name or 'the system compiler'}) is not installed by ptkit"
        )
        return
    found = find_cached(spec)
    if found is not None:
        click.echo(
            f"{command}: already in ptkit's toolchain cache: {found.path} "
            f"({_compiler_text(found.site_packages, spec.backend)})"
        )
        return
    click.echo(
        f"{command}: {spec.name} {spec.version} from {origin} ({' '.join(spec.packages)}) "
        "into ptkit's toolchain cache, a venv of its own"
    )
    started = time.monotonic()
    done = install_toolchain(spec, echo=click.echo)
    click.echo(
        f"{command}: ready in {time.monotonic() - started:.0f} s: {done.path} "
        f"({_compiler_text(done.site_packages, spec.backend)})"
    )


@toolchain.command(name="list")
@json_option()
def list_toolchains(as_json: bool) -> None:
    """The toolchains in the cache, newest first."""
    from ptkit.backends.toolchain_cache import cached_toolchains, toolchains_dir

    folder = toolchains_dir()
    found = cached_toolchains()
    if as_json:
        rows = [
            {
                "name": t.spec.name,
                "version": t.spec.version,
                "backend": t.spec.backend,
                "path": str(t.path),
                "packages": list(t.spec.packages),
                "installed": list(t.installed),
                "created": t.created,
            }
            for t in found
        ]
        click.echo(json.dumps({"cache": str(folder), "toolchains": rows}, indent=2))
        return
    click.echo(f"ptkit's toolchain cache: {folder} ({_WHERE})")
    if not found:
        click.echo("  (empty: `ptkit toolchain install <variant>` adds one)")
    for t in found:
        click.echo(f"  {t.spec.name} {t.spec.version}  {t.path}  (made {t.created})")
        click.echo(f"      {', '.join(t.installed) or 'no packages listed'}")


@toolchain.command()
@click.argument("variant")
@source_option("The project whose recipes/<VARIANT>.toml to read (else ptkit's own recipes).")
def path(variant: str, source: Path) -> None:
    """Print VARIANT's toolkit root in the cache (what PTKIT_CUDA_ROOT takes).

    Exits with status 1, naming the install command, when it is not installed.
    """
    from ptkit.backends import BACKENDS
    from ptkit.backends.toolchain_cache import find_cached
    from ptkit.release.toolchains import install_command, toolchain_spec

    command = f"ptkit toolchain path {variant}"
    recipe, origin = load_variant_recipe(command, variant, source.resolve())
    spec = toolchain_spec(recipe)
    if spec is None:
        raise CommandFailed(f"{command}: {origin} has no [toolkit] packages to install")
    found = find_cached(spec)
    compilers = (
        BACKENDS[spec.backend].pip_compilers(found.site_packages)
        if found is not None and found.site_packages is not None
        else []
    )
    if not compilers:
        here = source.resolve() == Path.cwd().resolve()
        install = install_command(variant, None if here else source.resolve())
        raise CommandFailed(
            f"{command}: {spec.name} {spec.version} is not in ptkit's toolchain cache "
            f"({spec.path()}); install it with: {install}"
        )
    # <root>/bin/<compiler>: the folder the backend's root variable takes.
    click.echo(compilers[0].parent.parent)

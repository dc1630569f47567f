"""``ptkit build``: one variant's wheel, as the release builds it."""

from __future__ import annotations

from pathlib import Path

import click

from ptkit.cli.failures import CommandMisused
from ptkit.cli.options import SuggestingChoice, WritableFolder, source_option


def _variant_problem(variant: str, source: Path) -> str | None:
    """Why ``--variant`` cannot be built from ``source``, with the likely fix: no
    recipes there at all (not a project: the wrong --source?), or no such variant (the
    closest one, and the ones there are). None when its recipe file exists (the
    pipeline then reads and checks it)."""
    from ptkit.backends.base import did_you_mean
    from ptkit.recipes import RecipeError, load_recipes, recipe_path

    recipes = source / "recipes"
    if recipe_path(variant, recipes).is_file():
        return None
    not_a_project = (
        f"ptkit build: {source} is not a ptkit project (it has no recipes/<variant>.toml); "
        "pass --source <project> (the folder with pyproject.toml and recipes/), or start one "
        "with `ptkit new <name>`"
    )
    if not recipes.is_dir():
        return not_a_project
    try:
        known = sorted(load_recipes(recipes))
    except RecipeError as exc:
        return (
            f"ptkit build: --variant {variant!r}: {recipe_path(variant, recipes)} does not "
            f"exist, and the other recipes do not load: {exc}"
        )
    if not known:
        return not_a_project
    return (
        f"ptkit build: --variant {variant!r} is not a recipe of {source}"
        f"{did_you_mean(variant, known)}; expected one of {', '.join(known)} "
        f"(or add recipes/{variant}.toml)"
    )


@click.command()
@click.option("--variant", required=True, help="Recipe to build: recipes/<variant>.toml.")
@source_option("The project to build (its pyproject.toml and recipes/).")
@click.option(
    "--dist",
    type=WritableFolder(),
    default=Path("dist"),
    show_default=True,
    help="Finished wheels go to DIST/<variant>/.",
)
@click.option(
    "--build-root",
    type=WritableFolder(),
    default=None,
    show_default="SOURCE/build",
    help="CMake build folders, the scratch folder and the compiler cache go here.",
)
@click.option(
    "--allow-missing-backend",
    is_flag=True,
    help="Build even when the variant's GPU toolchain is missing (a CPU-only wheel).",
)
@click.option(
    "--compiler-cache",
    type=SuggestingChoice(["auto", "sccache", "ccache", "none"]),
    default="auto",
    show_default=True,
    help="Compiler launcher: auto = ccache if installed (it wraps nvcc too), else sccache.",
)
def build(
    variant: str,
    source: Path,
    dist: Path,
    build_root: Path | None,
    allow_missing_backend: bool,
    compiler_cache: str,
) -> None:
    """Build one variant's wheel here as the release does: build, repair, audit, smoke, dist.

    Each stage is printed with its duration; a failure names the stage, the cause and
    the fix, exits with status 1 and leaves DIST untouched. SOURCE_DATE_EPOCH defaults
    to the last commit's time (git log -1 --format=%ct), so rebuilding a commit gives
    the same bytes. ccache (or else sccache) is used when installed; CCACHE_DIR defaults
    to BUILD_ROOT/ccache (SCCACHE_DIR to BUILD_ROOT/sccache).
    """
    problem = _variant_problem(variant, source.resolve())
    if problem is None and build_root is None:  # the default, SOURCE/build: checked here
        unusable = WritableFolder.problem(source.resolve() / "build")
        if unusable is not None:
            problem = (
                f"ptkit build: the build folder {source.resolve() / 'build'} {unusable}; pass "
                "--build-root with a folder you can write"
            )
    if problem is not None:
        raise CommandMisused(problem)

    from ptkit.release.pipeline import run_pipeline

    # A BuildError names the stage, the cause and the fix: the CLI's boundary prints it.
    run_pipeline(
        variant,
        repo=source.resolve(),
        dist=dist,
        build_root=build_root,
        require_backend=not allow_missing_backend,
        compiler_cache=compiler_cache,
        echo=click.echo,
    )

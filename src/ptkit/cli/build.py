"""``ptkit build``: one variant's wheel, as the release builds it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ptkit.cli.failures import CommandMisused
from ptkit.cli.options import SuggestingChoice, WritableFolder, source_option
from ptkit.cross import CROSS_TARGETS

if TYPE_CHECKING:
    from ptkit.recipes.torch_builds import TorchMinor


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
@click.option(
    "--torch",
    "torch_minors",
    multiple=True,
    metavar="MINOR",
    help="For an abi = 'torch' recipe: the torch minor to build for (2.13), one of its "
    "[torch] versions; repeat it for several, 'all' for every one. Default: this Python's "
    "torch.",
)
@click.option(
    "--build-python",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar="PTKIT_BUILD_PYTHON",
    default=None,
    help="The Python that runs the build (its torch is the one built against). Default for "
    "--torch: this Python when its torch is that minor, else ptkit's build environment for "
    "it (installed into ptkit's cache on first use). Env: PTKIT_BUILD_PYTHON.",
)
@click.option(
    "--platform",
    "cross_platform",
    type=SuggestingChoice(sorted(CROSS_TARGETS)),
    default=None,
    help="Cross-build for that release platform with zig against its own torch (a compile "
    "and link proof: audited, not repaired or smoke-tested). Default: this machine's.",
)
def build(
    variant: str,
    source: Path,
    dist: Path,
    build_root: Path | None,
    allow_missing_backend: bool,
    compiler_cache: str,
    torch_minors: tuple[str, ...],
    build_python: Path | None,
    cross_platform: str | None,
) -> None:
    """Build one variant's wheel here as the release does: build, repair, audit, smoke, dist.

    Each stage is printed with its duration; a failure names the stage, the cause and
    the fix, exits with status 1 and leaves DIST untouched. SOURCE_DATE_EPOCH defaults
    to the last commit's time (git log -1 --format=%ct), so rebuilding a commit gives
    the same bytes. ccache (or else sccache) is used when installed; CCACHE_DIR defaults
    to BUILD_ROOT/ccache (SCCACHE_DIR to BUILD_ROOT/sccache).

    A torch-mode recipe (abi = "torch") builds one wheel per torch minor, each with a
    Python whose torch is that minor (+cpu.torch2.13 requires torch>=2.13,<2.14): pass
    --torch to say which; the build runs in that Python (--build-python, or ptkit's
    build environment for it) with this ptkit.
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
    repo = source.resolve()
    minors = _torch_minors(variant, repo, torch_minors)
    if cross_platform is not None and (minors or build_python is not None):
        raise CommandMisused(
            "ptkit build: --platform builds with this Python against the target's torch of "
            "the same version; it does not combine with --torch or --build-python"
        )

    from ptkit.release.pipeline import run_pipeline

    if not minors and build_python is None:
        # A BuildError names the stage, the cause and the fix: the CLI's boundary prints it.
        run_pipeline(
            variant,
            repo=repo,
            dist=dist,
            build_root=build_root,
            require_backend=not allow_missing_backend,
            compiler_cache=compiler_cache,
            echo=click.echo,
            cross_platform=cross_platform,
        )
        return
    for minor in minors or (None,):
        _build_with(
            variant,
            minor,
            repo=repo,
            dist=dist,
            build_root=build_root,
            allow_missing_backend=allow_missing_backend,
            compiler_cache=compiler_cache,
            build_python=build_python,
        )


def _torch_minors(variant: str, repo: Path, given: tuple[str, ...]) -> tuple[TorchMinor, ...]:
    """The torch minors to build for: each ``--torch`` (``all``: every one of the recipe's
    ``[torch] versions``), checked against the recipe; none given: none (the pipeline
    takes the build Python's torch)."""
    if not given:
        return ()
    from ptkit.recipes import RecipeError, load_recipe, recipe_path
    from ptkit.recipes.torch_builds import (
        TorchBuildError,
        TorchMinor,
        build_for_torch,
        recipe_torch_minors,
    )

    try:
        recipe = load_recipe(variant, repo / "recipes")
    except RecipeError:
        return ()  # the pipeline reports the recipe's problems with the build's words
    where = str(recipe_path(variant, repo / "recipes"))
    if "all" in given:
        if recipe.abi != "torch":
            raise CommandMisused(
                f"ptkit build: --torch all: {where} is a stable-ABI recipe (one wheel for every "
                "torch); build it without --torch"
            )
        return recipe_torch_minors(recipe)
    minors: list[TorchMinor] = []
    for text in given:
        minor = TorchMinor.parse(text)
        if minor is None or str(minor) != text.strip():
            raise CommandMisused(
                f"ptkit build: --torch {text!r} is not a torch minor: expected one like 2.14 "
                "(or all)"
            )
        try:
            build_for_torch(recipe, minor, where)
        except TorchBuildError as exc:
            raise CommandMisused(f"ptkit build: --torch {text}: {exc}") from exc
        if minor not in minors:
            minors.append(minor)
    return tuple(minors)


def _build_with(
    variant: str,
    minor: TorchMinor | None,
    *,
    repo: Path,
    dist: Path,
    build_root: Path | None,
    allow_missing_backend: bool,
    compiler_cache: str,
    build_python: Path | None,
) -> None:
    """One build (for torch ``minor``; None: of the build Python's torch, or the stable
    one): here when this Python is the build Python, else ``ptkit build`` run there."""
    import subprocess

    from ptkit.recipes import load_recipe
    from ptkit.release.build_python import delegated_command, delegated_environment, stage_toolkit
    from ptkit.release.pipeline import run_pipeline
    from ptkit.release.pipeline.provision import provision_build_python

    recipe = load_recipe(variant, repo / "recipes")
    python = provision_build_python(recipe, minor, given=build_python, echo=click.echo)
    if python.is_this_python:
        run_pipeline(
            variant,
            repo=repo,
            dist=dist,
            build_root=build_root,
            require_backend=not allow_missing_backend,
            compiler_cache=compiler_cache,
            echo=click.echo,
            torch=str(minor) if minor is not None else None,
        )
        return
    root = (build_root or repo / "build").resolve()
    staged = stage_toolkit(root / (minor.label if minor else "build-python") / "toolkit")
    what = f"{variant} for torch {minor}" if minor else variant
    click.echo(f"ptkit build {what}: in {python.describe()}, with this ptkit ({staged})")
    command = delegated_command(
        python,
        variant=variant,
        torch=minor,
        source=repo,
        dist=dist,
        build_root=root,
        allow_missing_backend=allow_missing_backend,
        compiler_cache=compiler_cache,
    )
    # Its output is the build's own (stages, errors with their fix): passed through as it is.
    code = subprocess.run(command, env=delegated_environment(staged), check=False).returncode
    if code != 0:
        raise click.exceptions.Exit(code)

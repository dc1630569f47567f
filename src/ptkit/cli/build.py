"""``ptkit build``: one variant's wheel, as the release builds it."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ptkit.cli.options import source_option


@click.command()
@click.option("--variant", required=True, help="Recipe to build: recipes/<variant>.toml.")
@source_option("The project to build (its pyproject.toml and recipes/).")
@click.option(
    "--dist",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("dist"),
    show_default=True,
    help="Finished wheels go to DIST/<variant>/.",
)
@click.option(
    "--build-root",
    type=click.Path(file_okay=False, path_type=Path),
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
    type=click.Choice(["auto", "sccache", "ccache", "none"]),
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
    from ptkit.release.pipeline import BuildError, run_pipeline

    try:
        run_pipeline(
            variant,
            repo=source.resolve(),
            dist=dist,
            build_root=build_root,
            require_backend=not allow_missing_backend,
            compiler_cache=compiler_cache,
            echo=click.echo,
        )
    except BuildError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)

"""Before stage 1: the recipe's pinned toolkit, installed into ptkit's toolchain cache
when the build would find none.

A cuda recipe's ``[toolkit] packages`` (CUDA 13.5 from PyPI) are what its build needs;
a machine that has no CUDA toolkit where the build looks (``PTKIT_CUDA_ROOT``, pip's
``nvidia/cu*`` on the build Python's path, the cache) gets the recipe's one installed
into the cache (:mod:`ptkit.release.toolchains`), with one line saying what, where and
why, and pip's own progress. A toolkit the build finds is used as it is: one named by
``PTKIT_CUDA_ROOT`` is never second-guessed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ptkit.backends import BACKENDS
from ptkit.backends.toolchain_cache import CachedToolchain
from ptkit.recipes.model import Recipe
from ptkit.release.pipeline import cuda_toolkit
from ptkit.release.pipeline.errors import BuildError
from ptkit.release.toolchains import ToolchainError, install_toolchain, toolchain_spec

__all__ = ["provision_toolkit"]


def provision_toolkit(
    recipe: Recipe,
    repo: Path,
    *,
    environ: Mapping[str, str] | None = None,
    echo: Callable[[str], None] = print,
    required: bool = True,
) -> CachedToolchain | None:
    """The toolchain installed for ``recipe`` now, or None when its build needs none
    (no ``[toolkit] packages``, a backend the cache does not serve, a toolkit found). A
    failed install stops the build, unless the backend is not ``required``
    (``--allow-missing-backend``): then the build goes on without it."""
    env = os.environ if environ is None else environ
    backend = BACKENDS[recipe.backend]
    if not backend.cached_toolkits or not recipe.toolkit.packages:
        return None
    paths = cuda_toolkit.search_paths(repo, recipe, env)
    if backend.find_toolkit(env, paths) is not None:
        return None
    spec = toolchain_spec(recipe)
    if spec is None:  # pragma: no cover - the packages were checked above
        return None
    echo(
        f"ptkit build {recipe.name}: installing the recipe's toolkit, {backend.title} "
        f"{spec.version} ({' '.join(spec.packages)}), into ptkit's toolchain cache "
        f"{spec.path(env)} (once for every project, never into torch's environment), "
        f"because no {backend.compiler_name} was found ({backend.toolkit_search})"
    )
    started = time.monotonic()
    try:
        done = install_toolchain(spec, environ=env, echo=echo)
    except ToolchainError as exc:
        if required:
            raise BuildError("toolkit", recipe.name, exc.cause, exc.fix) from exc
        echo(f"ptkit build {recipe.name}: no toolkit ({exc}); building without it as asked")
        return None
    echo(f"ptkit build {recipe.name}: toolkit ready in {time.monotonic() - started:.0f} s")
    return done

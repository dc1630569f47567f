"""Before stage 1: the recipe's pinned toolkit, installed into ptkit's toolchain cache
when the build would find none; for a torch-mode build, the Python whose torch is the
minor asked for (:func:`provision_build_python`), installed into ptkit's cache when
there is none.

A cuda recipe's ``[toolkit] packages`` (CUDA 13.5 from PyPI) are what its build needs;
a machine that has no CUDA toolkit where the build looks (``PTKIT_CUDA_ROOT``, pip's
``nvidia/cu*`` on the build Python's path, the cache) gets the recipe's one installed
into the cache (:mod:`ptkit.release.toolchains`), with one line saying what, where and
why, and pip's own progress. A toolkit the build finds is used as it is: one named by
``PTKIT_CUDA_ROOT`` is never second-guessed.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ptkit.backends import BACKENDS
from ptkit.backends.toolchain_cache import CachedToolchain
from ptkit.recipes.model import Recipe
from ptkit.recipes.torch_builds import TorchMinor
from ptkit.release.build_python import BuildPython, build_environment, probe_python
from ptkit.release.pipeline import cuda_toolkit
from ptkit.release.pipeline.errors import BuildError
from ptkit.release.pipeline.prerequisites import build_environment_requirements
from ptkit.release.toolchains import (
    ToolchainError,
    install_build_environment,
    install_toolchain,
    toolchain_spec,
)

__all__ = ["provision_build_python", "provision_toolkit"]


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


def _probe(recipe: Recipe, executable: Path | str, source: str) -> BuildPython:
    try:
        return probe_python(executable, source)
    except (OSError, ValueError) as exc:
        raise BuildError(
            "build python",
            recipe.name,
            f"{source} {executable} does not run as a Python: {exc}",
            "pass --build-python with the path of a Python interpreter (its bin/python)",
        ) from exc


def _usable(python: BuildPython, torch: TorchMinor | None, recipe: Recipe) -> BuildPython:
    """``python``, when its torch is ``torch`` (None: any) and ``python -m ptkit`` can
    start there; else the ``BuildError`` that says what it lacks and the fix."""
    if torch is not None and python.torch_minor != torch:
        found = f"torch {python.torch}" if python.torch else "no torch"
        raise BuildError(
            "build python",
            recipe.name,
            f"the build for torch {torch} needs a Python whose torch is {torch}; "
            f"{python.executable} ({python.source}) has {found}",
            f"install torch=={torch}.* into it ({python.executable} -m pip install "
            f"'torch=={torch}.*'), pass another --build-python, or leave --build-python out: "
            f"ptkit then uses (or installs) its own build environment for torch {torch}",
        )
    if python.missing:
        raise BuildError(
            "build python",
            recipe.name,
            f"{python.executable} ({python.source}) cannot run ptkit: it lacks "
            f"{', '.join(python.missing)}",
            f"{python.executable} -m pip install 'ptkit[build]' (the toolkit's dependencies "
            "and what the build needs)",
        )
    return python


def provision_build_python(
    recipe: Recipe,
    torch: TorchMinor | None,
    *,
    given: Path | None = None,
    environ: Mapping[str, str] | None = None,
    echo: Callable[[str], None] = print,
) -> BuildPython:
    """The Python that builds ``recipe`` for ``torch`` (:mod:`ptkit.release.build_python`
    says which, in what order): ``given`` (``--build-python``), else this Python when its
    torch is that minor, else ptkit's build environment for it, installed now when
    missing. ``torch`` None: ``given`` with whatever torch it has (the build there says
    whether the recipe wants it). ``BuildError`` with the fix when none will do."""
    env = os.environ if environ is None else environ
    if given is not None:
        return _usable(_probe(recipe, given, "--build-python"), torch, recipe)
    if torch is None:
        return _usable(_probe(recipe, sys.executable, "this Python"), None, recipe)
    this = _probe(recipe, sys.executable, "this Python")
    if this.torch_minor == torch:
        return _usable(this, torch, recipe)
    environment = build_environment(recipe, torch, build_environment_requirements(), env)
    source = f"ptkit's build environment for torch {torch}"
    if not environment.complete():
        have = f"torch {this.torch}" if this.torch else "no torch"
        echo(
            f"ptkit build {recipe.name} for torch {torch}: installing {source} "
            f"({environment.torch_requirement}"
            f"{f' from {environment.torch_index_url}' if environment.torch_index_url else ''}"
            f" and the build's prerequisites) into {environment.path} (once, for every "
            f"project), because this Python has {have} and no --build-python was given"
        )
        started = time.monotonic()
        try:
            install_build_environment(environment, echo=echo)
        except ToolchainError as exc:
            raise BuildError("build python", recipe.name, exc.cause, exc.fix) from exc
        echo(
            f"ptkit build {recipe.name}: build environment ready in {time.monotonic() - started:.0f} s"
        )
    return _usable(_probe(recipe, environment.python, source), torch, recipe)

"""The CUDA toolkit a cuda variant's build uses, found as CMake finds it.

The pipeline needs it three times: CMake gets its root (``PTKIT_CUDA_ROOT``), the
compiler cache is told which nvcc it would wrap, and the audit lists the fatbinaries
with the same toolkit's ``cuobjdump``. The search is the CUDA backend's
(:meth:`ptkit.backends.cuda.CudaBackend.toolkit_candidates`: ``PTKIT_CUDA_ROOT``, then
pip's ``nvidia/cu*`` on the search paths, then ptkit's toolchain cache), with the
recipe's own toolchains first: ``.toolchains/<variant>`` of the project (where ptkit's
``scripts/bootstrap`` installs the recipe's ``[toolkit] packages``), then the recipe's
toolchain in ptkit's toolchain cache (``ptkit toolchain install <variant>``; a cache
that holds other CUDA versions too must not hand this recipe another one).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ptkit.backends import BACKENDS
from ptkit.backends.base import ToolkitCandidate
from ptkit.backends.toolchain_cache import find_cached
from ptkit.recipes.model import Recipe
from ptkit.release.toolchains import toolchain_spec

__all__ = ["cuobjdump", "find_cuda_toolkit", "search_paths", "toolkit_environment"]


def search_paths(repo: Path, recipe: Recipe, environ: Mapping[str, str] | None = None) -> list[str]:
    """Where pip-installed toolkits are looked for: the project's ``.toolchains/<variant>``,
    the recipe's toolchain in ptkit's toolchain cache, then this Python's ``sys.path``
    (the build runs with this Python)."""
    local = sorted(repo.glob(f".toolchains/{recipe.name}/lib/python*/site-packages"))
    spec = toolchain_spec(recipe) if BACKENDS[recipe.backend].cached_toolkits else None
    cached = find_cached(spec, environ) if spec is not None else None
    own = [cached.site_packages] if cached is not None and cached.site_packages else []
    return [*map(str, local), *map(str, own), *sys.path]


def find_cuda_toolkit(
    repo: Path, recipe: Recipe, environ: Mapping[str, str] | None = None
) -> ToolkitCandidate | None:
    """The toolkit of a cuda recipe's build; None for other backends or when none is found
    (CMake then fails with its own message, or builds without CUDA when allowed)."""
    if recipe.backend != "cuda":
        return None
    environ = os.environ if environ is None else environ
    return BACKENDS["cuda"].find_toolkit(environ, search_paths(repo, recipe, environ))


def toolkit_environment(toolkit: ToolkitCandidate | None) -> dict[str, str]:
    """What CMake is told about the toolkit: its root, so CMake and the pipeline use one."""
    return {"PTKIT_CUDA_ROOT": str(toolkit.root)} if toolkit is not None else {}


def cuobjdump(toolkit: ToolkitCandidate | None) -> str | None:
    """The toolkit's ``bin/cuobjdump`` (``nvidia-cuda-cuobjdump``), else
    ``$PTKIT_CUOBJDUMP``; the audit falls back to pip's or PATH's."""
    if toolkit is not None:
        candidate = toolkit.root / "bin" / "cuobjdump"
        if candidate.is_file():
            return str(candidate)
    return os.environ.get("PTKIT_CUOBJDUMP")

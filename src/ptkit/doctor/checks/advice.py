"""Fixes that name what ``ptkit select`` recommends for this machine: its answer is
asked for, never re-derived, and the recipes are read once per doctor run."""

from __future__ import annotations

import dataclasses
import functools

from ptkit.doctor.model import PackageFacts
from ptkit.hardware.facts import Machine
from ptkit.recipes.model import Recipe
from ptkit.selection.recipes import OPS_DISTRIBUTION, OPS_PACKAGE

__all__ = [
    "PYTORCH_INSTALL",
    "Recommendation",
    "package_fix",
    "recommended",
    "select_fix",
    "torch_index_fix",
]

PYTORCH_INSTALL = "https://pytorch.org/get-started/locally/"


@dataclasses.dataclass(frozen=True)
class Recommendation:
    """What ``ptkit select`` answers for a machine (from the detected hardware)."""

    variant: str
    torch_index_url: str | None
    reason: str
    """``ptkit select``'s reason for it (``no GPU that a ptkit GPU variant serves was found``)."""
    recipe: Recipe
    """The recommended variant's recipe (its index path and local version label)."""
    variants: tuple[str, ...]
    """Every variant ``ptkit select`` chooses from."""


@functools.lru_cache(maxsize=4)  # several checks ask about one machine
def recommended(machine: Machine) -> Recommendation | None:
    """What ``ptkit select`` names here; None when its recipes cannot be read (the fix
    then names the command instead of its answer)."""
    try:
        from ptkit.selection import load_all_recipes, recipes_dir, select_variant

        recipes = load_all_recipes(recipes_dir())
        selection = select_variant(machine, recipes, index_url=None, environ={})
    except Exception:  # a broken recipe folder must not break an unrelated check
        return None
    return Recommendation(
        selection.variant,
        selection.torch_index_url,
        selection.reason,
        recipes[selection.variant],
        tuple(sorted(recipes)),
    )


def select_fix(machine: Machine | None) -> str:
    """Install the ptkit-ops variant ``ptkit select`` names."""
    choice = None if machine is None else recommended(machine)
    if choice is None:
        return f"install the {OPS_DISTRIBUTION} variant that `ptkit select` names for this machine"
    return (
        f"install the {choice.variant} variant of {OPS_DISTRIBUTION}, which `ptkit select` "
        "names for this machine (`ptkit select --index-url <index>` prints the pip/uv commands)"
    )


def package_fix(package: PackageFacts, machine: Machine | None, what: str) -> str:
    """For ptkit-ops, ``select_fix``; for another package, install its build for ``what``
    (``this GPU``, ``this torch``)."""
    if package.name == OPS_PACKAGE:
        return select_fix(machine)
    return f"install the build of {package.distribution or package.name} made for {what}"


def torch_index_fix(machine: Machine, kind: str, label: str) -> str:
    """Install torch's ``label`` build (``CUDA``), from the torch index of the variant
    ``ptkit select`` names when that index is one of ``kind`` (``cu``, ``rocm``)."""
    choice = recommended(machine)
    url = choice.torch_index_url if choice else None
    if url and "download.pytorch.org" in url and f"/{kind}" in url:
        return (
            f"install torch's {label} build: pip install --force-reinstall torch --index-url {url}"
        )
    return f"install torch's {label} build (pick it at {PYTORCH_INSTALL})"

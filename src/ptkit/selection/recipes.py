"""Where the variants ``ptkit select`` chooses from live, and what they build.

They are ptkit-ops' recipes (``recipes/`` in the source tree), shipped in the toolkit as
``ptkit/_recipes/`` (in the source tree a link to ``recipes/``) so that ``ptkit select``,
``ptkit index`` and the doctor know ptkit-ops' variants without a source checkout.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ptkit.recipes.model import Recipe, load_recipes

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "OPS_DISTRIBUTION",
    "OPS_PACKAGE",
    "SelectionError",
    "load_all_recipes",
    "project_distribution",
    "recipes_dir",
]

OPS_DISTRIBUTION = "ptkit-ops"
"""The distribution these recipes build, one wheel per (platform, variant): what the
install commands install (its ``ptkit`` dependency comes from the same index page)."""
OPS_PACKAGE = "ptkit_ops"
"""Its import name: the installed package the doctor's ``ptkit select`` fixes are for."""


class SelectionError(ValueError):
    """``ptkit select`` cannot answer: a bad override, index URL or recipe folder."""


def recipes_dir() -> Path:
    """``ptkit/_recipes``: ptkit-ops' recipes as the toolkit ships them."""
    return Path(__file__).resolve().parents[1] / "_recipes"


def load_all_recipes(directory: Path) -> dict[str, Recipe]:
    """Every ``<variant>.toml`` in ``directory``, by name; a broken one raises
    ``RecipeError`` (a packaging bug, never something to guess around), none at all
    ``SelectionError``."""
    recipes = load_recipes(directory)
    if not recipes:
        raise SelectionError(
            f"ptkit select: no recipes in {directory} (expected <variant>.toml files); "
            "reinstall ptkit, or run from a source checkout that has recipes/"
        )
    return recipes


def project_distribution(project: Path) -> str:
    """The distribution another project's recipes build (``[project] name`` of its
    pyproject.toml): what ``ptkit select --source`` installs. ``SelectionError`` when
    the folder is not such a project."""
    path = project / "pyproject.toml"
    try:
        name = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {}).get("name")
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SelectionError(
            f"ptkit select: --source {project}: cannot read {path} ({exc}); pass the folder "
            "of a project built with ptkit (its pyproject.toml and recipes/)"
        ) from exc
    if not isinstance(name, str) or not name:
        raise SelectionError(f"ptkit select: --source {project}: {path} has no [project] name")
    return name

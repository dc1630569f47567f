"""Variant recipes (``recipes/<variant>.toml``): what a variant is, in one model.

``model`` holds the dataclasses (each field's docstring is its documentation), the
parser, the JSON schema derived from them, and where a project's recipes live.
"""

from __future__ import annotations

from ptkit.recipes.model import (
    Recipe,
    RecipeError,
    Release,
    Targets,
    Toolkit,
    json_schema,
    load_recipe,
    load_recipes,
    recipe_path,
    schema_text,
)

__all__ = [
    "Recipe",
    "RecipeError",
    "Release",
    "Targets",
    "Toolkit",
    "json_schema",
    "load_recipe",
    "load_recipes",
    "recipe_path",
    "schema_text",
]

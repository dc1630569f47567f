"""Variant recipes (``recipes/<variant>.toml``): what a variant is, in one model.

``model`` holds the dataclasses (each field's docstring is its documentation) and what
is derived from them: the parser, the JSON schema and the CMake feed.
"""

from __future__ import annotations

from ptkit.recipes.model import (
    Recipe,
    RecipeError,
    Release,
    Targets,
    Toolkit,
    cmake_feed,
    json_schema,
    load_recipe,
    load_recipes,
    parse_recipe,
    recipe_path,
    schema_text,
)

__all__ = [
    "Recipe",
    "RecipeError",
    "Release",
    "Targets",
    "Toolkit",
    "cmake_feed",
    "json_schema",
    "load_recipe",
    "load_recipes",
    "parse_recipe",
    "recipe_path",
    "schema_text",
]

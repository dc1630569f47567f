"""``python -m ptkit.recipes``: the recipes for CMake and for scripts/bootstrap.

``cmake <recipes_dir> <variant>``
    ``FIELD=value`` lines for ``ptkit_read_recipe`` (``cmake_feed``: every field of the
    model, lists as CMake lists).
``toolkit <recipes_dir> <variant>``
    The toolkit's pip requirements file (``--index-url`` first when it is not on PyPI).
``schema``
    The recipes' JSON schema (``recipes/recipe.schema.json``).

A bad recipe exits 1 with every problem on stderr. Standard library only (tomli on 3.10).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ptkit.recipes.model import RecipeError, cmake_feed, load_recipe, schema_text

_USAGE = "usage: python -m ptkit.recipes cmake|toolkit <recipes_dir> <variant>, or schema"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["schema"]:
        # Bytes: the descriptions are UTF-8 whatever the console's encoding.
        sys.stdout.buffer.write(schema_text().encode("utf-8"))
        return 0
    if len(argv) != 3 or argv[0] not in ("cmake", "toolkit"):
        print(_USAGE, file=sys.stderr)
        return 2
    try:
        recipe = load_recipe(argv[2], Path(argv[1]))
    except RecipeError as exc:
        print(exc, file=sys.stderr)
        return 1
    if argv[0] == "toolkit":
        if recipe.toolkit.index_url and recipe.toolkit.packages:
            print(f"--index-url {recipe.toolkit.index_url}")
        for package in recipe.toolkit.packages:
            print(package)
        return 0
    for key, value in cmake_feed(recipe):
        print(f"{key}={value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

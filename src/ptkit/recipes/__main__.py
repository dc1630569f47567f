"""``python -m ptkit.recipes``: the recipes for CMake and for scripts/bootstrap."""

from __future__ import annotations

import sys
from pathlib import Path

from ptkit.recipes.model import RecipeError, load_recipe, schema_text


def main(argv: list[str] | None = None) -> int:
    """``python -m ptkit.recipes cmake <recipes_dir> <variant>``: FIELD=value lines for CMake;
    ``python -m ptkit.recipes toolkit <recipes_dir> <variant>``: the toolkit's pip requirements;
    ``python -m ptkit.recipes schema``: the recipes' JSON schema (``recipes/recipe.schema.json``)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["schema"]:
        # Bytes: the descriptions are UTF-8 whatever the console's encoding.
        sys.stdout.buffer.write(schema_text().encode("utf-8"))
        return 0
    if len(argv) != 3 or argv[0] not in ("cmake", "toolkit"):
        print(
            "usage: python -m ptkit.recipes cmake|toolkit <recipes_dir> <variant>, or schema",
            file=sys.stderr,
        )
        return 2
    try:
        recipe = load_recipe(argv[2], Path(argv[1]))
    except RecipeError as exc:
        print(exc, file=sys.stderr)
        return 1
    if argv[0] == "toolkit":
        # A pip requirements file: the index line first when the toolkit is not on PyPI.
        if recipe.toolkit.index_url and recipe.toolkit.packages:
            print(f"--index-url {recipe.toolkit.index_url}")
        for package in recipe.toolkit.packages:
            print(package)
        return 0
    print(f"NAME={recipe.name}")
    print(f"BACKEND={recipe.backend}")
    print(f"LOCAL_VERSION={recipe.local_version}")
    print(f"ISA={','.join(recipe.targets.isa)}")
    print(f"CUDA_TARGETS={','.join(recipe.targets.cuda)}")
    print(f"CUDA_OPTIONAL_TARGETS={','.join(recipe.targets.cuda_optional)}")
    print(f"HIP_TARGETS={','.join(recipe.targets.hip)}")
    print(f"HIP_OPTIONAL_TARGETS={','.join(recipe.targets.hip_optional)}")
    print(f"XPU_TARGETS={','.join(recipe.targets.xpu)}")
    print(f"TOOLKIT_VERSION={recipe.toolkit.version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""scikit-build-core metadata provider: ``version = <base>+<variant label>``.

Loaded by the build backend from ``provider-path`` before ptkit is importable,
so it reads ``recipes.py`` and ``_version.py`` by file path (standard library only).
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from types import ModuleType
from typing import Any

_HERE = Path(__file__).resolve().parent


def _load_by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look the module up in sys.modules while the class is created
    import sys

    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def variant_version(project_root: Path, variant: str) -> str:
    recipes = _load_by_path("_ptkit_recipes", _HERE / "recipes.py")
    recipe = recipes.load_recipe(variant, project_root / "recipes")
    text = (_HERE.parent / "_version.py").read_text(encoding="utf-8")
    match = re.search(r'^BASE_VERSION = "([^"]+)"', text, re.MULTILINE)
    if match is None:
        raise RuntimeError("src/ptkit/_version.py has no BASE_VERSION")
    return f"{match.group(1)}+{recipe.local_version}"


def dynamic_metadata(field: str, settings: dict[str, Any]) -> str:
    if field != "version":
        raise RuntimeError(f"ptkit's version provider only sets 'version', not {field!r}")
    variant = os.environ.get("PTKIT_VARIANT", "cpu")
    return variant_version(Path.cwd(), variant)

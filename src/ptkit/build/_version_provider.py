"""scikit-build-core metadata provider: ``version = <base>+<variant label>``.

Loaded by the build backend from ``provider-path`` before ptkit is importable,
so it reads ``recipes.py`` and ``_version.py`` by file path (standard library only).
The variant is ``$PTKIT_VARIANT`` (default ``cpu``), the same value CMake receives.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_HERE = Path(__file__).resolve().parent


def _load_by_path(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while classes are made
    spec.loader.exec_module(module)
    return module


def variant_version(project_root: Path, variant: str) -> str:
    recipes = _load_by_path("_ptkit_build_recipes", _HERE / "recipes.py")
    recipe = recipes.load_recipe(variant, project_root / "recipes")
    text = (_HERE.parent / "_version.py").read_text(encoding="utf-8")
    match = re.search(r'^BASE_VERSION = "([^"]+)"', text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{_HERE.parent / '_version.py'} has no BASE_VERSION")
    return f"{match.group(1)}+{recipe.local_version}"


def dynamic_metadata(field: str, settings: dict[str, Any]) -> str:
    if field != "version":
        raise RuntimeError(f"ptkit's version provider only sets 'version', not {field!r}")
    return variant_version(Path.cwd(), os.environ.get("PTKIT_VARIANT", "cpu"))

"""scikit-build-core metadata provider: ``version = <base>+<variant label>``.

ptkit's own build loads it from ``provider-path`` before ptkit is importable, so it
reads ``recipes.py`` and ``_version.py`` by file path (standard library only).
The variant is ``$PTKIT_VARIANT`` (default ``cpu``), the same value CMake receives.

Other projects use it from the installed ptkit (``ptkit new`` writes this)::

    [tool.scikit-build.metadata.version]
    provider = "ptkit.build._version_provider"
    base-version = "0.1.0"

``base-version`` is the project's own version; the label comes from its
``recipes/$PTKIT_VARIANT.toml``. Without ``base-version`` the base is ptkit's own
``_version.py``, which only ptkit's source tree may use.
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


def _project_name(project_root: Path) -> str | None:
    path = project_root / "pyproject.toml"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    name = re.search(r'^name\s*=\s*"([^"]+)"', project.group(1), re.MULTILINE) if project else None
    return name.group(1) if name else None


def _ptkit_base_version(project_root: Path) -> str:
    if _project_name(project_root) != "ptkit":
        raise RuntimeError(
            "ptkit's version provider needs the project's version: add base-version = "
            '"0.1.0" (yours) under [tool.scikit-build.metadata.version] in pyproject.toml'
        )
    text = (_HERE.parent / "_version.py").read_text(encoding="utf-8")
    match = re.search(r'^BASE_VERSION = "([^"]+)"', text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{_HERE.parent / '_version.py'} has no BASE_VERSION")
    return match.group(1)


def variant_version(project_root: Path, variant: str, base_version: str | None = None) -> str:
    """``<base>+<local label of recipes/<variant>.toml>``; the base is ``base_version``,
    else ptkit's own (only for ptkit's source tree)."""
    recipes = _load_by_path("_ptkit_build_recipes", _HERE / "recipes.py")
    recipe = recipes.load_recipe(variant, project_root / "recipes")
    base = base_version or _ptkit_base_version(project_root)
    if not re.fullmatch(r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?", base):
        raise RuntimeError(
            f"base-version {base!r} is not a public PEP 440 version (like 1.2.0): the local "
            "label comes from the recipe"
        )
    return f"{base}+{recipe.local_version}"


def dynamic_metadata(field: str, settings: dict[str, Any]) -> str:
    if field != "version":
        raise RuntimeError(f"ptkit's version provider only sets 'version', not {field!r}")
    unknown = sorted(set(settings) - {"base-version"})
    if unknown:
        raise RuntimeError(
            f"ptkit's version provider: unknown setting(s) {', '.join(unknown)} under "
            "[tool.scikit-build.metadata.version]; it knows base-version"
        )
    base = settings.get("base-version")
    if base is not None and not isinstance(base, str):
        raise RuntimeError(f'base-version must be a string like "0.1.0", got {base!r}')
    return variant_version(Path.cwd(), os.environ.get("PTKIT_VARIANT", "cpu"), base)

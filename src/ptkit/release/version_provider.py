"""scikit-build-core metadata provider: ``version = <base>+<variant label>``.

The variant is ``$PTKIT_VARIANT`` (default ``cpu``), the same value CMake receives; the
label is its recipe's ``local-version``. A project names the provider in its
pyproject.toml (``ptkit new`` writes this)::

    [tool.scikit-build.metadata.version]
    provider = "ptkit.release.version_provider"
    base-version = "0.1.0"

``base-version`` is the project's own version, or ``"ptkit"`` for the version of the
ptkit toolkit that builds it (ptkit-ops releases in lockstep with the toolkit).
Standard library only: scikit-build-core imports it before anything else is there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ptkit._version import __version__
from ptkit.recipes.model import load_recipe

__all__ = ["dynamic_metadata", "variant_version"]

_PUBLIC_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?")


def variant_version(project_root: Path, variant: str, base_version: str) -> str:
    """``<base>+<local label of recipes/<variant>.toml>``; ``base_version`` ``ptkit`` is
    the toolkit's own version."""
    recipe = load_recipe(variant, project_root / "recipes")
    base = __version__ if base_version == "ptkit" else base_version
    if not _PUBLIC_VERSION.fullmatch(base):
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
    if not isinstance(base, str):
        raise RuntimeError(
            "ptkit's version provider needs the project's version: add base-version = \"0.1.0\" "
            "(yours) under [tool.scikit-build.metadata.version] in pyproject.toml, got "
            f"{base!r}"
        )
    return variant_version(Path.cwd(), os.environ.get("PTKIT_VARIANT", "cpu"), base)

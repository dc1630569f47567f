"""scikit-build-core metadata provider: the version and the dependencies of one build.

The variant is ``$PTKIT_VARIANT`` (default ``cpu``), the same value CMake receives; the
build (:mod:`ptkit.recipes.torch_builds`) is its recipe's one stable build, or for a
``torch``-mode recipe the one for the torch of the Python running the build (checked
against ``$PTKIT_TORCH`` when ``ptkit build --torch`` or the release sets it). A project
names the provider in its pyproject.toml (``ptkit new`` writes the first table)::

    [tool.scikit-build.metadata.version]
    provider = "ptkit.release.version_provider"
    base-version = "0.1.0"

``version`` is ``<base>+<label>``: ``0.1.0+cpu``, or ``0.1.0+cpu.torch2.14`` for a
torch-mode build. ``base-version`` is the project's own version, or ``"ptkit"`` for the
version of the ptkit toolkit that builds it (ptkit-ops releases in lockstep with it).

A torch-mode project also lets the provider write its dependencies, so that each wheel
requires the torch minor it was built for::

    [project]
    dynamic = ["version", "dependencies"]

    [tool.scikit-build.metadata.dependencies]
    provider = "ptkit.release.version_provider"
    requires = ["ptkit>=0.1,<0.2", "torch>=2.10"]

``dependencies`` is ``requires`` as written for a stable build, and with the torch
requirement replaced by the build's pin (``torch>=2.14,<2.15``; added when ``requires``
has none) for a torch-mode one. A torch-mode recipe with static ``[project]
dependencies`` is refused: its wheels would claim every torch.

Standard library only: scikit-build-core imports it before anything else is there.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ptkit._version import __version__
from ptkit.recipes.model import RecipeError, load_recipe, recipe_path
from ptkit.recipes.torch_builds import (
    TorchBuild,
    TorchBuildError,
    build_for_environment,
    installed_torch,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "ENV_TORCH",
    "ENV_VARIANT",
    "PROVIDER",
    "build_dependencies",
    "dynamic_metadata",
    "installed_torch",
    "project_build",
    "variant_version",
]

PROVIDER = "ptkit.release.version_provider"
ENV_VARIANT = "PTKIT_VARIANT"
ENV_TORCH = "PTKIT_TORCH"
"""The torch minor a torch-mode build is for (``2.14``), set by ``ptkit build --torch``
and the release: the build Python's torch must be that minor."""

_PUBLIC_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?")
# A PEP 508 requirement's name: what comes before its extras, version, marker or URL.
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
_SETTINGS = {"version": {"base-version"}, "dependencies": {"requires"}}


def project_build(
    project_root: Path,
    variant: str,
    *,
    torch_version: str | None = None,
    requested_torch: str | None = None,
) -> TorchBuild:
    """The build of ``recipes/<variant>.toml`` that this environment makes: stable, or
    for the torch minor of ``torch_version`` (the build Python's torch), which must be
    ``requested_torch`` when given. ``RuntimeError`` with the recipe's problem and fix."""
    recipes = project_root / "recipes"
    try:
        recipe = load_recipe(variant, recipes)
        return build_for_environment(
            recipe, torch_version, requested_torch, str(recipe_path(variant, recipes))
        )
    except (RecipeError, TorchBuildError) as exc:
        raise RuntimeError(f"ptkit's version provider: {exc}") from exc


def variant_version(
    project_root: Path,
    variant: str,
    base_version: str,
    *,
    torch_version: str | None = None,
    requested_torch: str | None = None,
) -> str:
    """``<base>+<label of the build>`` (``0.1.0+cpu``, ``0.1.0+cpu.torch2.14``);
    ``base_version`` ``ptkit`` is the toolkit's own version."""
    build = project_build(
        project_root, variant, torch_version=torch_version, requested_torch=requested_torch
    )
    return _labelled(base_version, build)


def _labelled(base_version: str, build: TorchBuild) -> str:
    base = __version__ if base_version == "ptkit" else base_version
    if not _PUBLIC_VERSION.fullmatch(base):
        raise RuntimeError(
            f"base-version {base!r} is not a public PEP 440 version (like 1.2.0): the local "
            "label comes from the recipe"
        )
    return f"{base}+{build.local_version}"


def _requirement_name(requirement: str) -> str | None:
    match = _REQUIREMENT_NAME.match(requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else None


def build_dependencies(requires: Sequence[str], build: TorchBuild) -> list[str]:
    """``requires`` for ``build``: as written for a stable build; for a torch-mode one
    with every torch requirement replaced by its pin (markers kept), or the pin added."""
    pin = build.torch_requirement
    if pin is None:
        return list(requires)
    result: list[str] = []
    for requirement in requires:
        if _requirement_name(requirement) != "torch":
            result.append(requirement)
            continue
        marker = requirement.partition(";")[2].strip()
        result.append(f"{pin}; {marker}" if marker else pin)
    if pin not in (r.partition(";")[0].strip() for r in result):
        result.append(pin)
    return result


def _static_dependencies_problem(project_root: Path) -> str | None:
    """Why this project's pyproject.toml keeps the torch pin out of a torch-mode wheel:
    its ``dependencies`` are not this provider's. None when they are."""
    path = project_root / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None  # scikit-build-core reads it too, and says what is wrong
    dynamic = data.get("project", {}).get("dynamic", [])
    table = data.get("tool", {}).get("scikit-build", {}).get("metadata", {})
    provider = table.get("dependencies", {}).get("provider")
    if "dependencies" in dynamic and provider == PROVIDER:
        return None
    return (
        f"the recipe is torch-mode, so each wheel must require the torch minor it is built "
        f"for, but {path} does not let ptkit write the dependencies: list "
        '"dependencies" in [project] dynamic, move the list into requires = [...] under '
        f'[tool.scikit-build.metadata.dependencies] with provider = "{PROVIDER}" '
        "(docs/releasing.md, torch-mode recipes)"
    )


def _environment_build(environ: Mapping[str, str]) -> TorchBuild:
    return project_build(
        Path.cwd(),
        environ.get(ENV_VARIANT, "cpu"),
        torch_version=installed_torch(),
        requested_torch=environ.get(ENV_TORCH) or None,
    )


def _check_settings(field: str, settings: Mapping[str, Any]) -> None:
    if field not in _SETTINGS:
        raise RuntimeError(
            f"ptkit's version provider sets 'version' and 'dependencies', not {field!r}"
        )
    unknown = sorted(set(settings) - _SETTINGS[field])
    if unknown:
        raise RuntimeError(
            f"ptkit's version provider: unknown setting(s) {', '.join(unknown)} under "
            f"[tool.scikit-build.metadata.{field}]; it knows {', '.join(sorted(_SETTINGS[field]))}"
        )


def dynamic_metadata(field: str, settings: dict[str, Any]) -> str | list[str]:
    _check_settings(field, settings)
    environ = os.environ
    if field == "dependencies":
        requires = settings.get("requires")
        if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
            raise RuntimeError(
                "ptkit's version provider needs the project's dependencies: add requires = "
                '["ptkit>=0.1,<0.2", "torch>=2.10"] (yours) under '
                f"[tool.scikit-build.metadata.dependencies] in pyproject.toml, got {requires!r}"
            )
        return build_dependencies(requires, _environment_build(environ))
    base = settings.get("base-version")
    if not isinstance(base, str):
        raise RuntimeError(
            "ptkit's version provider needs the project's version: add base-version = \"0.1.0\" "
            "(yours) under [tool.scikit-build.metadata.version] in pyproject.toml, got "
            f"{base!r}"
        )
    build = _environment_build(environ)
    if build.torch is not None:
        problem = _static_dependencies_problem(Path.cwd())
        if problem is not None:
            raise RuntimeError(f"ptkit's version provider: {problem}")
    return _labelled(base, build)

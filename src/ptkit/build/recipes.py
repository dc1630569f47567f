"""Variant recipes: what a variant is, read from ``recipes/<variant>.toml``.

This module uses the standard library only: the build backend loads it by file
path (``_version_provider.py``) before ptkit or torch can be imported.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["BACKENDS", "Recipe", "RecipeError", "load_recipe", "recipe_path"]

BACKENDS = ("cpu", "cuda", "hip", "xpu", "metal")

_LOCAL_LABEL = re.compile(r"^[a-z0-9]+(?:[.][a-z0-9]+)*$")
_VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9.]*$")


class RecipeError(ValueError):
    """A recipe file is missing or invalid; the message lists every problem."""


@dataclasses.dataclass(frozen=True)
class Targets:
    """What the variant's native code is compiled for."""

    isa: tuple[str, ...] = ()
    """CPU instruction-set levels dispatched at run time ("default" is the baseline)."""
    cuda: tuple[str, ...] = ()
    """CUDA targets: ``sm_XY`` (SASS, ``a``/``f`` suffixes allowed) and ``compute_XY`` (PTX)."""
    cuda_optional: tuple[str, ...] = ()
    """CUDA targets that may be dropped (recorded in the manifest) when the toolkit lacks them."""
    hip: tuple[str, ...] = ()
    """AMD GPU targets: ``gfx942``, ``gfx1100``, generic ``gfx11-generic``, feature-qualified ``gfx90a:xnack+``."""
    hip_optional: tuple[str, ...] = ()
    """AMD GPU targets that may be dropped (recorded in the manifest) when the compiler lacks them."""
    xpu: tuple[str, ...] = ()
    """Intel GPU devices compiled ahead of time (``pvc``, ``bmg``…) and ``spir64`` for the JIT fallback."""


@dataclasses.dataclass(frozen=True)
class Toolkit:
    """The pinned toolchain of the variant."""

    name: str = ""
    """``gcc`` (system), ``cuda`` …"""
    version: str = ""
    """The toolkit version the recipe is pinned to (``13.5``)."""
    packages: tuple[str, ...] = ()
    """pip requirements that provide it (``nvidia-cuda-nvcc==13.5.*`` …)."""
    index_url: str = ""
    """The package index they come from, when it is not PyPI (TheRock's for ROCm)."""


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One variant: one wheel per platform, one index page."""

    name: str
    """Variant name, also the recipe's file stem (``cpu``, ``cu13`` …)."""
    backend: str
    """The accelerator backend, one of ``BACKENDS``."""
    description: str
    """One line for humans."""
    local_version: str
    """PEP 440 local label appended to the version (``0.1.0+cpu``)."""
    index_path: str
    """Folder under the index root holding this variant's ``simple/`` tree."""
    targets: Targets
    """Compilation targets."""
    toolkit: Toolkit = Toolkit()
    """The pinned toolchain."""


_VARIANT_KEYS = {"name", "backend", "description", "local-version", "index-path"}
_TOP_KEYS = {"variant", "targets", "toolkit"}
_TARGET_KEYS = {f.name.replace("_", "-") for f in dataclasses.fields(Targets)}
_TOOLKIT_KEYS = {f.name.replace("_", "-") for f in dataclasses.fields(Toolkit)}
_CUDA_TARGET = re.compile(r"^(sm|compute)_[0-9]{2,3}[af]?$")
_HIP_TARGET = re.compile(r"^gfx[0-9a-f]+(-[0-9]+)*(-generic)?(:[a-z]+[+-])*$")
_XPU_TARGET = re.compile(r"^[a-z][a-z0-9_.-]*$")


def recipe_path(variant: str, recipes_dir: Path) -> Path:
    return recipes_dir / f"{variant}.toml"


def _unknown(keys: set[str], known: set[str], where: str) -> list[str]:
    problems = []
    for key in sorted(keys - known):
        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(f"unknown key {where}{key!r}{hint}")
    return problems


def _str(table: dict[str, Any], key: str, where: str, problems: list[str]) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        problems.append(f"{where}{key} must be a non-empty string, got {value!r}")
        return ""
    return value


def _str_list(table: dict[str, Any], key: str, where: str, problems: list[str]) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        problems.append(f"{where}{key} must be a list of strings, got {value!r}")
        return ()
    return tuple(value)


def load_recipe(variant: str, recipes_dir: Path) -> Recipe:
    """Read and validate one recipe; raise ``RecipeError`` listing all problems."""
    path = recipe_path(variant, recipes_dir)
    if not path.is_file():
        known = sorted(p.stem for p in recipes_dir.glob("*.toml"))
        raise RecipeError(
            f"no recipe for variant {variant!r}: {path} does not exist "
            f"(known variants: {', '.join(known) or 'none'})"
        )
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: not valid TOML: {exc}") from exc

    problems = _unknown(set(data), _TOP_KEYS, "")
    table = data.get("variant", {})
    targets_table = data.get("targets", {})
    problems += _unknown(set(table), _VARIANT_KEYS, "variant.")
    problems += _unknown(set(targets_table), _TARGET_KEYS, "targets.")
    toolkit_table = data.get("toolkit", {})
    problems += _unknown(set(toolkit_table), _TOOLKIT_KEYS, "toolkit.")

    name = _str(table, "name", "variant.", problems)
    if name and name != variant:
        problems.append(f"variant.name is {name!r} but the file is {path.name}")
    if name and not _VARIANT_NAME.match(name):
        problems.append(f"variant.name {name!r} must match {_VARIANT_NAME.pattern}")
    backend = _str(table, "backend", "variant.", problems)
    if backend and backend not in BACKENDS:
        problems.append(f"variant.backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    local = _str(table, "local-version", "variant.", problems)
    if local and not _LOCAL_LABEL.match(local):
        problems.append(
            f"variant.local-version {local!r} is not a PEP 440 local label "
            "(lower-case letters, digits and dots)"
        )
    isa = _str_list(targets_table, "isa", "targets.", problems)
    cuda = _str_list(targets_table, "cuda", "targets.", problems)
    cuda_optional = _str_list(targets_table, "cuda-optional", "targets.", problems)
    for target in (*cuda, *cuda_optional):
        if not _CUDA_TARGET.match(target):
            problems.append(
                f"targets.cuda: {target!r} is not a CUDA target (expected sm_90, sm_90a, "
                "sm_100f or compute_120)"
            )
    hip = _str_list(targets_table, "hip", "targets.", problems)
    hip_optional = _str_list(targets_table, "hip-optional", "targets.", problems)
    for target in (*hip, *hip_optional):
        if not _HIP_TARGET.match(target):
            problems.append(
                f"targets.hip: {target!r} is not an AMD GPU target (expected gfx942, gfx1100, "
                "gfx11-generic or gfx90a:xnack+)"
            )
    xpu = _str_list(targets_table, "xpu", "targets.", problems)
    for target in xpu:
        if not _XPU_TARGET.match(target):
            problems.append(
                f"targets.xpu: {target!r} is not an Intel GPU device name (pvc, bmg, spir64)"
            )
    for key, values, owner in (
        ("cuda", (*cuda, *cuda_optional), "cuda"),
        ("hip", (*hip, *hip_optional), "hip"),
        ("xpu", xpu, "xpu"),
    ):
        if backend and backend != owner and values:
            problems.append(f"targets.{key} is set but the backend is {backend!r}, not {owner!r}")
    packages = _str_list(toolkit_table, "packages", "toolkit.", problems)

    if problems:
        raise RecipeError(f"{path}: " + "; ".join(problems))
    return Recipe(
        name=name,
        backend=backend,
        description=str(table.get("description", "")),
        local_version=local,
        index_path=str(table.get("index-path", name)),
        targets=Targets(
            isa=isa,
            cuda=cuda,
            cuda_optional=cuda_optional,
            hip=hip,
            hip_optional=hip_optional,
            xpu=xpu,
        ),
        toolkit=Toolkit(
            name=str(toolkit_table.get("name", "")),
            version=str(toolkit_table.get("version", "")),
            packages=packages,
            index_url=str(toolkit_table.get("index-url", "")),
        ),
    )


def _cmake_main(argv: list[str]) -> int:
    """``python recipes.py cmake <recipes_dir> <variant>``: FIELD=value lines for CMake;
    ``python recipes.py toolkit <recipes_dir> <variant>``: the toolkit's pip requirements."""
    if len(argv) != 3 or argv[0] not in ("cmake", "toolkit"):
        print("usage: recipes.py cmake|toolkit <recipes_dir> <variant>", file=sys.stderr)
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
    raise SystemExit(_cmake_main(sys.argv[1:]))
